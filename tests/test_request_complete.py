"""A request is complete when its key is made: the pair order, the answer prefix and the known answer
are given to ``make_request``, the first two keyed as the mode's named parts, the last never."""

from __future__ import annotations

import hashlib
import json

import pytest

from promptlottery.backends.base import Decoding, KnownAnswer
from promptlottery.backends.fake import FakeBackend
from promptlottery.calls.cache import make_request

MSGS = [{"role": "user", "content": "Which answer is better?"}]


def _key_by_hand(ident: dict, dec: Decoding, **named) -> str:
    # the judge key: backend identity, decoding, messages, prompt, labels, sample index, named parts
    payload = {"backend": ident, "decoding": dec.as_dict(), "messages": MSGS, "prompt": None,
               "labels": ["A", "B", "C"], "sample_index": 0, **named}  # fmt: skip
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def test_a_pairwise_request_carries_its_order_prefix_and_known_answer_under_the_same_key():
    ident, dec = FakeBackend().identity(), Decoding()
    known = KnownAnswer("P1", (1.0, 0.0, 0.5), "B")
    parts = {"order": "21", "assistant_prefix": "[["}
    req = make_request(
        "judge", ident, dec, messages=MSGS, labels=("A", "B", "C"), parts=parts,
        assistant_prefix="[[", order="21", known=known,
    )  # fmt: skip
    assert (req.order, req.assistant_prefix, req.known) == ("21", "[[", known)
    assert req.key == _key_by_hand(ident, dec, order="21", assistant_prefix="[[")
    # the known answer is never keyed; the order and the prefix only as their named parts
    bare = make_request("judge", ident, dec, messages=MSGS, labels=("A", "B", "C"), parts=parts)
    assert bare.key == req.key and bare.order is None and bare.known is None


def test_an_order_or_prefix_its_key_does_not_name_is_refused():
    ident, dec = FakeBackend().identity(), Decoding()
    with pytest.raises(ValueError, match=r"^judge request: order='12' is not in its key"):
        make_request("judge", ident, dec, messages=MSGS, labels=("A",), order="12")
    with pytest.raises(ValueError, match=r"^judge request: order='12' is not in its key"):
        make_request("judge", ident, dec, messages=MSGS, labels=("A",), order="12", parts={"order": "21"})
    with pytest.raises(ValueError, match=r"^judge request: assistant_prefix='\[\[' is not in a judge key"):
        make_request(
            "judge",
            ident,
            dec,
            messages=MSGS,
            labels=("A",),
            assistant_prefix="[[",
            parts={"assistant_prefix": "("},
        )

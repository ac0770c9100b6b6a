"""Existing cache entries stay valid: each kind of model call gives the key it gave before the
one request builder (``calls.cache.make_request``, issue 23).

The digests below were computed on main at 94ef321 (before the builder) by these same calls through
the real call sites (the judge grid's ``build_requests``, ``predict.answer_requests``, the rubric
study's (since its move onto the grid: ``build_requests`` of a rubric group), the paraphrase generator's ``_ask``, the gate's ``llm_prompt_classifier``):
a change to a kind's key layout would make every cached answer of that kind a miss, and fails here.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import pytest

from promptlottery.backends.base import Decoding
from promptlottery.backends.fake import FakeBackend
from promptlottery.calls.cache import CALL_KINDS, CallCache, make_request
from promptlottery.data.schema import Item
from promptlottery.judging.predict import answer_requests
from promptlottery.judging.runner import Condition, build_requests
from promptlottery.prompts import load_group
from promptlottery.prompts.groups import PromptGroup, Variant
from promptlottery.prompts.scales import get_scale

PINNED = {
    "judge_chat": [
        "143f596745f140ed9981f90484e724df299540a9bb298d97f0692730ef978517",
        "6425767838a8ca71e8aa0987afa92d23382556834852b401e11b32c55089b0a6",
        "02b3be6077254f32e11586acc45ac055aebb73bd35036bd8fd18852a6bfca0e4",
        "35ad4803a1d58af6b0ff7ad5a0bb6527f8c14df6ad971d18c21213ce6e555126",
    ],
    "judge_batch_repeats": [
        "96f21ca0ffe9b037abdfbf200abe6ae6bfe75713b29201a5a1fdfc070d10cfca",
        "f788b205ed9791d49aca2181bcd8e864d033ca17407060a37854ffb13cd0b7f0",
        "9e5dbabe69c20e884810118bba64042dbbd45953fb5f3680b4baba4459856a81",
        "e60243bf4cb15d546fbedde33fdabb91adb0f05c284af64fcba61cb038feba65",
        "538fa6cd442004d39683c776f4f0bb0f6cb2af79a026e793bff8c8c015063e69",
        "4df846036e52036930277099cc5d0763aebf41093f6c1018229a640c12ea5a11",
    ],
    "judge_completion": [
        "4bd4cdb0e6ca394fad9ad6e9cc26979aa31ce022221d7a54c428293a41161749",
        "420474068292755cd7b1ff0a3e4506900fbfd0f2f5a902e86fca809edf1e15a8",
    ],
    "predict_chat": [
        "5183a3b1e1d385835aee8d9bd67783270612db2e3489abab506a387042953df9",
    ],
    "predict_completion": [
        "cfbf1d8fb43204e41fa05e17856535d691cc5e0eb6c025da6e4c177b35543eea",
    ],
    # changed once, on purpose, when stage=rubric moved onto the judge grid (its own engine and call
    # kind ``rubric`` retired; docs/rubric_study.md): now a judge key of a rubric group's criterion;
    # before: 12695b55... (chat), 176ca0f5... (completion)
    "rubric_chat": [
        "78cda62792ab18ab8725967f3237edc6eddea1d58de221fc7eaac27d15e16446",
    ],
    "rubric_completion": [
        "4e970d6d0770c63b496ac32fc96374e031b0119efd28b415740bd6c2d4e74b30",
    ],
    "paraphrase": [
        "64a1dca6efc861625339edb92bf566882417ccdc5312ebed5525693ee6bd5557",
        "923f7fe00a518669bf2cb288f6028ca3a2a15fea50873e8adf3ef94814b9d7c8",
    ],
    # changed on purpose with the paper's §F.2 cuts (gating.baselines TASK_VERSION 2: queries cut to 3,500
    # characters, shots to 1,200, keeping the start); before: 7cb93941..., a9a0418f..., e2c14644...
    "gate_llm_baseline": [
        "6580dd03eb6eabe323d8b94e59d5ee8eeeaaafb3b43e855902eb3b8d32102bfc",
        "83f41d909d7601ebc6650aeec7c434ce8da3900b00994b46857d0a483792f6dc",
        "f0a99d896df86a6345a99604b4011579df58506555a8bcd005cded22f33d5f12",
    ],
}


class Rec(FakeBackend):
    """The hash fake, recording the key of every request it answers."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.keys = []

    def generate(self, requests, decoding):
        self.keys += [r.key for r in requests]
        return super().generate(requests, decoding)


def keys() -> dict[str, list[str]]:
    """The keys of each call kind for fixed inputs, built by the real call sites."""
    out = {}
    group = load_group("G12")
    items = [
        Item(id=f"i{k}", dataset="d", inputs={"reference": "r" * (k + 1), "prediction": "p é"})
        for k in range(2)
    ]
    cond = Condition("d", "semantic_alignment", "G12", "P2", "fake", "similarity")
    b = FakeBackend(max_concurrency=4)
    out["judge_chat"] = [
        r.key
        for _, r in build_requests(items, cond, group, b, Decoding(temperature=0.7, seed=3), n_samples=2)
    ]
    out["judge_batch_repeats"] = [
        r.key
        for _, r in build_requests(items, cond, group, b, Decoding(), n_samples=3, repeat_source="batch")
    ]
    ccond = Condition(
        "d", "semantic_alignment", "G12", "P1", "fake", "similarity", prompt_format="completion", rubric="r1"
    )
    out["judge_completion"] = [
        r.key for _, r in build_requests(items, ccond, group, b, Decoding(), examples=[(items[0], "4")])
    ]
    qa = [
        Item(
            id="q1",
            dataset="squad",
            inputs={"question": "Who?", "context": "Ann did."},
            meta={"answers": ["Ann"]},
        )
    ]
    tmpl = "Passage: {context}\nQuestion: {question}\nAnswer:"
    out["predict_chat"] = [
        r.key
        for r in answer_requests(
            qa, "s", b, tmpl, prompt_format="chat", examples=[], decoding=Decoding(max_new_tokens=32)
        )
    ]
    out["predict_completion"] = [
        r.key
        for r in answer_requests(
            qa, "s", b, tmpl, prompt_format="completion", examples=qa, decoding=Decoding(max_new_tokens=32)
        )
    ]
    # the rubric study's condition as the grid judges it: a criterion read after its name
    rubric = PromptGroup(
        "rubric_analytic_separate",
        judge_family="rubric",
        scale=get_scale("likert_1_6"),
        version=2,
        variants={
            "analytic_separate": Variant(
                "analytic_separate", "USER essay {{ criterion_description }}", system="SYS"
            )
        },
        criteria=(("content", "Content: ideas"),),
        criteria_info={"content": {"name": "Content"}},
        assistant_prefix="{{ criterion_name }}:",
        completion_answer=None,
    )
    essay = [Item(id="e1", dataset="asap", inputs={"task": "T", "response": "R"})]
    for fmt in ("chat", "completion"):
        rcond = Condition(
            "asap",
            "rubric",
            rubric.id,
            "analytic_separate",
            "fake",
            "holistic",
            prompt_format=fmt,
            judge_mode="analytic",
        )
        out[f"rubric_{fmt}"] = [r.key for _, r in build_requests(essay, rcond, rubric, b, Decoding())]
    from promptlottery.stages.paraphrase import _ask

    with tempfile.TemporaryDirectory() as d:
        rb = Rec(replies=("a rewording", "another"))
        _ask(
            rb,
            CallCache(Path(d) / "c.sqlite"),
            Decoding(temperature=1.0, max_new_tokens=200),
            "Rate how well {prediction} fits.",
            [0, 3],
        )
        out["paraphrase"] = rb.keys
        from promptlottery.gating.baselines import LLMBaselineConfig, llm_prompt_classifier

        df = pd.DataFrame(
            {
                "answer": ["Verdict: 5", "Verdict: 1", "Verdict: 3"],
                "query": ["[user] a", "[user] b", "[user] c"],
                "in_cluster": [1, 0, 1],
            }
        )
        gb = Rec()
        llm_prompt_classifier(
            df, df, gb, CallCache(Path(d) / "g.sqlite"), Decoding(), LLMBaselineConfig(n_shot=2, seed=0)
        )
        out["gate_llm_baseline"] = sorted(gb.keys)
    return out


def test_every_call_kind_keeps_its_key():
    got = keys()
    assert set(got) == set(PINNED)
    for kind, pinned in PINNED.items():
        assert got[kind] == pinned, kind


def test_the_builder_refuses_a_request_part_its_kind_does_not_key():
    ident, dec = FakeBackend().identity(), Decoding()
    msgs = [{"role": "user", "content": "x"}]
    with pytest.raises(ValueError, match="sample_index=2 is not in a predict key"):
        make_request("predict", ident, dec, messages=msgs, sample_index=2)
    with pytest.raises(ValueError, match="labels=.*not in a paraphrase key"):
        make_request("paraphrase", ident, dec, messages=msgs, labels=("1", "2"))
    with pytest.raises(ValueError, match="assistant_prefix='A:' is not in a judge key"):
        make_request("judge", ident, dec, messages=msgs, labels=("1",), assistant_prefix="A:")
    with pytest.raises(ValueError, match=r"extra key parts \['labels'\]"):
        make_request("judge", ident, dec, messages=msgs, parts={"labels": "x"})
    with pytest.raises(ValueError, match="exactly one of messages and prompt"):
        make_request("judge", ident, dec, messages=msgs, prompt="p")
    with pytest.raises(ValueError, match="call kind 'pairwise': must be one of"):
        make_request("pairwise", ident, dec, messages=msgs)
    assert sorted(CALL_KINDS) == [
        "gate_llm_baseline",
        "judge",
        "paraphrase",
        "paraphrase_equivalence",
        "predict",
    ]


def test_what_changes_the_answer_changes_the_key_and_nothing_else_does():
    msgs = [{"role": "user", "content": "x"}]
    base = make_request("judge", FakeBackend().identity(), Decoding(), messages=msgs, labels=("1", "2")).key
    same = make_request(
        "judge", FakeBackend(max_concurrency=3).identity(), Decoding(), messages=msgs, labels=("1", "2")
    )
    assert same.key == base and same.labels == ("1", "2") and same.messages == msgs
    for other in (
        make_request(
            "judge", FakeBackend(model="m").identity(), Decoding(), messages=msgs, labels=("1", "2")
        ),
        make_request("judge", FakeBackend().identity(), Decoding(seed=1), messages=msgs, labels=("1", "2")),
        make_request("judge", FakeBackend().identity(), Decoding(), messages=msgs, labels=("1", "3")),
        make_request("judge", FakeBackend().identity(), Decoding(), prompt="x", labels=("1", "2")),
        make_request(
            "judge", FakeBackend().identity(), Decoding(), messages=msgs, labels=("1", "2"), sample_index=1
        ),
        make_request(
            "judge", FakeBackend().identity(), Decoding(), messages=msgs, labels=("1", "2"), parts={"v": 1}
        ),
        make_request(
            "gate_llm_baseline", FakeBackend().identity(), Decoding(), messages=msgs, labels=("1", "2")
        ),
    ):
        assert other.key != base

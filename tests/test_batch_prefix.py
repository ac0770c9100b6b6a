"""Batches by shared prefix (calls.loop.prefix_batches): a backend that runs a batch's common prompt
prefix once (the transformers and OpenVINO judges) gets the answers to one source in one batch, so the
source is computed once, not once per answer; the batches are a function of the whole request list."""

from __future__ import annotations

import pytest

from promptlottery.backends.base import Decoding, JudgeRequest
from promptlottery.backends.fake import FakeBackend
from promptlottery.calls.cache import CallCache
from promptlottery.calls.loop import BatchPlan, CallStats, prefix_batches, run_calls

INSTRUCTIONS = "Rate the coherence of the response written for the source below.\n\nSource:\n"


def _req(key: str, prompt: str) -> JudgeRequest:
    return JudgeRequest(key=key, labels=("1", "2"), prompt=prompt)


def _summaries(article: str, n: int, words: int = 20) -> list[JudgeRequest]:
    body = f"{article} " + "the article goes on. " * 50  # ~1,000 characters of source
    return [
        _req(f"{article}-{k}", f"{INSTRUCTIONS}{body}\n\nResponse:\nsummary {k}: " + "w " * words)
        for k in range(n)
    ]


class Recording(FakeBackend):
    """The fake judge, remembering the keys of every batch it was given."""

    def __init__(self, order: str, size: int = 8):
        super().__init__()
        self.batch_order, self.max_concurrency, self.batches = order, size, []

    def generate(self, requests, decoding):
        self.batches.append([r.key for r in requests])
        return super().generate(requests, decoding)


def test_the_answers_to_one_source_share_a_batch():
    reqs = _summaries("alpha", 7) + _summaries("beta", 7) + _summaries("gamma", 7)
    order = sorted(reqs, key=lambda r: r.prompt)
    batches = prefix_batches(order, size=8)
    # by hand: a batch of alpha's 7 costs ~1,020 + 7 * 60 characters; beta's first joining it would pad
    # every row to a whole source (~8 * 1,080): three batches, one per article
    assert [sorted({r.key.split("-")[0] for r in b}) for b in batches] == [["alpha"], ["beta"], ["gamma"]]
    assert [len(b) for b in batches] == [7, 7, 7]


def test_a_batch_holds_at_most_size_requests_and_every_request_once():
    reqs = _summaries("alpha", 16)
    batches = prefix_batches(sorted(reqs, key=lambda r: r.prompt), size=8)
    assert [len(b) for b in batches] == [8, 8]
    assert sorted(r.key for b in batches for r in b) == sorted(r.key for r in reqs)


def test_short_unrelated_prompts_still_fill_a_batch():
    # nothing shared, lengths within the per-batch overhead of each other: padding them together is cheaper
    reqs = [_req(f"k{i}", f"{i:02d} " + "x" * (100 + i)) for i in range(10)]
    batches = prefix_batches(sorted(reqs, key=lambda r: r.prompt), size=4)
    assert [len(b) for b in batches] == [4, 4, 2]
    assert prefix_batches([], size=4) == []


@pytest.mark.parametrize("order, expected", [("prefix", [7, 7]), ("length", [8, 6])])
def test_the_backends_batch_order_is_the_default_plan(tmp_path, order, expected):
    reqs = _summaries("beta", 7, words=5) + _summaries("alpha", 7, words=30)
    backend = Recording(order)
    run_calls(reqs, backend, CallCache(tmp_path / "c.sqlite"), Decoding(), stats=CallStats())
    assert [len(b) for b in backend.batches] == expected
    if order == "prefix":
        assert [{k.split("-")[0] for k in b} for b in backend.batches] == [{"alpha"}, {"beta"}]
    # an explicit plan wins over the backend's order
    other = Recording(order)
    run_calls(reqs, other, CallCache(tmp_path / "d.sqlite"), Decoding(), stats=CallStats(),
              plan=BatchPlan("length"))  # fmt: skip
    assert [len(b) for b in other.batches] == [8, 6]


def test_a_resumed_run_computes_the_same_batches(tmp_path):
    reqs = _summaries("alpha", 5) + _summaries("beta", 6) + _summaries("gamma", 3)
    whole = Recording("prefix", size=4)
    run_calls(reqs, whole, CallCache(tmp_path / "whole.sqlite"), Decoding(), stats=CallStats())
    cache = CallCache(tmp_path / "resumed.sqlite")
    first = Recording("prefix", size=4)
    run_calls(reqs[:6], first, cache, Decoding(), stats=CallStats())  # a run killed after some answers
    resumed = Recording("prefix", size=4)
    run_calls(reqs, resumed, cache, Decoding(), stats=CallStats())
    # every batch the resumed run computes is one of the uninterrupted run's batches, whole
    assert resumed.batches and all(b in whole.batches for b in resumed.batches)


def test_the_shared_prefix_leaves_every_row_a_token_and_respects_the_minimum():
    from promptlottery.backends.tokens import shared_prefix_len

    rows = [[1, 2, 3, 4, 5], [1, 2, 3, 9], [1, 2, 3]]
    # common prefix 3, but the shortest row must keep one token of its own: 2
    assert shared_prefix_len(rows, 1) == 2
    assert shared_prefix_len(rows, 3) == 0  # shorter than the minimum: nothing shared
    assert shared_prefix_len([[1, 2, 3]], 1) == 0  # one row: nothing to share
    assert shared_prefix_len([[7, 1], [8, 1]], 0) == 0

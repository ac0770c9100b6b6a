"""Classifier baselines: metrics, frozen embeddings + logistic regression, the cached LLM prompt classifier."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promptlottery.backends.base import BackendError, Decoding, JudgeResponse
from promptlottery.backends.fake import FakeBackend
from promptlottery.calls.cache import CallCache
from promptlottery.gating.baselines import (
    LLMBaselineConfig,
    classification_metrics,
    embedding_logreg,
    llm_prompt_classifier,
    pick_shots,
    yes_probability,
)


def frame(n: int = 12) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "answer": [f"Verdict: {'5' if k % 2 else '1'}. Answer: x" for k in range(n)],
            "query": [f"[user] Rate {'the cat' if k % 2 else 'a dog'} {k}." for k in range(n)],
            "in_cluster": [k % 2 for k in range(n)],
        }
    )


def test_classification_metrics_hand_computed():
    m = classification_metrics([1, 1, 1, 0, 0], [0.9, 0.6, 0.2, 0.4, 0.7])
    assert m["tpr"] == pytest.approx(2 / 3) and m["tnr"] == pytest.approx(1 / 2)
    assert m["balanced_accuracy"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert m["mcc"] == pytest.approx(1 / 6)  # (2*1 - 1*1) / sqrt(3*2*2*3)
    assert classification_metrics([1, 0, 1], [1, 1, 1])["mcc"] == 0.0  # constant prediction


def test_embedding_logistic_regression_separates_easy_data():
    df = frame()
    probs = embedding_logreg(df, {"val": df}, C=10.0)
    p = probs["val"]
    assert p.shape == (12,) and p[df["in_cluster"] == 1].mean() > p[df["in_cluster"] == 0].mean()


def test_llm_prompt_classifier_is_cached_and_few_shot(tmp_path):
    df = frame(6)
    cfg = LLMBaselineConfig(n_shot=2, seed=0)
    shots = pick_shots(df, 2, 0)
    assert [int(s.in_cluster) for s in shots] == [1, 0]
    cache = CallCache(tmp_path / "calls.sqlite")
    backend = FakeBackend()
    p1 = llm_prompt_classifier(df, df, backend, cache, Decoding(), cfg)
    assert backend.calls == 6 and ((p1 >= 0) & (p1 <= 1)).all()
    p2 = llm_prompt_classifier(df, df, FakeBackend(), cache, Decoding(), cfg)
    np.testing.assert_allclose(p1, p2)
    fresh = FakeBackend()
    llm_prompt_classifier(df, df, fresh, cache, Decoding(), cfg)
    assert fresh.calls == 0  # answered from the call cache


def test_yes_probability():
    assert yes_probability(JudgeResponse("yes", {"yes": 0.3, "no": 0.1}, 1, 1, 0.0)) == pytest.approx(0.75)
    assert yes_probability(JudgeResponse("No.", None, 1, 1, 0.0)) == 0.0
    assert yes_probability(JudgeResponse("maybe", None, 1, 1, 0.0)) == 0.5


class RecordingBackend(FakeBackend):
    """A fake backend with a context length (in whitespace words, as FakeBackend counts tokens)."""

    def __init__(self, max_length: int):
        super().__init__()
        self.max_length = max_length
        self.seen: list = []

    @property
    def context_length(self) -> int:
        return self.max_length

    def count_tokens(self, request):  # like the transformers backend: an over-long prompt raises
        n = super().count_tokens(request)
        if n >= self.max_length:
            raise BackendError(f"prompt of {n} tokens exceeds max_length={self.max_length}")
        return n

    def generate(self, requests, decoding):
        for r in requests:
            assert self.count_tokens(r) < self.max_length
        self.seen += list(requests)
        return super().generate(requests, decoding)


def test_llm_prompt_classifier_fits_the_context_middle_cut_then_fewer_shots(tmp_path):
    from promptlottery.gating.baselines import cut_middle

    assert cut_middle("abcdefghij", 20) == "abcdefghij"
    assert cut_middle("abcdefghijklmnopqrstuvwxyz", 9) == "abc [...] uvwxyz"
    df = frame(4)
    long_q = "INSTRUCTIONS " + " ".join(["shot"] * 2000) + " JUDGED-ITEM"
    df["query"] = [long_q, long_q, "short cat", "short dog"]
    # ours: the middle cut (the paper's right cut at 3,500 / 1,200 is tests/test_gate_protocol.py)
    cfg = LLMBaselineConfig(
        n_shot=2,
        seed=0,
        max_query_chars=12000,
        max_shot_chars=12000,
        truncation="middle",
        min_query_chars=400,
    )
    backend = RecordingBackend(max_length=400)
    p = llm_prompt_classifier(df, df, backend, CallCache(tmp_path / "c.sqlite"), Decoding(), cfg)
    assert len(p) == 4 and len(backend.seen) == 4
    for r in backend.seen:
        last = r.messages[-1]["content"]
        if "INSTRUCTIONS" in last:  # a long query keeps its start and the judged item at its end
            assert "JUDGED-ITEM" in last and "[...]" in last
    # nothing is cut or dropped where the prompt fits
    roomy = RecordingBackend(max_length=100_000)
    llm_prompt_classifier(df, df, roomy, CallCache(tmp_path / "d.sqlite"), Decoding(), cfg)
    assert all(len(r.messages) == 5 for r in roomy.seen)
    assert not any("[...]" in m["content"] for r in roomy.seen for m in r.messages)

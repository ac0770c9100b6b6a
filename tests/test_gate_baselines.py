"""Classifier baselines: metrics, frozen embeddings + logistic regression, the cached LLM prompt classifier."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promptlottery.backends.base import Decoding, JudgeResponse
from promptlottery.backends.fake import FakeBackend
from promptlottery.gating.baselines import (
    LLMBaselineConfig,
    classification_metrics,
    embedding_logreg,
    llm_prompt_classifier,
    pick_shots,
    yes_probability,
)
from promptlottery.judging.cache import CallCache


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

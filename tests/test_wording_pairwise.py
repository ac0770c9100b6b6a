"""The PromptEval-style wording model on pairwise grids (analysis/budget/pairwise/wording_model.py): the cell outcome
by hand, and the known judges end to end on a full and a sparse pairwise grid of the fake backend."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from promptlottery.analysis.budget.pairwise.wording_model import pairwise_agreement


def test_the_cell_outcome_by_hand():
    """Rows: pairs; columns: wordings. The two-order verdict is the orders' common verdict, a tie where
    they differ, and agrees when it equals the human preference; a pair whose human label is a tie or
    missing is left out; a cell with an order unjudged is NaN (unknown, not a miss)."""
    first = [["1", "1", "2"], ["2", "1", None], ["1", "1", "1"], ["tie", "2", "1"]]
    second = [["1", "2", "2"], ["2", "2", "1"], ["1", "1", "1"], ["tie", "2", "1"]]
    human = ["1", "2", "tie", None]
    agree, kept, outcome = pairwise_agreement(first, second, human)
    # pair 0 (human 1): P1 (1, 1) -> 1 agrees; P2 (1, 2) -> tie, no; P3 (2, 2) -> 2, no
    # pair 1 (human 2): P1 (2, 2) -> 2 agrees; P2 (1, 2) -> tie, no; P3 only order 21 judged -> NaN
    assert kept.tolist() == [True, True, False, False] and "human preference" in outcome
    assert np.array_equal(agree, [[1.0, 0.0, 0.0], [1.0, 0.0, np.nan]], equal_nan=True)
    # without any human preference: agreement with the pair's plurality two-order verdict
    # pair 0: verdicts 1, tie, 2 (one each: the smallest code, "1", is the plurality): 1, 0, 0
    # pair 3: tie, 2, 1 -> 1 of each again: "1" -> 0, 0, 1
    agree, kept, outcome = pairwise_agreement(first, second, [None] * 4)
    assert kept.all() and "plurality" in outcome
    assert agree[0].tolist() == [1.0, 0.0, 0.0] and agree[3].tolist() == [0.0, 0.0, 1.0]
    assert agree[2].tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="one preference per pair"):
        pairwise_agreement(first, second, ["1"])
    with pytest.raises(ValueError, match="'1', '2' or 'tie'"):
        pairwise_agreement(first, second, ["A", "1", "2", "1"])


def _sweep(tmp_path, behaviour, design, variants, limit=16):
    from promptlottery.stages import run_stage
    from tests.conftest import compose

    base = ["backbone=fake", f"backbone.backend.behaviour={behaviour}", "+experiment=llmbar_natural_pairwise",
            f"dataset.limit={limit}", "stage=judge"]  # fmt: skip
    out = tmp_path / f"{behaviour}_{len(design)}"
    for n, v in enumerate(variants):
        cfg = compose([*base, *design, f"judge.variant={v}"], tmp_path=tmp_path)
        assert run_stage(cfg, out / f"{n}_{v}")["status"] == "ok"
    return out


def _budget(tmp_path, sweep, name, *extra):
    from promptlottery.stages import run_stage
    from tests.conftest import compose

    cfg = compose(["+analysis=budget", f"analysis.runs={sweep}/*", "analysis.model_ranks=[0]",
                   "analysis.model_embedding=words", "analysis.n_sim=2", "analysis.n_resamples=5",
                   "analysis.model_n_sim=2", "analysis.model_resamples=3", *extra], tmp_path=tmp_path)  # fmt: skip
    assert run_stage(cfg, tmp_path / name)["status"] == "ok"
    return tmp_path / name


def test_the_oracle_on_a_full_pairwise_grid(tmp_path):
    """The oracle gives the human preference in both orders under every wording: every cell agrees, so
    the full grid's per-wording agreement and its quantiles are 1, the observed cells' means are 1 in
    every plan, and the model's estimates are close to 1 (its unseen cells predicted near 1). The
    simulation's plans cost the share of the single-order calls asked for."""
    variants = ["P1", "P2", "P3", "P4"]
    out = _budget(tmp_path, _sweep(tmp_path, "oracle", [], variants), "budget", "analysis.budgets=[0.5]")
    table = pd.read_csv(out / "tables" / "wording_model.csv")
    quant = table[table["statistic"].str.startswith("q")]
    assert (quant["full"] == 1.0).all()
    assert (quant.loc[quant["method"].str.startswith("observed"), "mean_estimate"] == 1.0).all()
    model = quant[quant["method"] == "ours: PromptEval-style model, rank 0"]
    assert len(model) == 5 and (model["mean_estimate"] > 0.95).all()
    assert table["calls_share"].tolist() == pytest.approx([0.5] * len(table))
    (summary,) = json.loads((out / "tables" / "wording_model_full.json").read_text())
    assert summary["per_wording"] == dict.fromkeys(variants, 1.0) and summary["n_left_out"] == 0
    assert "human preference" in summary["outcome"]
    assert "## Many wordings: the PromptEval-style model" in (out / "budget.md").read_text()


@pytest.mark.parametrize(("behaviour", "value"), [("oracle", 1.0), ("always_first", 0.0)])
def test_known_judges_on_a_sparse_pairwise_grid(tmp_path, behaviour, value):
    """A sparse sweep (half the calls, P1 the anchor in both orders, a quarter of the pairs under
    everything): the oracle's every observed cell agrees, the always-first judge's none (its two-order
    verdict is always a tie; LLMBar's human preferences never are). Each wording's observed cells'
    mean is that value exactly; the model keeps the observed cells and predicts the rest close to it,
    so every wording's agreement and every quantile is within 0.05 of it."""
    design = ["judge.design=sparse", "judge.budget=0.5", "judge.full_share=0.25", "judge.anchor=P1"]
    variants = ["P1", "P2", "P3", "P4", "P5"]
    out = _budget(tmp_path, _sweep(tmp_path, behaviour, design, variants), "budget")
    (s,) = json.loads((out / "tables" / "wording_model_sparse.json").read_text())
    assert s["rank"] == 0 and s["n_reported"] + s["n_validation"] == 16 and s["n_left_out"] == 0
    observed = [v for v in s["observed_per_wording"].values() if v == v]  # NaN: no cell on the reported pairs
    assert observed and all(v == value for v in observed)
    assert all(abs(v - value) < 0.05 for v in s["per_wording"].values())
    assert all(abs(v - value) < 0.05 for v in s["quantiles"].values())
    assert s["calls_share"] == pytest.approx(0.5, abs=0.1)
    assert "PromptEval-style model on this sparse grid" in (out / "budget.md").read_text()


def test_too_few_pairs_is_one_line(tmp_path):
    from promptlottery.errors import UserError

    sweep = _sweep(tmp_path, "oracle", [], ["P1", "P2"], limit=3)
    with pytest.raises(UserError, match=r"analysis.model_ranks: .* 3 pairs .* needs >= 4"):
        _budget(tmp_path, sweep, "budget", "analysis.min_items=2")

"""``judge.design=adaptive`` with a pairwise judge: each pair's (wording, order) cells walked in its seeded
order, every cell a call and a vote; the known-answer judges stop where the hand derivation says, and the
simulator on the full grid predicts the sweep's calls exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promptlottery.analysis.budget.pairwise.simulation import simulate_pairwise_adaptive
from promptlottery.metrics.adaptive import item_order
from tests.conftest import compose

WORDINGS = ["P1", "P2", "P3", "P4", "P5"]  # the group's: the walk spans every wording
CELLS = [f"{w}:{o}" for w in WORDINGS for o in ("12", "21")]
BASE = ["backbone=fake", "+experiment=llmbar_natural_pairwise", "dataset.limit=8", "stage=judge"]


def _sweep(tmp_path, name: str, extra: list[str]) -> pd.DataFrame:
    from promptlottery.stages import run_stage

    for n, v in enumerate(WORDINGS):
        cfg = compose([*BASE, *extra, f"judge.variant={v}"], tmp_path=tmp_path)
        assert run_stage(cfg, tmp_path / name / f"{n}_{v}")["status"] == "ok"
    return pd.concat(pd.read_parquet(p) for p in sorted((tmp_path / name).glob("*/judgments.parquet")))


def test_known_answer_pairwise_judges_stop_where_the_hand_derivation_says(tmp_path):
    """The oracle gives the human preference in every cell: under Beta at 0.9 one preference with v votes
    has P = 1 - 0.5^(v + 1), 0.875 at 2 and 0.9375 at 3: 3 of the 10 cells on every pair, the plurality
    the human preference. The judge that always prefers the answer shown first votes "1" in order 12 and
    "2" in order 21: 5 votes each of 10, so the paper's rule (ceil(11 / 2) = 6 votes) never decides: every
    pair is judged in all 10 cells."""
    from promptlottery.stages import run_stage

    oracle = _sweep(tmp_path, "oracle", ["backbone.backend.behaviour=oracle", "judge.design=adaptive",
                                         "judge.stop_rule=beta", "judge.confidence=0.9"])  # fmt: skip
    assert (oracle.groupby("item_id").size() == 3).all() and set(oracle["adaptive_stop"]) == {"confident"}
    per_pair = oracle.drop_duplicates("item_id")
    assert (per_pair["adaptive_plurality"].astype(str) == per_pair["human_preferred"].astype(str)).all()
    # each row's cell is at its place in the pair's seeded order
    for row in oracle.itertuples(index=False):
        order = item_order(0, str(row.item_id), CELLS)
        assert order.index(f"{row.variant}:{row.order}") + 1 == row.adaptive_position
    first = _sweep(tmp_path, "first", ["backbone.backend.behaviour=always_first", "judge.design=adaptive",
                                       "judge.stop_rule=paper_3of5"])  # fmt: skip
    assert (first.groupby("item_id").size() == 10).all() and set(first["adaptive_stop"]) == {"exhausted"}
    cfg = compose(["+analysis=budget", f"analysis.runs={tmp_path / 'oracle'}/*"], tmp_path=tmp_path)
    assert run_stage(cfg, tmp_path / "budget")["status"] == "ok"
    summary = pd.read_csv(tmp_path / "budget" / "tables" / "adaptive_summary.csv").iloc[0]
    assert (summary["n_cells"], summary["calls"], summary["full_calls"]) == (10, 3 * 8, 10 * 8)
    assert summary["saved_share"] == pytest.approx(0.7)


def test_the_pairwise_simulator_predicts_the_adaptive_sweeps_calls_exactly(tmp_path):
    """A full pairwise grid and an adaptive sweep of the same fake judge (hash): replaying the sweep's own
    orders over the full grid's cells gives exactly the calls the sweep made, pair by pair."""
    full = _sweep(tmp_path, "full", [])
    verdict = full["preferred"].where(full["preferred"].notna(), full["preferred_parsed"])
    table = full.assign(v=verdict).pivot_table(index="item_id", columns=["variant", "order"], values="v",
                                                aggfunc="first")  # fmt: skip
    pairs = [str(i) for i in table.index]
    first = table.xs("12", axis=1, level="order")[WORDINGS].to_numpy(object)
    second = table.xs("21", axis=1, level="order")[WORDINGS].to_numpy(object)
    design = [
        "judge.design=adaptive",
        "judge.stop_rule=dirichlet",
        "judge.confidence=0.8",
        "judge.design_seed=3",
    ]
    rows = _sweep(tmp_path, "adaptive", design)
    orders = np.array([[CELLS.index(c) for c in item_order(3, p, CELLS)] for p in pairs])
    sim = simulate_pairwise_adaptive(first, second, rule="dirichlet", confidence=0.8, orders=orders)
    assert sim["n_left_out"] == 0 and len(rows) == sim["calls"] < len(full)


def test_a_pairwise_adaptive_design_needs_both_orders():
    from promptlottery.errors import ConfigError
    from promptlottery.judging.adaptive_job import adaptive_design

    with pytest.raises(ConfigError, match=r"^judge.design=adaptive for pairwise judging walks both orders"):
        adaptive_design({"design": "adaptive", "position_swap": False}, "pairwise", 1)
    assert adaptive_design({"design": "adaptive"}, "pairwise", 1)["rule"] == "dirichlet"

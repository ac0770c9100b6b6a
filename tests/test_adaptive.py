"""Adaptive stopping per item (metrics/adaptive.py) and ``judge.design=adaptive`` in a sweep: the rules by
hand, the sweep's calls predicted exactly by the simulator on the full grid, known-answer judges end to end."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from promptlottery.analysis.budget.simulation import simulate_adaptive
from promptlottery.metrics.adaptive import dirichlet_confidence, item_order, stop_reason, walk
from tests.conftest import compose

VARIANTS = ["P1", "P2", "P3", "P4", "P5"]
FIELDS = [
    "dataset=table", "dataset.path=examples/own_judge/qa_answers.jsonl", "dataset.fields.id=id",
    "dataset.fields.context=question", "dataset.fields.reference=gold", "dataset.fields.response=answer",
    "dataset.fields.system=system", "dataset.fields.human=rating", "dataset.human_range=[1,5]",
    "backbone=fake", "judge.group_file=examples/own_judge/correctness.yaml",
]  # fmt: skip


def test_stop_rules_by_hand():
    # Beta(v_top + 1, v_second + 1): P(p > 0.5) for 3 vs 0 is 1 - 0.5^4 = 0.9375; for 2 vs 1 it is 11/16
    assert stop_reason({"a": 3}, 5, "beta", 0.93) == "confident"
    assert stop_reason({"a": 3}, 5, "beta", 0.94) is None
    assert stop_reason({"a": 2, "b": 1}, 5, "beta", 0.68) == "confident"
    assert stop_reason({"a": 2, "b": 1}, 5, "beta", 0.69) is None
    # Dirichlet(3, 1, 1) for counts 2, 0, 0: with G_2, G_3 ~ Exp(1) and X ~ Gamma(3),
    # P(X > G_2, X > G_3) = E[(1 - e^-X)^2] = 1 - 2 (1 + 1)^-3 + (1 + 2)^-3 = 1 - 1/4 + 1/27
    assert dirichlet_confidence([2, 0, 0]) == pytest.approx(1 - 1 / 4 + 1 / 27, abs=1e-9)
    assert dirichlet_confidence([1, 1, 1]) == pytest.approx(1 / 3, abs=1e-9)  # by symmetry
    # one label seen: Dir(v + 1, 1) = Beta(v + 1, 1), P = 1 - 0.5^(v + 1)
    assert dirichlet_confidence([3]) == pytest.approx(0.9375, abs=1e-9)
    # with two labels seen it is the Beta criterion (a 3-label Dirichlet: 3, 1, 1 is less sure)
    assert stop_reason({"a": 2, "b": 1}, 5, "dirichlet", 0.68) == "confident"
    assert stop_reason({"a": 3, "b": 1, "c": 1}, 5, "dirichlet", 0.95) is None
    # the paper's rule: ceil((J + 1) / 2) votes, 3 of 5, 2 of 3
    assert stop_reason({"a": 2, "b": 2}, 5, "paper_3of5", 0.0) is None
    assert stop_reason({"a": 3, "b": 1}, 5, "paper_3of5", 0.0) == "decided"
    assert stop_reason({"a": 2}, 3, "paper_3of5", 0.0) == "decided"
    with pytest.raises(ValueError, match="stop rule"):
        stop_reason({"a": 1}, 5, "majority", 0.9)


def test_walk_by_hand_asks_each_wording_once_per_round():
    # three wordings, the 2-of-3 rule: all agree -> 2 calls; all differ -> 3 calls (exhausted); x agrees
    # with y only -> 2 calls if x and y come first in its order, else 3
    labels = {"same": dict(A=1, B=1, C=1), "differ": dict(A=1, B=2, C=3), "two": dict(A=1, B=1, C=2)}
    asked = []

    def labels_of(w, ids):
        asked.append((w, tuple(ids)))
        return {i: labels[i][w] for i in ids}

    walks = walk(list(labels), ["A", "B", "C"], labels_of, rule="paper_3of5", confidence=0.9, seed=7)
    order = item_order(7, "two", ["A", "B", "C"])
    assert (walks["same"].calls, walks["same"].stop, walks["same"].plurality) == (2, "decided", 1)
    assert (walks["differ"].calls, walks["differ"].stop, walks["differ"].plurality) == (3, "exhausted", 1)
    assert walks["two"].calls == (2 if set(order[:2]) == {"A", "B"} else 3)
    assert walks["two"].judged == tuple(order[: walks["two"].calls])
    # every wording at most once per round, never an item twice under one wording
    assert len({(w, i) for w, ids in asked for i in ids}) == sum(len(ids) for _, ids in asked)
    assert sum(len(ids) for _, ids in asked) == sum(w.calls for w in walks.values())


def _sweep(tmp_path, name, overrides):
    from promptlottery.stages import run_stage

    for n, v in enumerate(VARIANTS):
        cfg = compose(["+experiment=own_judge", *FIELDS, *overrides, f"judge.variant={v}"], tmp_path=tmp_path)
        assert run_stage(cfg, tmp_path / name / f"{n}_{v}")["status"] == "ok"
    return pd.concat(pd.read_parquet(p) for p in sorted((tmp_path / name).glob("*/judgments.parquet")))


def _orders(items, seed):
    return np.array([[VARIANTS.index(v) for v in item_order(seed, i, VARIANTS)] for i in items])


@pytest.mark.parametrize("behaviour", ["random", "inverted"])
def test_the_simulator_predicts_the_adaptive_sweeps_calls_exactly(tmp_path, behaviour):
    """A full grid and adaptive sweeps on the same fake judge: the simulator, replaying the sweep's own
    orders on the full grid, gives exactly the calls (per item) the sweep made; the budget stage gives the
    calls saved and the plurality labels; the lottery report refuses the adaptive grid in one line."""
    from promptlottery.errors import UserError
    from promptlottery.stages import run_stage

    judge = [f"backbone.backend.behaviour={behaviour}"]
    full = _sweep(tmp_path, "full", judge)
    grid = full.pivot(index="item_id", columns="variant", values="argmax_label")[VARIANTS].astype(float)
    items = [str(i) for i in grid.index]
    for rule, conf in (("dirichlet", 0.8), ("beta", 0.9), ("paper_3of5", 0.95)):
        design = [
            "judge.design=adaptive",
            f"judge.stop_rule={rule}",
            f"judge.confidence={conf}",
            "judge.design_seed=5",
        ]
        rows = _sweep(tmp_path, f"ad_{rule}", [*judge, *design])
        sim = simulate_adaptive(grid.to_numpy(), rule=rule, confidence=conf, orders=_orders(items, 5))
        assert len(rows) == sim["calls"] < len(full)
        calls = rows.groupby("item_id").size()
        assert (rows.groupby("item_id")["adaptive_calls"].first() == calls).all()
        for i, n in calls.items():  # each item's first n wordings in its order, and its plurality
            order = item_order(5, str(i), VARIANTS)
            own = rows[rows["item_id"] == i].sort_values("adaptive_position")
            assert list(own["variant"]) == order[:n] and list(own["adaptive_position"]) == list(
                range(1, n + 1)
            )
            votes = [float(grid.loc[i, v]) for v in order[:n]]
            top = max(votes, key=lambda x: (votes.count(x), -votes.index(x)))
            assert float(own["adaptive_plurality"].iloc[0]) == top
        out = tmp_path / f"budget_{rule}"
        cfg = compose(["+analysis=budget", f"analysis.runs={tmp_path / f'ad_{rule}'}/*"], tmp_path=tmp_path)
        assert run_stage(cfg, out)["status"] == "ok"
        summary = pd.read_csv(out / "tables" / "adaptive_summary.csv").iloc[0]
        assert summary["calls"] == len(rows) and summary["full_calls"] == len(full)
        assert summary["saved_share"] == pytest.approx(1 - len(rows) / len(full), abs=1e-5)  # csv: 6 digits
    lottery = compose(["+analysis=lottery", f"analysis.runs={tmp_path / 'ad_beta'}/*"], tmp_path=tmp_path)
    with pytest.raises(UserError, match="adaptive design"):
        run_stage(lottery, tmp_path / "lottery")


def test_known_answer_judges_stop_where_the_hand_derivation_says(tmp_path):
    """The inverted judge answers the human rating under every wording but P3, where it answers 6 - rating.
    Under the paper's rule (3 of 5) an item stops at its 3rd wording, or at its 4th when P3 comes among its
    first three and 6 - rating != rating (rating != 3). The oracle under the Dirichlet rule at 0.95 agrees
    with itself: 1 - 0.5^(v + 1) >= 0.95 first at v = 4 votes, so 4 calls on every item."""
    humans = pd.read_json("examples/own_judge/qa_answers.jsonl", lines=True).set_index("id")["rating"]
    rows = _sweep(tmp_path, "inv", ["backbone.backend.behaviour=inverted", "judge.design=adaptive",
                                    "judge.stop_rule=paper_3of5"])  # fmt: skip
    calls = rows.groupby("item_id").size()
    expected = {
        str(i): 3 + int("P3" in item_order(0, str(i), VARIANTS)[:3] and r != 3) for i, r in humans.items()
    }
    assert calls.to_dict() == expected
    assert set(rows["adaptive_stop"]) == {"decided"}
    oracle = _sweep(tmp_path, "oracle", ["backbone.backend.behaviour=oracle", "judge.design=adaptive"])
    assert len(oracle) == 4 * len(humans) and set(oracle["adaptive_stop"]) == {"confident"}
    assert math.isclose(1 - 0.5**5, 0.96875) and 1 - 0.5**4 < 0.95


def test_adaptive_options_stay_out_of_the_hash_where_they_change_no_answer():
    from promptlottery.tracking.jobdir import config_hash

    before = {"judge": {"variant": "P1", "family": "x"}, "n_samples": 1}
    full = {"judge": {**before["judge"], "stop_rule": "beta", "confidence": 0.8}, "n_samples": 1}
    assert config_hash(full) == config_hash(before)
    adaptive = {"judge": {**before["judge"], "design": "adaptive", "stop_rule": "beta", "confidence": 0.8}}
    other = {"judge": {**adaptive["judge"], "confidence": 0.9}}
    assert config_hash({**adaptive, "n_samples": 1}) != config_hash({**other, "n_samples": 1})


@pytest.mark.faults
def test_bad_adaptive_options_are_one_line_before_any_job(tmp_path):
    from tests.test_user_errors import SWEEP, no_job_started, one_line, run

    for option, expected in (
        ("judge.design=adaptiv", "judge.design='adaptiv': must be one of full, sparse, adaptive"),
        ("judge.stop_rule=paper35", "judge.stop_rule='paper35': must be one of"),
        ("judge.confidence=1.5", "judge.confidence=1.5: must be in (0.5, 1)"),
    ):
        extra = [] if option.startswith("judge.design") else ["judge.design=adaptive"]
        proc = run(tmp_path, *SWEEP, "judge.group_file=examples/own_judge/correctness.yaml", option, *extra)
        one_line(proc, expected)
        no_job_started(tmp_path)
    proc = run(tmp_path, *SWEEP, "judge.group_file=examples/own_judge/correctness.yaml", "judge.design=adaptive",
               "n_samples=3")  # fmt: skip
    one_line(proc, "must be 1 under judge.design=adaptive")

"""The gate stage on grids judged by judges whose every answer is known (issue 31: "gate").

Twenty STS-B items are judged under the five wordings of G12 by the fake backend with a known
behaviour (``promptlottery/backends/fake.py``), and the real gate stage (tiny DeBERTa-v2, as in
``test_gate_stage.py``) runs on each grid. What the gate must print is derived here by hand from
the definitions (``gating/data.py``: a verdict is in the cluster when it equals the label of >= 3
of the 5 judges; ``gating/simulate.py``: the policies) and the raw human values:

* ``oracle`` (every wording answers the label nearest the human value) and ``constant``: every
  verdict is in its item's cluster, so the gate has one class to learn and everything it reports is
  undefined: the stage refuses in one line (exit status 2), naming why;
* ``inverted`` (the oracle, mirrored under P3): on an item whose oracle label L is not the scale's
  middle, P3 says the mirrored label and the other four say L, so the cluster is L (4 of 5 votes),
  only P3's verdict is out of it, P1 is always in it. By hand, on the test items with a share ``f``
  of such items: ``first_2_agree`` stops at call 2 (P1 = P2); ``first_3_agree`` and the adaptive full
  aggregation at call 3, or 4 when P3 differs: mean ``3 + f``; P1 alone, the paper's policy and the
  sequential gate (threshold 0 chosen on validation: trusting P1 always recovers 100% there with the
  largest saving) call once; all recover 100%, by construction of these judgments; the share in the
  cluster is ``1 - f / 5``; convergence by the third call ``1 - f``, by the fifth ``f``, never 0; the
  paper's derived adaptive cost ``3 (1 - f) + 5 f`` (it counts a convergence at call 4 as 5); the
  P1 rates of the absent class, the MCC and the balanced accuracy are undefined (n/a); there is no
  no-consensus item, so every ``_nc`` figure is n/a.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from promptlottery.gating.data import GateDataError
from promptlottery.prompts.groups import resolve_group
from promptlottery.stages import run_stage, user_message
from tests.conftest import REPO, compose, subprocess_env

VARIANTS = ["P1", "P2", "P3", "P4", "P5"]
N_ITEMS = 20
GATE = [
    "+gate=selective",
    "gate/classifier=deberta_tiny",
    "backbone=fake",
    "gate.llm_baseline.enabled=false",
    "gate.embedding_baseline.enabled=false",
    "gate.save_adapter=false",
]


def _judge(tmp, behaviour: str):
    for v in VARIANTS:
        extra = ["+backbone.backend.label='3'"] if behaviour == "constant" else []
        cfg = compose(
            [
                "backbone=fake",
                f"dataset.limit={N_ITEMS}",
                f"judge.variant={v}",
                f"backbone.backend.behaviour={behaviour}",
                *extra,
            ],
            tmp_path=tmp,
        )
        run_stage(cfg, tmp / "grid" / f"stsb_{v}")
    return cfg


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """``grid(behaviour)``: the judged grid's directory and its last composed judge config."""
    made = {}

    def get(behaviour: str):
        if behaviour not in made:
            tmp = tmp_path_factory.mktemp(f"gate_{behaviour}")
            made[behaviour] = (tmp, _judge(tmp, behaviour))
        return made[behaviour]

    return get


# --------------------------------------------------------------------------- one class: refused


@pytest.mark.parametrize("behaviour", ["oracle", "constant"])
def test_judges_that_always_agree_leave_the_gate_one_class_and_it_refuses(grid, behaviour, tmp_path):
    tmp, _ = grid(behaviour)
    labels = pd.concat(pd.read_parquet(p / "judgments.parquet") for p in sorted((tmp / "grid").iterdir()))
    # every wording gives each item one label: every verdict is in its item's cluster
    assert (labels.groupby("item_id")["argmax_label"].nunique() == 1).all()
    cfg = compose([*GATE, f"gate.runs={tmp / 'grid'}/*"], tmp_path=tmp)
    with pytest.raises(GateDataError) as err:
        run_stage(cfg, tmp_path / "gate")
    msg = user_message(err.value)
    assert msg == str(err.value) and "\n" not in msg
    assert f"all {5 * N_ITEMS} examples of gate.runs=" in msg and "have in_cluster=1" in msg
    assert "one class to learn" in msg and "undefined" in msg
    assert not (tmp_path / "gate" / "report.md").exists()  # no number printed


def test_the_gate_command_refuses_an_oracle_grid_with_status_2(grid, tmp_path):
    tmp, _ = grid("oracle")
    cmd = [
        sys.executable, "-m", "run", *GATE, f"gate.runs={tmp / 'grid'}/*", "logger=none",
        f"hydra.run.dir={tmp_path / 'gate'}", f"paths.cache_dir={tmp / 'cache'}",
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=subprocess_env(tmp_path)
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(errors) == 1 and "have in_cluster=1" in errors[0] and "one class to learn" in errors[0]


# --------------------------------------------------------------------------- one wording inverted


def _hand_labels(cfg, judgments: pd.DataFrame):
    """The oracle's label per item: the scale label nearest the human value mapped linearly from the
    dataset's human range onto the scale (halfway: the label listed first)."""
    scale = resolve_group(cfg.judge).scale
    lo, hi = (float(x) for x in cfg.dataset.human_range)
    s = scale.scores

    def nearest(h: float) -> str:
        x = min(s) + (h - lo) / (hi - lo) * (max(s) - min(s))
        return scale.labels[min(range(len(s)), key=lambda i: (abs(s[i] - x), i))]

    p1 = judgments[judgments.variant == "P1"].set_index("item_id")
    return p1["human"].map(nearest), scale


def _mirror(scale, label: str) -> str:
    s = dict(zip(scale.labels, scale.scores, strict=True))
    m = min(s.values()) + max(s.values()) - s[label]
    return next(lab for lab in scale.labels if math.isclose(s[lab], m))


@pytest.fixture(scope="module")
def inverted(grid, tmp_path_factory):
    tmp, judge_cfg = grid("inverted")
    out = tmp_path_factory.mktemp("gate_inverted_out") / "gate"
    rec = run_stage(compose([*GATE, f"gate.runs={tmp / 'grid'}/*"], tmp_path=tmp), out)
    judgments = pd.concat(pd.read_parquet(p / "judgments.parquet") for p in sorted((tmp / "grid").iterdir()))
    hand, scale = _hand_labels(judge_cfg, judgments)
    return rec, out, judgments, hand, scale


def test_inverted_judge_gate_examples_and_split(inverted):
    rec, out, judgments, hand, scale = inverted
    assert rec["status"] == "ok"
    # the judge answered what the definition says: the hand label, mirrored under P3
    got = judgments.set_index(["item_id", "variant"])["argmax_label"]
    for (item, v), lab in got.items():
        assert lab == (_mirror(scale, hand[item]) if v == "P3" else hand[item]), (item, v)
    pred = pd.read_parquet(out / "heldout_predictions.parquet")
    test_items = sorted(pred["item_id"].unique())
    flipped = {i for i in test_items if _mirror(scale, hand[i]) != hand[i]}
    f = len(flipped) / len(test_items)
    assert 0 < f < 1, "the seeded split should hold items of both kinds"
    # in the cluster: every verdict but P3's on a flipped item; the cluster is the hand label
    want = {(i, v): int(not (v == "P3" and i in flipped)) for i in test_items for v in VARIANTS}
    assert {(r.item_id, r.variant): r.in_cluster for r in pred.itertuples()} == want
    assert (pred["cluster"] == pred["item_id"].map(hand)).all() and not pred["no_consensus"].any()
    summary = json.loads((out / "results.json").read_text())["summary"]
    assert summary["positive_rate_test"] == pytest.approx(1 - f / 5)
    assert summary["n_test_nc"] == 0
    conv = summary["convergence"]
    assert conv["converged_by_3"] == pytest.approx(1 - f) and conv["converged_by_5"] == pytest.approx(f)
    assert conv["never_converged"] == 0
    assert summary["adaptive_calls_observed"] == pytest.approx(3 + f)
    assert summary["adaptive_calls_derived"] == pytest.approx(3 * (1 - f) + 5 * f)
    assert summary["n_stable_items"] == len(test_items) and summary["stable_calls_simulated"] == 1


def test_inverted_judge_operating_points_by_hand(inverted):
    rec, out, judgments, hand, scale = inverted
    pred = pd.read_parquet(out / "heldout_predictions.parquet")
    test_items = sorted(pred["item_id"].unique())
    f = np.mean([_mirror(scale, hand[i]) != hand[i] for i in test_items])
    ops = pd.read_csv(out / "operating_points.csv").set_index("policy")
    # every decision is the hand label: Spearman with the humans is the hand labels'
    p1 = judgments[(judgments.variant == "P1") & judgments.item_id.isin(test_items)].set_index("item_id")
    rho = stats.spearmanr([scale.score_of(hand[i]) for i in p1.index], p1["human"]).statistic
    calls = {
        "first_2_agree": 2,
        "first_3_agree": 3 + f,
        "adaptive_full_aggregation": 3 + f,
        "P1_only": 1,
        "full_plurality": 5,
        "paper_gate": 1,
        "learned_gate": 1,
        "confidence": 1,
    }
    for policy, c in calls.items():
        row = ops.loc[policy]
        assert row["mean_calls"] == pytest.approx(c), policy
        assert row["calls_saved"] == pytest.approx(1 - c / 5), policy
        assert row["recovered"] == 1, policy
        assert row["human_spearman"] == pytest.approx(rho), policy
        assert row["n_items"] == len(test_items) and row["n_items_nc"] == 0, policy
        assert np.isnan(row["recovered_nc"]) and np.isnan(row["mean_calls_nc"]), policy
    for policy in ("paper_gate", "learned_gate", "confidence"):
        assert ops.loc[policy, "threshold"] == 0, policy  # the lowest threshold with the largest saving
    matched = pd.read_csv(out / "savings_at_recovery.csv")
    assert (matched["recovered"] == 1).all()
    np.testing.assert_allclose(matched[matched.policy == "paper_gate"]["calls_saved"], 0.8)


def test_inverted_judge_undefined_rates_say_so(inverted):
    rec, out, *_ = inverted
    clf = pd.read_csv(out / "classifier_metrics.csv").set_index("classifier")
    p1 = clf.loc["paper_gate@P1@operating_threshold"]
    # P1 is in the cluster on every test item: one class. At threshold 0 every P1 verdict is trusted
    assert p1["tnr_needs_aggregation"] == 1 and p1["tpr_in_cluster"] == 1
    for col in ("tpr_needs_aggregation", "tnr_in_cluster", "mcc", "balanced_accuracy"):
        assert np.isnan(p1[col]), col  # was: mcc 0.000 and balanced accuracy 1.000 printed
    # all five judges: both classes; always trusting them keeps every in-cluster verdict
    always = clf.loc["always_trust"]
    assert always["tpr_in_cluster"] == 1 and always["tnr_in_cluster"] == 0
    assert always["balanced_accuracy"] == 0.5 and always["mcc"] == 0  # sklearn's constant-prediction MCC
    comp = pd.read_csv(out / "paper_comparison.csv", keep_default_na=False).set_index("measure")
    assert comp.loc["gate TPR on P1, positive = needs aggregation (threshold)", "ours"] == "n/a"
    assert comp.loc["five-judge decisions recovered (paper's policy)", "ours"] == "100%"
    assert comp.loc["judge calls saved vs five-prompt aggregation (paper's policy)", "ours"] == "80%"
    report = (out / "report.md").read_text()
    assert "True by construction of these judgments" in report
    assert "P1's verdict is in the plurality cluster on every test item" in report
    assert "every no-consensus figure (`_nc`) is undefined (n/a)" in report
    assert "The judgments come from the fake backend" in report

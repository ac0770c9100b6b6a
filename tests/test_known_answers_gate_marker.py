"""Known answers for the LEARNED gate, end to end through ``+gate=selective`` (issue 47).

On a fake-backend grid rewritten so that stability is written into the text (``tests/gate_grids.py``:
every answer says ``stable`` when its verdict is in the item's plurality cluster, ``shaky`` when not),
the gate must learn it: its test MCC is near 1. With the markers shuffled over the rows (the text says
nothing about the label, nor does the judge's confidence, 0.8 on every verdict) the gate's MCC
interval (item-cluster bootstrap) must contain 0.

The classifier is the CPU default (MiniLM) cut to 32 tokens with unaccumulated batches of 16, so the
test trains 2 epochs of 180 examples in well under a minute on one core.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from promptlottery.stages import run_stage
from tests.conftest import compose
from tests.gate_grids import VARIANTS, marker_grid, relabel_backbone, relabel_group

N_ITEMS = 60
FAST = [
    "+gate=selective",
    "backbone=fake",
    "gate.llm_baseline.enabled=false",
    "gate.embedding_baseline.enabled=false",
    "gate.save_adapter=false",
    "gate.classifier.max_length=32",
    "gate.classifier.batch_size=16",
    "gate.classifier.accumulate_grad_batches=1",
    "gate.classifier.lr=2e-3",
    "gate.classifier.max_epochs=2",
    "gate.n_bootstrap=500",
    "gate.classifier.num_threads=1",  # one thread: the machine's other jobs do not slow it down
]


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    made = {}

    def get(marker: str):
        if marker not in made:
            tmp = tmp_path_factory.mktemp(f"marker_{marker}")
            grid = marker_grid(tmp, N_ITEMS, marker)
            out = tmp / "gate"
            rec = run_stage(compose([*FAST, f"gate.runs={grid}/*"], tmp_path=tmp), out)
            made[marker] = (rec, out, grid)
        return made[marker]

    return get


def _mcc(rec, classifier: str) -> dict:
    rows = [r for r in rec["classifier_intervals"] if r["part"] == "test" and r["classifier"] == classifier]
    assert len(rows) == 1
    return rows[0]


def test_marker_in_the_text_is_learned(gated):
    rec, out, _ = gated("label")
    assert rec["status"] == "ok"
    pred = pd.read_parquet(out / "heldout_predictions.parquet")
    # the labels are the design's: 0-2 dissenters per item, so every item has a cluster
    assert not pred["no_consensus"].any() and 0.6 < pred["in_cluster"].mean() < 0.95
    assert pred["item_id"].nunique() * len(VARIANTS) == len(pred) == _mcc(rec, "learned_gate")["n_rows"]
    m = _mcc(rec, "learned_gate")
    assert m["mcc"] >= 0.9 and m["mcc_lo"] >= 0.75, m
    # the judge's own confidence is the same on every verdict: it knows nothing
    assert _mcc(rec, "confidence")["mcc"] == 0
    # the stacked gate (text + the judge's confidence) reads the same marker
    assert _mcc(rec, "stacked_gate")["mcc"] >= 0.9
    fr = pd.DataFrame(rec["frontier"]).set_index("policy")
    assert fr.loc["full_aggregation", "calls"] == 5 and fr.loc["P1_only", "calls"] == 1
    assert "fake" in (out / "report.md").read_text()


def test_shuffled_markers_leave_the_gate_at_chance(gated):
    rec, out, _ = gated("shuffled")
    m = _mcc(rec, "learned_gate")
    assert m["mcc_lo"] <= 0 <= m["mcc_hi"], m
    assert abs(m["mcc"]) < 0.3, m
    summary = json.loads((out / "results.json").read_text())
    assert summary["recommendation"].startswith("Take ")


def test_frontier_intervals_hold_their_estimates(gated):
    rec, _, _ = gated("label")
    fr = pd.DataFrame(rec["frontier"])
    for axis in ("calls", "recovered"):
        assert (fr[f"{axis}_lo"] <= fr[axis] + 1e-12).all() and (fr[axis] <= fr[f"{axis}_hi"] + 1e-12).all()
    # the fixed policies' calls have no spread: every item costs the same
    fixed = fr[fr["policy"].isin(["P1_only", "full_aggregation"])]
    assert np.allclose(fixed["calls_lo"], fixed["calls_hi"])
    assert fr["n_items"].nunique() == 1 and 9 <= fr["n_items"].iloc[0] <= 15


def test_transfer_to_an_unseen_configuration(gated, tmp_path):
    """Two configurations (the marker grid and a copy judged by 'another backbone'); one is left out
    of training and validation: the gate learned the marker, so it holds on the unseen configuration."""
    _, _, grid = gated("label")
    other = relabel_backbone(grid, tmp_path / "grid_b", "fake_b")
    out = tmp_path / "gate"
    cfg = compose(
        [*FAST, f"gate.runs=[{grid}/*,{other}/*]", "gate.transfer_config_share=0.5"], tmp_path=tmp_path
    )
    rec = run_stage(cfg, out)
    assert len(rec["transfer_configs"]) == 1
    unseen = pd.DataFrame(rec["frontier_unseen_configs"])
    assert set(unseen["n_configs"]) == {1} and (unseen["n_items"] > 0).all()
    test = pd.DataFrame(rec["frontier"])
    assert set(test["n_configs"]) == {
        1
    }  # the left-out configuration is in no training, validation or test row
    m = [
        r
        for r in rec["classifier_intervals"]
        if r["part"] == "config_transfer" and r["classifier"] == "learned_gate"
    ]
    assert len(m) == 1 and m[0]["mcc"] >= 0.9, m
    assert "Transfer to unseen configurations" in (out / "report.md").read_text()


def test_transfer_to_the_held_out_group(gated, tmp_path):
    """The same marker grid judged (relabelled) under the held-out group G15 among ``gate.runs``: its rows
    train and validate nothing (the G12 split decides), its rows of items no training row holds are the
    held-out group's frontier, and the gate, having learned the marker, holds there."""
    _, _, grid = gated("label")
    g15 = relabel_group(grid, tmp_path / "grid_g15", "G15")
    out = tmp_path / "gate"
    rec = run_stage(compose([*FAST, f"gate.runs=[{grid}/*,{g15}/*]"], tmp_path=tmp_path), out)
    assert rec["heldout_groups"] == ["G15"]
    held = pd.DataFrame(rec["frontier_heldout_group"])
    split = json.loads((out / "results.json").read_text())["split"]
    # the validation and test items (no training row holds them) under G15's wordings
    assert set(held["n_items"]) == {split["validation"] + split["test"]} and set(held["n_configs"]) == {1}
    m = [
        r
        for r in rec["classifier_intervals"]
        if r["part"] == "heldout_group" and r["classifier"] == "learned_gate"
    ]
    assert len(m) == 1 and m[0]["mcc"] >= 0.9, m
    assert "Transfer to the held-out prompt group G15" in (out / "report.md").read_text()

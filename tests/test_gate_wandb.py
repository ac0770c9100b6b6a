"""The gate's W&B records, offline (``logger=wandb``, W&B's offline mode): the stage's run holds
Lightning's per-epoch curves and the frontier as a native line plot; an Optuna search writes one run
per trial, grouped by the study, each with its per-epoch curves."""

from __future__ import annotations

import time

import pytest

from promptlottery.stages import run_stage
from tests.conftest import compose
from tests.gate_grids import marker_grid, wandb_group, wandb_history, wandb_records

pytest.importorskip("wandb")

TINY = [
    "gate/classifier=deberta_tiny",
    "gate.classifier.max_length=48",
    "gate.classifier.max_epochs=2",
    "gate.classifier.accumulate_grad_batches=1",
    "backbone=fake",
    "gate.llm_baseline.enabled=false",
    "gate.embedding_baseline.enabled=false",
    "gate.save_adapter=false",
    "gate.n_bootstrap=100",
]


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wandb_grid")
    return marker_grid(tmp, 30, "label"), tmp


def _history(run_dir, key: str, tries: int = 100) -> list[dict]:
    for _ in range(tries):  # wandb-core may still be flushing when finish() returns
        rows = [r for r in wandb_history(run_dir) if key in r]
        if rows:
            return rows
        time.sleep(0.1)
    return []


def test_stage_run_holds_epoch_curves_and_the_frontier_line(grid, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    g, gtmp = grid
    cfg = compose(
        ["+gate=selective", *TINY, f"gate.runs={g}/*", "logger=wandb", f"logger.dir={tmp_path / 'wb'}"],
        tmp_path=gtmp,
    )
    rec = run_stage(cfg, tmp_path / "gate")
    assert rec["status"] == "ok"
    runs = list((tmp_path / "wb" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    epochs = _history(runs[0], "val/mcc")
    # one validation row per epoch, each with the epoch's metrics (a curve), and the training throughput
    assert len(epochs) == 2 and all("val/balanced_accuracy" in r and "epoch" in r for r in epochs)
    assert len(_history(runs[0], "train/examples_per_s")) == 2
    assert all(r["train/examples_per_s"] > 0 for r in _history(runs[0], "train/examples_per_s"))
    # the frontier as a native line plot (wandb.plot.line: a custom chart over a logged table)
    line = _history(runs[0], "frontier_line_table/_type")
    assert line and line[0]["frontier_line_table/_type"] == "table-file"
    assert line[0]["frontier_line_table/nrows"] == len(rec["frontier"]) >= 9
    charts = [
        u.value_json
        for r in wandb_records(runs[0])
        if r.WhichOneof("record_type") == "config"
        for u in r.config.update
    ]
    assert any("wandb/line/v0" in v and "frontier_line_table" in v for v in charts)
    assert _history(runs[0], "frontier/_type")


def test_tune_writes_one_grouped_run_per_trial(grid, tmp_path, monkeypatch):
    from promptlottery.gating import tune

    monkeypatch.setenv("WANDB_MODE", "offline")
    g, gtmp = grid
    summary = tune.run_study(
        [
            f"gate.runs={g}/*",
            *[o for o in TINY if not o.startswith(("backbone=", "gate.classifier.max_epochs"))],
            "logger=wandb",
            f"logger.dir={tmp_path / 'wb'}",
            f"paths.cache_dir={gtmp / 'cache'}",
            "gate.tune.n_trials=2",
            "gate.tune.epochs=2",
            f"gate.tune.output_dir={tmp_path / 'tune'}",
            "gate.tune.tpe_startup_trials=1",
            "gate.tune.pruner.n_startup_trials=5",
        ]
    )
    assert summary["n_trials"] == 2
    runs = sorted((tmp_path / "wb" / "wandb").glob("offline-run-*"))
    groups = [wandb_group(r) for r in runs]
    trial_runs = [r for r, grp in zip(runs, groups) if grp == f"tune_gate/{summary['study_name']}"]
    assert len(trial_runs) == 2  # one per trial, grouped (the study's summary run is the third)
    for r in trial_runs:
        curve = _history(r, "val/mcc")
        assert len(curve) == 2 and [c["epoch"] for c in curve] == [0, 1]

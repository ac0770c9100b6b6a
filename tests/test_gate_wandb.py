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


def test_search_on_a_study_of_three_configurations_then_the_frontier_table(grid, tmp_path, monkeypatch):
    """The Optuna search over a study's glob (``<study>/<configuration>/<job>``, three configurations,
    stray files beside the jobs as a multirun leaves them): one W&B run per trial; its best parameters
    applied by the stage, which leaves a configuration out and writes the frontier the table reads."""
    import json
    import shutil

    import pandas as pd

    from promptlottery.gating import tune
    from promptlottery.gating.frontier_table import frontier_markdown
    from tests.gate_grids import relabel_backbone

    monkeypatch.setenv("WANDB_MODE", "offline")
    g, gtmp = grid
    study = tmp_path / "study"
    shutil.copytree(g, study / "cfg_a")
    relabel_backbone(g, study / "cfg_b", "fake_b")
    relabel_backbone(g, study / "cfg_c", "fake_c")
    for c in ("cfg_a", "cfg_b", "cfg_c"):
        (study / c / "multirun.yaml").write_text("{}\n")
    common = [f"gate.runs={study}/*/*", *[o for o in TINY if not o.startswith("gate.classifier.max_epochs")]]
    summary = tune.run_study(
        [
            *common,
            "logger=wandb",
            f"logger.dir={tmp_path / 'wb'}",
            f"paths.cache_dir={gtmp / 'cache'}",
            "gate.tune.n_trials=2",
            "gate.tune.epochs=1",
            f"gate.tune.output_dir={tmp_path / 'tune'}",
            "gate.tune.tpe_startup_trials=1",
            "gate.tune.pruner.n_startup_trials=5",
        ]
    )
    assert summary["n_trials"] == 2 and summary["n_complete"] == 2
    runs = sorted((tmp_path / "wb" / "wandb").glob("offline-run-*"))
    trial_runs = [r for r in runs if wandb_group(r) == f"tune_gate/{summary['study_name']}"]
    assert len(trial_runs) == 2 and all(len(_history(r, "val/mcc")) == 1 for r in trial_runs)
    best = tmp_path / "tune" / "best_params.json"
    assert best.exists()
    cfg = compose(
        [
            "+gate=selective", *common, f"gate.best_params={best}", "gate.transfer_config_share=0.3",
            "gate.classifier.max_epochs=1", "logger=none",
        ],
        tmp_path=gtmp,
    )  # fmt: skip
    rec = run_stage(cfg, tmp_path / "gate")
    assert rec["status"] == "ok" and len(rec["transfer_configs"]) == 1  # round(0.3 x 3) = 1 left out
    test = pd.DataFrame(rec["frontier"])
    assert set(test["n_configs"]) == {2}
    rec = json.loads((tmp_path / "gate" / "results.json").read_text())
    md = frontier_markdown(rec, command="python -m run ...", wall_s=12.0, runs=["cfg_a", "cfg_b", "cfg_c"])
    assert (
        "3 configuration dir(s) with judgments under the glob (cfg_a, cfg_b, cfg_c)" in md and "# 12 s" in md
    )
    assert "used: 3 complete configuration(s), 2 for training / validation / test" in md
    assert "| **paper (§5.2, DeBERTa-v3-large)** | 60% (no interval given) | 86% (no interval given) |" in md
    assert "| ours: the paper's policy" in md and "sparse_0.4_anchor_P1" in md
    assert f"unseen configurations {rec['transfer_configs'][0]}" in md
    assert "Held-out prompt group (G15): not evaluated." in md
    assert f"**{rec['recommendation']}**" in md


def test_logger_mode_offline_holds_after_wandb_was_set_up_without_it(tmp_path):
    """``logger.mode=offline`` reaches ``wandb.init`` itself: W&B reads WANDB_MODE once per process,
    so a process whose W&B was set up before (no WANDB_MODE, no API key) still writes offline runs
    rather than asking for a login (the CI failure of e7eea7e, where a module fixture set W&B up
    first)."""
    import subprocess
    import sys

    from tests.conftest import subprocess_env

    code = (
        "import wandb; wandb.setup()\n"
        "from promptlottery.gating.throughput import lightning_wandb_logger\n"
        f"lw = lightning_wandb_logger({{'name': 'wandb', 'mode': 'offline', 'dir': {str(tmp_path / 'wb')!r}}},"
        " name='t', group='g')\n"
        "run = lw.experiment; print('MODE', run.settings.mode); run.finish()\n"
    )
    env = {**subprocess_env(tmp_path), "WANDB_SILENT": "true"}
    assert "WANDB_MODE" not in env and "WANDB_API_KEY" not in env
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "MODE offline" in out.stdout or "MODE dryrun" in out.stdout
    assert list((tmp_path / "wb" / "wandb").glob("offline-run-*"))

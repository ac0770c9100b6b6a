"""``study.layout=configuration_backbone``: one task per configuration x backbone judges its wordings
with one engine load, into the job dirs, results and sweep summaries of one task per job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from promptlottery.errors import ConfigError
from promptlottery.stages.study_tasks import TASKS_DIR, group_jobs, study_layout

REPO = Path(__file__).resolve().parents[1]


def test_jobs_that_differ_only_in_their_wording_are_one_task():
    jobs = [
        ["+experiment=a", "backbone=x", "judge.variant=P1"],
        ["+experiment=a", "backbone=y", "judge.variant=P1"],
        ["+experiment=a", "backbone=x", "judge.variant=P2"],
        ["+experiment=a", "backbone=y", "judge.variant=P2"],
        ["+experiment=a", "backbone=x", "judge.variant=P3", "dataset.limit=3"],
    ]
    # x with P1 and P2; y with P1 and P2; the job with another limit is its own configuration
    assert group_jobs(jobs) == [[0, 2], [1, 3], [4]]


def test_auto_groups_under_any_launcher_but_the_basic_one_and_a_typo_is_one_line():
    def cfg(layout, launcher):
        return OmegaConf.create({"study": {"layout": layout}, "hydra": {"launcher": {"_target_": launcher}}})

    basic = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
    slurm = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert study_layout(cfg("auto", basic)) == "condition"
    assert study_layout(cfg("auto", slurm)) == "configuration_backbone"
    assert study_layout(cfg("condition", slurm)) == "condition"
    assert study_layout(cfg("configuration_backbone", basic)) == "configuration_backbone"
    with pytest.raises(
        ConfigError, match=r"study.layout=per_backbone: not one of auto, condition, configuration_backbone"
    ):
        study_layout(cfg("per_backbone", basic))


def _study(tmp_path: Path, name: str, layout: str) -> tuple[Path, int, str]:
    from tests.conftest import subprocess_env
    from tests.load_counter import fake_study_command

    log = tmp_path / f"{name}.loads"
    log.touch()
    cmd = fake_study_command(tmp_path / name, f"study.layout={layout}", counting=True)
    env = {**subprocess_env(tmp_path), "PL_LOAD_LOG": str(log), "PYTHONPATH": f"{REPO / 'src'}:{REPO}"}
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return tmp_path / name / "out" / "study_cpu", len(log.read_text().split()), r.stdout + r.stderr


def test_one_task_per_configuration_backbone_loads_one_engine_and_writes_the_same_jobs(tmp_path):
    grouped, grouped_loads, out = _study(tmp_path, "grouped", "configuration_backbone")
    single, single_loads, _ = _study(tmp_path, "single", "condition")
    # 2 configurations x 1 backbone x 5 wordings: 2 engines grouped, 10 one task per job
    assert (grouped_loads, single_loads) == (2, 10)
    assert out.count("study task: 5 jobs, one engine per backbone") == 2
    for exp in ("pc_usr_engaging", "evouna_nq_correctness"):
        tasks = json.loads((grouped / exp / TASKS_DIR / "tasks.json").read_text())["tasks"]
        assert list(tasks) == ["0"] and [m["num"] for m in tasks["0"]] == [0, 1, 2, 3, 4]
        for root in (grouped, single):
            summary = json.loads((root / exp / "sweep_summary.json").read_text())
            assert summary["status_counts"] == {"ok": 5} and summary["n_planned"] == 5
        jobs = sorted(p.name for p in (single / exp).glob("[0-9]_*"))
        assert sorted(p.name for p in (grouped / exp).glob("[0-9]_*")) == jobs and len(jobs) == 5
        for job in jobs:
            a, b = grouped / exp / job, single / exp / job
            pd.testing.assert_frame_equal(
                pd.read_parquet(a / "judgments.parquet"), pd.read_parquet(b / "judgments.parquet")
            )
            ra, rb = (json.loads((d / "results.json").read_text()) for d in (a, b))
            assert ra["status"] == rb["status"] == "ok" and ra["condition"] == rb["condition"]
            assert ra["calls"] == rb["calls"]
            assert (a / ".hydra" / "overrides.yaml").read_text().replace("grouped", "single") == (
                b / ".hydra" / "overrides.yaml"
            ).read_text()


def test_a_bad_layout_on_the_command_line_is_one_line_and_writes_nothing(tmp_path):
    from tests.conftest import subprocess_env

    cmd = [sys.executable, "-m", "run", "+study=cpu", "study.layout=per_task", "backbone=fake", "logger=none"]
    cmd += [f"paths.output_dir={tmp_path / 'out'}", "dry_run=true", "-m"]
    r = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=subprocess_env(tmp_path)
    )
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: study.layout=per_task: not one of auto, condition, configuration_backbone"]
    assert not (tmp_path / "out").exists()

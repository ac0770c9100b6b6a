"""The smoke grid as a SLURM array job on a one-node cluster (hydra/launcher=submitit_slurm).

Four conditions, two array tasks at a time, all writing one calls.sqlite. The first sweep has a
task cancelled with scancel while it runs: the sweep fails, its summary lists that job as failed
and the others ok. The re-run completes it (the other three from the cache), and a third run is
all cache hits. ``make test-cluster`` runs it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cluster_services import slurm  # noqa: F401 - fixture
from tests.conftest import DATA_DIR, REPO
from tests.load_counter import fake_study_command

pytestmark = pytest.mark.cluster

VARIANTS = ["P1", "P2", "P3", "P4"]
N_ITEMS = 8  # the smoke experiment's dataset.limit


def sweep(env: dict, tmp: Path, *extra: str) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "run",
        "+experiment=smoke",
        "-m",
        "hydra/launcher=submitit_slurm",
        "backbone=fake",
        "logger=none",
        f"judge.variant={','.join(VARIANTS)}",
        f"paths.data_dir={DATA_DIR}",
        f"paths.cache_dir={tmp / 'cache'}",
        f"paths.output_dir={tmp / 'outputs'}",
        f"hydra.sweep.dir={tmp / 'sweep'}",
        "hydra.sweep.subdir=${hydra.job.num}",  # job dirs 0..3, whatever the default naming
        # this host: partition `local` of 2 CPUs, no GPU
        "hydra.launcher.partition=local",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.gpus_per_node=0",
        "hydra.launcher.mem_gb=1",
        "hydra.launcher.array_parallelism=2",
        *extra,
    ]
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finish(proc: subprocess.Popen, timeout: float = 600) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def squeue(env: dict) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i %T"], env=env, capture_output=True, text=True, check=True)
    return out.stdout.split("\n")[:-1]


def wait_idle(env: dict, timeout: float = 300) -> None:
    """The launcher stops waiting at the first failed task; the array's other tasks still run."""
    end = time.time() + timeout
    while squeue(env):
        assert time.time() < end, f"jobs still queued: {squeue(env)}"
        time.sleep(1)


def summary(tmp: Path) -> dict[str, dict]:
    s = json.loads((tmp / "sweep" / "sweep_summary.json").read_text())
    return {j["job"]: j for j in s["jobs"]}


def test_smoke_grid_as_a_slurm_array_job(slurm, tmp_path):  # noqa: F811 - the fixture
    env = slurm
    # 1. every generate() sleeps 8 s, so task 1 can be cancelled while it runs
    # the fake judge sleeps 8 s per batch, so task 1 is still running when it is cancelled; every re-run
    # is the same command (a job dir refuses a job of another config, see tracking.jobdir)
    slow = "+backbone.backend.delay_s=8"
    first = sweep(env, tmp_path, slow)
    job_dir = tmp_path / "sweep" / "1"
    end = time.time() + 300
    while not (job_dir / ".hydra").exists():
        assert first.poll() is None, finish(first)[1][-3000:]
        assert time.time() < end, "task 1 never started"
        time.sleep(0.5)
    task = next(line.split()[0] for line in squeue(env) if line.split()[0].endswith("_1"))
    subprocess.run(["scancel", task], env=env, check=True)
    rc, out = finish(first)
    assert rc != 0, out[-3000:]
    assert "UncompletedJobError" in out or "CANCELLED" in out, out[-3000:]
    wait_idle(env)
    jobs = summary(tmp_path)
    # a job that wrote no final results.json is `missing`, whether it never started or was killed
    assert jobs["1"]["status"] == "missing" and "no results.json" in jobs["1"]["error"], jobs
    assert [jobs[k]["status"] for k in ("0", "2", "3")] == ["ok", "ok", "ok"], jobs
    assert not (job_dir / "results.json").exists()

    # 2. the re-run completes the cancelled condition; the others come from the shared cache
    rc, out = finish(sweep(env, tmp_path, slow))
    assert rc == 0, out[-3000:]
    jobs = summary(tmp_path)
    assert {k: j["status"] for k, j in jobs.items()} == {"0": "ok", "1": "ok", "2": "ok", "3": "ok"}
    assert jobs["1"]["calls"]["cache_misses"] == N_ITEMS  # cancelled in its sleep: nothing was cached
    for k in ("0", "2", "3"):
        assert jobs[k]["calls"] == {
            "total": N_ITEMS,
            "cache_hits": N_ITEMS,
            "cache_misses": 0,
            "parse_failures": 0,
        }

    # 3. a re-run of the whole sweep is all cache hits
    rc, out = finish(sweep(env, tmp_path, slow))
    assert rc == 0, out[-3000:]
    for j in summary(tmp_path).values():
        assert j["status"] == "ok" and j["calls"]["cache_hits"] == N_ITEMS and j["calls"]["cache_misses"] == 0

    # the array tasks wrote one SQLite file, two at a time: every call is there once
    with sqlite3.connect(tmp_path / "cache" / "calls.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == N_ITEMS * len(VARIANTS)
    results = sorted((tmp_path / "sweep").glob("*/results.json"))
    assert len(results) == len(VARIANTS)


def test_a_study_on_slurm_runs_one_task_per_configuration_backbone(slurm, tmp_path):  # noqa: F811
    """``+study=cpu`` under submitit_slurm (study.layout=auto: grouped): two configurations x P1-P5 are
    two array tasks, each loading one engine for its five wordings, into the ten job dirs and sweep
    summaries of a study run one task per job."""
    log = tmp_path / "loads"
    log.touch()
    env = {
        **slurm,
        "PL_LOAD_LOG": str(log),
        "PYTHONPATH": f"{slurm['PYTHONPATH']}{os.pathsep}{REPO}",
    }
    cmd = fake_study_command(
        tmp_path,
        "hydra/launcher=submitit_slurm",
        "hydra.launcher.partition=local",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.gpus_per_node=0",
        "hydra.launcher.mem_gb=1",
        "hydra.launcher.array_parallelism=2",
        counting=True,
    )
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert len(log.read_text().split()) == 2  # one engine per task, in two SLURM tasks
    root = tmp_path / "out" / "study_cpu"
    for exp in ("pc_usr_engaging", "evouna_nq_correctness"):
        s = json.loads((root / exp / "sweep_summary.json").read_text())
        assert s["status_counts"] == {"ok": 5} and s["n_planned"] == 5, s
        assert len(list((root / exp).glob("[0-4]_*/results.json"))) == 5
        assert list((root / exp / ".study_tasks").glob("0/.hydra"))  # the task's own dir
        assert not (root / exp / ".study_tasks" / "1").exists()

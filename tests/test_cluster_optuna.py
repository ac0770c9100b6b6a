"""Optuna workers (sweeps/tune_gate.py) sharing one study on PostgreSQL.

Two workers started at once complete their trials in one study with no trial number twice; a
worker killed mid-trial leaves that trial marked FAIL (its heartbeat stopped), not RUNNING for
ever, and the study goes on: the next worker re-runs it with the same parameters. Trials are a
tiny random DeBERTa-v2 on a fake-judge grid, one epoch. ``make test-cluster`` runs it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from promptlottery.stages import run_stage as judge_run
from tests.cluster_services import postgres_url  # noqa: F401 - fixture
from tests.conftest import DATA_DIR, REPO, compose

pytestmark = pytest.mark.cluster

GRACE_S = 10  # generous: a loaded machine may delay a live worker's heartbeat
FINISHED = ("COMPLETE", "PRUNED")


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """20 STS-B items judged with five variants by the fake judge."""
    tmp = tmp_path_factory.mktemp("tune_grid")
    for v in ["P1", "P2", "P3", "P4", "P5"]:
        judge_run(compose(["backbone=fake", "dataset.limit=20", f"judge.variant={v}"], tmp_path=tmp), tmp / v)
    return tmp


def worker(url: str, grid: Path, study: str, n_trials: int, out: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "sweeps/tune_gate.py",
        f"gate.runs={grid}/P*",
        "gate/classifier=deberta_tiny",
        "logger=none",
        f"paths.cache_dir={grid / 'cache'}",
        f"paths.data_dir={DATA_DIR}",
        f"gate.tune.storage={url}",
        f"gate.tune.study_name={study}",
        f"gate.tune.n_trials={n_trials}",
        "gate.tune.epochs=1",
        f"gate.tune.output_dir={out}",
        "gate.tune.tpe_startup_trials=1",
        "gate.tune.pruner.n_startup_trials=1",
        "gate.tune.metric=val/balanced_accuracy",
        "gate.tune.heartbeat_s=1",
        f"gate.tune.grace_s={GRACE_S}",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finish(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    return out


def trials(url: str, study: str):
    import optuna

    try:
        return optuna.load_study(study_name=study, storage=url).get_trials(deepcopy=False)
    except KeyError:  # no worker has created the study yet
        return []


def test_two_workers_share_one_study(postgres_url, grid, tmp_path):  # noqa: F811
    a, b = (worker(postgres_url, grid, "shared", 2, tmp_path / w) for w in "ab")
    finish(a), finish(b)
    ts = trials(postgres_url, "shared")
    assert sorted(t.number for t in ts) == [0, 1, 2, 3]
    assert all(t.state.name in FINISHED for t in ts), [t.state.name for t in ts]
    by_worker: dict[str, int] = {}
    for t in ts:
        by_worker[t.user_attrs["worker"]] = by_worker.get(t.user_attrs["worker"], 0) + 1
    assert sorted(by_worker.values()) == [2, 2]  # both ran at once, each its own two trials


def test_a_killed_workers_trial_is_failed_and_rerun(postgres_url, grid, tmp_path):  # noqa: F811
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    study = "killed"
    a = worker(postgres_url, grid, study, 3, tmp_path / "a")
    b = worker(postgres_url, grid, study, 2, tmp_path / "b")
    end = time.time() + 300
    victim = None
    while victim is None:  # B's first trial, once it is running
        assert b.poll() is None and time.time() < end, "worker b ended before it was killed"
        ts = trials(postgres_url, study)
        victim = next(
            (
                t
                for t in ts
                if t.state.name == "RUNNING" and t.user_attrs.get("worker", "").endswith(f":{b.pid}")
            ),
            None,
        )
        time.sleep(0.5)
    b.send_signal(signal.SIGKILL)
    b.wait()
    killed_at = time.time()
    finish(a)
    time.sleep(max(0.0, killed_at + GRACE_S + 1 - time.time()))
    finish(worker(postgres_url, grid, study, 1, tmp_path / "c"))  # a later worker: the study goes on

    ts = {t.number: t for t in trials(postgres_url, study)}
    assert ts[victim.number].state.name == "FAIL"
    reruns = [
        t for t in ts.values() if RetryHeartbeatStaleTrialCallback.retried_trial_number(t) == victim.number
    ]
    assert len(reruns) == 1 and reruns[0].state.name in FINISHED
    assert reruns[0].params == victim.params
    finished = [t for t in ts.values() if t.state.name in FINISHED]
    assert len(finished) == 3 + 1  # A's three and C's one; B's only trial failed and was re-run
    assert not [t for t in ts.values() if t.state.name == "RUNNING"]

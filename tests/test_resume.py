"""A sweep killed with SIGKILL resumes where it stopped and ends with the same judgments."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from tests.conftest import DATA_DIR, MODEL_CACHE, REPO

VOLATILE = ["cache_hit", "latency_s"]


def sweep(tmp: Path, name: str, cache: Path, extra: list[str]) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "run",
        "+experiment=smoke",
        "logger=none",
        f"paths.data_dir={DATA_DIR}",
        f"paths.model_dir={MODEL_CACHE}",
        f"paths.cache_dir={cache}",
        f"hydra.sweep.dir={tmp / name}",
        *extra,
        "-m",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def cached_rows(cache: Path) -> int:
    db = cache / "calls.sqlite"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as c:
            return c.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def judgments(sweep_dir: Path) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in sorted(sweep_dir.glob("*/judgments.parquet"))]
    df = pd.concat(frames).drop(columns=VOLATILE)
    return df.sort_values(["condition", "item_id"]).reset_index(drop=True)


def test_sigkill_mid_sweep_then_resume_equals_uninterrupted(tmp_path):
    # the real CPU judge, small batches so that a job spans several cache writes
    extra = ["dataset.limit=4", "backbone.backend.batch_size=2"]
    cache = tmp_path / "cache"
    proc = sweep(tmp_path, "killed", cache, extra)
    deadline = time.time() + 240
    while cached_rows(cache) < 2 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, "the sweep ended before it could be killed:\n" + proc.stdout.read()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = cached_rows(cache)
    assert 2 <= done_before < 8  # killed mid-run, with some calls already cached

    resumed = sweep(tmp_path, "resumed", cache, extra)
    out = resumed.communicate(timeout=600)[0]
    assert resumed.returncode == 0, out
    misses = [
        json.loads(p.read_text())["calls"]["cache_misses"]
        for p in (tmp_path / "resumed").glob("*/results.json")
    ]
    assert sum(misses) == 8 - done_before  # only the missing calls were made

    clean = sweep(tmp_path, "clean", tmp_path / "cache_clean", extra)
    out = clean.communicate(timeout=600)[0]
    assert clean.returncode == 0, out
    pd.testing.assert_frame_equal(judgments(tmp_path / "resumed"), judgments(tmp_path / "clean"))

    rerun = sweep(tmp_path, "rerun", cache, extra)
    assert rerun.communicate(timeout=600)[1] is None and rerun.returncode == 0
    for p in (tmp_path / "rerun").glob("*/results.json"):
        assert json.loads(p.read_text())["calls"]["cache_misses"] == 0
    summary = json.loads((tmp_path / "rerun" / "sweep_summary.json").read_text())
    assert summary["n_jobs"] == 2 and summary["status_counts"] == {"ok": 2}


def test_joblib_launcher_runs_jobs_in_parallel_sharing_one_cache(tmp_path):
    cache = tmp_path / "cache"
    proc = sweep(
        tmp_path,
        "joblib",
        cache,
        [
            "backbone=fake",
            "judge.variant=P1,P2,P3",
            "dataset.limit=5",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
        ],
    )
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, out
    assert "Joblib.Parallel" in out or "joblib" in out.lower()
    summary = json.loads((tmp_path / "joblib" / "sweep_summary.json").read_text())
    assert summary["status_counts"] == {"ok": 3}
    assert cached_rows(cache) == 15  # three jobs x five items, nothing lost to concurrent writes

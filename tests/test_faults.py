"""The fault suite (``make test-faults``; ``scripts/fault_suite.py`` prints its table): the guarantees of
docs/guarantees.md under SIGKILL, a damaged cache, a full disk and two writers, on the fake judge.

The sweep is the demo's (five wordings x 24 answers = 120 calls, then the lottery analysis), on the fake
backend in batches of 4, so a sweep has 30 cache writes. The fake's hooks (``backends.fake``) kill the
process at a seeded call count (``PROMPTLOTTERY_FAKE_KILL_AFTER``) and log every call it answers
(``PROMPTLOTTERY_FAKE_CALL_LOG``). Each killed sweep is re-run with the same command into the same
directory; the re-run must make exactly the calls the cache lacks (each once) and end with the clean
run's judgments and lottery tables.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from promptlottery.backends.fake import CALL_LOG_ENV, KILL_AFTER_ENV
from tests.conftest import DATA_DIR, REPO, subprocess_env

pytestmark = pytest.mark.faults

SEED = 32
N_CALLS = 120  # 5 wordings x 24 answers
#: columns that say how this run got its answers, not what they are: a resumed run has cache hits, and
#: group_file is the path of the job's own copy of the group
HOW = ["cache_hit", "latency_s", "group_file"]
KILL_POINTS = sorted(random.Random(SEED).sample(range(1, N_CALLS), 15))
ANALYSIS_DELAYS = [round(random.Random(SEED + k).uniform(0.2, 3.0), 2) for k in range(5)]
#: make test runs the first point of each (marker fault_subset); make test-faults runs them all
SUBSET = pytest.mark.fault_subset


def first_in_subset(values: list) -> list:
    return [pytest.param(v, marks=SUBSET) if i == 0 else v for i, v in enumerate(values)]


def sweep_cmd(sweep_dir: Path, cache: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "run",
        "-m",
        "+experiment=demo",
        "hydra.sweeper.params.backbone=fake",
        "+backbone.backend.max_concurrency=4",
        "analysis.n_resamples=100",
        "analysis.n_permutations=50",
        f"paths.data_dir={DATA_DIR}",
        f"paths.cache_dir={cache}",
        f"hydra.sweep.dir={sweep_dir}",
    ]


def start(sweep_dir: Path, cache: Path, log: Path, **env: str) -> subprocess.Popen:
    e = {**subprocess_env(sweep_dir.parent), CALL_LOG_ENV: str(log), **env}
    return subprocess.Popen(
        sweep_cmd(sweep_dir, cache),
        cwd=REPO,
        env=e,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen) -> None:
    out = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, out[-4000:]


def calls(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def cached_keys(cache: Path) -> set[str]:
    db = cache / "calls.sqlite"
    if not db.exists():
        return set()
    with sqlite3.connect(db) as c:
        return {k for (k,) in c.execute("SELECT key FROM calls")}


def outputs(sweep_dir: Path) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The sweep's judgments (every job's parquet, without the columns in HOW) and its lottery tables."""
    frames = [pd.read_parquet(p) for p in sorted(sweep_dir.glob("*/judgments.parquet"))]
    df = pd.concat(frames).drop(columns=HOW).sort_values(["condition", "item_id"]).reset_index(drop=True)
    tables = {p.name: pd.read_csv(p) for p in sorted((sweep_dir / "lottery" / "tables").glob("*.csv"))}
    return df, tables


def assert_same(sweep_dir: Path, clean_dir: Path) -> None:
    df, tables = outputs(sweep_dir)
    want_df, want_tables = outputs(clean_dir)
    pd.testing.assert_frame_equal(df, want_df)
    assert sorted(tables) == sorted(want_tables) and tables
    for name in tables:
        pd.testing.assert_frame_equal(tables[name], want_tables[name], obj=name)


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> dict:
    """One uninterrupted sweep: its directory and the 120 calls it made."""
    tmp = tmp_path_factory.mktemp("clean")
    log = tmp / "calls.log"
    finish(start(tmp / "sweep", tmp / "cache", log))
    made = calls(log)
    assert len(made) == N_CALLS == len(set(made))
    return {"dir": tmp / "sweep", "calls": made}


def kill_then_resume(tmp: Path, clean: dict, *, kill_after: int | None = None, delay_s: float | None = None):
    cache, sweep_dir = tmp / "cache", tmp / "sweep"
    if kill_after is not None:
        proc = start(sweep_dir, cache, tmp / "killed.log", **{KILL_AFTER_ENV: str(kill_after)})
        proc.communicate(timeout=600)
    else:  # the judging done (120 calls logged), kill during the lottery analysis after a seeded delay
        proc = start(sweep_dir, cache, tmp / "killed.log")
        deadline = time.time() + 300
        while len(calls(tmp / "killed.log")) < N_CALLS and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(delay_s)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL or delay_s is not None, proc.returncode
    before = cached_keys(cache)
    finish(start(sweep_dir, cache, tmp / "resumed.log"))
    again = calls(tmp / "resumed.log")
    # exactly the missing calls, each once: the clean run's calls less what the cache kept
    assert len(again) == len(set(again))
    assert set(again) == set(clean["calls"]) - before
    assert_same(sweep_dir, clean["dir"])
    return len(before), len(again)


@pytest.mark.parametrize("kill_after", first_in_subset(KILL_POINTS))
def test_sigkill_mid_sweep_then_rerun_makes_exactly_the_missing_calls(tmp_path, clean, kill_after):
    kept, made = kill_then_resume(tmp_path, clean, kill_after=kill_after)
    assert kept == kill_after // 4 * 4  # whole batches of 4 were cached before the kill, none after
    assert kept + made == N_CALLS


@pytest.mark.parametrize("delay_s", first_in_subset(ANALYSIS_DELAYS))
def test_sigkill_in_the_lottery_analysis_then_rerun_makes_no_call(tmp_path, clean, delay_s):
    kept, made = kill_then_resume(tmp_path, clean, delay_s=delay_s)
    assert (kept, made) == (N_CALLS, 0)


# -------------------------------------------------------------------------------- a damaged cache


def judged_once(tmp: Path, clean: dict) -> Path:
    finish(start(tmp / "first", tmp / "cache", tmp / "first.log"))
    return tmp / "cache" / "calls.sqlite"


def rerun(tmp: Path) -> subprocess.CompletedProcess:
    cmd = sweep_cmd(tmp / "second", tmp / "cache")
    e = {**subprocess_env(tmp), CALL_LOG_ENV: str(tmp / "second.log")}
    return subprocess.run(cmd, cwd=REPO, env=e, capture_output=True, text=True, timeout=600)


def test_flipped_digits_in_a_cached_value_are_one_line_naming_the_key(tmp_path, clean):
    db = judged_once(tmp_path, clean)
    with sqlite3.connect(db) as c:
        key, value = c.execute("SELECT key, response FROM calls ORDER BY key LIMIT 1").fetchone()
        flipped = "".join({"1": "7", "2": "8", "3": "9"}.get(ch, ch) for ch in value)
        assert flipped != value
        c.execute("UPDATE calls SET response = ? WHERE key = ?", (flipped, key))
    proc = rerun(tmp_path)
    # the job that reads the value fails with the cache's one line; the sweep exits 2 without a traceback
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = proc.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("error: job "), errors
    assert key in errors[0] and "does not match its checksum" in errors[0]  # named, never served
    # the other jobs' judgments are kept; the lottery analysis is not run on an unfinished sweep
    summary = json.loads((tmp_path / "second" / "sweep_summary.json").read_text())
    assert summary["status_counts"] == {"ok": 4, "failed": 1}
    assert len(list((tmp_path / "second").glob("*/judgments.parquet"))) == 4
    assert not (tmp_path / "second" / "lottery").exists()


@pytest.mark.parametrize("damage", ["zero_bytes", "renamed"])
def test_an_emptied_or_renamed_cache_says_how_many_calls_are_paid_again(tmp_path, clean, damage):
    db = judged_once(tmp_path, clean)
    if damage == "zero_bytes":
        db.write_bytes(b"")
    else:
        db.rename(db.with_name("calls.sqlite.bak"))
    proc = rerun(tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # a new sweep dir: only the cache's manifest knows what the file held; each job says so before its calls
    said = [line for line in proc.stdout.splitlines() if "will be made again" in line]
    assert len(said) == 5 and all(f"held {N_CALLS} calls" in line for line in said), said
    assert all("24 of this job's 24 calls" in line for line in said)
    assert sorted(calls(tmp_path / "second.log")) == sorted(clean["calls"])  # and they were


# -------------------------------------------------------------------------------- a full disk


def test_a_full_disk_leaves_no_half_file_and_a_rerun_completes(tmp_path, clean):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounts a 2 MB tmpfs: needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        free = shutil.disk_usage(disk).free
        (disk / "filler").write_bytes(b"\0" * (free - 96 * 1024))  # room for Hydra's files, not the run's
        proc = start(disk / "sweep", tmp_path / "cache", tmp_path / "full.log")
        proc.communicate(timeout=600)
        assert proc.returncode != 0
        for p in (disk / "sweep").rglob("judgments.parquet"):
            pd.read_parquet(p)  # a file that is there is whole (written through a temporary + os.replace)
        for p in (disk / "sweep").rglob("*.tmp*"):
            raise AssertionError(f"a temporary file was left behind: {p}")
        (disk / "filler").unlink()
        finish(start(disk / "sweep", tmp_path / "cache", tmp_path / "after.log"))
        assert_same(disk / "sweep", clean["dir"])
    finally:
        subprocess.run(["umount", "-l", str(disk)])


# -------------------------------------------------------------------------------- two writers


@SUBSET
def test_two_sweeps_on_one_cache_end_as_a_clean_run(tmp_path, clean):
    a = start(tmp_path / "a", tmp_path / "cache", tmp_path / "a.log")
    b = start(tmp_path / "b", tmp_path / "cache", tmp_path / "b.log")
    finish(a)
    finish(b)
    assert_same(tmp_path / "a", clean["dir"])
    assert_same(tmp_path / "b", clean["dir"])
    # every call is in the cache once; a call both computed at the same time is computed twice at most
    assert cached_keys(tmp_path / "cache") == set(clean["calls"])
    assert len(calls(tmp_path / "a.log")) + len(calls(tmp_path / "b.log")) <= 2 * N_CALLS

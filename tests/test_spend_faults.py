"""Fault-suite row (``make test-faults``): a spend cap reached in the middle of the demo sweep (five
wordings x 24 answers on the fake judge; tests/test_faults.py's sweep). The sweep's jobs share one
budget (``spend.json`` in the sweep dir): the jobs that fit run, the first that does not is refused in
one line before its first call, and so are the rest; every answer is kept; the same command with the
cap raised makes exactly the missing calls and ends with the clean run's judgments and tables."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

from tests.conftest import REPO, subprocess_env
from tests.test_faults import CALL_LOG_ENV, N_CALLS, assert_same, cached_keys, calls, clean, sweep_cmd  # noqa: F401

pytestmark = pytest.mark.faults


def run_sweep(tmp, log, *overrides: str) -> subprocess.CompletedProcess:
    env = {**subprocess_env(tmp), CALL_LOG_ENV: str(log)}
    cmd = [*sweep_cmd(tmp / "sweep", tmp / "cache"), *overrides]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def test_a_spend_cap_reached_mid_sweep_keeps_every_answer_and_a_raised_cap_resumes(tmp_path, clean):  # noqa: F811
    jobs = sorted(clean["dir"].glob("*/judgments.parquet"))
    used = [
        int((d := pd.read_parquet(p))["prompt_tokens"].sum() + d["completion_tokens"].sum()) for p in jobs
    ]
    assert len(used) == 5 and min(used) > 0
    cap = int(max(used) * 2.5)  # two or three jobs fit; the next one's dry-run count does not
    first = run_sweep(tmp_path, tmp_path / "capped.log", f"max_tokens={cap}")
    assert first.returncode == 2, first.stdout[-2000:] + first.stderr[-2000:]
    refused = [ln for ln in first.stderr.splitlines() if "uncached calls are estimated at" in ln]
    assert 1 <= len(refused) <= 4 and all(
        f"> max_tokens={cap}" in ln and "raise the cap" in ln for ln in refused
    )
    judged = 5 - len(refused)  # about two jobs fit (the wordings' prompts differ in length)
    made = calls(tmp_path / "capped.log")
    assert len(made) == judged * 24 == len(set(made))  # none of the refused jobs' calls was sent
    kept = cached_keys(tmp_path / "cache")
    assert set(made) <= kept  # every paid answer is in the cache
    ledger = json.loads((tmp_path / "sweep" / "spend.json").read_text())
    assert ledger["calls"] == judged * 24 and ledger["tokens"] <= cap
    again = run_sweep(tmp_path, tmp_path / "resumed.log", f"max_tokens={cap * 10}")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    resumed = calls(tmp_path / "resumed.log")
    assert len(resumed) == N_CALLS - judged * 24 == len(set(resumed))
    assert set(resumed) == set(clean["calls"]) - kept  # exactly the missing calls
    assert_same(tmp_path / "sweep", clean["dir"])

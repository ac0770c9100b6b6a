"""A sweep's preflight (every job's inputs checked before the first starts) says what it is doing:
a line when it starts, one every tenth of the jobs and one when it is done (issue 45: a one-experiment
``grid=gpu dry_run=true`` sweep was silent for minutes)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import DATA_DIR, REPO, subprocess_env


def test_a_sweeps_preflight_logs_its_progress(tmp_path):
    cmd = [
        sys.executable, "-m", "run", "-m", "+experiment=demo", "backbone=fake", "logger=none", "dry_run=true",
        f"hydra.sweep.dir={tmp_path / 'sweep'}", f"paths.cache_dir={tmp_path / 'cache'}", f"paths.data_dir={DATA_DIR}",
    ]  # fmt: skip
    done = subprocess.run(
        cmd, cwd=REPO, env=subprocess_env(tmp_path), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [m.group(1) for m in re.finditer(r"preflight: (.*)", done.stdout + done.stderr)]
    assert lines[0] == "checking the inputs of 5 job(s) before the first starts"
    assert [re.sub(r" \(\d+ s\)$", "", x) for x in lines[1:-1]] == [
        f"{k} of 5 jobs checked" for k in range(1, 5)
    ]
    assert re.fullmatch(r"5 job\(s\) checked in \d+\.\d s", lines[-1])

"""An analysis directory is read only when its results.json vouches for every file in it.

The lottery analysis writes its tables, figures and report.md aside and moves them into place, then
writes results.json with the sha256 of each; ``python -m promptlottery.analysis.lottery.verdict`` and
``compare`` refuse, in one line with exit status 2, a directory killed mid-way (no results.json), a
failed analysis, a results.json without digests, or a file that differs from its digest.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from promptlottery.analysis.common import report as rp
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.stage import run_lottery
from promptlottery.tracking.jobdir import file_sha256
from tests.conftest import REPO, compose, subprocess_env

LIMIT = 6


class Killed(BaseException):
    """Stands for SIGKILL: no handler of the job wrapper runs (it catches Exception only)."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Five fake-judge jobs (P1-P5 of the default group), and P1-P2 alone under ``two/``."""
    from promptlottery.stages import run_stage

    root = tmp_path_factory.mktemp("staging")
    for v in ("P1", "P2", "P3", "P4", "P5"):
        cfg = compose(["backbone=fake", f"dataset.limit={LIMIT}", f"judge.variant={v}"], tmp_path=root)
        run_stage(cfg, root / "five" / v)
        if v in ("P1", "P2"):
            run_stage(cfg, root / "two" / v)
    return root


def analyse(runs: Path, out: Path) -> dict:
    opts = {"runs": str(runs), "n_resamples": 20, "n_permutations": 20, "embeddings": "none", "plots": False}
    return run_lottery(LotteryOptions.from_dict(opts), out)


def verdict_cli(d: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "promptlottery.analysis.lottery.verdict", str(d)]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, env=subprocess_env(d))


def assert_refused(proc: subprocess.CompletedProcess, *, says: str) -> None:
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout[-500:]
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: ") and says in proc.stderr


def kill_after(monkeypatch, table: str) -> None:
    """The analysis dies right after it wrote ``tables/<table>.csv``."""
    write = rp.write_table

    def dying(df, name, tables_dir, **kw):
        out = write(df, name, tables_dir, **kw)
        if name == table:
            raise Killed
        return out

    monkeypatch.setattr(rp, "write_table", dying)


def test_results_json_names_the_digest_of_every_file_it_wrote(runs, tmp_path):
    out = tmp_path / "lottery"
    rec = analyse(runs / "five", out)
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert rec["outputs"] == {f: file_sha256(out / f) for f in files if f != "results.json"}
    assert {"report.md", "unstable_items.csv", "tables/headlines.csv", "tables/verdict.md"} <= set(
        rec["outputs"]
    )
    assert json.loads((out / "results.json").read_text())["outputs"] == rec["outputs"]
    assert not (out / ".staging").exists()
    proc = verdict_cli(out)
    assert (
        proc.returncode == 0 and proc.stdout.startswith("Fake judge") and "\nThe finding:" in proc.stdout
    ), proc.stderr[-2000:]


def test_killed_when_headlines_appeared_the_verdict_is_refused(runs, tmp_path, monkeypatch):
    out = tmp_path / "lottery"
    kill_after(monkeypatch, "headlines")
    with pytest.raises(Killed):
        analyse(runs / "five", out)
    assert not (out / "results.json").exists() and not (out / "report.md").exists()
    assert_refused(verdict_cli(out), says=f"{out}: no results.json (the analysis did not finish")
    from promptlottery.analysis.compare.runs import main as compare_main

    assert compare_main([str(out), str(out)]) == 2


def test_a_reanalysis_killed_mid_way_leaves_the_old_files_together_and_is_refused(
    runs, tmp_path, monkeypatch
):
    out = tmp_path / "lottery"
    analyse(runs / "two", out)
    old = {p.relative_to(out).as_posix(): file_sha256(p) for p in out.rglob("*") if p.is_file()}
    assert "across the 2 variants" in (out / "report.md").read_text()
    kill_after(monkeypatch, "verdict")  # the re-analysis of five wordings wrote some of its tables
    with pytest.raises(Killed):
        analyse(runs / "five", out)
    monkeypatch.undo()
    assert_refused(verdict_cli(out), says="no results.json")
    # nothing new reached the directory: the old report.md stands beside its own tables
    now = {p.relative_to(out).as_posix(): file_sha256(p) for p in out.rglob("*") if p.is_file()}
    assert {k: v for k, v in now.items() if not k.startswith(".staging/")} == {
        k: v for k, v in old.items() if k != "results.json"
    }
    rec = analyse(runs / "five", out)  # the re-run finishes and cleans up
    assert "across the 5 variants" in (out / "report.md").read_text() and not (out / ".staging").exists()
    assert rec["outputs"] == json.loads((out / "results.json").read_text())["outputs"]
    assert verdict_cli(out).returncode == 0


_SIGKILL_SCRIPT = """
import os, signal, sys
sys.path.insert(0, {repo!r})
from promptlottery.analysis.common import report as rp
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.stage import run_lottery
write = rp.write_table
def dying(df, name, tables_dir, **kw):
    out = write(df, name, tables_dir, **kw)
    if name == "headlines":
        os.kill(os.getpid(), signal.SIGKILL)
    return out
rp.write_table = dying
opts = dict(runs={runs!r}, n_resamples=20, n_permutations=20, embeddings="none", plots=False)
run_lottery(LotteryOptions.from_dict(opts), {out!r})
"""


def test_a_sigkilled_reanalysis_is_refused(runs, tmp_path):
    out = tmp_path / "lottery"
    analyse(runs / "two", out)
    script = _SIGKILL_SCRIPT.format(repo=str(REPO), runs=str(runs / "five"), out=str(out))
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert (out / ".staging" / "tables" / "headlines.csv").exists()  # killed after that file
    assert_refused(verdict_cli(out), says="no results.json")


def test_a_failed_or_old_or_changed_analysis_is_refused_by_verdict_and_compare(runs, tmp_path):
    good = tmp_path / "good"
    analyse(runs / "five", good)
    other = tmp_path / "other"
    analyse(runs / "two", other)
    rec = json.loads((good / "results.json").read_text())
    # a file that is not the one results.json describes
    verdict = good / "tables" / "verdict.csv"
    saved = verdict.read_bytes()
    verdict.write_bytes(saved.replace(b"P1", b"P9", 1) + b"\n")
    assert_refused(verdict_cli(good), says=f"{verdict}: not the file results.json describes")
    cmd = [sys.executable, "-m", "promptlottery.analysis.compare.runs", str(good), str(other)]
    proc = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=120, env=subprocess_env(tmp_path)
    )
    assert proc.returncode == 2 and "not the file results.json describes" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    # the same through `python -m run +analysis=compare`: one line, status 2
    cmd = [
        sys.executable, "-m", "run", "+analysis=compare", f"analysis.runs=[{good},{other}]", "logger=none",
        f"hydra.run.dir={tmp_path / 'cmp'}",
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=120, env=subprocess_env(tmp_path)
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(errors) == 1 and "not the file results.json describes" in errors[0]
    verdict.write_bytes(saved)
    assert verdict_cli(good).returncode == 0
    # a results.json without digests (written before they were recorded)
    (good / "results.json").write_text(json.dumps({k: v for k, v in rec.items() if k != "outputs"}))
    assert_refused(verdict_cli(good), says="names no digest of its files")
    # a failed analysis
    (good / "results.json").write_text(
        json.dumps({**rec, "status": "failed", "error": "AnalysisError: boom"})
    )
    assert_refused(verdict_cli(good), says="status='failed' (AnalysisError: boom)")
    # a file results.json names is gone
    (good / "results.json").write_text(json.dumps(rec))
    (good / "report.md").unlink()
    assert_refused(verdict_cli(good), says=f"{good / 'report.md'}: missing, but results.json names it")

"""Fake runs look fake: every report and table a fake judge's run writes says so (issue 45, item 6)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from promptlottery.stages import run_stage
from tests.conftest import DATA_DIR, MODEL_CACHE, REPO, compose


def _written(root: Path) -> list[Path]:
    """The reports and tables under ``root`` (not the judge jobs' own files, figures or parquet)."""
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".md", ".csv"))


def test_rubric_study_honours_backbone_fake_and_names_its_judges_fake(tmp_path):
    cfg = compose(
        ["+experiment=rubric_asap_set1", "backbone=fake", "dataset.limit=6", "rubric.stats.n_resamples=50"],
        tmp_path=tmp_path,
    )
    rec = run_stage(cfg, tmp_path / "job")
    # the fake judge in both backbones' places, under names that say so; no model was loaded
    assert list(rec["backends"]) == ["fake-smollm2", "fake-gemma3_270m"]
    assert {b["backend"] for b in rec["backends"].values()} == {"fake"}
    assert rec["backends"]["fake-gemma3_270m"]["model"] == "fake-gemma3_270m"
    scores = pd.read_parquet(tmp_path / "job" / "scores.parquet")
    assert set(scores["backbone"]) == {"fake-smollm2", "fake-gemma3_270m"}
    files = [p for p in _written(tmp_path / "job") if "jobs" not in p.parts]
    assert len(files) >= 10
    for p in files:
        assert "fake" in p.read_text(encoding="utf-8"), p
    columns = pd.read_csv(tmp_path / "job" / "tables" / "table1.csv").columns
    assert "fake-smollm2: Full" in columns and not columns.str.startswith("smollm2").any()


def test_rubric_known_answer_judge_is_not_called_smollm2(tmp_path):
    # the known-answer judge composed into a backbone's place (tests/rubric_known.py's way)
    over = ["+experiment=rubric_asap_set1", "dataset.limit=6", "rubric.stats.n_resamples=50"]
    for bb in ("smollm2", "gemma3_270m"):
        over += [f"backbone@rubric.backbones.{bb}=fake", f"rubric.backbones.{bb}.backend.behaviour=oracle"]
    rec = run_stage(compose(over, tmp_path=tmp_path), tmp_path / "job")
    assert list(rec["backends"]) == ["fake-smollm2", "fake-gemma3_270m"]
    text = (tmp_path / "job" / "rubric_tables.md").read_text(encoding="utf-8")
    assert "- backbones: fake-smollm2, fake-gemma3_270m" in text
    assert (
        "| smollm2:" not in text
        and "fake-smollm2: Full" in (tmp_path / "job" / "tables" / "table1.md").read_text()
    )


def test_fake_demo_and_its_lottery_say_fake_in_every_report_and_table(tmp_path):
    sweep = tmp_path / "demo"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PROMPTLOTTERY_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [
        sys.executable, "-m", "run", "-m", "+experiment=demo", "backbone=fake", "logger=none",
        f"hydra.sweep.dir={sweep}", f"paths.data_dir={DATA_DIR}", f"paths.model_dir={MODEL_CACHE}",
        f"paths.cache_dir={tmp_path / 'cache'}", "analysis.embeddings=none",
        "analysis.n_resamples=50", "analysis.n_permutations=20",
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lottery = sweep / "lottery"
    report = (lottery / "report.md").read_text(encoding="utf-8")
    assert report.splitlines()[2].startswith("**Fake judge** (backbone fake):")
    mds = sorted((lottery / "tables").glob("*.md"))
    assert len(mds) >= 20
    for p in mds:  # every table's readable form opens with the warning
        assert p.read_text(encoding="utf-8").startswith("**Fake judge** (backbone fake)"), p
    # every CSV (pooled, across backbones or wordings, empty) carries judge_is_fake, true on every row
    csvs = sorted((lottery / "tables").glob("*.csv")) + [lottery / "unstable_items.csv"]
    assert len(csvs) >= 25
    for p in csvs:
        table = pd.read_csv(p)
        assert "judge_is_fake" in table.columns and table["judge_is_fake"].all(), p
    # the first screen says so in its first line, above the finding
    shown = subprocess.run(
        [sys.executable, "-m", "promptlottery.analysis.lottery.verdict", str(lottery)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    first = shown.stdout.splitlines()
    assert shown.returncode == 0 and first[0].startswith("Fake judge (backbone fake): the fake backend's")
    assert first[1] == "The finding:" and first[2].endswith("/fake:")


@pytest.mark.parametrize("name", ["fake", "fake-smollm2"])
def test_fake_judge_line_names_the_fake_backbones(name):
    from types import SimpleNamespace

    from promptlottery.analysis.lottery.render import fake_judge_line

    grid = SimpleNamespace(judgments=pd.DataFrame({"backbone": [name, "smollm2"]}), mode_frames=lambda: [])
    assert fake_judge_line(grid).startswith(f"**Fake judge** (backbone {name}):")
    grid = SimpleNamespace(
        judgments=pd.DataFrame({"backbone": ["smollm2", "fakeish"]}), mode_frames=lambda: []
    )
    assert fake_judge_line(grid) is None

"""The stage registry, the one job wrapper and the one table writer (issue 23, "One way through the house")."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from promptlottery.errors import ConfigError
from promptlottery.stages import STAGES, get_stage
from promptlottery.tracking.job import StageJob, run_job
from promptlottery.tracking.jobdir import OutputDirError, claim_output_dir, release_output_dir
from promptlottery.tracking.tables import fmt, markdown_table
from tests.conftest import REPO


def test_every_stage_is_the_function_its_registry_entry_names():
    for name, target in STAGES.items():
        fn = get_stage(name)
        assert f"{fn.__module__}:{fn.__name__}" == target
        assert fn.__name__ == name
    with pytest.raises(ConfigError, match=r"^stage=bogus: unknown stage; valid: \['budget', 'compare', "):
        get_stage("bogus")


def test_composing_a_config_loads_no_stage():
    """config.py imports no stage: the run schema and its checks load without analysis, gate or rubrics."""
    code = (
        "import sys, promptlottery.config, promptlottery.stages;"
        "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('promptlottery.')}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout.replace("'", '"')))
    assert not loaded & {"analysis", "gating", "rubrics", "judging"}, loaded


def test_the_judge_stages_inputs_load_without_scipy_stats():
    """A sweep's preflight imports the judge stage's input checks; scipy.stats (about half a second of a
    refused command's start-up) is imported when a metric first needs it (metrics._lazy), and then works."""
    code = (
        "import sys, promptlottery.judging.inputs, promptlottery.metrics as m;"
        "print('scipy.stats' in sys.modules);"
        "print(round(m.spearman([1, 2, 3, 4], [1, 3, 2, 4]), 3), 'scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["False", "0.8 True"]


def _job(tmp_path, name="job"):
    return StageJob("judge", tmp_path / name, config={"judge": {"variant": "P1"}, "logger": {"name": "none"}})


def test_the_wrapper_writes_one_failed_record_and_keeps_the_stages_own(tmp_path):
    job = _job(tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        run_job(job, lambda job: (_ for _ in ()).throw(RuntimeError("boom")))
    rec = json.loads((job.output_dir / "results.json").read_text())
    assert (rec["status"], rec["error"]) == ("failed", "RuntimeError: boom")

    def own(job):  # a stage that records its own failure (with its counts) is not overwritten
        job.write("failed", candidates_tried=7)
        raise ValueError("too few")

    job = _job(tmp_path, "own")
    with pytest.raises(ValueError):
        run_job(job, own)
    rec = json.loads((job.output_dir / "results.json").read_text())
    assert rec["candidates_tried"] == 7 and "error" not in rec

    job = _job(tmp_path, "silent")  # a body that returns without a record is a failure, not a success
    with pytest.raises(RuntimeError, match="returned without writing"):
        run_job(job, lambda job: {"status": "ok"})
    assert json.loads((job.output_dir / "results.json").read_text())["status"] == "failed"


def test_a_refused_config_is_recorded_before_the_claim_but_never_in_another_jobs_dir(tmp_path):
    def refuse():
        raise ConfigError("dataset.limit=0: must be a positive number of items")

    job = _job(tmp_path, "fresh")
    with pytest.raises(ConfigError):
        run_job(job, lambda job: job.ok(), check=refuse, claim=True)
    assert not job.output_dir.exists()  # a refused config creates no directory
    job.output_dir.mkdir()  # a `python -m run` job's directory, made by Hydra
    with pytest.raises(ConfigError):
        run_job(job, lambda job: job.ok(), check=refuse, claim=True)
    assert json.loads((job.output_dir / "results.json").read_text())["status"] == "failed"
    assert not (job.output_dir / ".job.json").exists()  # the check ran before the claim

    other = tmp_path / "other"  # another job's directory: nothing is written there
    claim_output_dir(other, {"judge": {"variant": "P2"}})
    release_output_dir(other)
    with pytest.raises(ConfigError):
        run_job(_job(tmp_path, "other"), lambda job: job.ok(), check=refuse, claim=True)
    with pytest.raises(OutputDirError):
        run_job(_job(tmp_path, "other"), lambda job: job.ok(), claim=True)
    assert not (other / "results.json").exists()


def test_one_value_prints_the_same_in_every_report():
    # each case by hand: None, bools, ints, NaN, infinities, 3 decimals, small numbers by the report's choice
    cases = [
        (None, ""),
        (True, "yes"),
        (np.bool_(False), "no"),
        (np.int64(7), "7"),
        (float("nan"), "n/a"),
        (float("inf"), "inf"),
        (-np.inf, "-inf"),
        (0.12345, "0.123"),
        (0.0005, "0.001"),
        ("a|b", "a|b"),
    ]
    assert [fmt(v) for v, _ in cases] == [t for _, t in cases]
    assert fmt(0.0005, small="significant") == "0.0005" and fmt(0.0, small="significant") == "0.000"
    assert fmt(2.0, 0) == "2" and fmt(0.056, 2, small="significant") == "0.056"
    df = pd.DataFrame({"name": ["a|b", "c\nd"], "n": [1, 2], "ok": [True, False], "v": [0.5, np.nan]})
    assert markdown_table(df, {"name": "Name", "n": "n", "ok": "ok", "v": "v"}) == "\n".join(
        [
            "| Name | n | ok | v |",
            "|---|---|---|---|",
            "| a\\|b | 1 | yes | 0.500 |",
            "| c d | 2 | no | n/a |",
        ]
    )
    assert markdown_table(df.iloc[:0]) == "_(empty table)_"

"""The rubric study as a sweep of judge-grid jobs (``stage=rubric_judge``, one per condition and
backbone) and its tables (``stage=rubric_tables``): on rubric set 1 with the tests' oracle (chat)
and hash (completion) judges, the tables are byte-identical to the study's own
(tests/fixtures/rubric_set1); a re-run job answers from the call cache; a job's dry run counts its
calls before any is made."""

from __future__ import annotations

import gc
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from promptlottery.backends.fake import FakeBackend
from promptlottery.errors import ConfigError
from promptlottery.stages import run_stage
from promptlottery.tracking.jobdir import file_sha256
from tests.conftest import REPO
from tests.test_rubric_fixture import FIXTURE, INFOBENCH_FIXTURE, INFOBENCH_LIMIT, infobench_backends
from tests.test_rubric_study import OracleJudge, RecordingFake, compose_rubric, make_asap, make_infobench

LIMIT = 12
IF_CONDITIONS = ["holistic_none", "holistic_three", "analytic_separate", "analytic_batch", "analytic_edited"]
CONDITIONS = ["holistic_all", "holistic_three", "analytic_separate", "analytic_batch", "analytic_edited"]
BACKENDS = {
    "smollm2": lambda: OracleJudge(model="oracle"),
    "gemma3_270m": lambda: RecordingFake(model="hash"),
}


def test_the_rubric_sweep_on_the_grid_gives_the_studys_tables_byte_for_byte(tmp_path):
    data = make_asap(tmp_path / "data")

    def cfg(*extra):
        return compose_rubric("rubric_asap_set1", data, tmp_path, [f"dataset.limit={LIMIT}", *extra])

    dry = run_stage(cfg("stage=rubric_judge", "rubric.condition=analytic_batch", "backbone=smollm2", "dry_run=true"),
                    tmp_path / "dry", backend=BACKENDS["smollm2"]())  # fmt: skip
    assert dry["estimate"]["calls"] == 5 * LIMIT and dry["estimate"]["cached_calls"] == 0
    assert "cost_usd" in dry["estimate"]
    calls = 0
    for backbone, make in BACKENDS.items():
        for cond in CONDITIONS:
            over = ("stage=rubric_judge", f"rubric.condition={cond}", f"backbone={backbone}")
            rec = run_stage(cfg(*over), tmp_path / "sweep" / f"{backbone}_{cond}", backend=make())
            assert rec["status"] == "ok" and rec["calls"]["cache_misses"] == rec["calls"]["total"]
            calls += rec["calls"]["total"]
    assert calls == 2 * (2 * LIMIT + 3 * 5 * LIMIT)
    again = run_stage(cfg("stage=rubric_judge", "rubric.condition=analytic_batch", "backbone=gemma3_270m"),
                      tmp_path / "again", backend=BACKENDS["gemma3_270m"]())  # fmt: skip
    assert again["calls"]["cache_hits"] == again["calls"]["total"] == 5 * LIMIT
    record = run_stage(cfg("stage=rubric_tables", f"rubric.runs={tmp_path / 'sweep'}"), tmp_path / "tables")
    assert record["status"] == "ok" and record["n_jobs"] == 10
    pinned = [p for p in sorted(FIXTURE.rglob("*")) if p.is_file() and p.name != "calls.csv"]
    assert len(pinned) == 19
    for path in pinned:
        rel = path.relative_to(FIXTURE)
        assert (tmp_path / "tables" / rel).read_bytes() == path.read_bytes(), rel


def test_a_missing_condition_or_job_is_one_line(tmp_path):
    data = make_asap(tmp_path / "data")
    cfg = compose_rubric(
        "rubric_asap_set1",
        data,
        tmp_path,
        ["dataset.limit=6", "stage=rubric_judge", "rubric.condition=holistc"],
    )
    with pytest.raises(ConfigError, match=r"^rubric.condition='holistc': must be one of \['holistic_all'"):
        run_stage(cfg, tmp_path / "bad", backend=BACKENDS["smollm2"]())
    one = compose_rubric(
        "rubric_asap_set1",
        data,
        tmp_path,
        ["dataset.limit=6", "stage=rubric_judge", "rubric.condition=holistic_all", "backbone=smollm2"],
    )
    with pytest.raises(
        ConfigError,
        match=r"^backbone smollm2: backend FakeBackend does not honour JudgeRequest.assistant_prefix",
    ):
        run_stage(one, tmp_path / "plain", backend=FakeBackend())
    run_stage(one, tmp_path / "sweep" / "one", backend=BACKENDS["smollm2"]())
    tables = compose_rubric(
        "rubric_asap_set1",
        data,
        tmp_path,
        ["dataset.limit=6", "stage=rubric_tables", f"rubric.runs={tmp_path / 'sweep'}"],
    )
    with pytest.raises(
        ConfigError, match=r"^rubric.runs: no judgments of holistic_three by smollm2 \(of 4 missing\)$"
    ):
        run_stage(tables, tmp_path / "tables")
    other = compose_rubric("rubric_asap_set1", data, tmp_path, ["dataset.limit=7", "stage=rubric_tables", f"rubric.runs={tmp_path / 'sweep'}"])  # fmt: skip
    with pytest.raises(
        ConfigError, match=r"judged other items than this sample of 7 \(dataset.limit / dataset.seed"
    ):
        run_stage(other, tmp_path / "tables7")


def test_infobench_on_the_grid_gives_the_studys_tables_byte_for_byte(tmp_path):
    """InFoBench's questions differ per item (its groups: ``criteria: from_item``): every condition
    x backbone a rubric_judge job, then rubric_tables, byte-identical to the study's own engine's
    tables (tests/fixtures/rubric_infobench)."""
    data = make_infobench(tmp_path / "data")

    def cfg(*extra):
        return compose_rubric(
            "rubric_infobench", data, tmp_path, [f"dataset.limit={INFOBENCH_LIMIT}", *extra]
        )

    for backbone, backend in infobench_backends().items():
        for cond in IF_CONDITIONS:
            over = ("stage=rubric_judge", f"rubric.condition={cond}", f"backbone={backbone}")
            rec = run_stage(cfg(*over), tmp_path / "sweep" / f"{backbone}_{cond}", backend=backend)
            assert rec["status"] == "ok", rec
    record = run_stage(cfg("stage=rubric_tables", f"rubric.runs={tmp_path / 'sweep'}"), tmp_path / "tables")
    assert record["status"] == "ok" and record["n_jobs"] == 10
    pinned = [p for p in sorted(INFOBENCH_FIXTURE.rglob("*")) if p.is_file() and p.name != "calls.csv"]
    assert len(pinned) == 23
    for path in pinned:
        rel = path.relative_to(INFOBENCH_FIXTURE)
        assert (tmp_path / "tables" / rel).read_bytes() == path.read_bytes(), rel


def test_a_rubric_sweeps_job_dirs_are_named_by_condition_and_backbone(tmp_path):
    data = make_asap(tmp_path / "data")
    sweep = tmp_path / "sweep"
    cmd = [
        sys.executable, "-m", "run", "-m", "+experiment=rubric_asap_set1", "stage=rubric_judge",
        "rubric.condition=holistic_all,analytic_batch", "backbone=fake", "backbone.prompt_format=completion",
        f"paths.data_dir={data}", f"paths.cache_dir={tmp_path / 'cache'}", "dataset.limit=4", "logger=none",
        f"hydra.sweep.dir={sweep}",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.parent.name for p in sweep.glob("*/judgments.parquet")) == [
        "0_holistic_all_fake",
        "1_analytic_batch_fake",
    ]
    record = json.loads((sweep / "1_analytic_batch_fake" / "results.json").read_text())
    assert record["judgments"]["sha256"] == file_sha256(sweep / "1_analytic_batch_fake" / "judgments.parquet")


def test_a_rubric_judge_job_names_its_lost_cache_before_any_call(tmp_path, caplog):
    data = make_asap(tmp_path / "data")
    one = ["dataset.limit=4", "stage=rubric_judge", "rubric.condition=analytic_batch", "backbone=gemma3_270m"]
    cfg = compose_rubric("rubric_asap_set1", data, tmp_path, one)
    first = run_stage(cfg, tmp_path / "job", backend=BACKENDS["gemma3_270m"]())
    assert first["calls"]["cache_misses"] == 5 * 4
    gc.collect()  # the job's cache connection
    cache = tmp_path / "cache" / "calls.sqlite"
    for extra in ("-wal", "-shm"):
        Path(f"{cache}{extra}").unlink(missing_ok=True)
    cache.write_bytes(b"")  # a 0-byte cache, as a failed copy leaves it
    with caplog.at_level(logging.WARNING):
        again = run_stage(cfg, tmp_path / "job", backend=BACKENDS["gemma3_270m"]())
    # the first round's keys: the only ones known before any answer
    # the manifest names the file that held its 20 calls; the first round's 4 keys are the only
    # ones known before any answer
    assert "held 20 calls when its manifest was written" in caplog.text
    assert "4 of this job's 4 calls will be made again" in caplog.text
    assert again["status"] == "ok" and again["calls"]["cache_misses"] == 20

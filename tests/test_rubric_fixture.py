"""The rubric study's tables and call keys on rubric set 1 (and InFoBench) stay byte-identical.

The tables under ``tests/fixtures/rubric_set1`` and ``tests/fixtures/rubric_infobench`` were written
by ``scripts/rubric_fixture.py`` from the study as it was before its judging moved onto the judge
grid (its own engine, the former ``rubrics/rubric_judge.py``); the synthetic data and the tests'
judges are those of tests/test_rubric_study.py. ``calls.csv`` holds every call's cache key, so a
changed request (text, prefix, key layout) fails here too; its keys were rewritten once, on
purpose, when ``stage=rubric`` became a driver of the grid's judge jobs (call kind ``judge``, not
``rubric``): every other column, and every table, unchanged.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "rubric_set1"
#: InFoBench's (its criteria differ per item): the synthetic 16 instructions of
#: tests/test_rubric_study.py's make_infobench, 12 judged, two hash judges (one at sharpness 0.5)
INFOBENCH_FIXTURE = FIXTURE.parent / "rubric_infobench"
INFOBENCH_LIMIT = 12
#: the study's own outputs pinned as written (scores.parquet is pinned through calls.csv)
PINNED = ("rubric_tables.md", "cells.csv", "significance.csv")
#: the columns of scores.parquet that identify a call and carry its verdict
CALL_COLUMNS = [
    "backbone",
    "condition",
    "item_id",
    "criterion",
    "position",
    "answer_prefix",
    "cache_key",
    "score",
    "argmax_label",
    "human",
]


def rubric_set1_job(tmp_path: Path) -> Path:
    from tests.test_rubric_study import asap_run

    return asap_run(tmp_path, limit=12)[2]


def infobench_backends() -> dict:
    from tests.test_rubric_study import RecordingFake

    return {"smollm2": RecordingFake(model="a"), "gemma3_270m": RecordingFake(model="b", sharpness=0.5)}


def infobench_job(tmp_path: Path) -> Path:
    from promptlottery.stages import run_stage
    from tests.test_rubric_study import compose_rubric, make_infobench

    data = make_infobench(tmp_path / "data")
    cfg = compose_rubric("rubric_infobench", data, tmp_path, [f"dataset.limit={INFOBENCH_LIMIT}"])
    run_stage(cfg, tmp_path / "job", backends=infobench_backends())
    return tmp_path / "job"


def pinned_outputs(job: Path) -> dict[str, bytes]:
    """``{relative path: bytes}`` of the pinned outputs of a rubric study job folder."""
    out = {name: (job / name).read_bytes() for name in PINNED}
    out.update({f"tables/{p.name}": p.read_bytes() for p in sorted((job / "tables").iterdir())})
    scores = pd.read_parquet(job / "scores.parquet")
    keys = ["backbone", "condition", "item_id", "position"]
    out["calls.csv"] = scores[CALL_COLUMNS].sort_values(keys).to_csv(index=False).encode()
    return out


def test_rubric_tables_and_call_keys_are_byte_identical_to_the_fixture(tmp_path):
    got = pinned_outputs(rubric_set1_job(tmp_path))
    want = {str(p.relative_to(FIXTURE)): p.read_bytes() for p in FIXTURE.rglob("*") if p.is_file()}
    assert sorted(got) == sorted(want)
    differ = [name for name in sorted(want) if got[name] != want[name]]
    assert not differ, f"not byte-identical to tests/fixtures/rubric_set1: {differ}"


def test_infobench_tables_and_call_keys_are_byte_identical_to_the_fixture(tmp_path):
    got = pinned_outputs(infobench_job(tmp_path))
    want = {
        str(p.relative_to(INFOBENCH_FIXTURE)): p.read_bytes()
        for p in INFOBENCH_FIXTURE.rglob("*")
        if p.is_file()
    }
    assert sorted(got) == sorted(want)
    differ = [name for name in sorted(want) if got[name] != want[name]]
    assert not differ, f"not byte-identical to tests/fixtures/rubric_infobench: {differ}"

"""The rubric study's tables and call keys on rubric set 1 stay byte-identical.

The expected files under ``tests/fixtures/rubric_set1`` were written by ``scripts/rubric_fixture.py``
from the study as it was before its judging moved onto the judge modes (its own engine,
``rubrics/rubric_judge.py``); the synthetic ASAP set-1 data, the oracle judge in the chat slot and
the hash judge in the completion slot are those of tests/test_rubric_study.py. ``calls.csv`` holds
every call's cache key, so a changed request (text, prefix, key layout) fails here too.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "rubric_set1"
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

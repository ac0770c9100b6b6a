"""Helpers of the loader-against-raw-file tests: the data folder (or a skip naming it) and one compare.

The tests read each raw file with the stdlib / pandas only, never through the loaders' readers in
``data/loaders/_io.py``, and rebuild every item's texts and labels from SOURCE.md's words.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from promptlottery.data.registry import load_items
from tests.conftest import DATA_DIR

csv.field_size_limit(2**31 - 1)


def folder(name: str) -> Path:
    """``DATA_DIR/name``, or skip the test saying which folder is absent."""
    path = DATA_DIR / name
    if not path.is_dir():
        pytest.skip(f"data folder {path} is absent")
    return path


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """(1-based line number, object) per non-blank line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(n, json.loads(line)) for n, line in enumerate(lines, start=1) if line.strip()]


def expect(id: str, system: str | None, inputs: dict, human: dict, **meta: Any) -> dict:
    """One expected item: the fields compared exactly, plus the ``meta`` keys given."""
    return {"id": id, "system": system, "inputs": inputs, "human": human, "meta": meta}


def check(name: str, expected: list[dict], *, ordered: bool = True, **options: Any) -> None:
    """``load_items(name, **options)`` equals ``expected``: the same ids (in order unless ``ordered``
    is False) and per item the same system, inputs and human dicts (no key more or less) and meta keys."""
    items = load_items(name, data_dir=DATA_DIR, **options)
    got_ids, want_ids = [it.id for it in items], [e["id"] for e in expected]
    if ordered:
        assert got_ids == want_ids
    else:
        assert sorted(got_ids) == sorted(want_ids)
    by_id = {e["id"]: e for e in expected}
    for it in items:
        e = by_id[it.id]
        got = {"system": it.system, "inputs": it.inputs, "human": it.human}
        got["meta"] = {k: it.meta.get(k, "<absent>") for k in e["meta"]}
        assert got == {k: e[k] for k in ("system", "inputs", "human", "meta")}, it.id

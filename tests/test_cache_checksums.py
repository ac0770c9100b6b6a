"""The call cache never serves an answer changed after it was written, and says when a lost cache is paid again.

The issue's case: digits flipped inside stored answers leave a valid SQLite file with valid JSON; a
re-run must not judge from them. Legacy caches (no checksum column) keep working.
"""

from __future__ import annotations

import json
import logging
import sqlite3

import pandas as pd
import pytest

from promptlottery.backends.base import JudgeResponse
from promptlottery.judging.cache import CacheError, CallCache
from tests.test_reliability import _job

FLIP = str.maketrans("12345", "54321")


def _flip_digits(cache_file) -> int:
    """Swap the labels 1<->5, 2<->4 in every stored answer's text and label probabilities (valid JSON)."""
    con = sqlite3.connect(cache_file)
    rows = con.execute("SELECT key, response FROM calls").fetchall()
    for key, response in rows:
        r = json.loads(response)
        r["raw_text"] = r["raw_text"].translate(FLIP)
        if r.get("label_probs"):
            r["label_probs"] = {k.translate(FLIP): p for k, p in r["label_probs"].items()}
        con.execute("UPDATE calls SET response = ? WHERE key = ?", (json.dumps(r), key))
    con.commit()
    con.close()
    return len(rows)


def test_flipped_digits_in_stored_answers_are_refused_then_recomputed(tmp_path):
    clean = _job(tmp_path, "clean", "judge.variant=P2")
    scores = pd.read_parquet(clean / "judgments.parquet")
    n = _flip_digits(tmp_path / "cache" / "calls.sqlite")
    assert n == len(scores) == 3
    with pytest.raises(
        CacheError, match=r"the stored answer for key [0-9a-f]{64} does not match its checksum"
    ):
        _job(tmp_path, "flipped", "judge.variant=P2")
    again = _job(tmp_path, "recomputed", "judge.variant=P2", "paths.cache_on_mismatch=recompute")
    rec = json.loads((again / "results.json").read_text())
    assert rec["status"] == "ok" and rec["calls"]["cache_misses"] == n  # every bad entry asked again
    redone = pd.read_parquet(again / "judgments.parquet")
    for col in ("parsed_label", "score"):
        assert redone[col].tolist() == scores[col].tolist()
    # the recomputed answers were stored with good checksums: a plain re-run is served from the cache
    last = json.loads((_job(tmp_path, "cached", "judge.variant=P2") / "results.json").read_text())
    assert last["calls"]["cache_hits"] == n


def test_a_cache_from_before_checksums_is_read_and_hashed_on_first_read(tmp_path, caplog):
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE calls (key TEXT PRIMARY KEY, response TEXT NOT NULL, request TEXT, created REAL NOT NULL)"
    )
    answer = JudgeResponse("4", {"4": 1.0}, 3, 1, 0.0)
    con.execute("INSERT INTO calls VALUES ('k1', ?, NULL, 0)", (json.dumps(answer.to_json()),))
    con.commit()
    con.close()
    with caplog.at_level(logging.WARNING):
        assert CallCache(path).get_many(["k1"])["k1"].raw_text == "4"
    assert "1 entries written before answers carried checksums" in caplog.text
    stored = sqlite3.connect(path).execute("SELECT response, response_sha256 FROM calls").fetchone()
    assert stored[1] is not None
    # from now on the legacy row is checked like any other
    sqlite3.connect(path).execute(
        "UPDATE calls SET response = replace(response, '4', '1')"
    ).connection.commit()
    with pytest.raises(CacheError, match="key k1 does not match its checksum"):
        CallCache(path).get_many(["k1"])


def test_an_unknown_mismatch_option_is_one_line(tmp_path):
    with pytest.raises(CacheError, match="paths.cache_on_mismatch='ignore': must be one of error, recompute"):
        CallCache(tmp_path / "c.sqlite", on_mismatch="ignore")

"""The call cache never serves an answer changed after it was written, and says when a lost cache is paid again.

The issue's case: digits flipped inside stored answers leave a valid SQLite file with valid JSON; a
re-run must not judge from them. Legacy caches (no checksum column) keep working.
"""

from __future__ import annotations

import gc
import json
import logging
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from promptlottery.backends.base import JudgeResponse
from promptlottery.backends.fake import FakeBackend
from promptlottery.calls.cache import CacheError, CallCache
from promptlottery.stages import run_stage
from tests.conftest import compose
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


class _Watched(FakeBackend):
    """The fake judge, noting what the log held when it was first called."""

    def __init__(self, log):
        super().__init__()
        self.log, self.seen_at_first_call = log, None

    def generate(self, requests, decoding):
        if self.seen_at_first_call is None:
            self.seen_at_first_call = self.log.text
        return super().generate(requests, decoding)


def _claimed_job(tmp_path, out, *overrides, backend=None):
    cfg = compose(["backbone=fake", "dataset.limit=3", *overrides], tmp_path=tmp_path)
    run_stage(cfg, out, claim=True, **({"backend": backend} if backend else {}))
    return json.loads((out / "results.json").read_text())


def _empty_the_cache(tmp_path):
    gc.collect()  # the jobs' cache connections (a new process would hold none)
    cache = tmp_path / "cache" / "calls.sqlite"
    for extra in ("-wal", "-shm"):
        Path(f"{cache}{extra}").unlink(missing_ok=True)
    cache.write_bytes(b"")  # a 0-byte cache, as a failed copy leaves it


def test_an_emptied_cache_says_how_many_calls_are_made_again_before_any(tmp_path, caplog):
    out = tmp_path / "job"
    assert _claimed_job(tmp_path, out)["calls"]["cache_misses"] == 3
    _empty_the_cache(tmp_path)
    backend = _Watched(caplog)
    with caplog.at_level(logging.WARNING):
        rec = _claimed_job(tmp_path, out, backend=backend)
    said = "this job's previous run cached 3 calls in it: all 3 calls of this job will be made again"
    assert said in backend.seen_at_first_call  # said before the first call
    assert rec["status"] == "ok" and rec["calls"]["cache_misses"] == 3


def test_an_emptied_cache_on_a_paid_api_is_refused_unless_allowed(tmp_path):
    paid = "+backbone.price_per_mtok_input=2.5"
    # two finished jobs of a sweep beside the one that runs now
    for name in ("0_a", "1_b"):
        _claimed_job(
            tmp_path, tmp_path / "sweep" / name, paid, f"judge.variant={'P1' if name == '0_a' else 'P2'}"
        )
    _empty_the_cache(tmp_path)
    with pytest.raises(
        CacheError, match=r"2 completed jobs here cached 6 calls in it: all 3 calls .* paid API"
    ):
        _claimed_job(tmp_path, tmp_path / "sweep" / "2_c", paid, "judge.variant=P3")
    assert not (tmp_path / "sweep" / "2_c" / "judgments.parquet").exists()
    rec = _claimed_job(
        tmp_path, tmp_path / "sweep" / "2_c", paid, "judge.variant=P3", "paths.allow_paid_recompute=true"
    )
    assert rec["status"] == "ok" and rec["calls"]["cache_misses"] == 3


def _answers(cache: CallCache, *keys: str) -> None:
    cache.put_many([(k, JudgeResponse("4", {"4": 1.0}, 3, 1, 0.0), None) for k in keys])


def test_the_manifest_keeps_what_a_renamed_file_held_until_the_new_one_catches_up(tmp_path):
    db = tmp_path / "calls.sqlite"
    first = CallCache(db)
    _answers(first, "k1", "k2")
    first.close()
    manifest = json.loads((tmp_path / "calls.sqlite.manifest.json").read_text())
    assert manifest["answers"] == 2 and "replaced" not in manifest
    db.rename(tmp_path / "moved.sqlite")
    second = CallCache(db)  # a new file: a new id, so it is not the file the manifest names
    assert second.replaced["answers"] == 2 and second.replaced["file_id"] == manifest["file_id"]
    _answers(second, "k1")
    second.close()
    third = CallCache(db)  # 1 of 2: still short, the loss is carried in the new file's manifest
    assert third.replaced["answers"] == 2
    _answers(third, "k2")
    third.close()
    assert "replaced" not in json.loads((tmp_path / "calls.sqlite.manifest.json").read_text())
    assert CallCache(db).replaced is None
    # the same file emptied of its rows is not a replacement; a removed manifest forgets the loss
    (tmp_path / "calls.sqlite.manifest.json").unlink()
    gc.collect()
    db.write_bytes(b"")
    assert CallCache(db).replaced is None


def test_an_emptied_cache_under_a_new_sweep_dir_is_told_by_its_manifest(tmp_path, caplog):
    assert _claimed_job(tmp_path, tmp_path / "old" / "0_a")["calls"]["cache_misses"] == 3
    _empty_the_cache(tmp_path)
    backend = _Watched(caplog)
    with caplog.at_level(logging.WARNING):
        rec = _claimed_job(tmp_path, tmp_path / "new" / "0_a", backend=backend)  # no record beside it
    said = "is not the file that held 3 calls when its manifest was written"
    assert said in backend.seen_at_first_call and "3 of this job's 3 calls will be made again" in caplog.text
    assert rec["status"] == "ok" and rec["calls"]["cache_misses"] == 3


def test_a_renamed_cache_under_a_new_sweep_dir_on_a_paid_api_is_refused_unless_allowed(tmp_path):
    paid = "+backbone.price_per_mtok_input=2.5"
    _claimed_job(tmp_path, tmp_path / "old" / "0_a", paid)
    gc.collect()
    (tmp_path / "cache" / "calls.sqlite").rename(tmp_path / "cache" / "calls.sqlite.bak")
    with pytest.raises(CacheError, match=r"held 3 calls .* 3 of this job's 3 calls .* paid API"):
        _claimed_job(tmp_path, tmp_path / "new" / "0_a", paid)
    assert not (tmp_path / "new" / "0_a" / "judgments.parquet").exists()
    rec = _claimed_job(tmp_path, tmp_path / "new" / "0_a", paid, "paths.allow_paid_recompute=true")
    assert rec["status"] == "ok" and rec["calls"]["cache_misses"] == 3

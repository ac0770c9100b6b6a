"""The call cache on PostgreSQL (``paths.cache_url``): several writers at once, the same judgments as
the SQLite store, and the same checksums on every read. ``make test-cluster`` runs it (a throwaway
server on loopback)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from promptlottery.calls.cache import CacheError, CallCache
from tests.cache_writers import expected_keys, response, write_concurrently
from tests.cluster_services import postgres_url  # noqa: F401 - fixture
from tests.conftest import DATA_DIR, REPO

pytestmark = pytest.mark.cluster

VOLATILE = ["cache_hit", "latency_s"]


def _fresh(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS calls")


def test_four_processes_writing_one_postgres_cache_lose_nothing(postgres_url):  # noqa: F811
    _fresh(postgres_url)
    assert write_concurrently(postgres_url, 4) == [0, 0, 0, 0]  # incl. the race on CREATE TABLE
    cache = CallCache(postgres_url)
    keys = sorted(expected_keys(4))
    assert len(cache) == len(keys) == 60 + 4 * 40
    got = cache.get_many(keys)
    assert all(got[k] == response(k) for k in keys)
    cache.close()


def judge(tmp: Path, out: Path, *extra: str) -> dict:
    """``python -m run`` (one condition, fake judge) as a user would type it; its results.json."""
    cmd = [
        sys.executable,
        "-m",
        "run",
        "backbone=fake",
        "dataset.limit=12",
        "judge.variant=P2",
        "logger=none",
        f"paths.data_dir={DATA_DIR}",
        f"paths.cache_dir={tmp / 'cache'}",
        f"hydra.run.dir={out}",
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return json.loads((out / "results.json").read_text())


def test_sqlite_and_postgres_stores_give_identical_judgments(postgres_url, tmp_path):  # noqa: F811
    _fresh(postgres_url)
    frames, records = {}, {}
    for store, extra in (("sqlite", []), ("postgres", [f"paths.cache_url={postgres_url}"])):
        for attempt in ("first", "again"):
            out = tmp_path / store / attempt
            records[store, attempt] = judge(tmp_path / store, out, *extra)
            frames[store, attempt] = pd.read_parquet(out / "judgments.parquet").drop(columns=VOLATILE)
    assert not (tmp_path / "postgres" / "cache" / "calls.sqlite").exists()  # the URL was used, not the file
    for store in ("sqlite", "postgres"):
        assert records[store, "first"]["calls"]["cache_misses"] == 12
        assert records[store, "again"]["calls"]["cache_hits"] == 12  # the store served the re-run
        pd.testing.assert_frame_equal(frames[store, "first"], frames[store, "again"])
    pd.testing.assert_frame_equal(frames["sqlite", "first"], frames["postgres", "first"])
    assert frames["sqlite", "first"]["score"].notna().sum() > 0


def test_a_changed_answer_on_postgres_is_refused_naming_its_key_then_recomputed(postgres_url):  # noqa: F811
    _fresh(postgres_url)
    cache = CallCache(postgres_url)
    cache.put_many([(k, response(k), None) for k in ("k1", "k2")])
    cache.close()
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        text, digest = conn.execute("SELECT response, response_sha256 FROM calls WHERE key = 'k1'").fetchone()
        assert digest == hashlib.sha256(text.encode("utf-8")).hexdigest()  # the sha256 of the stored text
        conn.execute("UPDATE calls SET response = replace(response, '0.75', '0.15') WHERE key = 'k1'")
    with pytest.raises(CacheError, match="the stored answer for key k1 does not match its checksum"):
        CallCache(postgres_url).get_many(["k1", "k2"])
    served = CallCache(postgres_url, on_mismatch="recompute").get_many(["k1", "k2"])
    assert sorted(served) == ["k2"]  # k1 dropped, to be asked again
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM calls WHERE key = 'k1'").fetchone()[0] == 0


def test_a_postgres_table_from_before_checksums_gains_them_on_first_read(postgres_url):  # noqa: F811
    _fresh(postgres_url)
    import psycopg

    text = json.dumps(response("old").to_json())
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE calls (key TEXT PRIMARY KEY, response TEXT NOT NULL, request TEXT,"
            " created DOUBLE PRECISION NOT NULL)"
        )
        conn.execute("INSERT INTO calls VALUES ('old', %s, NULL, 0)", (text,))
    assert CallCache(postgres_url).get_many(["old"])["old"].raw_text == "old"  # legacy: served as stored
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        digest = conn.execute("SELECT response_sha256 FROM calls WHERE key = 'old'").fetchone()[0]
        assert digest == hashlib.sha256(text.encode("utf-8")).hexdigest()
        conn.execute("UPDATE calls SET response = replace(response, '0.75', '0.15') WHERE key = 'old'")
    with pytest.raises(CacheError, match="key old does not match its checksum"):
        CallCache(postgres_url).get_many(["old"])

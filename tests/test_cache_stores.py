"""The call cache's SQLite store under several writing processes, and the store chosen by location."""

from __future__ import annotations

import pytest

from promptlottery.calls.cache import CallCache, cache_location
from tests.cache_writers import expected_keys, response, write_concurrently


def test_four_processes_writing_one_sqlite_file_lose_nothing(tmp_path):
    db = tmp_path / "calls.sqlite"
    assert write_concurrently(str(db), 4) == [0, 0, 0, 0]  # no "database is locked": writers queue
    cache = CallCache(db)
    keys = sorted(expected_keys(4))
    assert len(cache) == len(keys) == 60 + 4 * 40
    got = cache.get_many(keys)
    assert all(got[k] == response(k) for k in keys)


def test_the_location_names_the_store(tmp_path):
    from omegaconf import OmegaConf

    paths = OmegaConf.create({"cache_dir": str(tmp_path), "cache_url": None})
    assert cache_location(paths) == tmp_path / "calls.sqlite"
    paths.cache_url = "postgresql://u@127.0.0.1:1/db"
    assert cache_location(paths) == "postgresql://u@127.0.0.1:1/db"
    try:  # the server store was chosen: it is not there, or (without the extra) its driver is not
        import psycopg  # noqa: F401

        expected = "127.0.0.1"
    except ImportError:
        expected = r"PostgreSQL URL but psycopg is missing: pip install -e '\.\[postgres\]'"
    with pytest.raises(Exception, match=expected):
        CallCache(paths.cache_url, timeout_s=1)

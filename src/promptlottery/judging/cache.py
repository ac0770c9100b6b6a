"""The call cache: every model answer, keyed by everything that changes it, in SQLite (WAL).

One database file lives in a cache dir outside Hydra's per-run output dirs and is shared by every
sweep (and every parallel job) on the machine. Rows are written as each batch of calls completes,
so a killed job loses at most the batch in flight. Errors are never cached.

A cache dir the job cannot write is opened read-only (``readonly``): a fully cached run still works,
and a run that would need new calls fails before calling the model. A file that is not a SQLite
database is a :class:`CacheError` naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from promptlottery.backends.base import JudgeResponse


def cache_key(payload: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of ``payload`` (what changes the output, nothing else)."""
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CacheError(RuntimeError):
    """The call cache cannot be used (unreadable file, read-only dir with calls to add)."""


class CallCache:
    def __init__(self, path: str | Path, *, timeout_s: float = 60.0):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"call cache dir {self.path.parent} cannot be created: {exc}") from None
        writable = os.access(self.path.parent, os.W_OK) and (
            not self.path.exists() or os.access(self.path, os.W_OK)
        )
        self.readonly = not writable
        try:
            if self.readonly and not self.path.exists():
                self._conn, self._has_table = None, None
                return
            if self.readonly:
                # immutable: SQLite creates no -wal/-shm files, which a read-only dir cannot hold
                uri = f"file:{self.path.resolve()}?mode=ro&immutable=1"
                self._conn = sqlite3.connect(uri, uri=True, timeout=timeout_s, isolation_level=None)
                self._has_table = self._conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type='table' AND name='calls'"
                ).fetchone()
                return
            self._conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, response TEXT NOT NULL,"
                " request TEXT, created REAL NOT NULL)"
            )
            self._has_table = True
        except sqlite3.DatabaseError as exc:
            raise CacheError(
                f"call cache {self.path} is not a usable SQLite database ({exc}); move it away or set "
                "paths.cache_dir to another directory"
            ) from None

    def get_many(self, keys: list[str]) -> dict[str, JudgeResponse]:
        found: dict[str, JudgeResponse] = {}
        if not self._has_table:
            return found
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, resp in self._conn.execute(
                    f"SELECT key, response FROM calls WHERE key IN ({marks})", chunk
                ):
                    found[key] = JudgeResponse.from_json(json.loads(resp))
        except (sqlite3.DatabaseError, ValueError, TypeError) as exc:
            raise CacheError(f"call cache {self.path} is corrupt ({exc}); move it away") from None
        return found

    def put_many(self, rows: list[tuple[str, JudgeResponse, dict | None]]) -> None:
        if self.readonly:
            raise CacheError(
                f"call cache dir {self.path.parent} is read-only: {len(rows)} new calls cannot be cached; "
                "make it writable or set paths.cache_dir to a writable directory"
            )
        now = time.time()
        with self._conn:  # one transaction per batch: all of it lands or none of it
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "INSERT OR REPLACE INTO calls (key, response, request, created) VALUES (?, ?, ?, ?)",
                [(k, json.dumps(r.to_json()), json.dumps(req) if req else None, now) for k, r, req in rows],
            )

    def __len__(self) -> int:
        if not self._has_table:
            return 0
        return self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

"""The call cache's default store: one SQLite file in WAL mode.

Many processes on one machine may write it at once: each batch is one ``BEGIN IMMEDIATE``
transaction, so writers queue for the lock (up to ``timeout_s``) while readers go on reading.
WAL keeps its index in shared memory (``calls.sqlite-shm``): every writer must be on the same
host, which is why jobs on many nodes use the PostgreSQL store instead. A file in a dir the job
cannot write is opened immutable and read-only (SQLite could create no -wal/-shm files there).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from promptlottery.judging.cache import CacheError


class SqliteStore:
    def __init__(self, path: Path, *, timeout_s: float = 60.0):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"call cache dir {self.path.parent} cannot be created: {exc}") from None
        self.readonly = not (
            os.access(self.path.parent, os.W_OK) and (not self.path.exists() or os.access(self.path, os.W_OK))
        )
        self._conn: sqlite3.Connection | None = None
        self._has_table = False
        try:
            if self.readonly:
                if self.path.exists():
                    uri = f"file:{self.path.resolve()}?mode=ro&immutable=1"
                    self._conn = sqlite3.connect(uri, uri=True, timeout=timeout_s, isolation_level=None)
                    self._has_table = bool(
                        self._conn.execute(
                            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='calls'"
                        ).fetchone()
                    )
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

    def get_many(self, keys: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        if not self._has_table:
            return found
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                found.update(
                    self._conn.execute(f"SELECT key, response FROM calls WHERE key IN ({marks})", chunk)
                )
        except sqlite3.DatabaseError as exc:
            raise CacheError(f"call cache {self.path} is corrupt ({exc}); move it away") from None
        return found

    def put_many(self, rows: list[tuple[str, str, str | None, float]]) -> None:
        with self._conn:  # one transaction per batch: all of it lands or none of it
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "INSERT OR REPLACE INTO calls (key, response, request, created) VALUES (?, ?, ?, ?)", rows
            )

    def count(self) -> int:
        if not self._has_table:
            return 0
        return self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

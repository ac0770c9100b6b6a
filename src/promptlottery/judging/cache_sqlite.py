"""The call cache's default store: one SQLite file in WAL mode.

Many processes on one machine may write it at once: each batch is one ``BEGIN IMMEDIATE``
transaction, so writers queue for the lock (up to ``timeout_s``) while readers go on reading.
WAL keeps its index in shared memory (``calls.sqlite-shm``): every writer must be on the same
host, which is why jobs on many nodes use the PostgreSQL store instead.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


class SqliteStore:
    def __init__(self, path: Path, *, timeout_s: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, response TEXT NOT NULL,"
            " request TEXT, created REAL NOT NULL)"
        )

    def get_many(self, keys: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(self._conn.execute(f"SELECT key, response FROM calls WHERE key IN ({marks})", chunk))
        return found

    def put_many(self, rows: list[tuple[str, str, str | None, float]]) -> None:
        with self._conn:  # one transaction per batch: all of it lands or none of it
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "INSERT OR REPLACE INTO calls (key, response, request, created) VALUES (?, ?, ?, ?)", rows
            )

    def count(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        self._conn.close()

"""The call cache: every model answer, keyed by everything that changes it, in SQLite (WAL).

One database file lives in a cache dir outside Hydra's per-run output dirs and is shared by every
sweep (and every parallel job) on the machine. Rows are written as each batch of calls completes,
so a killed job loses at most the batch in flight. Errors are never cached.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from promptlottery.backends.base import JudgeResponse


def cache_key(payload: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of ``payload`` (what changes the output, nothing else)."""
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CallCache:
    def __init__(self, path: str | Path, *, timeout_s: float = 60.0):
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

    def get_many(self, keys: list[str]) -> dict[str, JudgeResponse]:
        found: dict[str, JudgeResponse] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, resp in self._conn.execute(
                f"SELECT key, response FROM calls WHERE key IN ({marks})", chunk
            ):
                found[key] = JudgeResponse.from_json(json.loads(resp))
        return found

    def put_many(self, rows: list[tuple[str, JudgeResponse, dict | None]]) -> None:
        now = time.time()
        with self._conn:  # one transaction per batch: all of it lands or none of it
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "INSERT OR REPLACE INTO calls (key, response, request, created) VALUES (?, ?, ?, ?)",
                [(k, json.dumps(r.to_json()), json.dumps(req) if req else None, now) for k, r, req in rows],
            )

    def __len__(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        self._conn.close()

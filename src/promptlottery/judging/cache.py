"""The call cache: every model answer, keyed by everything that changes it.

One store is shared by every sweep and every parallel job: by default a SQLite file
(``<paths.cache_dir>/calls.sqlite``, WAL) that many processes on one machine write at once;
``paths.cache_url=postgresql://...`` puts the same table on a PostgreSQL server, for jobs on many
nodes (SQLite's WAL needs shared memory between its writers, so not a file shared over NFS). Rows
are written as each batch of calls completes, so a killed job loses at most the batch in flight.
Errors are never cached. A SQLite cache whose dir the job cannot write is opened read-only
(``readonly``): a fully cached run still works, and a run that would need new calls fails before
calling the model. An unusable store is a :class:`CacheError` naming it.
"""

from __future__ import annotations

import hashlib
import json
import os  # noqa: F401 - tests patch os.access through this module to act as a non-root user
import time
from pathlib import Path
from typing import Any, Protocol

from promptlottery.backends.base import JudgeResponse
from promptlottery.errors import UserError


def cache_key(payload: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of ``payload`` (what changes the output, nothing else)."""
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CacheError(UserError, RuntimeError):
    """The call cache cannot be used (unreadable file, read-only dir with calls to add)."""


class CallStore(Protocol):
    """A table ``calls(key, response, request, created)`` of JSON text, wherever it lives."""

    def get_many(self, keys: list[str]) -> dict[str, str]: ...  # key -> response JSON
    def put_many(self, rows: list[tuple[str, str, str | None, float]]) -> None: ...  # one transaction
    def count(self) -> int: ...
    def close(self) -> None: ...


def open_store(location: str | Path, *, timeout_s: float = 60.0) -> CallStore:
    """A ``postgresql://`` URL opens the server store; anything else is a SQLite file path."""
    if str(location).startswith(("postgresql://", "postgres://")):
        from promptlottery.judging.cache_postgres import PostgresStore

        return PostgresStore(str(location), timeout_s=timeout_s)
    from promptlottery.judging.cache_sqlite import SqliteStore

    return SqliteStore(Path(location), timeout_s=timeout_s)


def cache_location(paths: Any) -> str | Path:
    """Where a run's cache lives: ``paths.cache_url`` if set, else ``<paths.cache_dir>/calls.sqlite``."""
    return paths.get("cache_url") or Path(paths.get("cache_dir")) / "calls.sqlite"


class CallCache:
    def __init__(self, location: str | Path, *, timeout_s: float = 60.0):
        self.location = location
        self._store = open_store(location, timeout_s=timeout_s)
        self.readonly = getattr(self._store, "readonly", False)

    def get_many(self, keys: list[str]) -> dict[str, JudgeResponse]:
        try:
            return {k: JudgeResponse.from_json(json.loads(v)) for k, v in self._store.get_many(keys).items()}
        except (ValueError, TypeError, KeyError) as exc:
            raise CacheError(f"call cache {self.location} is corrupt ({exc}); move it away") from None

    def put_many(self, rows: list[tuple[str, JudgeResponse, dict | None]]) -> None:
        if self.readonly:
            raise CacheError(
                f"call cache {self.location} is read-only: {len(rows)} new calls cannot be cached; "
                "make it writable or set paths.cache_dir to a writable directory"
            )
        now = time.time()
        self._store.put_many(
            [(k, json.dumps(r.to_json()), json.dumps(req) if req else None, now) for k, r, req in rows]
        )

    def __len__(self) -> int:
        return self._store.count()

    def close(self) -> None:
        self._store.close()

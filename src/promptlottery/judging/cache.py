"""The call cache: every model answer, keyed by everything that changes it.

One store is shared by every sweep and every parallel job: by default a SQLite file
(``<paths.cache_dir>/calls.sqlite``, WAL) that many processes on one machine write at once;
``paths.cache_url=postgresql://...`` puts the same table on a PostgreSQL server, for jobs on many
nodes (SQLite's WAL needs shared memory between its writers, so not a file shared over NFS). Rows
are written as each batch of calls completes, so a killed job loses at most the batch in flight.
Errors are never cached. A SQLite cache whose dir the job cannot write is opened read-only
(``readonly``): a fully cached run still works, and a run that would need new calls fails before
calling the model. An unusable store is a :class:`CacheError` naming it.

Every model call's request, and so its key, is built by :func:`make_request` (as inspect_ai's
``model/_cache.py`` builds its ``CacheEntry`` key): the backend's identity, the payload (chat
messages or a completion prompt), the scale's labels, the decoding and the call kind's named
extra key parts.

The SQLite store (the default) is here; the PostgreSQL one, an optional extra, is
:mod:`promptlottery.judging.cache_postgres`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from promptlottery.backends.base import Decoding, JudgeRequest, JudgeResponse
from promptlottery.errors import UserError


def cache_key(payload: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of ``payload`` (what changes the output, nothing else).

    Called by :func:`make_request` only: a key built elsewhere could miss a part of the request.
    """
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CallKind:
    """The key layout of one kind of model call.

    ``tag``: the entries that name the kind in its key; ``fields``: which request fields, beyond the
    backend identity and the decoding (always there), its key holds. A field a kind's key does not
    hold must keep its default in that kind's requests (:func:`make_request` checks).
    """

    tag: Mapping[str, str]
    fields: tuple[str, ...]


#: every kind of model call and its key layout, as each kind's keys have always been built: the
#: tag names differ (``stage`` / ``study`` / ``task``, none for the judge) and predict keys hold no
#: ``sample_index``, paraphrase keys no ``prompt`` and no ``labels``. A change to any layout here
#: makes every cached answer of that kind a miss (tests/test_request_keys.py pins the keys).
CALL_KINDS: dict[str, CallKind] = {
    # judging.runner: a judge verdict of the paraphrase grid (and its repeats)
    "judge": CallKind({}, ("messages", "prompt", "labels", "sample_index")),
    # judging.predict: a candidate system's answer, free text
    "predict": CallKind({"stage": "predict"}, ("messages", "prompt")),
    # rubrics: one holistic / criterion score of the rubric study
    "rubric": CallKind(
        {"study": "rubric"}, ("messages", "prompt", "assistant_prefix", "labels", "sample_index")
    ),
    # prompts.generate: a paraphrase candidate, free text from a chat prompt
    "paraphrase": CallKind({"task": "paraphrase"}, ("messages", "sample_index")),
    # prompts.validation: does a paraphrase ask for the same judgment as P1 (Yes / No, §3.1's LLM rating)
    "paraphrase_equivalence": CallKind({"task": "paraphrase_equivalence"}, ("messages", "prompt", "labels")),
    # gating.baselines: the gate's LLM prompt classifier (yes / no)
    "gate_llm_baseline": CallKind(
        {"task": "gate_llm_baseline"}, ("messages", "prompt", "labels", "sample_index")
    ),
}

_DEFAULTS: dict[str, Any] = {"prompt": None, "labels": (), "sample_index": 0, "assistant_prefix": None}


def make_request(
    kind: str,
    identity: Mapping[str, Any],
    decoding: Decoding,
    *,
    messages: list[dict[str, str]] | None = None,
    prompt: str | None = None,
    labels: tuple[str, ...] = (),
    sample_index: int = 0,
    assistant_prefix: str | None = None,
    parts: Mapping[str, Any] | None = None,
) -> JudgeRequest:
    """The request of one model call, with its cache key: the one place a key is made.

    ``identity`` is ``backend.identity()``; exactly one of ``messages`` (chat) and ``prompt``
    (completion) is set; ``parts`` are the kind's named extra key parts (a prompt group and variant,
    a template, a task version, ...), which may not reuse a name the key already has.
    """
    if kind not in CALL_KINDS:
        raise ValueError(f"call kind {kind!r}: must be one of {sorted(CALL_KINDS)}")
    if (messages is None) == (prompt is None):
        raise ValueError(f"{kind} request: exactly one of messages and prompt must be set")
    layout = CALL_KINDS[kind]
    given = {
        "messages": messages,
        "prompt": prompt,
        "labels": tuple(labels),
        "sample_index": sample_index,
        "assistant_prefix": assistant_prefix,
    }
    for name, default in _DEFAULTS.items():
        if name not in layout.fields and given[name] != default:
            raise ValueError(f"{kind} request: {name}={given[name]!r} is not in a {kind} key; leave it unset")
    payload: dict[str, Any] = {
        **layout.tag,
        "backend": dict(identity),
        "decoding": decoding.as_dict(),
        **{name: given[name] for name in layout.fields},
    }
    clash = sorted(set(parts or {}) & set(payload))
    if clash:
        raise ValueError(f"{kind} request: extra key parts {clash} would replace the key's own")
    payload.update(parts or {})
    return JudgeRequest(
        key=cache_key(payload),
        labels=tuple(labels),
        messages=messages,
        prompt=prompt,
        sample_index=sample_index,
        assistant_prefix=assistant_prefix,
    )


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
    return SqliteStore(Path(location), timeout_s=timeout_s)


def cache_location(paths: Any) -> str | Path:
    """Where a run's cache lives: ``paths.cache_url`` if set, else ``<paths.cache_dir>/calls.sqlite``."""
    return paths.get("cache_url") or Path(paths.get("cache_dir")) / "calls.sqlite"


class SqliteStore:
    """The default store: one SQLite file in WAL mode.

    Many processes on one machine may write it at once: each batch is one ``BEGIN IMMEDIATE``
    transaction, so writers queue for the lock (up to ``timeout_s``) while readers go on reading.
    WAL keeps its index in shared memory (``calls.sqlite-shm``): every writer must be on the same
    host, which is why jobs on many nodes use the PostgreSQL store instead. A file in a dir the job
    cannot write is opened immutable and read-only (SQLite could create no -wal/-shm files there).
    """

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


class CallCache:
    def __init__(self, location: str | Path, *, timeout_s: float = 60.0):
        self.location = location
        self._store = open_store(location, timeout_s=timeout_s)
        #: a SQLite file in a dir the job cannot write (the server store is always writable)
        self.readonly = isinstance(self._store, SqliteStore) and self._store.readonly

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

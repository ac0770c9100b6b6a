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

Every stored answer carries the sha256 of its stored text (``response_sha256``), checked on every
read: an answer changed after it was written (a flipped digit leaves valid SQLite and valid JSON) is
a :class:`CacheError` naming its key, or, with ``paths.cache_on_mismatch=recompute``, dropped and
asked again. A cache written before checksums gains the column on first open (a writable one; a
read-only one is read as it is); its rows without a checksum are legacy: hashed on their first read,
with a logged note, and checked from then on (a change made before that read cannot be seen).

The SQLite store (the default) is here; the PostgreSQL one, an optional extra, is
:mod:`promptlottery.calls.cache_postgres`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from promptlottery.backends.base import Decoding, JudgeRequest, JudgeResponse, KnownAnswer
from promptlottery.calls.cache_manifest import read_manifest, replaced, write_manifest
from promptlottery.errors import UserError
from promptlottery.registry import Registry

logger = logging.getLogger(__name__)
#: what a read does with an answer that does not match its checksum (``paths.cache_on_mismatch``)
ON_MISMATCH = ("error", "recompute")


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
CALL_KINDS: Registry[CallKind] = Registry("call kind", error=ValueError)
for _kind, _layout in {
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
}.items():
    CALL_KINDS.register(_kind, _layout)

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
    order: str | None = None,
    known: KnownAnswer | None = None,
) -> JudgeRequest:
    """The request of one model call, complete, with its cache key: the one place a key is made.

    ``identity`` is ``backend.identity()``; exactly one of ``messages`` (chat) and ``prompt``
    (completion) is set; ``parts`` are the kind's named extra key parts (a prompt group and variant,
    a template, a task version, ...), which may not reuse a name the key already has. A request
    field the kind's layout does not hold (``assistant_prefix`` of a judge call) may be set when a
    named part of the same name keys its value; so must a pair ``order``. ``known`` (what a judge
    with known behaviour reads) is never sent and never keyed.
    """
    if kind not in CALL_KINDS:
        raise ValueError(f"call kind {kind!r}: must be one of {sorted(CALL_KINDS)}")
    if (messages is None) == (prompt is None):
        raise ValueError(f"{kind} request: exactly one of messages and prompt must be set")
    layout = CALL_KINDS.get(kind)
    given = {
        "messages": messages,
        "prompt": prompt,
        "labels": tuple(labels),
        "sample_index": sample_index,
        "assistant_prefix": assistant_prefix,
    }
    named = dict(parts or {})
    for name, default in _DEFAULTS.items():
        if name not in layout.fields and given[name] != default and named.get(name, default) != given[name]:
            raise ValueError(f"{kind} request: {name}={given[name]!r} is not in a {kind} key; leave it unset")
    if order is not None and named.get("order") != order:
        raise ValueError(f"{kind} request: order={order!r} is not in its key; name it in parts (order=...)")
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
        order=order,
        known=known,
    )


class CacheError(UserError, RuntimeError):
    """The call cache cannot be used (unreadable file, read-only dir with calls to add)."""


class CallStore(Protocol):
    """A table ``calls(key, response, request, created, response_sha256)`` of JSON text, wherever it lives.

    ``get_many`` gives each found key's ``(response, response_sha256)`` (None: a legacy row);
    ``put_many`` rows are ``(key, response, request, created, response_sha256)``, one transaction.
    """

    def get_many(self, keys: list[str]) -> dict[str, tuple[str, str | None]]: ...
    def put_many(self, rows: list[tuple[str, str, str | None, float, str]]) -> None: ...
    def set_checksums(self, rows: list[tuple[str, str]]) -> None: ...  # (key, sha256) of legacy rows
    def delete_many(self, keys: list[str]) -> None: ...
    def count(self) -> int: ...
    def close(self) -> None: ...


def response_sha256(response: str) -> str:
    """The checksum a stored answer carries: sha256 of its stored JSON text."""
    return hashlib.sha256(response.encode("utf-8")).hexdigest()


def open_store(location: str | Path, *, timeout_s: float = 60.0) -> CallStore:
    """A ``postgresql://`` URL opens the server store; anything else is a SQLite file path."""
    if str(location).startswith(("postgresql://", "postgres://")):
        from promptlottery.calls.cache_postgres import PostgresStore

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
        self.file_id: str | None = None
        self._has_table = False
        self._has_checksums = False
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
                    self._has_checksums = self._has_table and "response_sha256" in self._columns()
                    self.file_id = self._read_file_id()
                return
            self._conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, response TEXT NOT NULL,"
                " request TEXT, created REAL NOT NULL, response_sha256 TEXT)"
            )
            self._has_table = True
            if "response_sha256" not in self._columns():  # a cache from before checksums
                try:
                    self._conn.execute("ALTER TABLE calls ADD COLUMN response_sha256 TEXT")
                except sqlite3.OperationalError as exc:  # another job added it first
                    if "duplicate column" not in str(exc):
                        raise
            self._has_checksums = True
            # the file's own id, which its manifest names (calls.cache_manifest): a new file has a new one
            self._conn.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('file_id', ?)", (uuid.uuid4().hex,))
            self.file_id = self._read_file_id()
        except sqlite3.DatabaseError as exc:
            raise CacheError(
                f"call cache {self.path} is not a usable SQLite database ({exc}); move it away or set "
                "paths.cache_dir to another directory"
            ) from None

    def _read_file_id(self) -> str | None:
        try:
            row = self._conn.execute("SELECT value FROM meta WHERE name = 'file_id'").fetchone()
        except sqlite3.OperationalError:  # no meta table: a file from before manifests, opened read-only
            return None
        return row[0] if row else None

    def _columns(self) -> set[str]:
        return {row[1] for row in self._conn.execute("PRAGMA table_info(calls)")}

    def get_many(self, keys: list[str]) -> dict[str, tuple[str, str | None]]:
        found: dict[str, tuple[str, str | None]] = {}
        if not self._has_table:
            return found
        checksum = "response_sha256" if self._has_checksums else "NULL"
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                found.update(
                    (k, (v, c))
                    for k, v, c in self._conn.execute(
                        f"SELECT key, response, {checksum} FROM calls WHERE key IN ({marks})", chunk
                    )
                )
        except sqlite3.DatabaseError as exc:
            raise CacheError(f"call cache {self.path} is corrupt ({exc}); move it away") from None
        return found

    def put_many(self, rows: list[tuple[str, str, str | None, float, str]]) -> None:
        with self._conn:  # one transaction per batch: all of it lands or none of it
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "INSERT OR REPLACE INTO calls (key, response, request, created, response_sha256)"
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    def set_checksums(self, rows: list[tuple[str, str]]) -> None:
        with self._conn:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "UPDATE calls SET response_sha256 = ? WHERE key = ? AND response_sha256 IS NULL",
                [(c, k) for k, c in rows],
            )

    def delete_many(self, keys: list[str]) -> None:
        with self._conn:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany("DELETE FROM calls WHERE key = ?", [(k,) for k in keys])

    def count(self) -> int:
        if not self._has_table:
            return 0
        return self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        if self._conn is not None:
            if not self.readonly:  # fold the WAL into the file: an immutable reader does not read the WAL
                try:
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except sqlite3.Error:
                    pass  # another connection is mid-transaction: its own close checkpoints
            self._conn.close()
            self._conn = None


class CallCache:
    """The call cache a run reads and writes: answers as :class:`JudgeResponse`, each checked against its
    checksum on read (``on_mismatch``: ``error``, or ``recompute`` to drop the bad ones and call again)."""

    def __init__(self, location: str | Path, *, timeout_s: float = 60.0, on_mismatch: str = "error"):
        if on_mismatch not in ON_MISMATCH:
            raise CacheError(
                f"paths.cache_on_mismatch={on_mismatch!r}: must be one of {', '.join(ON_MISMATCH)}"
            )
        self.location = location
        self.on_mismatch = on_mismatch
        self._store = open_store(location, timeout_s=timeout_s)
        #: a SQLite file in a dir the job cannot write (the server store is always writable)
        self.readonly = isinstance(self._store, SqliteStore) and self._store.readonly
        #: the file this SQLite cache replaced, as its manifest recorded it (calls.cache_manifest)
        self.replaced: dict[str, Any] | None = None
        #: a writable SQLite file keeps its manifest up to date, when opened and when closed
        self._manifest = isinstance(self._store, SqliteStore) and not self.readonly
        if isinstance(self._store, SqliteStore):
            self.replaced = replaced(read_manifest(location), self._store.file_id, len(self))
            self._write_manifest()

    def _write_manifest(self) -> None:
        if self._manifest:
            self.replaced = write_manifest(self.location, self._store.file_id, len(self), lost=self.replaced)

    def get_many(self, keys: list[str]) -> dict[str, JudgeResponse]:
        rows = self._store.get_many(keys)
        self._check(rows)
        try:
            return {k: JudgeResponse.from_json(json.loads(v)) for k, (v, _) in rows.items()}
        except (ValueError, TypeError, KeyError) as exc:
            raise CacheError(f"call cache {self.location} is corrupt ({exc}); move it away") from None

    def _check(self, rows: dict[str, tuple[str, str | None]]) -> None:
        """Drop (``recompute``) or refuse the rows whose answer does not match its checksum; hash legacy
        rows (no checksum yet) on this first read."""
        bad = sorted(k for k, (v, c) in rows.items() if c is not None and c != response_sha256(v))
        if bad and (self.on_mismatch != "recompute" or self.readonly):
            raise CacheError(
                f"call cache {self.location}: the stored answer for key {bad[0]} does not match its checksum "
                f"({len(bad)} of {len(rows)} entries read): it changed after it was written; "
                "paths.cache_on_mismatch=recompute drops and recomputes the bad entries"
                + (" (in a writable cache)" if self.readonly else "")
            )
        if bad:
            self._store.delete_many(bad)
            for k in bad:
                del rows[k]
            logger.warning(
                "call cache %s: dropped %d entries whose answer does not match its checksum (first key=%s);"
                " they are recomputed (paths.cache_on_mismatch=recompute)",
                self.location,
                len(bad),
                bad[0],
            )
        legacy = [(k, response_sha256(v)) for k, (v, c) in rows.items() if c is None]
        if legacy:
            if not self.readonly:
                self._store.set_checksums(legacy)
            logger.warning(
                "call cache %s: %d entries written before answers carried checksums are served as "
                "stored%s; a change made to them before now cannot be detected",
                self.location,
                len(legacy),
                "" if self.readonly else " and hashed now (checked on every later read)",
            )

    def put_many(self, rows: list[tuple[str, JudgeResponse, dict | None]]) -> None:
        if self.readonly:
            raise CacheError(
                f"call cache {self.location} is read-only: {len(rows)} new calls cannot be cached; "
                "make it writable or set paths.cache_dir to a writable directory"
            )
        now = time.time()
        stored = [(k, json.dumps(r.to_json()), json.dumps(req) if req else None) for k, r, req in rows]
        self._store.put_many([(k, v, req, now, response_sha256(v)) for k, v, req in stored])

    def __len__(self) -> int:
        return self._store.count()

    def close(self) -> None:
        self._write_manifest()
        self._manifest = False  # closed: a second close writes nothing
        self._store.close()


def open_cache(paths: Any, *, timeout_s: float = 60.0) -> CallCache:
    """The call cache of a run's ``paths`` config: where it lives (:func:`cache_location`) and what a
    checksum mismatch does (``paths.cache_on_mismatch``, default ``error``)."""
    return CallCache(
        cache_location(paths), timeout_s=timeout_s, on_mismatch=paths.get("cache_on_mismatch") or "error"
    )

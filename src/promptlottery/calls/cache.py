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

The stores are :mod:`promptlottery.calls.cache_store` (SQLite, the default) and
:mod:`promptlottery.calls.cache_postgres` (PostgreSQL, an optional extra).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptlottery.backends.base import Decoding, JudgeRequest, JudgeResponse, KnownAnswer
from promptlottery.calls.cache_manifest import read_manifest, replaced, write_manifest
from promptlottery.calls.cache_store import (
    CacheError,
    CacheWriteError,
    SqliteStore,
    open_store,
    response_sha256,
)
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
#: tag names differ (``stage`` / ``task``, none for the judge) and predict keys hold no
#: ``sample_index``, paraphrase keys no ``prompt`` and no ``labels``. A change to any layout here
#: makes every cached answer of that kind a miss (tests/test_request_keys.py pins the keys).
CALL_KINDS: Registry[CallKind] = Registry("call kind", error=ValueError)
for _kind, _layout in {
    # judging.runner: a judge verdict of the paraphrase grid (and its repeats), and of the rubric
    # study's conditions on the grid (its own kind, ``rubric``, retired with its engine)
    "judge": CallKind({}, ("messages", "prompt", "labels", "sample_index")),
    # judging.predict: a candidate system's answer, free text
    "predict": CallKind({"stage": "predict"}, ("messages", "prompt")),
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


def cache_location(paths: Any) -> str | Path:
    """Where a run's cache lives: ``paths.cache_url`` if set, else ``<paths.cache_dir>/calls.sqlite``."""
    return paths.get("cache_url") or Path(paths.get("cache_dir")) / "calls.sqlite"


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
        if not self.readonly:
            self._store_pending()

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
        try:
            self._store.put_many([(k, v, req, now, response_sha256(v)) for k, v, req in stored])
        except CacheWriteError as exc:  # a full disk, a lock held too long: keep the answers received
            kept = self._keep_pending(exc.rows)
            raise CacheError(
                f"{exc}; the {len(exc.rows)} answers of this batch "
                + (f"are kept in {kept} and stored by the next run (none is paid again)" if kept else
                   "could not be kept anywhere (every place is full): they are asked again on the next run")
            ) from None  # fmt: skip

    def _pending_dirs(self) -> list[Path]:
        """Where a batch the cache could not take waits: beside the cache, else in the temp dir."""
        import tempfile

        tag = hashlib.sha256(str(Path(self.location).absolute()).encode()).hexdigest()[:16]
        return [
            Path(f"{self.location}.pending"),
            Path(tempfile.gettempdir()) / f"promptlottery-pending-{tag}",
        ]

    def _keep_pending(self, rows: list) -> Path | None:
        import os
        import uuid

        if not isinstance(self._store, SqliteStore):
            return None
        for d in self._pending_dirs():
            path = d / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
            tmp = path.with_suffix(".part")
            try:
                d.mkdir(parents=True, exist_ok=True)
                with open(tmp, "w", encoding="utf-8") as f:
                    f.write("".join(json.dumps(list(r)) + "\n" for r in rows))
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)  # whole or not at all
                return path
            except OSError:
                tmp.unlink(missing_ok=True)
        return None

    def _store_pending(self) -> None:
        """The batches kept by an earlier run that could not write (:meth:`_keep_pending`), stored now."""
        for d in self._pending_dirs() if isinstance(self._store, SqliteStore) else []:
            for f in sorted(d.glob("*.jsonl")) if d.is_dir() and not d.is_symlink() else []:
                try:
                    rows = [
                        tuple(json.loads(line)) for line in f.read_text(encoding="utf-8").splitlines() if line
                    ]
                    self._store.put_many(rows)
                except CacheWriteError:
                    return  # still no room: they wait for the next run
                except (OSError, ValueError, TypeError) as exc:
                    logger.warning(
                        "call cache %s: kept answers in %s are unreadable (%s): left there",
                        self.location,
                        f,
                        exc,
                    )
                    continue
                f.unlink()
                logger.info(
                    "call cache %s: stored %d answers kept by an earlier run (%s)",
                    self.location,
                    len(rows),
                    f,
                )
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()

    def __len__(self) -> int:
        return self._store.count()

    def close(self) -> None:
        self._write_manifest()
        self._manifest = False  # closed: a second close writes nothing
        self._store.close()


def open_cache(paths: Any, *, timeout_s: float | None = None) -> CallCache:
    """The call cache of a run's ``paths`` config: where it lives (:func:`cache_location`) and what a
    checksum mismatch does (``paths.cache_on_mismatch``, default ``error``) and how long it waits for
    another writer's lock (``paths.cache_timeout_s``, default 60 s)."""
    if timeout_s is None:
        timeout_s = float(paths.get("cache_timeout_s") or 60.0)
    return CallCache(
        cache_location(paths), timeout_s=timeout_s, on_mismatch=paths.get("cache_on_mismatch") or "error"
    )

"""Where the call cache's answers live: the store protocol, the SQLite store (the default: one file in
WAL mode that many processes on one machine write at once) and the choice between it and the
PostgreSQL store (:mod:`promptlottery.calls.cache_postgres`) by the location's form.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Protocol

from promptlottery.errors import UserError

logger = logging.getLogger(__name__)


class CacheError(UserError, RuntimeError):
    """The call cache cannot be used (unreadable file, read-only dir with calls to add)."""


class CacheWriteError(CacheError):
    """A batch of answers could not be written (a full disk, a lock held too long, an I/O error);
    ``rows`` are the answers, for :class:`~promptlottery.calls.cache.CallCache` to keep elsewhere."""

    def __init__(self, message: str, rows: list | None = None):
        super().__init__(message)
        self.rows = rows or []


#: the tables a SQLite file of ours holds (``sqlite_*`` are SQLite's own)
OWN_TABLES = {
    "calls": {"key", "response", "request", "created", "response_sha256"},
    "meta": {"name", "value"},
}


def sqlite_problem(exc: sqlite3.Error, path: Path, timeout_s: float) -> str:
    """What an SQLite error on the cache means, and what to do, in one line."""
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return (
            f"call cache {path} is locked: another process has held a write on it for over {timeout_s:g} s. "
            "The file is not damaged: do not move it away (its answers would be lost); wait for the other "
            "job to finish (or stop it) and re-run"
        )
    if "full" in text or "no space" in text:
        return f"the disk under the call cache {path} is full ({exc}); free space there and re-run"
    if "readonly" in text or "read-only" in text:
        return f"call cache {path} cannot be written ({exc}); make it writable or set paths.cache_dir"
    if "disk i/o" in text:
        return (
            f"call cache {path}: the disk failed a read or write ({exc}); check the disk (full?) and re-run"
        )
    return ""


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
        self.timeout_s = timeout_s
        for f in (
            self.path,
            *(self.path.with_name(self.path.name + s) for s in ("-wal", "-shm", "-journal")),
        ):
            if f.is_symlink():  # another program's database behind it would be changed (WAL, tables)
                raise CacheError(
                    f"call cache {f} is a symbolic link: the cache is never opened through a link; move the "
                    "link away or set paths.cache_dir to a directory of its own"
                )
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
                    self._refuse_foreign()
                    self._has_checksums = self._has_table and "response_sha256" in self._columns()
                    self.file_id = self._read_file_id()
                return
            self._conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
            self._refuse_foreign()  # before anything changes the file (its journal mode, its tables)
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
            self._close_quietly()
            raise CacheError(
                sqlite_problem(exc, self.path, timeout_s)
                or f"call cache {self.path} is not a usable SQLite database ({exc}); move it away or set "
                "paths.cache_dir to another directory"
            ) from None

    def _close_quietly(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _refuse_foreign(self) -> None:
        """A SQLite file that holds tables (or columns) the cache never writes is another program's:
        refused, and left exactly as it was."""
        rows = self._conn.execute(
            "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
        ).fetchall()
        names = {n for t, n in rows if t in ("table", "view")}
        foreign = sorted(names - set(OWN_TABLES))
        for t in sorted(names & set(OWN_TABLES)):
            cols = {row[1] for row in self._conn.execute(f"PRAGMA table_info({t})")}
            if not cols <= OWN_TABLES[t] or not {"key", "response", "name"} & cols:
                foreign.append(f"{t}({', '.join(sorted(cols))})")
        if foreign or any(t not in ("table", "view", "index") for t, _ in rows):
            self._close_quietly()
            raise CacheError(
                f"call cache {self.path} is a SQLite database of another program (it holds {', '.join(foreign) or 'triggers'}); "
                "it was left as it was: set paths.cache_dir to a directory of the cache's own"
            )

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
        """One transaction per batch: all of it lands or none of it; a full disk, a lock held past the
        timeout or an I/O error is a :class:`CacheWriteError` that carries the rows."""
        try:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany(
                    "INSERT OR REPLACE INTO calls (key, response, request, created, response_sha256)"
                    " VALUES (?, ?, ?, ?, ?)",
                    rows,
                )
        except sqlite3.OperationalError as exc:
            raise CacheWriteError(
                sqlite_problem(exc, self.path, self.timeout_s) or f"call cache {self.path}: {exc}", rows
            ) from None

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

"""The call cache on a PostgreSQL server (``paths.cache_url=postgresql://user@host:port/db``).

For jobs on many nodes, where a SQLite file on a shared filesystem is unsafe. Same table as the
SQLite store; a batch is one transaction, and two jobs writing the same key both write the same
answer (the key holds everything that changes it), so the later write simply wins. Keep the
password out of the URL (it is part of the run's recorded config): libpq reads ``PGPASSWORD`` or
``~/.pgpass``. Needs the ``postgres`` extra (psycopg 3, which SQLAlchemy, hence Optuna, also uses
for ``postgresql://`` URLs). Answers carry their checksum (``response_sha256``) as in the SQLite
store; a table from before checksums gains the column on first connect and its rows are legacy
(:mod:`promptlottery.calls.cache`).
"""

from __future__ import annotations

_CREATE = (
    "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, response TEXT NOT NULL,"
    " request TEXT, created DOUBLE PRECISION NOT NULL, response_sha256 TEXT)"
)
_MIGRATE = "ALTER TABLE calls ADD COLUMN IF NOT EXISTS response_sha256 TEXT"
_UPSERT = (
    "INSERT INTO calls (key, response, request, created, response_sha256) VALUES (%s, %s, %s, %s, %s)"
    " ON CONFLICT (key) DO UPDATE SET response = EXCLUDED.response, request = EXCLUDED.request,"
    " created = EXCLUDED.created, response_sha256 = EXCLUDED.response_sha256"
)


class PostgresStore:
    def __init__(self, url: str, *, timeout_s: float = 60.0):
        try:
            import psycopg
        except ImportError as e:
            raise ImportError(
                "paths.cache_url is a PostgreSQL URL but psycopg is missing: pip install -e '.[postgres]'"
            ) from e
        self._conn = psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout_s)))
        with self._conn.transaction():
            # jobs starting together race on CREATE TABLE IF NOT EXISTS: one at a time
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtext('promptlottery.calls'))")
            self._conn.execute(_CREATE)
            self._conn.execute(_MIGRATE)

    def get_many(self, keys: list[str]) -> dict[str, tuple[str, str | None]]:
        found: dict[str, tuple[str, str | None]] = {}
        for start in range(0, len(keys), 1000):
            cur = self._conn.execute(
                "SELECT key, response, response_sha256 FROM calls WHERE key = ANY(%s)",
                (keys[start : start + 1000],),
            )
            found.update((k, (v, c)) for k, v, c in cur.fetchall())
        return found

    def put_many(self, rows: list[tuple[str, str, str | None, float, str]]) -> None:
        with self._conn.transaction(), self._conn.cursor() as cur:  # one transaction per batch
            cur.executemany(_UPSERT, rows)

    def set_checksums(self, rows: list[tuple[str, str]]) -> None:
        with self._conn.transaction(), self._conn.cursor() as cur:
            cur.executemany(
                "UPDATE calls SET response_sha256 = %s WHERE key = %s AND response_sha256 IS NULL",
                [(c, k) for k, c in rows],
            )

    def delete_many(self, keys: list[str]) -> None:
        with self._conn.transaction():
            self._conn.execute("DELETE FROM calls WHERE key = ANY(%s)", (keys,))

    def count(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        self._conn.close()

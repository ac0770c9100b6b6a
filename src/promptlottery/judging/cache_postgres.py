"""The call cache on a PostgreSQL server (``paths.cache_url=postgresql://user@host:port/db``).

For jobs on many nodes, where a SQLite file on a shared filesystem is unsafe. Same table as the
SQLite store; a batch is one transaction, and two jobs writing the same key both write the same
answer (the key holds everything that changes it), so the later write simply wins. Keep the
password out of the URL (it is part of the run's recorded config): libpq reads ``PGPASSWORD`` or
``~/.pgpass``. Needs the ``postgres`` extra (psycopg2).
"""

from __future__ import annotations

_CREATE = (
    "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, response TEXT NOT NULL,"
    " request TEXT, created DOUBLE PRECISION NOT NULL)"
)
_UPSERT = (
    "INSERT INTO calls (key, response, request, created) VALUES %s ON CONFLICT (key) DO UPDATE"
    " SET response = EXCLUDED.response, request = EXCLUDED.request, created = EXCLUDED.created"
)


class PostgresStore:
    def __init__(self, url: str, *, timeout_s: float = 60.0):
        try:
            import psycopg2
        except ImportError as e:
            raise ImportError(
                "paths.cache_url is a PostgreSQL URL but psycopg2 is missing: pip install -e '.[postgres]'"
            ) from e
        self._conn = psycopg2.connect(url, connect_timeout=max(1, int(timeout_s)))
        with self._conn, self._conn.cursor() as cur:
            # jobs starting together race on CREATE TABLE IF NOT EXISTS: one at a time
            cur.execute("SELECT pg_advisory_xact_lock(hashtext('promptlottery.calls'))")
            cur.execute(_CREATE)

    def get_many(self, keys: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        with self._conn, self._conn.cursor() as cur:
            for start in range(0, len(keys), 1000):
                cur.execute("SELECT key, response FROM calls WHERE key = ANY(%s)", (keys[start : start + 1000],))
                found.update(cur.fetchall())
        return found

    def put_many(self, rows: list[tuple[str, str, str | None, float]]) -> None:
        from psycopg2.extras import execute_values

        # one key twice in a batch would make ON CONFLICT fail; the last row wins, as in SQLite
        rows = list({r[0]: r for r in rows}.values())
        with self._conn, self._conn.cursor() as cur:  # one transaction per batch
            execute_values(cur, _UPSERT, rows)

    def count(self) -> int:
        with self._conn, self._conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM calls")
            return cur.fetchone()[0]

    def close(self) -> None:
        self._conn.close()

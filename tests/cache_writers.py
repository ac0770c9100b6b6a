"""Several processes writing one call cache at once (stand-ins for jobs on many nodes).

Used by tests/test_cache_stores.py (the SQLite file) and tests/test_cluster_cache.py (PostgreSQL).
Every writer puts batches whose keys overlap the other writers' (the same condition judged by
two jobs) plus keys of its own; the answer under a key depends only on the key, as in real use.
"""

from __future__ import annotations

import multiprocessing as mp

from promptlottery.backends.base import JudgeResponse

N_SHARED = 60  # keys every writer writes
N_OWN = 40  # keys only one writer writes
BATCH = 10


def response(key: str) -> JudgeResponse:
    return JudgeResponse(
        raw_text=key,
        label_probs={"1": 0.25, "2": 0.75},
        prompt_tokens=len(key),
        completion_tokens=1,
        latency_s=0.0,
    )


def keys_of(writer: int) -> list[str]:
    return [f"shared-{i}" for i in range(N_SHARED)] + [f"own-{writer}-{i}" for i in range(N_OWN)]


def _write(location: str, writer: int) -> None:
    from promptlottery.calls.cache import CallCache

    cache = CallCache(location)
    keys = keys_of(writer)
    keys = keys[writer % BATCH :] + keys[: writer % BATCH]  # writers start at different offsets
    for start in range(0, len(keys), BATCH):
        cache.put_many([(k, response(k), {"writer": writer}) for k in keys[start : start + BATCH]])
        cache.get_many(keys[: start + BATCH])  # reads interleaved with the others' writes
    cache.close()


def write_concurrently(location: str, n_writers: int) -> list[int]:
    """Start ``n_writers`` processes at once; return their exit codes."""
    ctx = mp.get_context("spawn")  # fresh interpreters: no connection inherited across fork
    procs = [ctx.Process(target=_write, args=(location, w)) for w in range(n_writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    return [p.exitcode for p in procs]


def expected_keys(n_writers: int) -> set[str]:
    return {k for w in range(n_writers) for k in keys_of(w)}

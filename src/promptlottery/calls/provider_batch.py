"""The call loop's driver for provider batch APIs (a backend with ``batch_api``:
:mod:`promptlottery.backends.provider_batch`).

The uncached calls are split into batches at the provider's limits (requests and bytes). Before a
batch is submitted its requests' keys and a tag are written to the journal (``<cache>.batches.json``
beside the call cache), and its id right after the provider accepted it; a run stopped and restarted
while batches are in flight finds them in the journal and polls them again instead of submitting
(nothing is submitted twice, nothing paid for is lost). A batch whose id was never written (stopped
between the two writes) is looked up by its tag where the provider keeps one. The run polls with a
progress bar (requests done, ETA); an ended batch's answers are stored in the call cache, its
failed requests are failures, and what it left unanswered (expired, cancelled, 429 / 5xx) goes
out again in a new batch, up to ``max_resubmits`` times.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from promptlottery.backends.base import BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.backends.provider_batch import RESUBMIT

logger = logging.getLogger(__name__)


class Journal:
    """``{tag: {"backend": ..., "keys": [...], "id": batch id or None, "collected": bool}}``, written
    atomically after every change."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.entries: dict[str, dict[str, Any]] = json.loads(path.read_text())
        except (OSError, ValueError):
            self.entries = {}

    def save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.entries, indent=1))
        os.replace(tmp, self.path)


def journal_path(cache) -> Path:
    loc = cache.location
    if not isinstance(loc, Path | str) or "://" in str(loc):
        raise BackendError(
            "provider batch APIs need a SQLite call cache (paths.cache_dir), not a server cache"
        )
    return Path(loc).with_name(Path(loc).name + ".batches.json")


def split(lines: list[dict[str, Any]], max_requests: int, max_bytes: int) -> list[list[dict[str, Any]]]:
    """``lines`` in consecutive chunks of at most ``max_requests`` lines and ``max_bytes`` of JSONL."""
    chunks: list[list[dict[str, Any]]] = [[]]
    size = 0
    for line in lines:
        n = len(json.dumps(line)) + 1
        if chunks[-1] and (len(chunks[-1]) >= max_requests or size + n > max_bytes):
            chunks.append([])
            size = 0
        chunks[-1].append(line)
        size += n
    return [c for c in chunks if c]


def run_provider_batches(
    misses: list[JudgeRequest], backend, cache, decoding: Decoding, answers: dict[str, JudgeResponse],
    *, desc: str, max_resubmits: int = 3,
) -> list[str]:  # fmt: skip
    """Answer ``misses`` through the backend's batch API; the failures' messages."""
    journal = Journal(journal_path(cache))
    who = json.dumps(backend.identity(), sort_keys=True)
    by_key = {r.key: r for r in misses}
    failures: list[str] = []
    run = backend._client.run
    # batches of an earlier run still to collect: polled, not submitted again
    pending = [
        tag for tag, e in journal.entries.items()
        if e["backend"] == who and not e["collected"] and set(e["keys"]) & by_key.keys()
    ]  # fmt: skip
    in_flight = {k for tag in pending for k in journal.entries[tag]["keys"]}
    todo = [r for r in misses if r.key not in in_flight]
    bar = tqdm(total=len(misses), desc=desc, unit="call", disable=not misses)
    try:
        for round_ in range(max_resubmits + 1):
            pending += _submit(todo, backend, decoding, journal, who, run)
            todo = []
            resubmit = _collect(
                pending, backend, cache, decoding, journal, by_key, answers, failures, bar, run
            )
            pending = []
            if not resubmit:
                break
            if round_ == max_resubmits:
                failures += [
                    f"{desc}: request {k[:12]} left unanswered by {max_resubmits + 1} batches"
                    for k in resubmit
                ]
                break
            logger.warning("resubmitting requests=%d (expired, cancelled or transient errors)", len(resubmit))
            todo = [by_key[k] for k in resubmit]
            bar.update(-len(todo))
    finally:
        bar.close()
    return failures


def _submit(todo, backend, decoding, journal: Journal, who: str, run) -> list[str]:
    """Submit ``todo`` in batches at the provider's limits; each recorded before and after; the tags."""
    lines = [backend.batch_line(r, decoding) for r in todo]
    tags = []
    for chunk in split(lines, backend.max_batch_requests, backend.max_batch_bytes):
        tag = f"pl-{uuid.uuid4().hex[:16]}"
        journal.entries[tag] = {"backend": who, "keys": [ln["custom_id"] for ln in chunk], "id": None,
                                "collected": False, "submitted": time.time()}  # fmt: skip
        journal.save()  # the intent first: a stop right after the provider accepts finds it by its tag
        journal.entries[tag]["id"] = run(backend.submit_batch(chunk, tag))
        journal.save()
        logger.info("batch submitted tag=%s id=%s requests=%d", tag, journal.entries[tag]["id"], len(chunk))
        tags.append(tag)
    return tags


def _collect(tags, backend, cache, decoding, journal, by_key, answers, failures, bar, run) -> list[str]:
    """Poll ``tags`` until each ended; store its answers; the keys to send again."""
    resubmit: list[str] = []
    waiting = list(tags)
    done_of: dict[str, int] = {}
    while waiting:
        for tag in list(waiting):
            e = journal.entries[tag]
            if e["id"] is None:  # stopped between submit and record: found by its tag, else sent again
                e["id"] = run(backend.find_batch(tag))
                if e["id"] is None:
                    e["collected"] = True
                    journal.save()
                    waiting.remove(tag)
                    resubmit += [k for k in e["keys"] if k in by_key]
                    continue
                journal.save()
            status = run(backend.batch_status(e["id"]))
            bar.update(status.done - done_of.get(tag, 0))
            done_of[tag] = status.done
            bar.set_postfix_str(f"{tag}: {status.state}")
            if not status.ended:
                continue
            requests = {k: by_key[k] for k in e["keys"] if k in by_key}
            results = run(backend.batch_results(e["id"], requests, decoding))
            fresh = [(k, a, {"messages": requests[k].messages, "prompt": requests[k].prompt})
                     for k, a in results.items() if isinstance(a, JudgeResponse)]  # fmt: skip
            cache.put_many(fresh)
            answers.update({k: a for k, a, _ in fresh})
            failures += [str(a) for a in results.values() if isinstance(a, BackendError)]
            resubmit += [k for k, a in results.items() if a == RESUBMIT]
            bar.update(len(fresh) + sum(isinstance(a, BackendError) for a in results.values()) - done_of[tag])
            e["collected"] = True
            journal.save()
            waiting.remove(tag)
            logger.info(
                "batch collected tag=%s id=%s state=%s answers=%d", tag, e["id"], status.state, len(fresh)
            )
        if waiting:
            time.sleep(backend.poll_s)
    return resubmit

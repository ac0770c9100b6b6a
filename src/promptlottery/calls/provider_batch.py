"""The call loop's driver for provider batch APIs (a backend with ``batch_api``:
:mod:`promptlottery.backends.provider_batch`).

The uncached calls are split into batches at the provider's limits (requests and bytes). Before a
batch is submitted its requests' keys, a tag and the time are written to the journal
(``<cache>.batches.json`` beside the call cache), and its id right after the provider accepted it; a
run stopped and restarted while batches are in flight finds them in the journal and polls them again
instead of submitting (nothing is submitted twice, nothing paid for is lost). A batch whose id was
never written (stopped between the provider's answer and the journal's write) is looked up by its tag
where the provider keeps one (OpenAI's metadata); where it keeps none (Anthropic), the provider's
batches of the same size created around the journal's time are its candidates, and the one whose
results answer the entry's keys is adopted once it ended (a candidate that answers other keys is
someone else's and left alone; no candidate: the keys are sent again). The run polls with a progress
bar (requests done, ETA); an ended batch's answers are stored in the call cache, its failed requests
are failures, and what it left unanswered (expired, cancelled, 429 / 5xx) goes out again in a new
batch, up to ``max_resubmits`` times. Under a spend cap (:class:`~promptlottery.calls.spend.SpendCap`)
each batch file is priced before it is submitted (the dry run's count: prompt tokens plus
``max_new_tokens`` a call) against the answers' usage so far plus the batches in flight; one that would
cross the cap is not submitted, nor are the files after it: the batches in flight are collected (every
answer kept) and the run stops with :class:`~promptlottery.calls.loop.SpendCapReached`.
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
    """``{tag: {"backend": ..., "keys": [...], "id": batch id or None, "collected": bool, "submitted":
    unix time, "estimate": [tokens, USD] or None, "candidates": [batch ids] (an unrecorded id's)}}``,
    written atomically after every change."""

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
    *, desc: str, max_resubmits: int = 3, spend=None,
) -> list[str]:  # fmt: skip
    """Answer ``misses`` through the backend's batch API; the failures' messages. ``spend``: the run's
    cap (checked before each batch file; the answers' usage added as they are collected)."""
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
            pending += _submit(todo, backend, decoding, journal, who, run, spend, pending)
            todo = []
            resubmit = _collect(
                pending, backend, cache, decoding, journal, by_key, answers, failures, bar, run, spend
            )
            pending = []
            if not resubmit or (spend is not None and spend.withheld):
                break  # done, or the cap: nothing more is sent
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


def _submit(todo, backend, decoding, journal: Journal, who: str, run, spend, pending) -> list[str]:
    """Submit ``todo`` in batches at the provider's limits; each recorded before and after; the tags.
    Under a cap, a file whose dry-run count, with the batches in flight (``pending``), would cross it
    is not submitted, nor are the files after it (:meth:`SpendCap.withhold`)."""
    by_key = {r.key: r for r in todo}
    lines = [backend.batch_line(r, decoding) for r in todo]
    chunks = split(lines, backend.max_batch_requests, backend.max_batch_bytes)
    flying = [journal.entries[t].get("estimate") or (0, 0.0) for t in pending]
    tokens, cost = sum(int(e[0]) for e in flying), sum(float(e[1]) for e in flying)
    tags = []
    for i, chunk in enumerate(chunks):
        estimate = None
        if spend is not None:
            prompt = sum(backend.count_tokens(by_key[ln["custom_id"]]) for ln in chunk)
            estimate = spend.estimate(
                calls=len(chunk), prompt_tokens=prompt, max_new_tokens=decoding.max_new_tokens
            )
            if not spend.fits(tokens + estimate[0], cost + estimate[1]):
                left = sum(len(c) for c in chunks[i:])
                spend.withhold(
                    left,
                    f"the next batch file ({len(chunk)} calls) is estimated at {estimate[0]} tokens / "
                    f"${estimate[1]:.4f} (the dry run's count), more than is left with "
                    f"{len(pending) + len(tags)} batch(es) in flight",
                )
                logger.warning("spend cap: batch files not submitted=%d calls=%d", len(chunks) - i, left)
                break
            tokens, cost = tokens + estimate[0], cost + estimate[1]
        tag = f"pl-{uuid.uuid4().hex[:16]}"
        journal.entries[tag] = {"backend": who, "keys": [ln["custom_id"] for ln in chunk], "id": None,
                                "collected": False, "submitted": time.time(),
                                "estimate": list(estimate) if estimate else None}  # fmt: skip
        journal.save()  # the intent first: a stop right after the provider accepts finds it again
        journal.entries[tag]["id"] = run(backend.submit_batch(chunk, tag))
        journal.save()
        logger.info("batch submitted tag=%s id=%s requests=%d", tag, journal.entries[tag]["id"], len(chunk))
        tags.append(tag)
    return tags


def _find(tag: str, e: dict[str, Any], backend, journal: Journal, decoding, run) -> str:
    """An entry whose id was never recorded: ``"found"`` (``e["id"]`` set), ``"waiting"`` (candidates
    not ended yet) or ``"lost"`` (the provider has no batch of it: its keys are sent again)."""
    if "candidates" not in e:
        e["id"] = run(backend.find_batch(tag))
        if e["id"] is not None:
            journal.save()
            return "found"
        known = {x.get("id") for x in journal.entries.values()} - {None}
        e["candidates"] = [c for c in run(backend.batch_candidates(len(e["keys"]), e.get("submitted")))
                           if c not in known]  # fmt: skip
        journal.save()
        logger.warning("batch tag=%s: id never recorded; candidates=%s", tag, e["candidates"])
    keys = set(e["keys"])
    for cid in list(e["candidates"]):
        if not run(backend.batch_status(cid)).ended:
            continue
        if keys & run(backend.result_ids(cid)):  # its results answer this entry's keys: ours
            e["id"] = cid
            del e["candidates"]
            journal.save()
            logger.info("batch tag=%s: adopted id=%s (its results answer the entry's keys)", tag, cid)
            return "found"
        e["candidates"].remove(cid)  # someone else's batch of the same size
        journal.save()
    return "waiting" if e["candidates"] else "lost"


def _collect(
    tags, backend, cache, decoding, journal, by_key, answers, failures, bar, run, spend
) -> list[str]:
    """Poll ``tags`` until each ended; store its answers; the keys to send again."""
    resubmit: list[str] = []
    waiting = list(tags)
    done_of: dict[str, int] = {}
    while waiting:
        for tag in list(waiting):
            e = journal.entries[tag]
            if e["id"] is None:  # stopped between submit and record: found again, else sent again
                found = _find(tag, e, backend, journal, decoding, run)
                if found == "waiting":
                    continue
                if found == "lost":
                    e["collected"] = True
                    journal.save()
                    waiting.remove(tag)
                    resubmit += [k for k in e["keys"] if k in by_key]
                    continue
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
            for _, a, _ in fresh if spend is not None else ():  # paid: the running total
                spend.add(a)
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

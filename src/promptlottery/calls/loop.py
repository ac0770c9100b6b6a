"""Answering judge requests: every call from the cache where possible, misses in fixed batches, or,
for a backend whose calls are independent (``Backend.streams``: an HTTP server), through a sliding
window of calls in flight (:mod:`promptlottery.calls.stream`, the window's size adaptive:
:mod:`promptlottery.calls.window`).

Used by the grid runner (:mod:`promptlottery.judging.runner`) and by stages that make their own
calls (the gate's LLM baseline, the rubric study, prediction generation).
"""

from __future__ import annotations

import json
import logging
import random  # noqa: F401 - the retry wait's jitter (calls.stream.retry_delay) draws from this module
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from promptlottery.backends.base import Backend, BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.calls.cache import CacheError, CallCache
from promptlottery.calls.spend import SpendCap
from promptlottery.calls.stream import MAX_RETRY_AFTER_S, retry_delay, stream_calls

__all__ = [
    "MAX_RETRY_AFTER_S",
    "BatchPlan",
    "CallStats",
    "JudgingError",
    "SpendCapReached",
    "retry_delay",
    "run_calls",
]
from promptlottery.errors import UserError

logger = logging.getLogger(__name__)


@dataclass
class CallStats:
    total: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    parse_failures: int = 0
    #: requests never sent: their prompt does not fit the backend's context (judging.runner.over_long)
    over_long: int = 0
    errors: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """``total``, ``cache_hits`` and ``cache_misses`` (and ``over_long`` where any request was too
        long): the ``calls`` record of results.json."""
        out = {"total": self.total, "cache_hits": self.cache_hits, "cache_misses": self.cache_misses}
        return out | ({"over_long": self.over_long} if self.over_long else {})


@dataclass(frozen=True)
class BatchPlan:
    """How :func:`run_calls` forms its batches.

    ``order="length"`` (the default plan): requests sorted by prompt length, so a batch pads little;
    ``order="shuffled"``: a permutation of that order drawn from ``seed``, so each request meets other
    neighbours. ``size`` is the number of requests per batch (``None``: the backend's
    ``max_concurrency``). A backend that computes a request differently with other neighbours (padding,
    a shared prefix run once, another kernel for another batch shape) gives slightly different numbers
    under another plan: the nondeterminism of batched GPU serving, made deterministic and named
    (``repeat_source=batch``).
    """

    order: str = "length"
    seed: int = 0
    size: int | None = None

    def __post_init__(self):
        if self.order not in ("length", "shuffled"):
            raise ValueError(f"BatchPlan.order must be 'length' or 'shuffled', got {self.order!r}")
        if self.size is not None and self.size < 1:
            raise ValueError(f"BatchPlan.size must be >= 1, got {self.size}")

    def describe(self) -> str:
        size = "backend" if self.size is None else str(self.size)
        return (
            f"length order, batch {size}"
            if self.order == "length"
            else f"shuffled seed {self.seed}, batch {size}"
        )


class JudgingError(UserError, RuntimeError):
    """The runner stopped; every judgment computed before the failure is in the cache."""


class SpendCapReached(JudgingError):
    """The run reached its spend cap (:mod:`promptlottery.calls.spend`); every answer is cached."""


def _call(
    backend: Backend, batch: list[JudgeRequest], decoding: Decoding, max_retries: int, backoff_s: float
):
    """The one retry layer: ``backend.generate(batch)``, retried up to ``max_retries`` times while
    ``backend.is_retryable`` (the predicate, as inspect_ai's ``ModelAPI.should_retry``) calls the
    error transient; a permanent error is raised at once. Backends do not retry inside."""
    for attempt in range(max_retries + 1):
        try:
            return backend.generate(batch, decoding)
        except Exception as exc:  # noqa: BLE001 - the predicate decides
            if attempt < max_retries and backend.is_retryable(exc):
                delay = retry_delay(attempt, backoff_s, exc)
                logger.warning("retrying attempt=%d delay_s=%.1f error=%s", attempt + 1, delay, exc)
                time.sleep(delay)
                continue
            raise


def run_calls(
    requests: list[JudgeRequest],
    backend: Backend,
    cache: CallCache,
    decoding: Decoding,
    *,
    stats: CallStats,
    max_retries: int = 4,
    backoff_s: float = 1.0,
    desc: str = "judging",
    max_consecutive_failures: int = 3,
    plan: BatchPlan | None = None,
    spend: SpendCap | None = None,
) -> dict[str, JudgeResponse]:
    """Answer every request, from the cache where possible.

    Batches are planned from the whole request list (sorted by length, fixed size), so a batch is
    always computed with the same neighbours: a resumed run reproduces an uninterrupted one
    exactly. A batch with any uncached request is computed whole and its misses written at once.
    ``plan`` changes the order and the batch size (:class:`BatchPlan`; default: length order, the
    backend's ``max_concurrency``). A batch that fails with an error the backend calls transient is
    retried up to ``max_retries`` times after ``backoff_s * 2**attempt`` seconds (:func:`_call`).
    A backend that ``streams`` (its answers do not depend on neighbours) gets the misses alone, in
    the same order, through a sliding window (:func:`~promptlottery.calls.stream.stream_calls`). ``spend``: the run's cap
    (:class:`~promptlottery.calls.spend.SpendCap`); at the cap the loop stops with
    :class:`SpendCapReached`, every answer kept.
    """
    plan = plan or BatchPlan()
    unique = list({r.key: r for r in requests}.values())
    cached = cache.get_many([r.key for r in unique])
    stats.total += len(requests)
    order = sorted(unique, key=lambda r: (len(r.prompt or json.dumps(r.messages)), r.key))
    if plan.order == "shuffled":
        perm = np.random.default_rng(plan.seed).permutation(len(order))
        order = [order[i] for i in perm]
    size = max(1, int(plan.size or backend.max_concurrency))
    batches = [order[i : i + size] for i in range(0, len(order), size)]
    todo = [b for b in batches if any(r.key not in cached for r in b)]
    answers = dict(cached)
    misses = sum(1 for r in unique if r.key not in cached)
    if todo and cache.readonly:  # fail before computing answers it cannot keep
        raise CacheError(
            f"call cache dir {Path(cache.location).parent} is read-only and {misses} calls are not cached; make it "
            "writable or set paths.cache_dir to a writable directory"
        )
    spend = spend if spend is not None and spend.active else None
    if spend is not None and spend.reached and todo:
        raise _cap_reached(desc, spend, 0)
    try:
        failures, kind = _answer(todo, order, backend, cache, decoding, answers, cached, max_retries,
                                 backoff_s, desc, max_consecutive_failures, spend)  # fmt: skip
    finally:
        if spend is not None:
            spend.save()
    if spend is not None and spend.reached and len(answers) < len(unique):
        raise _cap_reached(desc, spend, len(answers) - len(cached))
    if failures:
        stats.errors.extend(failures)
        raise JudgingError(
            f"{desc}: {len(failures)} {kind} failed, {len(answers) - len(cached)} new calls cached "
            f"(re-run to complete); first error: {failures[0]}"
        )
    stats.cache_misses += misses
    stats.cache_hits += len(requests) - misses
    return answers


def _answer(todo, order, backend, cache, decoding, answers, cached, max_retries, backoff_s, desc,
            max_consecutive_failures, spend) -> tuple[list[str], str]:  # fmt: skip
    """The misses answered by the window (a backend that ``streams``) or in batches; the failures."""
    if todo and getattr(backend, "batch_api", False):  # a duck-typed backend (no Backend base) has neither
        from promptlottery.calls.provider_batch import run_provider_batches

        misses = [r for r in order if r.key not in cached]
        failures = run_provider_batches(misses, backend, cache, decoding, answers, desc=desc, spend=spend)
        return failures, "call(s)"
    if todo and getattr(backend, "streams", False):
        failures = stream_calls(
            [r for r in order if r.key not in cached], backend, cache, decoding, answers,
            max_retries=max_retries, backoff_s=backoff_s, desc=desc,
            max_consecutive_failures=max_consecutive_failures, spend=spend,
        )  # fmt: skip
        kind = "call(s)"
    else:
        failures = _batches(todo, backend, cache, decoding, answers, cached, max_retries, backoff_s, desc,
                            max_consecutive_failures, spend)  # fmt: skip
        kind = "batch(es)"
    return failures, kind


def _cap_reached(desc: str, spend: SpendCap, new: int) -> SpendCapReached:
    return SpendCapReached(
        f"{desc}: spend cap reached ({spend.describe()}) after {spend.calls} paid calls; {new} new answers "
        "of this step are cached, none lost: raise max_cost_usd / max_tokens and re-run the same command to "
        "resume (cached calls are not paid again)"
        + (f"; the spend so far is in {spend.ledger}" if spend.ledger else "")
    )


def _batches(
    todo,
    backend,
    cache,
    decoding,
    answers,
    cached,
    max_retries,
    backoff_s,
    desc,
    max_consecutive_failures,
    spend,
) -> list[str]:
    """The fixed batches of :func:`run_calls`; the failures' messages."""
    failures: list[str] = []
    consecutive = 0
    for batch in tqdm(todo, desc=desc, unit="batch", disable=not todo):
        if spend is not None and spend.reached:
            break
        try:
            responses = _call(backend, batch, decoding, max_retries, backoff_s)
        except BackendError as exc:
            # keep going: one refused request must not cost the rest of the grid; but a backend
            # that fails batch after batch (server down) stops the run early
            failures.append(str(exc))
            consecutive += 1
            if consecutive >= max_consecutive_failures:
                break
            continue
        consecutive = 0
        fresh = [
            (r.key, resp, {"messages": r.messages, "prompt": r.prompt})
            for r, resp in zip(batch, responses)
            if r.key not in cached
        ]
        cache.put_many(fresh)
        answers.update({k: resp for k, resp, _ in fresh})
        for _, resp, _ in fresh if spend is not None else ():
            spend.add(resp)
    return failures

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
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from promptlottery.backends.base import Backend, BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.calls.cache import CacheError, CallCache
from promptlottery.calls.spend import SpendCap
from promptlottery.calls.stream import MAX_RETRY_AFTER_S, retry_delay, stream_calls

__all__ = [
    "MAX_RETRY_AFTER_S",
    "BatchPlan",
    "common_prefix_chars",
    "prefix_batches",
    "request_text",
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
    #: the order the calls' batches were formed in (BatchPlan.order); recorded when not ``length``
    batch_order: str = "length"

    def counts(self) -> dict[str, Any]:
        """``total``, ``cache_hits`` and ``cache_misses`` (and ``over_long`` where any request was too
        long, ``batch_order`` where the batches were not formed by length): the ``calls`` record of
        results.json."""
        out = {"total": self.total, "cache_hits": self.cache_hits, "cache_misses": self.cache_misses}
        out |= {"over_long": self.over_long} if self.over_long else {}
        return out | ({"batch_order": self.batch_order} if self.batch_order != "length" else {})


@dataclass(frozen=True)
class BatchPlan:
    """How :func:`run_calls` forms its batches.

    ``order="length"`` (the default plan): requests sorted by prompt length, so a batch pads little;
    ``order="prefix"`` (the default of a backend that runs a batch's shared prompt prefix once,
    ``Backend.batch_order``): requests sorted by their text, so the answers to one source (SummEval's
    16 summaries of an article, a dialogue's 6 responses) sit together, and cut where a batch would cost
    more than two (:func:`prefix_batches`); ``order="shuffled"``: a permutation of the length order
    drawn from ``seed``, so each request meets other neighbours. ``size`` is the most requests per
    batch (``None``: the backend's ``max_concurrency``). A backend that computes a request differently with other neighbours (padding,
    a shared prefix run once, another kernel for another batch shape) gives slightly different numbers
    under another plan: the nondeterminism of batched GPU serving, made deterministic and named
    (``repeat_source=batch``).
    """

    order: str = "length"
    seed: int = 0
    size: int | None = None

    def __post_init__(self):
        if self.order not in ("length", "prefix", "shuffled"):
            raise ValueError(f"BatchPlan.order must be 'length', 'prefix' or 'shuffled', got {self.order!r}")
        if self.size is not None and self.size < 1:
            raise ValueError(f"BatchPlan.size must be >= 1, got {self.size}")

    def describe(self) -> str:
        size = "backend" if self.size is None else str(self.size)
        if self.order == "shuffled":
            return f"shuffled seed {self.seed}, batch {size}"
        return f"{self.order} order, batch {size}"


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

    Batches are planned from the whole request list (sorted by length, or by text for a backend
    whose ``batch_order`` is ``prefix``), so a batch is always computed with the same neighbours: a
    resumed run reproduces an uninterrupted one exactly. A batch with any uncached request is
    computed whole and its misses written at once. ``plan`` changes the order and the batch size
    (:class:`BatchPlan`; default: the backend's ``batch_order`` and ``max_concurrency``). A batch that fails with an error the backend calls transient is
    retried up to ``max_retries`` times after ``backoff_s * 2**attempt`` seconds (:func:`_call`).
    A backend that ``streams`` (its answers do not depend on neighbours) gets the misses alone, in
    the same order, through a sliding window (:func:`~promptlottery.calls.stream.stream_calls`). ``spend``: the run's cap
    (:class:`~promptlottery.calls.spend.SpendCap`); at the cap the loop stops with
    :class:`SpendCapReached`, every answer kept.
    """
    plan = plan or BatchPlan(order=getattr(backend, "batch_order", "length"))
    unique = list({r.key: r for r in requests}.values())
    cached = cache.get_many([r.key for r in unique])
    stats.total += len(requests)
    size = max(1, int(plan.size or backend.max_concurrency))
    stats.batch_order = plan.order
    if plan.order == "prefix":
        order = sorted(unique, key=lambda r: (request_text(r), r.key))
        batches = prefix_batches(order, size)
    else:
        order = sorted(unique, key=lambda r: (len(request_text(r)), r.key))
        if plan.order == "shuffled":
            perm = np.random.default_rng(plan.seed).permutation(len(order))
            order = [order[i] for i in perm]
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


def request_text(r: JudgeRequest) -> str:
    """The text a request is ordered by: its prompt, or its chat messages as JSON."""
    return r.prompt or json.dumps(r.messages)


#: what one more batch costs beyond its prompt characters (its decoding steps, the passes' fixed costs),
#: in prompt characters: two requests with nothing in common share a batch when padding them to one
#: length wastes less than this
BATCH_OVERHEAD_CHARS = 256


def prefix_batches(order: list[JudgeRequest], size: int, overhead: int = BATCH_OVERHEAD_CHARS) -> list[list]:
    """``order`` (sorted by text) cut into batches of at most ``size`` requests for a backend that runs
    a batch's common prompt prefix once and pads the rest (``TransformersBackend._prefill``).

    A batch costs ``shared + n * (longest - shared) + overhead`` prompt characters (``shared``: the
    prefix all its texts have in common, which for sorted texts is that of its first and last). The
    next request joins the batch when that costs no more than a batch of its own would: the 16 summaries
    of one article share a batch that computes the article once, where length order put each beside
    summaries of other articles and computed every article 16 times. A function of the whole sorted
    list, so a resumed run forms the same batches."""
    batches: list[list] = []
    texts = [request_text(r) for r in order]
    start, longest = 0, 0
    for i, text in enumerate(texts):
        if i > start:
            n = i - start
            joined_longest = max(longest, len(text))
            alone = _batch_cost(texts[start], texts[i - 1], n, longest, overhead) + len(text) + overhead
            joined = _batch_cost(texts[start], text, n + 1, joined_longest, overhead)
            if n < size and joined <= alone:
                longest = joined_longest
                continue
            batches.append(order[start:i])
        start, longest = i, len(text)
    if texts:
        batches.append(order[start:])
    return batches


def _batch_cost(first: str, last: str, n: int, longest: int, overhead: int) -> int:
    shared = common_prefix_chars(first, last) if n > 1 else 0
    return shared + n * (longest - shared) + overhead


def common_prefix_chars(a: str, b: str) -> int:
    """The number of leading characters ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    lo, hi = 0, n  # the longest k with a[:k] == b[:k], by bisection (whole-slice compares run in C)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


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

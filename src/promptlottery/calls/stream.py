"""The sliding window of calls in flight for a backend whose calls are independent (``Backend.streams``:
an HTTP server), and the retry wait of the one retry layer (:mod:`promptlottery.calls.loop`).

Up to ``window.size`` calls run on the backend's own event loop (:meth:`Backend.submit`); a finished
call starts the next one, so a slow answer holds one slot, not a batch. Each call is retried on its
own; answers are handed to the caller's thread in lists and written to the cache there.

The window is a set of worker coroutines, each sending its next request in the step that read its last
answer: one event loop thread serves every call, so at C calls in flight what it spends per call
between an answer and the next request adds up over the answers that arrive together (a server of
fixed delay D answers in waves of up to C): at C = 256 and D = 100 ms the window reaches what a bare
aiohttp client reaches on the same machine (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import queue
import random
import threading
import time

from tqdm.auto import tqdm

from promptlottery.backends.base import Backend, BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.calls.cache import CallCache
from promptlottery.calls.spend import SpendCap
from promptlottery.calls.window import Window

logger = logging.getLogger(__name__)

#: the longest wait before a retry that a server's ``Retry-After`` may ask for
MAX_RETRY_AFTER_S = 60.0


def retry_delay(attempt: int, backoff_s: float, exc: BaseException) -> float:
    """Seconds before retry ``attempt + 1``: ``backoff_s * 2**attempt`` times a jitter in [0.5, 1)
    (parallel jobs do not retry in step), at least the server's ``Retry-After`` (up to
    :data:`MAX_RETRY_AFTER_S`)."""
    delay = backoff_s * 2**attempt * (0.5 + random.random() / 2)
    after = exc.retry_after if isinstance(exc, BackendError) else None
    return max(delay, min(after, MAX_RETRY_AFTER_S)) if after else delay


#: the sliding window writes its answers to the cache in chunks of this many, or after this long
FLUSH_EVERY = 256
FLUSH_S = 1.0
#: after taking what arrived, this thread waits DRAIN_S before it takes more: one wake-up (and one
#: handover of the interpreter lock) for the answers of 20 ms, not one for each turn of the event loop
#: (at C = 256, D = 100 ms: 0.26 instead of 0.33 ms of client CPU a call, 3% more calls a second)
DRAIN_S = 0.02


def stream_calls(
    misses: list[JudgeRequest], backend: Backend, cache: CallCache, decoding: Decoding,
    answers: dict[str, JudgeResponse], *, max_retries: int, backoff_s: float, desc: str,
    max_consecutive_failures: int, spend: SpendCap | None, window: Window | None = None,
) -> list[str]:  # fmt: skip
    """Answer ``misses`` with up to ``window.size`` calls in flight on the backend's event loop, each
    retried on its own (:func:`_acall`); every answer is written to the cache (in chunks of
    :data:`FLUSH_EVERY` or every :data:`FLUSH_S`, taken every :data:`DRAIN_S`, from this thread: the
    cache is not shared with the loop's), and what arrived is written even when the run is interrupted. A call that fails for good
    is a failure (returned) and the others go on; :data:`max_consecutive_failures` in a row (server
    down), or the spend cap, stop sending: the calls in flight are awaited and kept."""
    window = window or Window(backend.max_concurrency)
    out: queue.Queue = queue.Queue()
    stop = threading.Event()
    fut = backend.submit(_window(backend, misses, decoding, window, out, stop, max_retries, backoff_s, spend))
    failures: list[str] = []
    consecutive = 0
    buffer: list[tuple[str, JudgeResponse, dict]] = []
    last = time.monotonic()
    bar = tqdm(total=len(misses), desc=desc, unit="call", disable=not misses)
    try:
        while True:
            try:
                got = out.get(timeout=FLUSH_S)
            except queue.Empty:
                got = []
            end = got is None
            got = got or []
            while not end:  # whatever else arrived: one wake-up of this thread for many answers
                try:
                    more = out.get_nowait()
                except queue.Empty:
                    break
                end = more is None
                got = got + (more or [])
            if end and not got:
                break
            for r, a in got:
                if isinstance(a, BackendError):
                    failures.append(str(a))
                    consecutive += 1
                    if consecutive >= max_consecutive_failures:
                        stop.set()
                    continue
                if isinstance(a, BaseException):
                    raise a
                consecutive = 0
                answers[r.key] = a
                buffer.append((r.key, a, {"messages": r.messages, "prompt": r.prompt}))
            bar.update(len(got))
            if buffer and (len(buffer) >= FLUSH_EVERY or time.monotonic() - last >= FLUSH_S):
                cache.put_many(buffer)
                buffer, last = [], time.monotonic()
            if end:
                break
            time.sleep(DRAIN_S)
        fut.result()  # the window's own error, if any
    except BaseException:
        stop.set()
        fut.cancel()
        raise
    finally:
        if buffer:  # every answer that arrived is kept, even on the way out
            cache.put_many(buffer)
        bar.close()
    if window.throttles:
        logger.info("adaptive concurrency desc=%s throttles=%d window=%d max=%d", desc, window.throttles,
                    window.size, window.ceiling)  # fmt: skip
    return failures


async def _window(backend, misses, decoding, window: Window, out: queue.Queue, stop: threading.Event,
                  max_retries: int, backoff_s: float, spend: SpendCap | None = None) -> None:  # fmt: skip
    """On the backend's loop: keep ``window.size`` calls in flight, hand each answer (or its final
    error) to the caller's thread in the order they arrive, one list per turn of the loop; ``None``
    at the end.

    ``window.ceiling`` workers (fewer for fewer calls), each sending its next request in the same step
    that took its last answer (no task, callback or wake-up per call between an answer and the next
    request); workers above ``window.size`` (the window shrank on a throttle) park until a call ends.
    Each answer is added to ``spend`` here, so the cap stops the sending at once."""
    loop = asyncio.get_running_loop()
    finished: list[tuple[JudgeRequest, object]] = []
    parked: collections.deque[asyncio.Future] = collections.deque()
    it = iter(misses)
    in_flight = 0

    def hand_over() -> None:
        nonlocal finished
        if finished:
            out.put(finished)
            finished = []

    def wake(n: int) -> None:
        while parked and n > 0:
            f = parked.popleft()
            if not f.done():
                f.set_result(None)
                n -= 1

    async def worker() -> None:
        nonlocal in_flight
        try:
            while not stop.is_set():
                if in_flight >= window.size:  # the window shrank: wait for a call to end
                    f = loop.create_future()
                    parked.append(f)
                    await f
                    continue
                r = next(it, None)
                if r is None:
                    return
                in_flight += 1
                try:
                    a = await _acall(backend, r, decoding, window, max_retries, backoff_s)
                except Exception as exc:  # noqa: BLE001 - its final error, handed over like an answer
                    a = exc
                finally:
                    in_flight -= 1
                if spend is not None and isinstance(a, JudgeResponse):
                    spend.add(a)  # the running total, on this thread: at the cap nothing more is sent
                    if spend.reached:
                        stop.set()
                if not finished:  # one hand-over per turn of the loop, after this turn's answers
                    loop.call_soon(hand_over)
                finished.append((r, a))
                wake(window.size - in_flight - 1)  # room for others beside this worker's next call
        finally:
            wake(len(parked))  # no more to send (or stopped): the parked workers end too

    workers = [asyncio.ensure_future(worker()) for _ in range(min(window.ceiling, len(misses)))]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        hand_over()
        out.put(None)


#: a call throttled (HTTP 429) under the adaptive window is retried this many times before its
#: throttles count against ``max_retries``: the window shrinks until the server admits it
MAX_THROTTLED_RETRIES = 32


async def _acall(backend: Backend, request: JudgeRequest, decoding: Decoding, window: Window,
                 max_retries: int, backoff_s: float) -> JudgeResponse:  # fmt: skip
    """:func:`_call` for one streamed request: retried while ``backend.is_retryable``, waiting
    :func:`retry_delay` (at least the server's Retry-After); a 429 or nearly spent rate-limit
    headers shrink the window (:class:`~promptlottery.calls.window.Window`), and a 429 is retried
    up to :data:`MAX_THROTTLED_RETRIES` times before it counts as a failed attempt (it says "later",
    not "no")."""
    attempt = throttled = 0
    while True:
        epoch = window.epoch
        try:
            answer = await backend.acall(request, decoding)
        except Exception as exc:  # noqa: BLE001 - the predicate decides
            retryable = backend.is_retryable(exc)
            if retryable and getattr(exc, "status", None) == 429:
                window.on_throttle(epoch)
                if throttled < MAX_THROTTLED_RETRIES:
                    throttled += 1
                    await asyncio.sleep(retry_delay(min(throttled - 1, 5), backoff_s, exc))
                    continue
            if attempt < max_retries and retryable:
                delay = retry_delay(attempt, backoff_s, exc)
                attempt += 1
                logger.warning("retrying attempt=%d delay_s=%.1f error=%s", attempt, delay, exc)
                await asyncio.sleep(delay)
                continue
            raise
        window.on_answer(epoch, getattr(backend, "rate_headroom", None))
        return answer

"""The sliding window of calls in flight for a backend whose calls are independent (``Backend.streams``:
an HTTP server), and the retry wait of the one retry layer (:mod:`promptlottery.calls.loop`).

Up to ``window.size`` calls run on the backend's own event loop (:meth:`Backend.submit`); a finished
call starts the next one, so a slow answer holds one slot, not a batch. Each call is retried on its
own; answers are handed to the caller's thread in lists and written to the cache there.

The window is a set of worker coroutines, each sending its next request in the step that received its
last answer: one event loop thread serves every call, so at C calls in flight what it spends per call
between an answer and the next request adds up over the answers that arrive together (a server of
fixed delay D answers in waves of up to C). So an answer is received (``Backend.afetch``) and read
(``Backend.read_answer``: JSON, the boundary checks, label probabilities: a quarter of the client's CPU
a call) apart, a turn's answers after the requests of that turn went out: at C = 256 and D = 100 ms
the window reaches or passes what a bare aiohttp client reaches on the same machine
(docs/benchmarks.md).
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
    error) to the caller's thread in the order they are read, one list per turn of the loop; ``None``
    at the end (:class:`_Calls`)."""
    calls = _Calls(backend, iter(misses), decoding, window, out, stop, max_retries, backoff_s, spend)
    workers = [asyncio.ensure_future(calls.worker()) for _ in range(min(window.ceiling, len(misses)))]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        calls.close()


class _Calls:
    """The window's state on the backend's loop: ``window.ceiling`` worker coroutines, each sending its
    next request in the step that received its last answer (no task, callback or wake-up per call
    between an answer and the next request); workers above ``window.size`` (the window shrank on a
    throttle) park until a call ends.

    An answer is received (:meth:`Backend.afetch`: the HTTP round trip, its transient errors retried
    there) and read (:meth:`Backend.read_answer`: JSON, the boundary checks, label probabilities) apart:
    the answers of one turn of the loop are read together two turns later, after the requests their
    workers sent went out, so a wave of answers from a server of fixed delay sends its next wave
    without waiting for every answer's reading (docs/benchmarks.md). An answer that reads as a
    transient error (a malformed answer) is sent again after :func:`retry_delay`, counted against
    ``max_retries`` as before. With a spend cap each answer is read at once and added to ``spend``,
    so the cap stops the sending at once."""

    def __init__(self, backend, it, decoding, window, out, stop, max_retries, backoff_s, spend):
        self.backend, self.it, self.decoding, self.window = backend, it, decoding, window
        self.out, self.stop, self.max_retries, self.backoff_s, self.spend = (
            out,
            stop,
            max_retries,
            backoff_s,
            spend,
        )
        self.loop = asyncio.get_running_loop()
        self.finished: list[tuple[JudgeRequest, object]] = []
        self.unread: list[tuple[JudgeRequest, object, int, int]] = []
        self.parked: collections.deque[asyncio.Future] = collections.deque()
        #: (request, attempt, throttles so far) to send again, and the timers that will put more there
        self.again: collections.deque[tuple[JudgeRequest, int, int]] = collections.deque()
        self.timers: list[asyncio.TimerHandle] = []
        self.in_flight = 0
        #: answers received but not read, and reads waiting to send their request again
        self.pending = 0
        self.closing = False

    def _next(self) -> tuple[JudgeRequest, int] | None:
        if self.again:
            return self.again.popleft()
        r = next(self.it, None)
        return None if r is None else (r, 0, 0)

    async def worker(self) -> None:
        try:
            while not self.stop.is_set():
                item = self._next() if self.in_flight < self.window.size else None
                if item is None:
                    if self.in_flight < self.window.size and not self.pending:
                        return  # nothing left to send, nothing that may come back
                    await self._park()  # the window shrank, or a read may send a call again
                    continue
                r, attempt, throttled = item
                self.in_flight += 1
                try:
                    got = await _afetch(self.backend, r, self.decoding, self.window, self.max_retries,
                                        self.backoff_s, attempt, throttled)  # fmt: skip
                except Exception as exc:  # noqa: BLE001 - its final error, handed over like an answer
                    got = exc
                finally:
                    self.in_flight -= 1
                if isinstance(got, _Throttled):  # out of the window until its wait is over, then queued
                    self.pending += 1
                    self.timers.append(
                        self.loop.call_later(got.delay, self._again, r, attempt, got.throttled)
                    )
                elif isinstance(got, Exception):
                    self._done(r, got)
                elif self.spend is not None:
                    self._read(r, *got)
                else:
                    if not self.unread:  # read after the requests sent in this turn went out
                        self.loop.call_soon(self.loop.call_soon, self._read_all)
                    self.unread.append((r, *got))
                    self.pending += 1
                self._wake(self.window.size - self.in_flight - 1)  # room beside this worker's next call
        finally:
            self._wake(len(self.parked))  # no more to send (or stopped): the parked workers look again

    async def _park(self) -> None:
        f = self.loop.create_future()
        self.parked.append(f)
        await f

    def _wake(self, n: int) -> None:
        while self.parked and n > 0:
            f = self.parked.popleft()
            if not f.done():
                f.set_result(None)
                n -= 1

    def _read_all(self) -> None:
        batch, self.unread = self.unread, []
        self.pending -= len(batch)
        for item in batch:
            try:
                self._read(*item)
            except Exception as exc:  # noqa: BLE001 - not an answer's error but ours: the caller raises it
                self._done(item[0], exc)
        if not self.pending:
            self._wake(len(self.parked))  # nothing can come back: the idle workers may end

    def _read(self, r: JudgeRequest, fetched, attempt: int, epoch: int) -> None:
        """Read one answer: to the caller, or (a transient error with retries left) sent again later."""
        try:
            a = self.backend.read_answer(fetched, r, self.decoding)
        except Exception as exc:  # noqa: BLE001 - the predicate decides
            if attempt < self.max_retries and not self.closing and self.backend.is_retryable(exc):
                delay = retry_delay(attempt, self.backoff_s, exc)
                logger.warning("retrying attempt=%d delay_s=%.1f error=%s", attempt + 1, delay, exc)
                self.pending += 1
                self.timers.append(self.loop.call_later(delay, self._again, r, attempt + 1))
                return
            a = exc
        else:
            self.window.on_answer(epoch, getattr(self.backend, "rate_headroom", None))
            if self.spend is not None:
                self.spend.add(a)  # the running total, on this thread: at the cap nothing more is sent
                if self.spend.reached:
                    self.stop.set()
        self._done(r, a)

    def _again(self, r: JudgeRequest, attempt: int, throttled: int = 0) -> None:
        self.pending -= 1
        self.again.append((r, attempt, throttled))
        self._wake(1)

    def _done(self, r: JudgeRequest, a: object) -> None:
        if not self.finished:  # one hand-over per turn of the loop, after this turn's answers
            self.loop.call_soon(self._hand_over)
        self.finished.append((r, a))

    def _hand_over(self) -> None:
        if self.finished:
            self.out.put(self.finished)
            self.finished = []

    def close(self) -> None:
        """The end (or a stop): every answer received is read and handed over (one that reads as a
        transient error as its failure), then ``None``; the calls waiting to be sent again are not sent
        (the re-run sends them)."""
        self.closing = True
        for t in self.timers:
            t.cancel()
        self._read_all()
        self._hand_over()
        self.out.put(None)


#: a call throttled (HTTP 429) under the adaptive window is retried this many times before its
#: throttles count against ``max_retries``: the window shrinks until the server admits it
MAX_THROTTLED_RETRIES = 32


class _Throttled:
    """A call throttled (HTTP 429): it leaves the window and is queued again after ``delay`` seconds,
    so it is sent again only where the window (shrunk by its 429) has room, in the window's epoch of
    then: a burst of 429s from one window shrinks it once, not once per retry of each throttled call."""

    __slots__ = ("delay", "throttled")

    def __init__(self, delay: float, throttled: int):
        self.delay, self.throttled = delay, throttled


async def _afetch(backend: Backend, request: JudgeRequest, decoding: Decoding, window: Window,
                  max_retries: int, backoff_s: float, attempt: int = 0,
                  throttled: int = 0) -> tuple[object, int, int] | _Throttled:  # fmt: skip
    """The answer to ``request`` as received (:meth:`Backend.afetch`), the attempt it took and the
    window's epoch it was sent in: :func:`_call` for one streamed request, retried while
    ``backend.is_retryable``, waiting :func:`retry_delay` (at least the server's Retry-After); a 429
    shrinks the window (:class:`~promptlottery.calls.window.Window`) and is retried up to
    :data:`MAX_THROTTLED_RETRIES` times (``throttled``: so far) before it counts as a failed attempt (it
    says "later", not "no"): a :class:`_Throttled`, sent again by the window. Nearly spent rate-limit
    headers shrink the window when the answer is read."""
    while True:
        epoch = window.epoch
        try:
            return await backend.afetch(request, decoding), attempt, epoch
        except Exception as exc:  # noqa: BLE001 - the predicate decides
            retryable = backend.is_retryable(exc)
            if retryable and getattr(exc, "status", None) == 429:
                window.on_throttle(epoch)
                if throttled < MAX_THROTTLED_RETRIES:
                    return _Throttled(retry_delay(min(throttled, 5), backoff_s, exc), throttled + 1)
            if attempt < max_retries and retryable:
                delay = retry_delay(attempt, backoff_s, exc)
                attempt += 1
                logger.warning("retrying attempt=%d delay_s=%.1f error=%s", attempt, delay, exc)
                await asyncio.sleep(delay)
                continue
            raise

"""The one retry layer (calls.loop.run_calls): a transient error is retried the configured
number of times, a permanent one is not; the wait doubles, with jitter, and honours Retry-After."""

from __future__ import annotations

import pytest

from promptlottery.backends.base import BackendError, Decoding, JudgeRequest
from promptlottery.backends.fake import FakeBackend
from promptlottery.calls import loop as calls
from promptlottery.calls.cache import CallCache
from promptlottery.calls.loop import MAX_RETRY_AFTER_S, CallStats, JudgingError, retry_delay, run_calls


class Transient(BackendError):
    """An error the flaky backend calls transient."""


class Flaky(FakeBackend):
    """Fails its first ``fail_first`` generate() calls with ``error``; counts every call."""

    def __init__(self, fail_first: int, error: BackendError):
        super().__init__()
        self.fail_first, self.error, self.attempts = fail_first, error, 0

    def generate(self, requests, decoding):
        self.attempts += 1
        if self.attempts <= self.fail_first:
            raise self.error
        return super().generate(requests, decoding)

    def is_retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, Transient)


def _reqs(n: int = 2) -> list[JudgeRequest]:
    return [
        JudgeRequest(key=f"k{i}", labels=("1", "2"), messages=[{"role": "user", "content": f"q{i}"}])
        for i in range(n)
    ]


@pytest.fixture
def no_sleep(monkeypatch):
    waits: list[float] = []  # the retry waits (the fake backend itself sleeps 0 s per call)
    monkeypatch.setattr(calls.time, "sleep", lambda s: waits.append(s) if s > 0 else None)
    return waits


def _run(backend, tmp_path, max_retries):
    return run_calls(
        _reqs(), backend, CallCache(tmp_path / "c.sqlite"), Decoding(), stats=CallStats(),
        max_retries=max_retries, backoff_s=1.0,
    )  # fmt: skip


def test_a_transient_error_is_retried_until_it_passes(tmp_path, no_sleep):
    b = Flaky(fail_first=3, error=Transient("HTTP 503"))
    assert len(_run(b, tmp_path, max_retries=3)) == 2
    assert b.attempts == 4 and len(no_sleep) == 3  # 3 failures, 3 waits, then the answer


def test_a_transient_error_is_retried_max_retries_times_then_the_run_fails(tmp_path, no_sleep):
    b = Flaky(fail_first=10, error=Transient("HTTP 503"))
    with pytest.raises(JudgingError, match="HTTP 503"):
        _run(b, tmp_path, max_retries=2)
    assert b.attempts == 3  # the first try and 2 retries
    b0 = Flaky(fail_first=10, error=Transient("HTTP 503"))
    with pytest.raises(JudgingError):
        _run(b0, tmp_path, max_retries=0)
    assert b0.attempts == 1


def test_a_permanent_error_is_not_retried(tmp_path, no_sleep):
    b = Flaky(fail_first=10, error=BackendError("prompt exceeds the context"))
    with pytest.raises(JudgingError, match="exceeds the context"):
        _run(b, tmp_path, max_retries=4)
    assert b.attempts == 1 and no_sleep == []


def test_retry_delay_doubles_with_jitter_and_honours_retry_after(monkeypatch):
    monkeypatch.setattr(calls.random, "random", lambda: 0.0)  # jitter factor 0.5 + 0 / 2 = 0.5
    assert retry_delay(0, 1.0, Transient("x")) == 0.5  # 1 * 2**0 * 0.5
    assert retry_delay(3, 1.0, Transient("x")) == 4.0  # 1 * 2**3 * 0.5
    monkeypatch.setattr(calls.random, "random", lambda: 1.0)  # the factor's top end: 0.5 + 1 / 2 = 1
    assert retry_delay(2, 0.5, Transient("x")) == 2.0  # 0.5 * 2**2 * 1
    assert retry_delay(0, 1.0, Transient("x", retry_after=7.0)) == 7.0  # the server's wait is longer
    assert retry_delay(4, 1.0, Transient("x", retry_after=7.0)) == 16.0  # the backoff is longer
    assert retry_delay(0, 1.0, Transient("x", retry_after=1e6)) == MAX_RETRY_AFTER_S
    assert retry_delay(0, 1.0, RuntimeError("x")) == 1.0  # not a BackendError: no Retry-After

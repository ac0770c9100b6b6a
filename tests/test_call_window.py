"""The call loop's sliding window over an OpenAI-compatible server (calls.loop._stream), against a
loopback stub on 127.0.0.1 (tests/openai_stub.py): C calls in flight, each answer stored once, per-call retries with
Retry-After, exact resume after SIGKILL, the adaptive window (AIMD) under a server that admits L calls
at a time, and the spend cap (before the first call and during the run)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from promptlottery.backends.base import Decoding, JudgeRequest
from promptlottery.backends.openai_compat import VLLMServerBackend
from promptlottery.calls.cache import CallCache
from promptlottery.calls.loop import CallStats, JudgingError, SpendCapReached, run_calls
from promptlottery.calls.spend import SpendCap
from promptlottery.errors import ConfigError
from tests.openai_stub import USAGE

LABELS = ("1", "2", "3", "4", "5")
TOKENS = USAGE["total_tokens"]  # a call's tokens in the stub's answer


@pytest.fixture
def server(openai_stub):
    """The loopback server (tests/openai_stub.py): answers after ``delay_s``; above ``limit`` calls in
    flight answers 429 (``Retry-After: 0``); ``script`` statuses are answered first; counts what it saw."""
    return openai_stub


def _reqs(n: int) -> list[JudgeRequest]:
    return [
        JudgeRequest(key=f"key{i:04d}", labels=LABELS, messages=[{"role": "user", "content": f"rate {i}"}])
        for i in range(n)
    ]


def _backend(url: str, c: int) -> VLLMServerBackend:
    return VLLMServerBackend("judge-model", base_url=url, api_key_env="", max_concurrency=c)


def test_the_window_keeps_c_calls_in_flight_and_stores_every_answer_once(server, tmp_path):
    server.delay_s, server.slow = 0.01, {"rate 0": 1.0}
    cache = CallCache(tmp_path / "c.sqlite")
    stats = CallStats()
    out = run_calls(_reqs(48), _backend(server.url, 4), cache, Decoding(), stats=stats)
    assert len(out) == 48 and len(cache) == 48 and stats.cache_misses == 48
    assert sorted(server.contents) == sorted(f"rate {i}" for i in range(48))  # each sent once
    assert 2 <= server.max_in_flight <= 4
    # a window, not batches that wait for their slowest call: while "rate 0" took its second, the other
    # three slots served the rest (fixed batches of 4 would have sent 3 others in that time)
    assert server.seen_during_slow >= 40
    assert out["key0007"].label_probs["4"] == pytest.approx(0.6) and out["key0007"].label_probs[
        "5"
    ] == pytest.approx(0.2)
    again = run_calls(_reqs(48), _backend(server.url, 8), cache, Decoding(), stats=CallStats())
    assert len(server.seen) == 48 and again["key0001"].raw_text == "4"  # all from the cache


def test_answers_read_apart_send_a_malformed_one_again_and_store_each_answer_once(server, tmp_path):
    """The window reads a turn's answers after the requests of that turn went out (calls.stream._Calls):
    an answer that reads as malformed (a NaN logprob) is sent again, within max_retries, while the others
    go on; every answer is stored once, the well-formed ones as the server gave them."""
    bad = '{"choices": [{"message": {"content": "4"}, "logprobs": {"content": [{"token": "4", "logprob": NaN}]}}]}'
    server.delay_s, server.script = 0.005, [(200, bad, {})] * 5  # the first five answers
    cache = CallCache(tmp_path / "c.sqlite")
    out = run_calls(_reqs(64), _backend(server.url, 8), cache, Decoding(), stats=CallStats(), backoff_s=0.01)
    assert len(out) == 64 and len(cache) == 64 and len(server.seen) == 64 + 5  # five sent twice
    sent = server.contents
    assert len(set(sent)) == 64 and all(sent.count(c) <= 2 for c in sent)
    assert all(r.label_probs["4"] == pytest.approx(0.6) for r in out.values())  # none of the bad ones stored
    server.script = [(200, bad, {})] * 3  # malformed at every attempt: that call fails alone
    with pytest.raises(JudgingError, match="1 call\\(s\\) failed.*malformed answer"):
        run_calls(_reqs(65), _backend(server.url, 8), cache, Decoding(), stats=CallStats(), max_retries=2,
                  backoff_s=0.01)  # fmt: skip
    assert len(cache) == 64 and len(server.seen) == 64 + 5 + 3


def test_a_throttled_call_is_retried_alone_after_retry_after(server, tmp_path):
    server.script = [(429, {"error": {"message": "slow down"}}, {"Retry-After": "0.2"})]
    t0 = time.perf_counter()
    out = run_calls(_reqs(3), _backend(server.url, 1), CallCache(tmp_path / "c.sqlite"), Decoding(),
                    stats=CallStats(), backoff_s=0.0)  # fmt: skip
    assert len(out) == 3 and len(server.seen) == 4  # 3 requests, one of them twice
    assert time.perf_counter() - t0 >= 0.2  # the server's Retry-After was waited


def test_a_request_that_keeps_failing_fails_alone_and_the_rest_is_cached(server, tmp_path):
    server.script = [(400, {"error": {"message": "bad request"}}, {})]
    cache = CallCache(tmp_path / "c.sqlite")
    with pytest.raises(JudgingError, match=r"1 call\(s\) failed, 4 new calls cached"):
        run_calls(_reqs(5), _backend(server.url, 1), cache, Decoding(), stats=CallStats(), backoff_s=0.0)
    assert len(cache) == 4
    run_calls(_reqs(5), _backend(server.url, 1), cache, Decoding(), stats=CallStats())
    assert len(server.seen) == 6 and len(cache) == 5  # the re-run sent only the failed one


RUN = textwrap.dedent(
    """
    import sys
    from promptlottery.backends.base import Decoding, JudgeRequest
    from promptlottery.backends.openai_compat import VLLMServerBackend
    from promptlottery.calls.cache import CallCache
    from promptlottery.calls.loop import CallStats, run_calls
    import promptlottery.calls.stream as loop
    loop.FLUSH_EVERY = 4
    reqs = [JudgeRequest(key=f"key{i:04d}", labels=tuple("12345"), messages=[{"role": "user", "content": f"rate {i}"}])
            for i in range(int(sys.argv[3]))]
    b = VLLMServerBackend("judge-model", base_url=sys.argv[1], api_key_env="", max_concurrency=4)
    run_calls(reqs, b, CallCache(sys.argv[2]), Decoding(), stats=CallStats())
    """
)


@pytest.mark.faults
@pytest.mark.fault_subset
def test_sigkill_mid_window_then_resume_sends_exactly_the_missing_calls(server, tmp_path):
    server.delay_s = 0.02
    db, n = tmp_path / "c.sqlite", 400
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.Popen([sys.executable, "-c", RUN, server.url, str(db), str(n)], env=env)
    deadline = time.monotonic() + 60
    while len(server.seen) < 60 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    sent_before = len(server.seen)
    assert 60 <= sent_before < n  # killed mid-run
    cache = CallCache(db)
    kept = len(cache)
    assert kept >= sent_before - 4 - 8  # at most the calls in flight and one unwritten chunk are lost
    out = run_calls(_reqs(n), _backend(server.url, 4), cache, Decoding(), stats=(stats := CallStats()))
    assert (
        stats.cache_misses == n - kept and len(server.seen) - sent_before == n - kept
    )  # exactly the missing
    assert len(out) == n and len(cache) == n
    assert {r.raw_text for r in out.values()} == {"4"}


def test_the_adaptive_window_settles_near_the_servers_limit_without_failing_calls(server, tmp_path):
    server.delay_s, server.limit = 0.02, 6
    cache = CallCache(tmp_path / "c.sqlite")
    from promptlottery.calls import stream as loop

    window = loop.Window(32)
    real = loop.Window
    loop.Window = lambda ceiling: window  # this run's window, to read where it settled
    try:
        out = run_calls(_reqs(600), _backend(server.url, 32), cache, Decoding(), stats=CallStats(),
                        backoff_s=0.01)  # fmt: skip
    finally:
        loop.Window = real
    seen_windows = window.history
    assert len(out) == 600 and len(cache) == 600  # no call failed
    assert server.throttled > 0 and window.throttles > 0  # the server did say no
    late = seen_windows[len(seen_windows) // 2 :]  # after the first decreases
    assert 3 <= min(late) and max(late) <= 8  # a sawtooth between about 0.7 L and L + 1 (L = 6)
    assert server.throttled < 150  # a few 429s per episode, not one per call
    assert server.max_in_flight <= 33


def test_a_burst_of_429s_while_the_admitted_calls_are_slow_shrinks_the_window_once_per_round_trip(
    server, tmp_path
):
    """The server admits L = 6 calls and holds them 0.3 s; 26 of the first 32 get a 429 at once. Their
    retries leave the window and are sent again only where it has room: before, each retried in its
    slot, past the shrunk window, and every 429 of those retries was a new episode (32 -> 22 -> 15 -> ...
    -> 1 within the first 0.3 s, at a server that admits 6)."""
    server.delay_s, server.limit = 0.3, 6
    from promptlottery.calls import stream as loop

    window = loop.Window(32)
    real = loop.Window
    loop.Window = lambda ceiling: window
    try:
        out = run_calls(_reqs(64), _backend(server.url, 32), CallCache(tmp_path / "c.sqlite"), Decoding(),
                        stats=CallStats(), backoff_s=0.01)  # fmt: skip
    finally:
        loop.Window = real
    assert len(out) == 64 and server.throttled > 0
    # never below 0.7 * L rounded down, less one: a decrease only for calls sent within the window of then
    assert window.history[0] == 22 and min(window.history) >= 3, window.history
    assert server.max_in_flight <= 32


def test_the_spend_cap_stops_the_run_keeps_every_answer_and_says_how_to_resume(server, tmp_path):
    server.delay_s = 0.01
    cache = CallCache(tmp_path / "c.sqlite")
    cap = SpendCap(max_tokens=TOKENS * 20)  # 20 calls' worth
    with pytest.raises(SpendCapReached, match="re-run the same command to resume") as ei:
        run_calls(_reqs(100), _backend(server.url, 4), cache, Decoding(), stats=CallStats(), spend=cap)
    assert f"tokens of max_tokens={TOKENS * 20}" in str(ei.value)
    sent = len(server.seen)
    assert 20 <= sent <= 20 + 4 and len(cache) == sent == cap.calls  # the calls in flight kept, none lost
    assert cap.tokens == TOKENS * sent
    out = run_calls(_reqs(100), _backend(server.url, 4), cache, Decoding(), stats=CallStats(),
                    spend=SpendCap(max_tokens=TOKENS * 200))  # fmt: skip
    assert len(out) == 100 and len(server.seen) == 100  # the resume paid only for the rest


def test_the_cost_cap_is_checked_against_the_estimate_before_any_call():
    cap = SpendCap(max_cost_usd=0.01, price_in=2.5, price_out=10.0)
    cap.check_estimate(calls=10, prompt_tokens=300, max_new_tokens=8, where="condition x")  # $0.00155: passes
    # 30,000 prompt tokens at $2.5/M + 1000 x 8 answer tokens at $10/M = $0.155
    with pytest.raises(ConfigError, match=r"condition y: the 1000 uncached calls are estimated at \$0\.1550"):
        cap.check_estimate(calls=1000, prompt_tokens=30000, max_new_tokens=8, where="condition y")
    with pytest.raises(ConfigError, match="needs one"):
        SpendCap(max_cost_usd=1.0)  # no price: no cost cap
    with pytest.raises(ConfigError, match="max_tokens=0"):
        SpendCap(max_tokens=0)


def test_a_spend_cap_is_out_of_the_job_hash_so_a_capped_sweep_resumes_in_its_dir():
    from promptlottery.tracking.jobdir import config_hash

    job = {"task_name": "judge", "max_retries": 4, "judge": {"variant": "P1"}}
    assert config_hash({**job, "max_cost_usd": None, "max_tokens": None}) == config_hash(job)
    assert config_hash({**job, "max_cost_usd": 5.0, "max_tokens": 10**6}) == config_hash(job)
    assert config_hash({**job, "max_retries": 5}) != config_hash(job)


def test_nearly_spent_rate_limit_headers_shrink_the_window_once_per_episode():
    from promptlottery.backends.openai_wire import rate_headroom
    from promptlottery.calls.window import Window

    low = rate_headroom({"x-ratelimit-remaining-requests": "2", "x-ratelimit-limit-requests": "100",
                         "x-ratelimit-remaining-tokens": "90000", "x-ratelimit-limit-tokens": "100000"})  # fmt: skip
    assert low == pytest.approx(0.02)
    assert (
        rate_headroom(
            {"anthropic-ratelimit-requests-remaining": "50", "anthropic-ratelimit-requests-limit": "100"}
        )
        == 0.5
    )
    w = Window(20)
    sent = w.epoch
    w.on_answer(sent, low)  # 2% of the budget left: a throttle signal, no 429 needed
    assert w.size == 14 and w.throttles == 1
    w.on_answer(sent, low)  # sent before that decrease: the same episode
    assert w.size == 14
    for _ in range(15):  # about one window of answers with room left grows it by one
        w.on_answer(w.epoch, 0.5)
    assert w.size == 15
    for _ in range(200):
        w.on_answer(w.epoch, None)
    assert w.size == 20  # never above max_concurrency

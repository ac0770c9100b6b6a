"""Provider batch APIs (OpenAI's Batch API, Anthropic's Message Batches) against a loopback stub of
their documented endpoints (tests/batch_stub.py): split at the limits, answers in the call cache,
label probabilities where the provider gives logprobs and parsed labels (named so) where not, an
expired batch's unanswered requests sent again, a partly failed batch's failures named, and a run
stopped while a batch is in flight resumed without submitting it twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from promptlottery.backends.anthropic_batch import AnthropicBatchBackend
from promptlottery.backends.base import Decoding, JudgeRequest
from promptlottery.backends.openai_batch import OpenAIBatchBackend
from promptlottery.calls.cache import CallCache
from promptlottery.calls.loop import CallStats, JudgingError, run_calls
from tests.batch_stub import BatchStub, serve

LABELS = ("1", "2", "3", "4", "5")


@pytest.fixture
def stub():
    s = BatchStub()
    httpd = serve(s)
    yield s
    httpd.shutdown()
    httpd.server_close()


def _reqs(n: int, bad: tuple[int, ...] = ()) -> list[JudgeRequest]:
    return [
        JudgeRequest(
            key=f"{i:064x}", labels=LABELS,
            messages=[{"role": "system", "content": "You judge."},
                      {"role": "user", "content": f"rate {'bad ' if i in bad else ''}{i}"}],
        )
        for i in range(n)
    ]  # fmt: skip


def _openai(stub, **kw):
    b = OpenAIBatchBackend("gpt-judge", base_url=stub.base + "/v1", api_key_env="", poll_s=0.01, **kw)
    b.max_batch_requests = 12
    return b


def test_openai_batches_split_at_the_limit_and_answer_with_label_probabilities(stub, tmp_path):
    cache = CallCache(tmp_path / "calls.sqlite")
    out = run_calls(_reqs(30), _openai(stub), cache, Decoding(), stats=CallStats())
    assert stub.creates == 3  # 12 + 12 + 6
    assert len(out) == 30 and len(cache) == 30
    a = out[f"{7:064x}"]
    assert a.label_probs["4"] == pytest.approx(0.7) and a.label_probs["2"] == pytest.approx(0.2)
    assert a.extra["scoring"] == "logprobs" and a.prompt_tokens == 30
    journal = json.loads((tmp_path / "calls.sqlite.batches.json").read_text())
    assert len(journal) == 3 and all(e["collected"] and e["id"] for e in journal.values())
    run_calls(_reqs(30), _openai(stub), cache, Decoding(), stats=CallStats())
    assert stub.creates == 3  # all cached: nothing submitted


@pytest.mark.faults
@pytest.mark.fault_subset
def test_an_expired_batch_sends_its_unanswered_requests_again(stub, tmp_path):
    stub.expire_first = True
    cache = CallCache(tmp_path / "calls.sqlite")
    out = run_calls(_reqs(10), _openai(stub), cache, Decoding(), stats=CallStats())
    assert len(out) == 10 and len(cache) == 10
    assert stub.creates == 2 and len(stub.batches["batch_2"]["requests"]) == 5  # the 5 expired ones


def test_a_partly_failed_batch_names_its_failures_and_keeps_the_rest(stub, tmp_path):
    cache = CallCache(tmp_path / "calls.sqlite")
    with pytest.raises(JudgingError, match=r"2 call\(s\) failed, 8 new calls cached"):
        run_calls(_reqs(10, bad=(3, 6)), _openai(stub), cache, Decoding(), stats=CallStats())
    assert len(cache) == 8 and stub.creates == 1


def test_anthropic_batches_answer_with_parsed_labels_and_resend_expired(stub, tmp_path):
    stub.expire_first = True
    b = AnthropicBatchBackend("claude-judge", base_url=stub.base + "/v1", api_key_env="", poll_s=0.01)
    cache = CallCache(tmp_path / "calls.sqlite")
    out = run_calls(_reqs(8), b, cache, Decoding(), stats=CallStats())
    assert len(out) == 8 and stub.creates == 2
    a = out[f"{5:064x}"]
    assert a.raw_text == "4" and a.label_probs is None and a.extra["scoring"] == "parsed_label"
    sent = stub.batches["msgbatch_1"]["requests"][0]["params"]
    assert sent["system"] == "You judge." and [m["role"] for m in sent["messages"]] == ["user"]


RUN = textwrap.dedent(
    """
    import sys
    from promptlottery.backends.base import Decoding, JudgeRequest
    from promptlottery.backends.openai_batch import OpenAIBatchBackend
    from promptlottery.calls.cache import CallCache
    from promptlottery.calls.loop import CallStats, run_calls
    reqs = [JudgeRequest(key=f"{i:064x}", labels=tuple("12345"), messages=[{"role": "user", "content": f"rate {i}"}])
            for i in range(20)]
    b = OpenAIBatchBackend("gpt-judge", base_url=sys.argv[1], api_key_env="", poll_s=0.05)
    run_calls(reqs, b, CallCache(sys.argv[2]), Decoding(), stats=CallStats())
    """
)


@pytest.mark.faults
@pytest.mark.fault_subset
def test_a_run_killed_mid_batch_resumes_polling_it_and_submits_nothing_twice(stub, tmp_path):
    stub.release.clear()  # batches stay in progress
    db = tmp_path / "calls.sqlite"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.Popen([sys.executable, "-c", RUN, stub.base + "/v1", str(db)], env=env)
    deadline = time.monotonic() + 60
    while not stub.creates and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # polling
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert stub.creates == 1
    journal = json.loads((tmp_path / "calls.sqlite.batches.json").read_text())
    (entry,) = journal.values()
    assert entry["id"] == "batch_1" and not entry["collected"]  # recorded before the wait
    stub.release.set()  # the provider finishes the batch while nobody waits
    reqs = [JudgeRequest(key=f"{i:064x}", labels=LABELS, messages=[{"role": "user", "content": f"rate {i}"}])
            for i in range(20)]  # fmt: skip
    out = run_calls(reqs, _openai(stub), CallCache(db), Decoding(), stats=CallStats())
    assert len(out) == 20 and stub.creates == 1  # collected from the batch in flight, nothing sent again


def test_a_batch_whose_id_was_never_recorded_is_found_by_its_tag(stub, tmp_path):
    cache = CallCache(tmp_path / "calls.sqlite")
    reqs = _reqs(4)
    b = _openai(stub)
    lines = [b.batch_line(r, Decoding()) for r in reqs]
    b._client.run(
        b.submit_batch(lines, "pl-lost")
    )  # accepted by the provider; the run stopped before recording
    who = json.dumps(b.identity(), sort_keys=True)
    entry = {"backend": who, "keys": [r.key for r in reqs], "id": None, "collected": False}
    (tmp_path / "calls.sqlite.batches.json").write_text(json.dumps({"pl-lost": entry}))
    out = run_calls(reqs, b, cache, Decoding(), stats=CallStats())
    assert len(out) == 4 and stub.creates == 1  # found by its metadata tag, not submitted again


# -- the spend cap, checked before each batch file ----------------------------------------------------
@pytest.mark.faults
@pytest.mark.fault_subset
def test_a_cap_the_next_batch_file_would_cross_stops_before_submitting_it_and_keeps_every_answer(
    stub, tmp_path
):
    from promptlottery.calls.loop import SpendCapReached
    from promptlottery.calls.spend import SpendCap

    b = _openai(stub)  # 12 requests a file: 30 requests are files of 12, 12 and 6
    reqs = _reqs(30)

    def dry_run(rs):  # the dry run's count: prompt tokens + max_new_tokens a call
        return sum(b.count_tokens(r) for r in rs) + len(rs) * Decoding().max_new_tokens

    cache = CallCache(tmp_path / "calls.sqlite")
    cap = SpendCap(max_tokens=dry_run(reqs) - 1)  # the whole sweep does not fit, the first two files do
    with pytest.raises(SpendCapReached, match="re-run the same command to resume") as ei:
        run_calls(reqs, b, cache, Decoding(), stats=CallStats(), spend=cap)
    assert "6 calls not submitted: the next batch file (6 calls) is estimated at" in str(ei.value)
    assert stub.creates == 2 and len(cache) == 24  # the two files in flight collected: every answer kept
    assert cap.calls == 24 and cap.tokens == 24 * 31  # the running total: the answers' own usage
    out = run_calls(
        reqs, _openai(stub), cache, Decoding(), stats=CallStats(), spend=SpendCap(max_tokens=10**6)
    )
    assert (
        len(out) == 30 and stub.creates == 3 and len(stub.batches["batch_3"]["requests"]) == 6
    )  # the rest only


def test_a_cap_counts_the_batches_in_flight_of_an_earlier_run(stub, tmp_path):
    from promptlottery.calls.loop import SpendCapReached
    from promptlottery.calls.spend import SpendCap

    stub.release.clear()  # the first run's batch stays in flight; it is stopped while polling
    b = _openai(stub)
    reqs = _reqs(24)
    per = sum(b.count_tokens(r) for r in reqs[:12]) + 12 * Decoding().max_new_tokens
    journal = tmp_path / "calls.sqlite.batches.json"
    line = [b.batch_line(r, Decoding()) for r in reqs[:12]]
    bid = b._client.run(b.submit_batch(line, "pl-first"))
    who = json.dumps(b.identity(), sort_keys=True)
    journal.write_text(json.dumps({"pl-first": {"backend": who, "keys": [r.key for r in reqs[:12]], "id": bid,
                                                "collected": False, "submitted": time.time(),
                                                "estimate": [per, 0.0]}}))  # fmt: skip
    stub.release.set()
    cache = CallCache(tmp_path / "calls.sqlite")
    with pytest.raises(
        SpendCapReached, match="1 batch"
    ):  # in flight: 12 calls' count; the next 12 do not fit
        run_calls(reqs, b, cache, Decoding(), stats=CallStats(), spend=SpendCap(max_tokens=per + per // 2))
    assert stub.creates == 1 and len(cache) == 12  # the batch in flight collected, nothing new submitted


# -- stopped between the provider's answer and the journal's write ------------------------------------
KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from promptlottery.backends.base import Decoding, JudgeRequest
    from promptlottery.backends.anthropic_batch import AnthropicBatchBackend
    from promptlottery.backends.openai_batch import OpenAIBatchBackend
    from promptlottery.calls.cache import CallCache
    from promptlottery.calls.loop import CallStats, run_calls
    reqs = [JudgeRequest(key=f"{i:064x}", labels=tuple("12345"), messages=[{"role": "user", "content": f"rate {i}"}])
            for i in range(10)]
    cls = {"openai": OpenAIBatchBackend, "anthropic": AnthropicBatchBackend}[sys.argv[3]]
    b = cls("judge", base_url=sys.argv[1], api_key_env="", poll_s=0.05)
    submit = b.submit_batch
    async def submit_then_die(lines, tag):
        bid = await submit(lines, tag)  # the provider accepted it (and will bill it) ...
        os.kill(os.getpid(), signal.SIGKILL)  # ... and the run dies before the journal has its id
    b.submit_batch = submit_then_die
    run_calls(reqs, b, CallCache(sys.argv[2]), Decoding(), stats=CallStats())
    """
)


@pytest.mark.faults
@pytest.mark.fault_subset
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_run_killed_between_submit_and_journal_submits_nothing_new_on_restart(stub, tmp_path, provider):
    stub.release.clear()
    db = tmp_path / "calls.sqlite"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.run(
        [sys.executable, "-c", KILLED, stub.base + "/v1", str(db), provider], env=env, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL and stub.creates == 1
    (entry,) = json.loads((tmp_path / "calls.sqlite.batches.json").read_text()).values()
    assert entry["id"] is None and not entry["collected"]  # the intent only: the id never written
    stub.release.set()
    reqs = [JudgeRequest(key=f"{i:064x}", labels=LABELS, messages=[{"role": "user", "content": f"rate {i}"}])
            for i in range(10)]  # fmt: skip
    cls = {"openai": OpenAIBatchBackend, "anthropic": AnthropicBatchBackend}[provider]
    b = cls("judge", base_url=stub.base + "/v1", api_key_env="", poll_s=0.01)
    out = run_calls(reqs, b, CallCache(db), Decoding(), stats=CallStats())
    assert len(out) == 10 and stub.creates == 1  # found again and collected: nothing submitted twice
    (entry,) = json.loads((tmp_path / "calls.sqlite.batches.json").read_text()).values()
    assert entry["id"] == next(iter(stub.batches)) and entry["collected"]


def test_an_unrecorded_anthropic_batch_is_told_from_another_jobs_batch_of_the_same_size(stub, tmp_path):
    b = AnthropicBatchBackend("claude-judge", base_url=stub.base + "/v1", api_key_env="", poll_s=0.01)
    ours, theirs = _reqs(4), [JudgeRequest(key=f"{i + 100:064x}", labels=LABELS,
                                           messages=[{"role": "user", "content": f"other {i}"}]) for i in range(4)]  # fmt: skip
    t0 = time.time()
    mine = b._client.run(b.submit_batch([b.batch_line(r, Decoding()) for r in ours], "pl-ours"))
    b._client.run(
        b.submit_batch([b.batch_line(r, Decoding()) for r in theirs], "pl-theirs")
    )  # newer, same size
    who = json.dumps(b.identity(), sort_keys=True)
    entry = {"backend": who, "keys": [r.key for r in ours], "id": None, "collected": False, "submitted": t0}
    (tmp_path / "calls.sqlite.batches.json").write_text(json.dumps({"pl-ours": entry}))
    cache = CallCache(tmp_path / "calls.sqlite")
    out = run_calls(ours, b, cache, Decoding(), stats=CallStats())
    assert len(out) == 4 and stub.creates == 2 and len(cache) == 4  # adopted ours; theirs left alone
    (entry,) = json.loads((tmp_path / "calls.sqlite.batches.json").read_text()).values()
    assert entry["id"] == mine and entry["collected"]

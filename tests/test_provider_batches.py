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

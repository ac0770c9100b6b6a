"""The OpenAI-compatible backend against the loopback stub on 127.0.0.1 (tests/openai_stub.py; fast, offline).

The one retry layer (calls.loop.run_calls) on 429/503 (then success), no retry on a context
overflow (400) or a refused model (404), the concurrency limit, the logprob -> label_probs mapping, the parsed-label fallback when the
server gives no logprobs, and the API key never reaching results, judgments, cache or W&B files.
"""

from __future__ import annotations

import json
import math
import re
import socket

import pytest

from promptlottery.backends.base import BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.backends.openai_compat import OpenAIBackend, VLLMServerBackend
from promptlottery.backends.openai_wire import (
    ContextOverflowError,
    ModelRefusedError,
    TransientBackendError,
    label_probs_from_top_logprobs,
)
from promptlottery.backends.tokenizers import approx_token_count
from promptlottery.calls.cache import CallCache
from promptlottery.calls.loop import CallStats, JudgingError, run_calls
from promptlottery.prompts.scales import get_scale
from promptlottery.prompts.scoring import LOGPROB_WEIGHTED, PARSED_LABEL, score_response
from tests.openai_stub import DEFAULT_TOP
from tests.openai_stub import top_logprobs as _top

LABELS = ("1", "2", "3", "4", "5")
SECRET = "sk-test-Zq9f3TOPSECRETvalue"  # pragma: allowlist secret


@pytest.fixture
def stub(openai_stub):
    """A scripted OpenAI-compatible server (tests/openai_stub.py): each POST takes the next scripted
    (status, body, headers), else the default answer."""
    return openai_stub


def _backend(url, **kw):
    kw = {"api_key_env": "", **kw}
    return VLLMServerBackend("judge-model", base_url=url, **kw)


def _reqs(n=1, **kw):
    return [
        JudgeRequest(
            key=f"key{i:04d}", labels=LABELS, messages=[{"role": "user", "content": f"rate {i}"}], **kw
        )
        for i in range(n)
    ]


# -- logprobs -> label probabilities -----------------------------------------------------------------
def test_label_probs_sum_every_spelling_and_count_missing_labels_as_zero():
    pos = [{"token": "4", "logprob": math.log(0.5), "top_logprobs": _top(DEFAULT_TOP)}]
    probs = label_probs_from_top_logprobs(pos, LABELS)
    assert probs == pytest.approx({"1": 0.0, "2": 0.0, "3": 0.05, "4": 0.6, "5": 0.2})
    yes_no = [
        {
            "token": "Yes",
            "logprob": math.log(0.4),
            "top_logprobs": _top([("Yes", 0.4), (" yes", 0.2), ("YES", 0.1), ("No", 0.15), ("Maybe", 0.1)]),
        }
    ]
    assert label_probs_from_top_logprobs(yes_no, ("yes", "no")) == pytest.approx({"yes": 0.7, "no": 0.15})


def test_label_probs_follow_a_leading_space_token():
    # first token a bare space (p=0.6): p(label) = p0(label) + p0(space) * p1(label | space)
    pos = [
        {"token": " ", "logprob": math.log(0.6), "top_logprobs": _top([(" ", 0.6), ("2", 0.1), ("5", 0.05)])},
        {"token": "2", "logprob": math.log(0.7), "top_logprobs": _top([("2", 0.7), ("3", 0.2)])},
    ]
    probs = label_probs_from_top_logprobs(pos, LABELS)
    assert probs == pytest.approx({"1": 0.0, "2": 0.1 + 0.6 * 0.7, "3": 0.6 * 0.2, "4": 0.0, "5": 0.05})
    assert label_probs_from_top_logprobs([{"token": "4", "logprob": -0.1}], LABELS) is None
    assert label_probs_from_top_logprobs([], LABELS) is None


def test_generate_maps_logprobs_usage_and_request_body(stub):
    out = _backend(stub.url).generate(_reqs(3), Decoding(top_logprobs=5, max_new_tokens=4))
    assert [o.raw_text for o in out] == ["4", "4", "4"]
    assert out[0].label_probs == pytest.approx({"1": 0.0, "2": 0.0, "3": 0.05, "4": 0.6, "5": 0.2})
    assert (out[0].prompt_tokens, out[0].completion_tokens) == (42, 1)
    body = stub.seen[0]["body"]
    assert stub.seen[0]["path"] == "/v1/chat/completions"
    assert body["logprobs"] is True and body["top_logprobs"] == 5 and body["temperature"] == 0.0
    assert body["max_tokens"] == 4 and body["model"] == "judge-model"
    assert "Authorization" not in stub.seen[0]["headers"]  # api_key_env="" sends no key
    s = score_response(out[0], get_scale("likert_1_5"))
    assert s.scoring_mode == LOGPROB_WEIGHTED
    assert s.weighted_score == pytest.approx((3 * 0.05 + 4 * 0.6 + 5 * 0.2) / 0.85)


def test_completion_prompts_use_the_completions_endpoint(stub):
    stub.script = [
        (
            200,
            {
                "choices": [
                    {
                        "text": " 3",
                        "finish_reason": "length",
                        "logprobs": {
                            "tokens": [" 3"],
                            "token_logprobs": [math.log(0.7)],
                            "top_logprobs": [{" 3": math.log(0.7), "2": math.log(0.1)}],
                        },
                    }
                ],
                "usage": {"prompt_tokens": 9, "completion_tokens": 1},
            },
            {},
        )
    ]
    req = JudgeRequest(key="c", labels=LABELS, prompt="Rate it.\nAnswer:")
    out = _backend(stub.url).generate([req], Decoding(top_logprobs=2))[0]
    assert stub.seen[0]["path"] == "/v1/completions" and stub.seen[0]["body"]["logprobs"] == 2
    assert out.raw_text == " 3" and out.label_probs == pytest.approx(
        {"1": 0, "2": 0.1, "3": 0.7, "4": 0, "5": 0}
    )


def test_no_logprobs_falls_back_to_the_parsed_label(stub):
    stub.logprobs = False
    out = _backend(stub.url).generate(_reqs(1), Decoding())[0]
    assert out.label_probs is None and out.extra["scoring"] == "parsed_label"
    s = score_response(out, get_scale("likert_1_5"))
    assert s.scoring_mode == PARSED_LABEL and s.score == 4.0
    # a backend configured without logprobs does not ask for them
    _backend(stub.url, logprobs=False).generate(_reqs(1), Decoding())
    assert "logprobs" not in stub.seen[-1]["body"]


# -- retries: one layer, run_calls; the backend sends each request once per generate() ----------------
def _run(b, tmp_path, n=1, max_retries=3, name="c"):
    return run_calls(
        _reqs(n), b, CallCache(tmp_path / f"{name}.sqlite"), Decoding(), stats=CallStats(),
        max_retries=max_retries, backoff_s=0.01,
    )  # fmt: skip


def test_retries_429_and_503_then_succeeds(stub, tmp_path):
    stub.script = [
        (429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"}),
        (503, {"error": {"message": "overloaded"}}, {}),
    ]
    answers = _run(_backend(stub.url), tmp_path)
    assert answers["key0000"].raw_text == "4" and len(stub.seen) == 3  # 2 transient failures, then 200


def test_a_transient_error_is_retried_max_retries_times_then_fails(stub, tmp_path):
    stub.script = [(503, "busy", {})] * 10
    b = _backend(stub.url)
    with pytest.raises(TransientBackendError, match="503") as ei:
        b.generate(_reqs(1), Decoding())
    assert len(stub.seen) == 1 and b.is_retryable(ei.value)  # the backend itself sends once
    for max_retries in (0, 2):
        stub.seen.clear()
        with pytest.raises(JudgingError, match="503"):
            _run(b, tmp_path, max_retries=max_retries, name=f"r{max_retries}")
        assert len(stub.seen) == 1 + max_retries  # the first try, then max_retries retries


def test_retry_after_is_read_into_the_error(stub):
    stub.script = [(429, {"error": {"message": "slow down"}}, {"Retry-After": "7"})]
    with pytest.raises(TransientBackendError) as ei:
        _backend(stub.url).generate(_reqs(1), Decoding())
    assert ei.value.retry_after == 7.0


def test_a_retried_batch_sends_only_the_requests_that_failed(stub):
    stub.script = [(502, "bad gateway", {})]
    b = _backend(stub.url, max_concurrency=1)  # one at a time: the first request gets the 502
    with pytest.raises(TransientBackendError):
        b.generate(_reqs(3), Decoding())
    assert len(stub.seen) == 3  # every request was sent once; two were answered
    out = b.generate(_reqs(3), Decoding())  # the retry of the same batch
    assert [o.raw_text for o in out] == ["4"] * 3 and len(stub.seen) == 4
    assert stub.seen[-1]["body"]["messages"][0]["content"] == "rate 0"  # only the failed one again
    b.generate(_reqs(3), Decoding())  # nothing is kept once a batch succeeded
    assert len(stub.seen) == 7


@pytest.mark.parametrize(
    ("status", "message", "exc"),
    [
        (
            400,
            "This model's maximum context length is 2048 tokens. However, your prompt contains at least 2049 "
            "input tokens",
            ContextOverflowError,
        ),
        (404, "The model `judge-model` does not exist.", ModelRefusedError),
    ],
)
def test_no_retry_on_context_overflow_or_refused_model(stub, tmp_path, status, message, exc):
    stub.script = [(status, {"error": {"message": message, "code": status}}, {})] * 5
    b = _backend(stub.url)
    with pytest.raises(exc) as ei:
        b.generate(_reqs(1), Decoding())
    assert len(stub.seen) == 1 and not b.is_retryable(ei.value)
    # the call loop does not retry it either: one request, then a clear failure
    with pytest.raises(JudgingError, match=re.escape(message[:20])):
        _run(b, tmp_path, max_retries=4)
    assert len(stub.seen) == 2


def test_unreachable_server_is_transient():
    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = _backend(f"http://127.0.0.1:{port}/v1")
    with pytest.raises(TransientBackendError, match="Connect") as ei:
        b.generate(_reqs(1), Decoding())
    assert b.is_retryable(ei.value)


def test_concurrency_limit(stub):
    stub.delay_s = 0.05
    out = _backend(stub.url, max_concurrency=3).generate(_reqs(12), Decoding())
    assert len(out) == 12 and 2 <= stub.max_in_flight <= 3


# -- the API key -----------------------------------------------------------------------------------
def test_api_key_comes_from_the_named_environment_variable(stub, monkeypatch):
    monkeypatch.delenv("PL_TEST_OPENAI_KEY", raising=False)
    b = OpenAIBackend("gpt-x", base_url=stub.url, api_key_env="PL_TEST_OPENAI_KEY")
    with pytest.raises(BackendError, match="PL_TEST_OPENAI_KEY is not set") as ei:
        b.generate(_reqs(1), Decoding())
    assert not b.is_retryable(ei.value) and not stub.seen
    monkeypatch.setenv("PL_TEST_OPENAI_KEY", SECRET)
    b.generate(_reqs(1), Decoding())
    assert stub.seen[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert (
        SECRET not in repr(b)
        and SECRET not in json.dumps(b.identity())
        and SECRET not in json.dumps(vars(b), default=str)
    )
    assert OpenAIBackend("gpt-x").api_key_env == "OPENAI_API_KEY"  # the default for OpenAI


def test_api_key_never_reaches_results_judgments_cache_or_wandb(stub, tmp_path, monkeypatch):
    from promptlottery.stages import run_stage as run
    from tests.conftest import compose

    monkeypatch.setenv("PL_TEST_OPENAI_KEY", SECRET)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb"))
    cfg = compose(
        [
            "backbone=smollm2_vllm_server",
            f"backbone.backend.base_url={stub.url}",
            "backbone.backend.tokenizer=null",
            "backbone.backend.api_key_env=PL_TEST_OPENAI_KEY",
            "backoff_s=0.01",
            "dataset.limit=3",
            "logger=wandb",
            f"logger.dir={tmp_path / 'wandb'}",
        ],
        tmp_path=tmp_path,
    )
    rec = run(cfg, tmp_path / "job")
    assert rec["status"] == "ok" and rec["calls"]["cache_misses"] == 3
    assert rec["backend"]["backend"] == "vllm_server" and rec["metrics"]["scoring_modes"] == {
        LOGPROB_WEIGHTED: 3
    }
    assert all(s["headers"]["Authorization"] == f"Bearer {SECRET}" for s in stub.seen)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "results.json" for p in files) and any(p.suffix == ".sqlite" for p in files)
    assert any("wandb" in p.parts for p in files)
    for p in files:
        assert SECRET.encode() not in p.read_bytes(), p


# -- tokens ----------------------------------------------------------------------------------------
def test_count_tokens_without_a_tokenizer_approximates_and_says_so():
    b = OpenAIBackend("gpt-x", api_key_env="")
    r = JudgeRequest(
        key="k",
        labels=LABELS,
        messages=[{"role": "system", "content": "x" * 10}, {"role": "user", "content": "y" * 30}],
    )
    assert b.count_tokens(r) == approx_token_count(r) == 10 + 2 * 4
    assert b.token_count_method == "approx_chars_div_4"
    broken = OpenAIBackend("gpt-x", api_key_env="", tokenizer="/nonexistent/tokenizer/dir")
    assert broken.count_tokens(r) == 18 and broken.token_count_method == "approx_chars_div_4"


def test_response_round_trips_through_the_cache_format():
    r = JudgeResponse("4", {"4": 0.5}, 3, 1, 0.1, extra={"scoring": "logprobs"})
    assert JudgeResponse.from_json(json.loads(json.dumps(r.to_json()))) == r
    # the cache's bytes (and so their checksums) are those of dataclasses.asdict, without its deep copy
    from dataclasses import asdict

    nested = JudgeResponse(
        "4", None, 3, 1, 0.1, extra={"top": [{"token": "4", "logprob": -0.1}], "n": {"a": 1}}
    )
    for x in (r, nested):
        assert json.dumps(x.to_json()) == json.dumps(asdict(x))


def test_assistant_prefix_continues_the_final_message_on_vllm_only(stub):
    req = _reqs(1, assistant_prefix="Content: 4\nStyle:")
    _backend(stub.url).generate(req, Decoding())
    body = stub.seen[0]["body"]
    assert body["messages"][-1] == {"role": "assistant", "content": "Content: 4\nStyle:"}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    with pytest.raises(BackendError, match="assistant prefix"):
        OpenAIBackend("gpt-x", base_url=stub.url, api_key_env="").generate(req, Decoding())
    assert len(stub.seen) == 1


# -- a label that spans two tokens on the server ("10" = "1" + "0") ----------------------------------
TENS = tuple(str(k) for k in range(1, 11))


def test_a_two_token_label_takes_its_share_of_the_prefix_mass():
    # the answer starts with "1" (p 0.5 of the first token; "9" 0.4); after "1", "0" has p 0.8:
    # p(10) = 0.5 * 0.8 = 0.4, p(1) = 0.5 * 0.2 = 0.1, p(9) = 0.4 (before: p(1) 0.5 and p(10) 0)
    pos = [
        {"token": "1", "logprob": math.log(0.5), "top_logprobs": _top([("1", 0.5), ("9", 0.4)])},
        {"token": "0", "logprob": math.log(0.8), "top_logprobs": _top([("0", 0.8), (".", 0.1)])},
    ]
    probs = label_probs_from_top_logprobs(pos, TENS)
    assert (
        probs["10"] == pytest.approx(0.4)
        and probs["1"] == pytest.approx(0.1)
        and probs["9"] == pytest.approx(0.4)
    )
    # a server whose tokenizer has one token for "10" lists it: nothing is split
    whole = [{"token": "10", "logprob": math.log(0.5), "top_logprobs": _top([("10", 0.5), ("1", 0.2)])}]
    assert label_probs_from_top_logprobs(whole, TENS) == pytest.approx(
        {**dict.fromkeys(TENS, 0.0), "10": 0.5, "1": 0.2}
    )


def test_an_unknown_split_falls_back_to_the_parsed_label_and_says_why(stub):
    # the answer starts with "8"; "1" (p 0.3) may be "1" or the start of "10": no label probabilities
    top = _top([("8", 0.6), ("1", 0.3)])
    body = {
        "choices": [
            {
                "message": {"role": "assistant", "content": "8"},
                "finish_reason": "stop",
                "logprobs": {"content": [{"token": "8", "logprob": math.log(0.6), "top_logprobs": top}]},
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1},
    }
    stub.script = [(200, body, {})]
    req = [JudgeRequest(key="k", labels=TENS, messages=[{"role": "user", "content": "rate"}])]
    (out,) = _backend(stub.url).generate(req, Decoding(top_logprobs=5, max_new_tokens=4))
    assert out.label_probs is None and "spans two tokens" in out.extra["label_probs_missing"]
    s = score_response(out, get_scale("likert_1_10"))
    assert s.scoring_mode == PARSED_LABEL and s.parsed_label == "8"


class DigitTokenizer:
    """A tokenizer with one token per digit: no single token spells "10"."""

    name_or_path = "digits"

    def __len__(self):
        return 10

    def get_vocab(self):
        return {str(d): d for d in range(10)}

    def decode(self, ids):
        return "".join(str(i) for i in ids)


def test_stopping_at_a_label_token_refuses_a_two_token_label(stub, monkeypatch):
    backend = VLLMServerBackend("judge-model", base_url=stub.url, tokenizer="digits")
    monkeypatch.setattr(VLLMServerBackend, "tokenizer", property(lambda self: DigitTokenizer()))
    req = [JudgeRequest(key="k", labels=TENS, messages=[{"role": "user", "content": "rate"}])]
    with pytest.raises(
        BackendError, match=r"labels \['10'\] have no single-token spelling.*stop_at_label=false"
    ):
        backend.generate(req, Decoding(top_logprobs=5, max_new_tokens=4, stop_at_label=True))
    stub.script = [(200, None, {})]
    out = backend.generate(req, Decoding(top_logprobs=5, max_new_tokens=4, stop_at_label=False))
    assert "stop_token_ids" not in stub.seen[-1]["body"] and out[0].raw_text == "4"


# -- the answer check's fast path ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("where", "value", "ok"),
    [
        ("position", -0.7, True), ("position", 0, True), ("position", -3, True), ("position", -math.inf, True),
        ("position", 0.0, True), ("alternative", 1e-7, True), ("legacy", -1, True), ("legacy_top", -0.5, True),
        ("position", math.nan, False), ("position", math.inf, False), ("alternative", 0.5, False),
        ("alternative", True, False), ("alternative", "-0.1", False), ("alternative", None, False),
        ("legacy", math.nan, False), ("legacy_top", 2, False), ("legacy_top", "x", False),
    ],
)  # fmt: skip
def test_the_answer_check_reads_each_logprob_once_and_refuses_the_same_values(where, value, ok):
    """A float at most 0 passes at once; anything else (an int, -inf, NaN, a string, a bool, a positive
    number) is judged by the slow path: the same verdicts, the field named in the one-line error."""
    from promptlottery.backends.answer_checks import MalformedAnswerError, check_answer

    top = [
        {"token": "4", "logprob": -0.1},
        {"token": "5", "logprob": value if where == "alternative" else -2.0},
    ]
    pos = {"token": "4", "logprob": value if where == "position" else -0.1, "top_logprobs": top}
    lp = {"content": [pos]}
    if where.startswith("legacy"):
        lp = {"tokens": ["4"], "token_logprobs": [value if where == "legacy" else -0.1],
              "top_logprobs": [{"4": value if where == "legacy_top" else -0.1}]}  # fmt: skip
    data = {"choices": [{"logprobs": lp}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    if ok:
        check_answer(data, where="judge at x (request abc)")
        return
    with pytest.raises(MalformedAnswerError, match=r"^judge at x \(request abc\): malformed answer: ") as err:
        check_answer(data, where="judge at x (request abc)")
    named = {"position": "logprobs.content[0]", "alternative": "token '5' at position 0",
             "legacy": "logprobs.token_logprobs[0]", "legacy_top": "token '4' at position 0"}[where]  # fmt: skip
    assert named in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("count", [-1, 1.5, "3", True, math.inf])
def test_the_answer_check_refuses_a_token_count_that_is_no_count(count):
    from promptlottery.backends.answer_checks import MalformedAnswerError, check_answer

    check_answer({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2.0}}, where="w")
    with pytest.raises(MalformedAnswerError, match=r"usage\.completion_tokens is "):
        check_answer({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": count}}, where="w")


# -- the HTTP client's event loop ----------------------------------------------------------------------
def _answers(url, tmp_path, tag, **kw):
    """run_calls' answers through a backend with ``kw`` (without their latency), and its loop's module."""
    backend = _backend(url, max_concurrency=4, **kw)
    got = run_calls(_reqs(12), backend, CallCache(tmp_path / f"{tag}.sqlite"), Decoding(), stats=CallStats())
    loop = type(backend._client.loop).__module__.split(".")[0]
    backend.close()
    return {k: {**r.to_json(), "latency_s": None} for k, r in got.items()}, loop


def test_without_uvloop_event_loop_auto_falls_back_to_asyncios_loop_with_the_same_answers(
    stub, tmp_path, monkeypatch
):
    import sys

    plain, loop = _answers(stub.url, tmp_path, "plain")
    assert loop == "asyncio" and len(plain) == 12
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as where it is not installed: the import fails
    fallback, loop = _answers(stub.url, tmp_path, "auto", event_loop="auto")
    assert loop == "asyncio" and fallback == plain
    with pytest.raises(
        ValueError, match=r"^VLLMServerBackend: event_loop='uvloop' but uvloop is not installed"
    ):
        _backend(stub.url, event_loop="uvloop")  # asked for by name: refused before any call
    with pytest.raises(ValueError, match=r"event_loop='trio' must be one of asyncio, auto, uvloop"):
        _backend(stub.url, event_loop="trio")


def test_uvloop_where_installed_gives_the_same_answers(stub, tmp_path):
    pytest.importorskip("uvloop")
    plain, _ = _answers(stub.url, tmp_path, "plain")
    for name in ("uvloop", "auto"):
        fast, loop = _answers(stub.url, tmp_path, name, event_loop=name)
        assert loop == "uvloop" and fast == plain

"""A server's answer checked at the boundary, before anything of it is read or stored.

A chat/completions answer is JSON from a process we do not control: a logprob may be ``NaN``,
``Infinity`` (Python's JSON reader accepts both), positive (a probability above 1) or a string; a
token count may be a string. Any of these is a :class:`MalformedAnswerError` for that call, one line
naming the request and the field: retried like a transient error (a server's glitch), and failed
with the batch when it persists; never stored in the cache or a judgments table. The API key, where a
server echoes it, is replaced by ``***`` in every text of the answer (:func:`scrub`). And one request
gets one overall deadline (the HTTP session's total timeout, named by :func:`deadline_error`), not one
per read: a server that drips its answer byte by byte cannot hold a call past ``timeout_s``.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any

from promptlottery.backends.base import JudgeResponse
from promptlottery.backends.openai_wire import TransientBackendError

#: a logprob above this is no logprob (p > 1); servers round 0 to -0.0 or a few ulps above
MAX_LOGPROB = 1e-6
#: key values shorter than this are placeholders (``EMPTY``), left alone as the run's redaction does
MIN_SECRET_CHARS = 8


class MalformedAnswerError(TransientBackendError):
    """A server answer with a field that cannot be what it claims (a NaN logprob, a string count)."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def check_answer(data: Any, *, where: str) -> None:
    """Refuse (:class:`MalformedAnswerError`, one line with ``where``) an answer whose logprobs are not
    finite numbers at most 0, or whose token counts are not non-negative integers.

    Every logprob is read once: a float at most :data:`MAX_LOGPROB` (what a server sends) passes at
    once, anything else is judged by :func:`_check_logprob` (an int that is a logprob passes there too),
    and the field's name is spelt out only for an error: at hundreds of answers a second the check
    costs a few microseconds an answer (docs/benchmarks.md)."""
    if not isinstance(data, dict):
        raise _bad(where, "the answer", data)
    usage = data.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise _bad(where, "usage", usage)
    for field in ("prompt_tokens", "completion_tokens", "total_tokens"):
        v = (usage or {}).get(field)
        if v is None or (type(v) is int and v >= 0):
            continue
        n = _number(v)
        if n is None or not math.isfinite(n) or n < 0 or n != int(n):
            raise _bad(where, f"usage.{field}", v)
    choices = data.get("choices")
    if not isinstance(choices, list):
        return  # parse_response says "without choices"
    for choice in choices:
        lp = choice.get("logprobs") if isinstance(choice, dict) else None
        if lp is None:
            continue
        if not isinstance(lp, dict):
            raise _bad(where, "logprobs", lp)
        _check_positions(lp.get("content") or [], where)
        for k, v in enumerate(lp.get("token_logprobs") or []):
            if v is not None and not (type(v) is float and v <= MAX_LOGPROB):  # the legacy API's first
                _check_logprob(v, f"logprobs.token_logprobs[{k}]", where)  # prompt token has None
        for k, top in enumerate(lp.get("top_logprobs") or []):
            for tok, v in (top or {}).items() if isinstance(top, dict) else []:
                if not (type(v) is float and v <= MAX_LOGPROB):
                    _check_logprob(v, f"the logprob of token {tok!r} at position {k}", where)


def _check_positions(positions: list, where: str) -> None:
    """The chat API's ``logprobs.content``: each position's logprob and its ``top_logprobs``."""
    for k, pos in enumerate(positions):
        if not isinstance(pos, dict):
            _check_logprob(pos, f"logprobs.content[{k}]", where)
            continue
        v = pos.get("logprob")
        if not (type(v) is float and v <= MAX_LOGPROB):  # NaN and +inf fail the comparison
            _check_logprob(v, f"logprobs.content[{k}]", where)
        for alt in pos.get("top_logprobs") or []:
            v = alt.get("logprob") if isinstance(alt, dict) else None
            if not (type(v) is float and v <= MAX_LOGPROB):
                tok = alt.get("token") if isinstance(alt, dict) else alt
                _check_logprob(v, f"the logprob of token {tok!r} at position {k}", where)


def _bad(where: str, what: str, value: Any) -> MalformedAnswerError:
    return MalformedAnswerError(
        f"{where}: malformed answer: {what} is {value!r:.40}; the call is retried and never stored"
    )


def _check_logprob(value: Any, what: str, where: str) -> None:
    x = _number(value)
    if x is None or math.isnan(x) or x == math.inf or x > MAX_LOGPROB:
        raise _bad(where, what, value)


def secret_values(api_key_env: str | None) -> list[str]:
    """The values a stored answer must not hold: the backend's API key (and ``OPENAI_API_KEY``), as the
    environment holds them now."""
    return list(
        _long_values(os.environ.get(api_key_env) if api_key_env else None, os.environ.get("OPENAI_API_KEY"))
    )


@functools.lru_cache(maxsize=64)
def _long_values(*values: str | None) -> tuple[str, ...]:
    return tuple(sorted({v for v in values if v and len(v) >= MIN_SECRET_CHARS}))


def scrub(resp: JudgeResponse, secrets: list[str]) -> JudgeResponse:
    """``resp`` with every secret replaced by ``***`` in its text and its string extras."""
    if not secrets:
        return resp

    def clean(v: Any) -> Any:
        if isinstance(v, str):
            for s in secrets:
                v = v.replace(s, "***")
        return v

    resp.raw_text = clean(resp.raw_text)
    resp.extra = {k: clean(v) for k, v in resp.extra.items()}
    return resp


def deadline_error(where: str, seconds: float | None) -> TransientBackendError:
    """The error of a request that ran past its one overall deadline (``timeout_s``: connect, send and
    every read together; the HTTP session's total timeout, :mod:`promptlottery.backends.http_client`):
    transient, so retried."""
    within = f"within {seconds:g} s " if seconds else ""
    return TransientBackendError(
        f"{where}: no complete answer {within}(backbone.backend.timeout_s bounds the whole request)"
    )

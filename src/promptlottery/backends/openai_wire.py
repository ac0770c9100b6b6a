"""What an OpenAI-compatible server sends back: its errors sorted into retryable or not, and a
chat/completions answer read into a :class:`JudgeResponse` (text, label probabilities from
``top_logprobs``, token usage).

Label probabilities come from the chat API's ``top_logprobs`` at the first generated position
(and the position after, when the first generated token is a bare space): see
:func:`label_probs_from_top_logprobs`. The HTTP client that sends the requests is
:class:`~promptlottery.backends.openai_compat.OpenAICompatBackend`.
"""

from __future__ import annotations

import math
import os
from typing import Any

from promptlottery.backends.base import BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.backends.tokens import SPLIT_UNKNOWN, add_space_route, spelling_probs, split_prefix_labels

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
_CONTEXT_MARKERS = (
    "context length",
    "context_length",
    "maximum context",
    "context window",
    "too long",
    "exceeds the available context",
    "exceed_context_size",
    "maximum model length",
    "max_model_len",
)
_MODEL_MARKERS = ("model_not_found", "does not exist", "not found", "unknown model", "no such model")


class TransientBackendError(BackendError):
    """429 / 5xx / timeout / connection refused: retrying may succeed."""


class ContextOverflowError(BackendError):
    """The prompt does not fit the model's context: retrying cannot help."""


class ModelRefusedError(BackendError):
    """The server does not serve (or refuses) the requested model: retrying cannot help."""


def classify_http_error(
    status: int, body: str, *, where: str, model: str, api_key_env: str | None
) -> BackendError:
    """The error for a non-200 answer: transient (retried), context overflow, refused model, other.
    A body that echoes the request's key has the key replaced by ``***`` (the run's redaction hides it
    too; this keeps it out of the exception of a backend used on its own)."""
    key = os.environ.get(api_key_env) if api_key_env else None
    text = body.replace(key, "***")[:500] if key else body[:500]
    low = text.lower()
    if status in RETRY_STATUS:
        return TransientBackendError(f"{where}: HTTP {status}: {text}")
    if status == 400 and any(m in low for m in _CONTEXT_MARKERS):
        return ContextOverflowError(f"{where}: prompt exceeds the model's context length: {text}")
    if status == 404 or (status == 400 and any(m in low for m in _MODEL_MARKERS) and "model" in low):
        return ModelRefusedError(f"{where}: model {model!r} refused (HTTP {status}): {text}")
    if status in (401, 403):
        return BackendError(f"{where}: not authorised (HTTP {status}); check ${api_key_env}")
    return BackendError(f"{where}: HTTP {status}: {text}")


def label_probs_from_top_logprobs(
    positions: list[dict[str, Any]], labels: tuple[str, ...]
) -> dict[str, float] | None:
    """Label probabilities from OpenAI-style logprobs of the generated tokens.

    ``positions`` is ``choices[0].logprobs.content``: per generated token ``{"token", "logprob",
    "top_logprobs": [{"token", "logprob"}, ...]}``. Returns None when no position carries
    top logprobs (the server ignored the request for them).

    >>> pos = [{"token": "4", "logprob": -0.1, "top_logprobs": [
    ...     {"token": "4", "logprob": math.log(0.6)}, {"token": " 4", "logprob": math.log(0.1)},
    ...     {"token": "5", "logprob": math.log(0.2)}]}]
    >>> {k: round(v, 3) for k, v in label_probs_from_top_logprobs(pos, ("1", "4", "5")).items()}
    {'1': 0.0, '4': 0.7, '5': 0.2}
    """
    if not positions or not positions[0].get("top_logprobs"):
        return None
    wanted = {lab.lower(): lab for lab in labels}

    def dist(pos: dict[str, Any]) -> dict[str, float]:
        alts = ((str(a.get("token", "")), a.get("logprob")) for a in pos.get("top_logprobs") or [])
        return spelling_probs(alts, lambda token: wanted.get(token.strip().lower()), labels)

    probs = dist(positions[0])
    first = str(positions[0].get("token", ""))
    at = 0  # the position of the label's first token
    if first == " " and len(positions) > 1 and positions[1].get("top_logprobs"):
        add_space_route(probs, math.exp(float(positions[0]["logprob"])), dist(positions[1]))
        at = 1
    nxt = positions[at + 1].get("top_logprobs") if at + 1 < len(positions) else None
    following = [(str(a.get("token", "")), a.get("logprob")) for a in nxt] if nxt else None
    return split_prefix_labels(probs, str(positions[at].get("token", "")), following, labels)


def parse_response(
    data: dict[str, Any],
    request: JudgeRequest,
    decoding: Decoding,
    latency: float,
    *,
    name: str,
    logprobs: bool,
    stop_token_ids: bool,
) -> JudgeResponse:
    """One chat/completions answer as a JudgeResponse (``logprobs``: read label probabilities;
    ``stop_token_ids``: the server stopped at a label token and left it out of the text)."""
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError) as exc:
        raise BackendError(f"{name}: malformed response without choices: {str(data)[:200]}") from exc
    lp = choice.get("logprobs") or {}
    if request.messages is not None:
        text = (choice.get("message") or {}).get("content") or ""
        positions = lp.get("content") or []
    else:  # legacy completions: tokens + top_logprobs as {token: logprob}
        text = choice.get("text") or ""
        positions = [
            {
                "token": t,
                "logprob": lp_,
                "top_logprobs": [{"token": k, "logprob": v} for k, v in (top or {}).items()],
            }
            for t, lp_, top in zip(
                lp.get("tokens") or [],
                lp.get("token_logprobs") or [],
                lp.get("top_logprobs") or [],
                strict=False,
            )
        ]
    if (
        positions
        and choice.get("finish_reason") == "stop"
        and getattr(decoding, "stop_at_label", False)
        and stop_token_ids
    ):
        last = str(positions[-1].get("token", ""))
        if last.strip().lower() in {lab.lower() for lab in request.labels} and not text.endswith(last):
            text += last  # the label token that stopped generation
    probs = label_probs_from_top_logprobs(positions, request.labels) if logprobs else None
    usage = data.get("usage") or {}
    if decoding.max_new_tokens <= 0:
        text = ""
    return JudgeResponse(
        raw_text=text,
        label_probs=probs,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        latency_s=latency,
        extra={
            "scoring": "logprobs" if probs is not None else "parsed_label",
            **(
                {"label_probs_missing": SPLIT_UNKNOWN}
                if probs is None and logprobs and positions and positions[0].get("top_logprobs")
                else {}
            ),
            "finish_reason": choice.get("finish_reason"),
            "served_model": data.get("model"),
        },
    )


#: (remaining, limit) header pairs of the providers' rate limits: OpenAI's (and vLLM-fronting
#: gateways'), Anthropic's
RATE_LIMIT_HEADERS = (
    ("x-ratelimit-remaining-requests", "x-ratelimit-limit-requests"),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-limit-tokens"),
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-limit"),
    ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-limit"),
)


def rate_headroom(headers: Any) -> float | None:
    """The smallest share of a rate-limit budget left that the answer's headers state (0 to 1), or
    None where they state none (the adaptive window, :mod:`promptlottery.calls.window`, reads it).

    >>> rate_headroom({"x-ratelimit-remaining-requests": "3", "x-ratelimit-limit-requests": "100"})
    0.03
    >>> rate_headroom({}) is None
    True
    """
    shares = []
    for remaining, limit in RATE_LIMIT_HEADERS:
        r = headers.get(remaining)
        lim = None if r is None else headers.get(limit)  # most answers state none: one look-up each
        if lim is None:
            continue
        try:
            r_, lim_ = float(r), float(lim)
        except ValueError:
            continue
        if lim_ > 0 and math.isfinite(r_) and math.isfinite(lim_):
            shares.append(min(1.0, max(0.0, r_ / lim_)))
    return min(shares) if shares else None

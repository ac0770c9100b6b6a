"""A sparse design for pairwise judges: the orders as cells, and the estimators the pairwise section reads.

A pairwise judge judges a pair (response A vs B) under a wording in two orders: ``12`` (A shown first)
and ``21`` (swapped), each a call of its own. :func:`pairwise_plan` is :func:`~promptlottery.metrics.
sparse.sparse_plan` over the ``2 K`` cells ``"<wording>:<order>"`` of each pair, with the same nesting,
the same seeded orders and the same probabilities (an anchor wording is judged in both orders on every
pair). The pairwise section's measures need cells together:

* ``position_consistency`` of a wording (the share of pairs whose verdict is the same in both orders)
  needs both orders of the wording: each (pair, wording) judged in both is weighted by ``1 / P(both)``;
* ``first_position_rate`` (the share of single-order verdicts, ties left out, that prefer the answer
  shown first) reads each order on its own: each judged cell weighted by ``1 / P(cell)``;
* the human agreement of a wording's two-order verdict and the systems' win rates per wording read
  the two-order verdict: weighted by ``1 / P(both)`` (:mod:`promptlottery.metrics.sparse_shares`);
* the across-wording kappa of the two-order verdicts (Fleiss' kappa of the order-resolved verdict,
  inconsistent = tie, across the wordings: the section's ``pairwise_paraphrase_kappa``) needs both
  orders of two wordings for a pair of ratings: weighted by ``1 / P(all four)``, the label shares by
  ``1 / P(both)`` (Hajek ratios, as :func:`~promptlottery.metrics.sparse.ipw_fleiss_kappa`).

For a pair of the spread stratum, ``q`` given non-anchor cells are all judged with probability
``E[n (n - 1) ... (n - q + 1)] / (K' (K' - 1) ... (K' - q + 1))`` (``n`` its number of non-anchor
cells, ``K'`` their number): the prefix of a uniformly random order. A cell judged without a verdict
(a parse failure) counts as not judged (assumed missing at random). On a full plan each estimator is
its plain definition.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from promptlottery.metrics import sparse as sp
from promptlottery.metrics.sparse_plans import SparsePlan, sparse_plan
from promptlottery.metrics.sparse_shares import share_parts

__all__ = [
    "cell",
    "consistency_batch",
    "consistency_parts",
    "first_position_parts",
    "game_points",
    "human_agreement_parts",
    "ipw_pairwise_kappa",
    "ipw_position_consistency",
    "kappa_parts",
    "pair_probabilities",
    "pairwise_plan",
    "two_order",
]

VERDICTS = ("1", "2", "tie")


def cell(wording: str, order: str) -> str:
    return f"{wording}:{order}"


def pairwise_plan(
    pairs: Any, wordings: Any, *, orders: tuple[str, ...], budget: float | int, anchor: str | None = None,
    full_share: float = 0.0, seed: int = 0,
) -> SparsePlan:  # fmt: skip
    """The sparse plan over each pair's (wording, order) cells; ``orders``: the judge mode's
    (``JudgeMode.orders``); ``budget`` is a share of the ``len(orders) K`` calls per pair or a number
    of calls; ``anchor`` a wording judged in every order on every pair.

    >>> p = pairwise_plan(["a", "b"], ["P1", "P2"], orders=("x", "y"), budget=1.0)
    >>> p.variants, p.n_calls
    (('P1:x', 'P1:y', 'P2:x', 'P2:y'), 8)
    """
    cells = [cell(str(w), o) for w in wordings for o in orders]
    anchors = None if anchor is None else tuple(cell(anchor, o) for o in orders)
    if anchor is not None and anchors[0] not in cells:
        raise ValueError(f"anchor={anchor!r} is not one of the wordings {list(map(str, wordings))}")
    return sparse_plan(pairs, cells, budget=budget, anchor=anchors, full_share=full_share, seed=seed)


def _falling(n: int, q: int) -> float:
    return float(math.prod(range(n - q + 1, n + 1))) if q <= n else 0.0


def _joint(prob_row: np.ndarray, cols: list[int]) -> float:
    """The probability that every cell of ``cols`` is judged, for one pair of the plan."""
    spread = prob_row < 1.0
    q = int(spread[cols].sum())
    if q == 0:
        return 1.0
    kk = int(spread.sum())
    m = float(prob_row[spread][0]) * kk
    lo, frac = math.floor(m), m - math.floor(m)
    return ((1 - frac) * _falling(lo, q) + frac * _falling(lo + 1, q)) / _falling(kk, q)


def plan_orders(plan: SparsePlan) -> tuple[str, ...]:
    """The orders of a :func:`pairwise_plan`'s cells, as they come in it."""
    return tuple(dict.fromkeys(str(c).rsplit(":", 1)[1] for c in plan.variants))


def pair_probabilities(plan: SparsePlan, wordings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``both[i, a]``: P(both orders of wording ``a`` judged); ``four[i, a, b]``: P(both orders of ``a``
    and of ``b``), for every pair ``i`` of a :func:`pairwise_plan`."""
    col = {c: j for j, c in enumerate(plan.variants)}
    idx = [[col[cell(w, o)] for o in plan_orders(plan)] for w in wordings]
    n, k = len(plan.items), len(wordings)
    both, four = np.zeros((n, k)), np.zeros((n, k, k))
    for i in range(n):
        for a in range(k):
            both[i, a] = _joint(plan.prob[i], idx[a])
            for b in range(a + 1, k):
                four[i, a, b] = four[i, b, a] = _joint(plan.prob[i], idx[a] + idx[b])
    return both, four


def _verdicts(x: Any) -> np.ndarray:
    arr = np.asarray(x, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    for ix, v in np.ndenumerate(arr):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            out[ix] = None
        elif str(v) in VERDICTS:
            out[ix] = str(v)
        else:
            raise ValueError(f"a pairwise verdict must be one of {VERDICTS} or missing, got {v!r}")
    return out


def consistency_parts(first: Any, second: Any, both: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pair and wording: the weighted consistent indicator and the weight (``1 / P(both)``)."""
    a, b = _verdicts(first), _verdicts(second)
    seen = (a != None) & (b != None)  # noqa: E711 - elementwise on an object array
    w = np.where(seen, 1.0 / np.where(seen, both, 1.0), 0.0)
    return w * (seen & (a == b)), w


def consistency_batch(parts: tuple[np.ndarray, np.ndarray], r: np.ndarray, *, per_wording: bool = False):
    """The estimate under each row of pair weights ``r``: overall (R,) or per wording (R x K)."""
    num, den = parts
    if per_wording:
        return sp.safe_ratio(r @ num, r @ den)
    return sp.safe_ratio(r @ num.sum(axis=1), r @ den.sum(axis=1))


def ipw_position_consistency(first: Any, second: Any, both: np.ndarray, *, per_wording: bool = False):
    """The share of (pair, wording) whose verdict is the same in both orders, each (pair, wording)
    judged in both orders weighted by ``1 / P(both)`` (Hajek). ``first`` / ``second``: pairs x wordings,
    the verdicts of orders 12 and 21 in the pair's terms (``"1"``, ``"2"``, ``"tie"``; None: not judged)."""
    parts = consistency_parts(first, second, both)
    out = consistency_batch(parts, np.ones((1, np.shape(both)[0])), per_wording=per_wording)[0]
    return out if per_wording else sp.single_estimate(np.array([out]), "position consistency")


def kappa_parts(first: Any, second: Any, both: np.ndarray, four: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per pair: the weighted agreeing rating pairs, their weight and the weighted label counts of the
    two-order verdict (the common verdict of the orders, inconsistent = tie), as ``fleiss_parts``."""
    a, b = _verdicts(first), _verdicts(second)
    n, k = a.shape
    seen = (a != None) & (b != None)  # noqa: E711
    v = np.where(seen, np.where(a == b, a, "tie"), None)
    agree, weight = np.zeros(n), np.zeros(n)
    for x, y in itertools.combinations(range(k), 2):
        ok = seen[:, x] & seen[:, y] & (four[:, x, y] > 0)
        w = np.where(ok, 1.0 / np.where(ok, four[:, x, y], 1.0), 0.0)
        agree += w * (v[:, x] == v[:, y])
        weight += w
    labels_w = np.zeros((n, len(VERDICTS)))
    for j, lab in enumerate(VERDICTS):
        labels_w[:, j] = (np.where(seen, 1.0 / np.where(seen, both, 1.0), 0.0) * (v == lab)).sum(axis=1)
    return agree, weight, labels_w


def ipw_pairwise_kappa(first: Any, second: Any, both: np.ndarray, four: np.ndarray) -> float:
    """Fleiss' kappa across wordings of the two-order verdict, estimated from the judged cells."""
    parts = kappa_parts(first, second, both, four)
    return sp.single_estimate(sp.fleiss_batch(parts, np.ones((1, np.shape(both)[0]))), "the pairwise kappa")


def two_order(first: Any, second: Any) -> np.ndarray:
    """Pairs x wordings: the two-order verdict (the common verdict, inconsistent = tie; None unless
    both orders have a verdict)."""
    a, b = _verdicts(first), _verdicts(second)
    seen = (a != None) & (b != None)  # noqa: E711
    return np.where(seen, np.where(a == b, a, "tie"), None)


def first_position_parts(
    first: Any, second: Any, prob_12: Any, prob_21: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Per pair and wording: the weighted verdicts for the answer shown first (order 12: ``"1"``,
    order 21: ``"2"``) and the weighted non-tie verdicts, each order weighted by ``1 / P(cell)``."""
    a, b = _verdicts(first), _verdicts(second)
    p12, p21 = np.asarray(prob_12, dtype=float), np.asarray(prob_21, dtype=float)
    num, den = np.zeros(a.shape), np.zeros(a.shape)
    for v, p, shown_first in ((a, p12, "1"), (b, p21, "2")):
        decided = (v == "1") | (v == "2")
        w = np.where(decided, 1.0 / np.where(decided & (p > 0), p, 1.0), 0.0)
        num += w * (v == shown_first)
        den += w
    return num, den


def human_agreement_parts(
    first: Any, second: Any, human: Any, both: np.ndarray, *, ties: str = "exclude_human"
) -> tuple[np.ndarray, np.ndarray]:
    """Per pair and wording: the two-order verdict's agreement with the human preference (the section's
    ``human_agreement``: pairs whose human label is a tie left out, ``ties="exclude_human"``; or kept
    as a class, ``"class"``), weighted by ``1 / P(both orders)``."""
    if ties not in ("exclude_human", "class"):
        raise ValueError(f"ties must be 'exclude_human' or 'class', got {ties!r}")
    v = two_order(first, second)
    h = _verdicts(np.asarray(human, dtype=object).reshape(-1, 1))[:, 0]
    if h.shape[0] != v.shape[0]:
        raise ValueError(f"human must hold one preference per pair ({v.shape[0]}), got {h.shape[0]}")
    usable = (h != None) & ((h != "tie") if ties == "exclude_human" else True)  # noqa: E711
    eligible = (v != None) & usable[:, None]  # noqa: E711
    return share_parts(eligible & (v == h[:, None]), eligible, np.where(eligible, both, 1.0))


def game_points(first: Any, second: Any) -> np.ndarray:
    """Pairs x wordings: system_1's points from the two-order verdict (1 win, 0.5 tie, 0 loss; NaN)."""
    v = two_order(first, second)
    table = {"1": 1.0, "2": 0.0, "tie": 0.5}
    return np.vectorize(lambda x: table.get(x, np.nan) if x is not None else np.nan, otypes=[float])(v)

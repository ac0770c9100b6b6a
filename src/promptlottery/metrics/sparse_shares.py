"""Shares of a sparse grid per wording: agreement with the humans, and the systems' win rates.

A share of the full grid is a ratio of two totals over its units (an item under a wording; a pair
under a wording, whose verdict needs both orders): ``sum hit / sum eligible``. From a sparse plan each
total is estimated by Horvitz-Thompson (Horvitz & Thompson 1952): every observed unit counts
``1 / pi``, ``pi`` its probability of being observed (a cell's inclusion probability; for a pair's
two-order verdict, the joint probability of both orders, :func:`promptlottery.metrics.sparse_pairwise.
pair_probabilities`). The share is then

* the **ratio of the two HT totals** (Hajek): the default, exact on a full plan, and what the
  full-grid definitions need when a judged cell can lack a verdict (a parse failure leaves the unit
  out of both totals, as it leaves the full grid's denominator);
* or, given which units are eligible in the **full** grid (``known``: e.g. every item with a human
  label, known before any call), the HT total of the hits over their number: unbiased over the
  design, but only when every judged eligible unit has a verdict.

Every function works on per-item parts (``share_parts``: items x wordings numerators and
denominators), so the estimate under item weights ``r`` (1 for the estimate, a bootstrap resample's
counts for a replicate) is a matrix product, as in :mod:`promptlottery.metrics.sparse`; resampling
items with the cells each drew gives an interval that includes the design's uncertainty.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from promptlottery.metrics.sparse import safe_ratio, single_estimate

__all__ = [
    "ht_share",
    "pointwise_human_parts",
    "share_batch",
    "share_parts",
    "win_rate_batch",
    "win_rate_parts",
]


def share_parts(hit: Any, eligible: Any, prob: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per item and wording: ``hit / pi`` and ``1 / pi`` on the observed eligible units, else 0.

    ``hit`` / ``eligible``: items x wordings booleans (a unit not observed, or without a verdict, is
    not eligible); ``prob``: its probability of being observed."""
    hit, eligible = np.asarray(hit, dtype=bool), np.asarray(eligible, dtype=bool)
    prob = np.asarray(prob, dtype=float)
    if hit.shape != eligible.shape or hit.shape != prob.shape:
        raise ValueError(f"hit {hit.shape}, eligible {eligible.shape} and prob {prob.shape} differ in shape")
    if (eligible & ~(prob > 0)).any():
        raise ValueError("an observed unit has inclusion probability 0: the plan cannot have drawn it")
    w = np.where(eligible, 1.0 / np.where(eligible, prob, 1.0), 0.0)
    return w * (hit & eligible), w


def share_batch(
    parts: tuple[np.ndarray, np.ndarray], r: np.ndarray, *, pooled: bool = False, known: Any = None
) -> np.ndarray:
    """The share under each row of item weights ``r``: per wording (R x K) or pooled over wordings (R,).

    ``known`` (items x wordings, 0/1): the units eligible in the full grid, for the HT total of the
    hits over their (resampled) number instead of the ratio of the two HT totals."""
    num, den = parts
    if known is not None:
        den = np.broadcast_to(np.asarray(known, dtype=float), num.shape)
    if pooled:
        num, den = num.sum(axis=1, keepdims=True), den.sum(axis=1, keepdims=True)
    out = safe_ratio(r @ num, r @ den)
    return out[:, 0] if pooled else out


def ht_share(hit: Any, eligible: Any, prob: Any, *, known: Any = None, pooled: bool = False):
    """The share of hits among the eligible units of the full grid, estimated from the observed ones.

    >>> # 3 items x 1 wording, each observed w.p. 1/2; items 0 and 1 observed, item 0 a hit
    >>> ht_share([[1], [0], [0]], [[1], [1], [0]], [[0.5], [0.5], [0.5]]).tolist()  # (1/.5) / (2/.5)
    [0.5]
    >>> ht_share([[1], [0], [0]], [[1], [1], [0]], [[0.5]] * 3, known=[[1], [1], [1]]).tolist()  # 2 / 3
    [0.6666666666666666]
    """
    parts = share_parts(hit, eligible, prob)
    out = share_batch(parts, np.ones((1, parts[0].shape[0])), pooled=pooled, known=known)[0]
    return single_estimate(np.array([out]), "the share") if pooled else out


def pointwise_human_parts(labels: Any, human: Any, prob: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each wording's exact agreement with the humans: a judged cell (label not NaN) of an item with a
    human label (not NaN, on the scale) agrees when the two are equal; weights ``1 / prob``."""
    lab = np.asarray(labels, dtype=float)
    h = np.asarray(human, dtype=float)
    if h.shape != (lab.shape[0],):
        raise ValueError(f"human must hold one label per item ({lab.shape[0]}), got shape {h.shape}")
    eligible = np.isfinite(lab) & np.isfinite(h)[:, None]
    return share_parts(eligible & (lab == h[:, None]), eligible, prob)


def win_rate_parts(
    points: Any, observed_prob: Any, system_1: Any, system_2: Any
) -> tuple[np.ndarray, np.ndarray, list[str], int]:
    """Per pair, system and wording: system's weighted points and weighted games.

    ``points``: pairs x wordings, system_1's points in the pair's game under the wording (1 win, 0.5
    tie, 0 loss; NaN: no verdict, the game left out); ``observed_prob``: the probability that the
    game's verdict was observed (both orders). A system's win rate is its points over its games
    (FastChat's ``win_rate_adjusted``, ties half), each game weighted by ``1 / pi``."""
    pts = np.asarray(points, dtype=float)
    prob = np.asarray(observed_prob, dtype=float)
    s1, s2 = np.asarray(system_1, dtype=object), np.asarray(system_2, dtype=object)
    names = sorted({str(s) for s in np.concatenate([s1, s2]) if s is not None and s == s})
    n, k = pts.shape
    seen = np.isfinite(pts) & np.array([a is not None and b is not None for a, b in zip(s1, s2)])[:, None]
    if (seen & ~(prob > 0)).any():
        raise ValueError("an observed game has inclusion probability 0: the plan cannot have drawn it")
    w = np.where(seen, 1.0 / np.where(seen, prob, 1.0), 0.0)
    num, den = np.zeros((n, len(names), k)), np.zeros((n, len(names), k))
    code = {name: j for j, name in enumerate(names)}
    for i in range(n):
        if s1[i] is None or s2[i] is None:
            continue
        a, b = code[str(s1[i])], code[str(s2[i])]
        num[i, a] += w[i] * np.nan_to_num(pts[i])
        num[i, b] += w[i] * (1.0 - np.nan_to_num(pts[i]))
        den[i, a] += w[i]
        den[i, b] += w[i]
    return num.reshape(n, -1), den.reshape(n, -1), names, k


def win_rate_batch(parts: tuple, r: np.ndarray) -> np.ndarray:
    """The win rates under each row of pair weights ``r``: R x systems x wordings (NaN: no game)."""
    num, den, names, k = parts
    return safe_ratio(r @ num, r @ den).reshape(len(r), len(names), k)

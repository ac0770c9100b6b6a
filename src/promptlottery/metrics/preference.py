"""Pairwise (A-versus-B) preferences: their checks, the two-order verdicts and the position measures.

Preferences are in a pair's own terms: ``"1"`` = the pair's first response (response_a), ``"2"`` =
its second (response_b), ``"tie"``; None = missing. A pair judged in both orders has two
single-order verdicts: ``first`` (order 12, response_a shown first as "A") and ``second`` (order
21, swapped), both already mapped back to the pair's terms.

* the **order-resolved** verdict: the common verdict when both orders agree, ``"inconsistent"``
  otherwise (FastChat ``fastchat/llm_judge/common.py``, ``load_pairwise_model_judgments``); where a
  two-order preference is needed an inconsistent pair counts as a tie (:func:`two_order_verdict`),
  as FastChat's ``show_result.py`` counts ``g1_winner != g2_winner`` as a tie;
* the **order-averaged** verdict (ours): the two orders' probabilities averaged per response, argmax;
* :func:`position_consistency`, :func:`first_position_rate`: the position bias.

The agreement with human preferences is in :mod:`promptlottery.metrics.preference_humans`, win
rates, Bradley-Terry and rank flips in :mod:`promptlottery.metrics.preference_ranks`. Each share is
a ratio of per-item counts (``*_counts``, pooled by :func:`pooled_share`), so that the analysis can
bootstrap it by resampling clusters of items (:func:`~promptlottery.metrics.clustered_ratio_ci`).
``nan`` with an :class:`UndefinedMetricWarning` where no item is eligible; a value outside the
preferences raises ValueError naming its position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ._validation import check_same_length, to_1d, warn_undefined

__all__ = [
    "INCONSISTENT",
    "PREFERENCES",
    "check_preference_pairs",
    "check_preferences",
    "consistency_counts",
    "first_counts",
    "first_position_rate",
    "order_averaged",
    "order_resolved",
    "pooled_share",
    "position_consistency",
    "two_order_verdict",
]

PREFERENCES = ("1", "2", "tie")
INCONSISTENT = "inconsistent"


# --------------------------------------------------------------------------- checks


def check_preferences(x: Any, name: str, allowed: Sequence[str] = PREFERENCES) -> np.ndarray:
    """Object array of preferences (None = missing); a value outside ``allowed`` raises ValueError."""
    arr = to_1d(x, name).astype(object)
    out = np.empty(len(arr), dtype=object)
    for i, v in enumerate(arr):
        if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
            out[i] = None
        elif str(v) in allowed:
            out[i] = str(v)
        else:
            raise ValueError(
                f"{name}[{i}] = {v!r} is not a preference; expected one of {list(allowed)} or None"
            )
    return out


def check_preference_pairs(
    a: Any, b: Any, names: tuple[str, str], allowed=PREFERENCES
) -> tuple[np.ndarray, np.ndarray]:
    """Two equal-length preference arrays, checked as :func:`check_preferences` (``names`` for the messages)."""
    pa, pb = check_preferences(a, names[0], allowed), check_preferences(b, names[1], allowed)
    check_same_length([pa, pb], list(names))
    return pa, pb


def pooled_share(num: np.ndarray, den: np.ndarray, what: str) -> float:
    """``sum(num) / sum(den)`` over the items; ``nan`` with a warning (at the measure's caller) when
    no item is eligible."""
    if den.sum() == 0:
        return warn_undefined(f"{what} is undefined: no eligible verdict", stacklevel=4)
    return float(num.sum() / den.sum())


# --------------------------------------------------------------------------- verdicts


def order_resolved(first: Any, second: Any) -> np.ndarray:
    """The order-resolved verdict per pair: the common preference of the two orders, else ``"inconsistent"``.

    ``first``: the verdicts of order 12, ``second``: of order 21, both in the pair's terms. None
    where either is missing.

    >>> order_resolved(["1", "1", "tie", None], ["1", "2", "tie", "2"]).tolist()
    ['1', 'inconsistent', 'tie', None]
    """
    a, b = check_preference_pairs(first, second, ("first", "second"))
    out = np.empty(len(a), dtype=object)
    for i, (x, y) in enumerate(zip(a, b)):
        out[i] = None if x is None or y is None else (x if x == y else INCONSISTENT)
    return out


def two_order_verdict(resolved: Any) -> np.ndarray:
    """The order-resolved verdict where a preference is needed: ``"inconsistent"`` counts as a tie.

    FastChat's rule: ``show_result.py`` counts ``g1_winner == "tie" or g1_winner != g2_winner``
    as a tie when it scores the pairwise games.

    >>> two_order_verdict(["1", "inconsistent", None]).tolist()
    ['1', 'tie', None]
    """
    r = check_preferences(resolved, "resolved", (*PREFERENCES, INCONSISTENT))
    return np.array(["tie" if v == INCONSISTENT else v for v in r], dtype=object)


def order_averaged(probs_12: Any, probs_21: Any) -> np.ndarray:
    """The order-averaged verdict (ours): mean of the two orders' probabilities per response, argmax.

    ``probs_12`` / ``probs_21``: ``(n, 3)`` arrays of ``(p_pref_1, p_pref_2, p_pref_tie)`` in the
    pair's terms (p(first answer wins | 12) sits in the column of response_a, as does p(second
    answer wins | 21)). A NaN tie probability (a scale without a tie label) is 0. None where either
    order lacks p_pref_1 or p_pref_2; ``"tie"`` where responses 1 and 2 share the top probability.

    >>> order_averaged([[0.9, 0.1, 0.0], [0.6, 0.4, 0.0]], [[0.2, 0.8, 0.0], [0.1, 0.9, 0.0]]).tolist()
    ['1', '2']
    """
    a, b = (np.asarray(p, dtype=float) for p in (probs_12, probs_21))
    for p, name in ((a, "probs_12"), (b, "probs_21")):
        if p.ndim != 2 or p.shape[1] != 3:
            raise ValueError(
                f"{name} must be an (n, 3) array of p_pref_1, p_pref_2, p_pref_tie; got {p.shape}"
            )
    check_same_length([a, b], ["probs_12", "probs_21"])
    ok = np.isfinite(a[:, :2]).all(axis=1) & np.isfinite(b[:, :2]).all(axis=1)
    mean = (np.nan_to_num(a) + np.nan_to_num(b)) / 2.0
    top = mean.max(axis=1)
    out = np.empty(len(a), dtype=object)
    for i in range(len(a)):
        if not ok[i]:
            out[i] = None
        elif mean[i, 2] == top[i] or mean[i, 0] == mean[i, 1]:
            out[i] = "tie"
        else:
            out[i] = "1" if mean[i, 0] > mean[i, 1] else "2"
    return out


# --------------------------------------------------------------------------- position


def consistency_counts(first: Any, second: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the (numerator, denominator) of :func:`position_consistency`, for a bootstrap."""
    a, b = check_preference_pairs(first, second, ("first", "second"))
    den = np.array([x is not None and y is not None for x, y in zip(a, b)], dtype=float)
    num = np.array([x is not None and x == y for x, y in zip(a, b)], dtype=float) * den
    return num, den


def position_consistency(first: Any, second: Any) -> float:
    """Share of pairs whose ``preferred`` is the same in both orders (issue 25: ``position_consistency``).

    ``first`` / ``second``: the verdicts of orders 12 and 21 in the pair's terms; pairs missing
    either are left out (``nan`` with a warning when none is left). Two ties are consistent.

    >>> position_consistency(["1", "1", "tie", "2"], ["1", "2", "tie", None])
    0.6666666666666666
    """
    return pooled_share(*consistency_counts(first, second), "position_consistency")


def first_counts(first: Any, second: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the (numerator, denominator) of :func:`first_position_rate`, for a bootstrap."""
    a, b = check_preference_pairs(first, second, ("first", "second"))
    # order 12 shows response_a ("1") first; order 21 shows response_b ("2") first
    num = np.array([(x == "1") + (y == "2") for x, y in zip(a, b)], dtype=float)
    den = np.array([(x in ("1", "2")) + (y in ("1", "2")) for x, y in zip(a, b)], dtype=float)
    return num, den


def first_position_rate(first: Any, second: Any) -> float:
    """Share of single-order verdicts preferring the answer shown first (``first_position_rate``).

    Every verdict of either order counts once; ties and missing verdicts are left out. 0.5 = no
    position bias, 1 = the first answer always wins, 0 = the second always wins.

    >>> first_position_rate(["1", "1", "tie"], ["2", "1", "1"])  # first wins: 1, 1 (12); 2 (21)
    0.6
    """
    return pooled_share(*first_counts(first, second), "first_position_rate")

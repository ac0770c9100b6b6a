"""Aggregating several judges' verdicts on the same items (how fast the plurality settles:
:mod:`promptlottery.metrics.convergence`).

Two notions of "the plurality" live here, each under its own name:

* the **plurality cluster** (:func:`plurality_cluster`; how fast it is reached online:
  :func:`promptlottery.metrics.convergence.online_convergence`): the prompt-lottery
  paper's definition, a label given by at least ``ceil((J + 1) / 2)`` of the ``J`` judges (3 of 5);
  an item without one is *no-consensus*. Every row printed beside the paper uses it.
* the **tie-broken plurality** (:func:`plurality`, :func:`promptlottery.metrics.convergence.convergence`): the modal label with ties
  going to the earliest judge (``ties_to_P1``): our own extension, named as such wherever it is shown.

Every function takes an ``items x judges`` matrix (a NumPy array, a nested list or a DataFrame):
one row per item, one column per judge (a prompt variant, a backbone, a sample), the judge order
being the column order. A missing verdict is ``NaN`` / ``None``. Labels may be numbers or strings
for :func:`plurality` and :func:`majority`; :func:`mean_score` and :func:`median_score` need
numbers. Results are NumPy arrays with one entry per item (``NaN`` / ``None`` where an item has
no verdict).

Tie-break rule (plurality): when several labels share the highest count, the winner is the tied
label given by the earliest judge in column order. With P1 in the first column this is "ties are
broken by the P1 label" whenever P1 is among the tied labels; if P1 is missing or its label is not
tied, the next judge in order decides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.registry import Registry

__all__ = [
    "AGGREGATORS",
    "aggregate",
    "cluster_label",
    "cluster_threshold",
    "majority",
    "mean_score",
    "median_score",
    "plurality",
    "plurality_cluster",
    "plurality_details",
    "cluster_codes",
    "decode_matrix",
    "encode_matrix",
    "one_hot",
    "winning_codes",
]


def _as_matrix(matrix: Any) -> np.ndarray:
    arr = matrix.to_numpy() if isinstance(matrix, pd.DataFrame) else np.asarray(matrix, dtype=object)
    if arr.ndim != 2:
        raise ValueError(f"expected an items x judges matrix, got shape {arr.shape}")
    return arr


def encode_matrix(matrix: Any) -> tuple[np.ndarray, np.ndarray, bool]:
    """Integer codes (``-1`` = missing), the sorted distinct labels, and whether they are numeric."""
    arr = _as_matrix(matrix)
    flat = arr.ravel()
    missing = pd.isna(flat)
    present = flat[~missing]
    numeric = all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in present
    )
    if numeric:
        values = np.asarray(present, dtype=float)
        uniques = np.unique(values)
        codes_present = np.searchsorted(uniques, values)
    else:
        uniques_list = sorted(set(present.tolist()), key=lambda v: (str(type(v)), v))
        lookup = {v: i for i, v in enumerate(uniques_list)}
        codes_present = np.array([lookup[v] for v in present], dtype=int)
        uniques = np.array(uniques_list, dtype=object)
    codes = np.full(flat.shape, -1, dtype=int)
    codes[~missing] = codes_present
    return codes.reshape(arr.shape), uniques, numeric


def decode_matrix(codes: np.ndarray, uniques: np.ndarray, numeric: bool) -> np.ndarray:
    if numeric:
        out = np.full(codes.shape, np.nan)
        ok = codes >= 0
        out[ok] = uniques[codes[ok]]
        return out
    out = np.full(codes.shape, None, dtype=object)
    ok = codes >= 0
    out[ok] = uniques[codes[ok]]
    return out


def one_hot(codes: np.ndarray, n_labels: int) -> np.ndarray:
    return codes[:, :, None] == np.arange(n_labels)[None, None, :]


def winning_codes(
    counts: np.ndarray, first: np.ndarray, sentinel: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: winning code (``-1`` if no votes), whether it is a unique mode, and the top count."""
    top = counts.max(axis=1) if counts.shape[1] else np.zeros(counts.shape[0], dtype=int)
    tied = (counts == top[:, None]) & (top[:, None] > 0)
    win = np.argmin(np.where(tied, first, sentinel), axis=1) if counts.shape[1] else np.zeros(len(top), int)
    win = np.where(top > 0, win, -1)
    return win, tied.sum(axis=1) == 1, top


def plurality_details(matrix: Any) -> pd.DataFrame:
    """The plurality label of each item with its support.

    Columns: ``plurality`` (the modal label, ties broken by the earliest judge; missing where the item
    has no verdict), ``unique`` (True when the mode is not tied), ``votes`` (judges giving the
    plurality label) and ``n_judges`` (judges with a verdict).
    """
    codes, uniques, numeric = encode_matrix(matrix)
    n, j = codes.shape
    onehot = one_hot(codes, len(uniques))
    counts = onehot.sum(axis=1)
    first = np.where(onehot.any(axis=1), onehot.argmax(axis=1), j)
    win, unique, top = winning_codes(counts, first, j + 1)
    return pd.DataFrame(
        {
            "plurality": decode_matrix(win, uniques, numeric),
            "unique": unique & (top > 0),
            "votes": top.astype(int),
            "n_judges": (codes >= 0).sum(axis=1).astype(int),
        }
    )


def plurality(matrix: Any) -> np.ndarray:
    """Modal label per item; ties go to the tied label given first in column order (P1 first).

    >>> plurality([[1, 2, 2], [3, 1, 1], [1, 2, None], [None, None, None]]).tolist()
    [2.0, 1.0, 1.0, nan]
    >>> plurality([["yes", "no", "no", "yes"]]).tolist()
    ['yes']
    """
    return plurality_details(matrix)["plurality"].to_numpy()


def majority(matrix: Any, *, n_judges: int | None = None) -> np.ndarray:
    """The label given by more than half of the judges, per item; missing where no label has that.

    The one majority of this project, with two denominators:

    * ``n_judges=None``: more than half of the judges *with a verdict* on the item (a missing
      verdict leaves the panel; ``majority`` of analysis 7a);
    * ``n_judges=J``: at least ``ceil((J + 1) / 2)`` of the ``J`` judges of the design (more than
      half of J), a missing verdict being a judge that voted for no label: the prompt-lottery
      paper's plurality cluster (:func:`plurality_cluster`) and the verdict's majority.

    At most one label can have more than half of the votes, so there is never a tie.

    >>> majority([[1, 1, 2], [1, 2, 3], [1, 1, None], [1, 2, None]]).tolist()
    [1.0, nan, 1.0, nan]
    >>> majority([[1, 1, None], [1, 2, None]], n_judges=3).tolist()
    [1.0, nan]
    """
    codes, uniques, numeric = encode_matrix(matrix)
    if n_judges is None:
        need = (codes >= 0).sum(axis=1) // 2 + 1
    else:
        need = np.full(codes.shape[0], cluster_threshold(n_judges))
    return decode_matrix(cluster_codes(codes, len(uniques), need), uniques, numeric)


def _numeric(matrix: Any) -> np.ndarray:
    arr = _as_matrix(matrix)
    return pd.DataFrame(arr).apply(pd.to_numeric, errors="raise").to_numpy(dtype=float)


def mean_score(matrix: Any) -> np.ndarray:
    """Mean of the judges' numeric scores per item, missing verdicts ignored (NaN if none).

    >>> mean_score([[1, 2, 3], [4, None, 5]]).tolist()
    [2.0, 4.5]
    """
    x = _numeric(matrix)
    with np.errstate(all="ignore"):
        n = (~np.isnan(x)).sum(axis=1)
        s = np.nansum(x, axis=1)
        return np.where(n > 0, s / np.maximum(n, 1), np.nan)


def median_score(matrix: Any) -> np.ndarray:
    """Median of the judges' numeric scores per item, missing verdicts ignored (NaN if none).

    >>> median_score([[1, 2, 5, 4], [4, None, 5, None]]).tolist()
    [3.0, 4.5]
    """
    x = _numeric(matrix)
    out = np.full(x.shape[0], np.nan)
    for i, row in enumerate(x):
        row = row[~np.isnan(row)]
        if row.size:
            out[i] = float(np.median(row))
    return out


def cluster_label(matrix: Any) -> np.ndarray:
    """The aggregation the paper calls plurality (Table 6, §5.2): the label given by at least 3 of the
    5 judges, i.e. :func:`plurality_cluster`; no verdict where no label has the votes (no consensus).

    >>> cluster_label([[1, 1, 2, 2, 1], [1, 2, 2, 3, 3]]).tolist()
    [1.0, nan]
    """
    return plurality_cluster(matrix)


#: the aggregations of the variants' verdicts, by the name the report prints: ``plurality`` is the
#: paper's (a label given by at least 3 of 5 judges, Table 6 / §5.2); ``plurality_ties_to_p1`` is
#: ours (the modal label, ties broken toward P1, so every item has one); ``mean`` and ``median``
AGGREGATORS: Registry[Callable[[Any], np.ndarray]] = Registry("aggregation", error=ValueError)
AGGREGATORS.register("plurality", cluster_label)
AGGREGATORS.register("plurality_ties_to_p1", plurality)
AGGREGATORS.register("mean", mean_score)
AGGREGATORS.register("median", median_score)


def aggregate(matrix: Any, method: str) -> np.ndarray:
    """One of :data:`AGGREGATORS` by name."""
    if method not in AGGREGATORS:
        raise ValueError(f"unknown aggregation {method!r}; valid: {sorted(AGGREGATORS)}")
    return AGGREGATORS.get(method)(matrix)


# --- the paper's plurality cluster ---------------------------------------------------------------


def cluster_threshold(n_judges: int) -> int:
    """Votes a label needs to form the plurality cluster of ``n_judges`` judges: ``ceil((J + 1) / 2)``.

    The prompt-lottery paper's numbers fit "at least 3 of the 5" judges: strict plurality is reached in
    58.73% of cases = 37.68% (by the third call) + 21.05% (by the fifth call), 41.27% "require more than
    five calls"; its agreement classifier (§F.2) "predicts whether a judge's score matches at least
    three of five" judges.

    >>> [cluster_threshold(j) for j in (2, 3, 4, 5, 7)]
    [2, 2, 3, 3, 4]
    """
    if n_judges < 1:
        raise ValueError(f"n_judges must be >= 1, got {n_judges}")
    return n_judges // 2 + 1


def cluster_codes(
    codes: np.ndarray, n_labels: int, need: np.ndarray, *, counts: np.ndarray | None = None
) -> np.ndarray:
    """Per item, the label with at least ``need`` votes (``-1``: none); ``need`` > half the votes."""
    if counts is None:
        counts = one_hot(codes, n_labels).sum(axis=1)
    top = counts.max(axis=1) if n_labels else np.zeros(len(codes), dtype=int)
    # at most one label can reach a strict majority, so argmax is that label
    return np.where((top >= need) & (top > 0), counts.argmax(axis=1) if n_labels else -1, -1)


def plurality_cluster(matrix: Any, *, n_judges: int | None = None) -> np.ndarray:
    """The paper's plurality cluster per item: the label given by >= ``ceil((J + 1) / 2)`` judges.

    ``J`` is the number of judges in the design (``n_judges``, default the number of columns): a
    missing verdict is a judge that did not vote for any label, not a smaller panel. Items without
    such a label are *no-consensus* (NaN / None).

    >>> plurality_cluster([[1, 2, 2, 3, 3], [4, 4, 3, 4, 1], [2, 2, 2, None, None]]).tolist()
    [nan, 4.0, 2.0]
    """
    arr = _as_matrix(matrix)
    return majority(arr, n_judges=arr.shape[1] if n_judges is None else n_judges)

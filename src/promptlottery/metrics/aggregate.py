"""Aggregating several judges' verdicts on the same items, and how fast the plurality settles.

Two notions of "the plurality" live here, each under its own name:

* the **plurality cluster** (:func:`plurality_cluster`, :func:`online_convergence`): the prompt-lottery
  paper's definition, a label given by at least ``ceil((J + 1) / 2)`` of the ``J`` judges (3 of 5);
  an item without one is *no-consensus*. Every row printed beside the paper uses it.
* the **tie-broken plurality** (:func:`plurality`, :func:`convergence`): the modal label with ties
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
    "cluster_match",
    "CONVERGENCE_RULES",
    "cluster_threshold",
    "convergence",
    "convergence_shares",
    "convergence_summary",
    "majority",
    "mean_score",
    "median_score",
    "online_convergence",
    "plurality",
    "plurality_cluster",
    "plurality_details",
]


def _as_matrix(matrix: Any) -> np.ndarray:
    arr = matrix.to_numpy() if isinstance(matrix, pd.DataFrame) else np.asarray(matrix, dtype=object)
    if arr.ndim != 2:
        raise ValueError(f"expected an items x judges matrix, got shape {arr.shape}")
    return arr


def _encode(matrix: Any) -> tuple[np.ndarray, np.ndarray, bool]:
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


def _decode(codes: np.ndarray, uniques: np.ndarray, numeric: bool) -> np.ndarray:
    if numeric:
        out = np.full(codes.shape, np.nan)
        ok = codes >= 0
        out[ok] = uniques[codes[ok]]
        return out
    out = np.full(codes.shape, None, dtype=object)
    ok = codes >= 0
    out[ok] = uniques[codes[ok]]
    return out


def _onehot(codes: np.ndarray, n_labels: int) -> np.ndarray:
    return codes[:, :, None] == np.arange(n_labels)[None, None, :]


def _winner(
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
    codes, uniques, numeric = _encode(matrix)
    n, j = codes.shape
    onehot = _onehot(codes, len(uniques))
    counts = onehot.sum(axis=1)
    first = np.where(onehot.any(axis=1), onehot.argmax(axis=1), j)
    win, unique, top = _winner(counts, first, j + 1)
    return pd.DataFrame(
        {
            "plurality": _decode(win, uniques, numeric),
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
    codes, uniques, numeric = _encode(matrix)
    if n_judges is None:
        need = (codes >= 0).sum(axis=1) // 2 + 1
    else:
        need = np.full(codes.shape[0], cluster_threshold(n_judges))
    return _decode(_cluster_codes(codes, len(uniques), need), uniques, numeric)


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


def convergence(matrix: Any, *, strict: bool = True) -> pd.DataFrame:
    """After how many judges (in column order) each item's final plurality is reached and stays.

    The final label is :func:`plurality` over all the judges. After the first ``k`` judges the
    running leader is the modal label of those ``k`` verdicts. ``converged_at`` is the smallest ``k``
    such that the running leader equals the final label for ``k`` and every later prefix.

    ``strict=True`` (default): a tied running mode leads nobody, so an item whose final plurality
    is itself a tie (decided only by the tie-break) never converges (``converged_at`` = NaN).
    ``strict=False``: ties are broken at every prefix as in :func:`plurality`, so every item with a
    verdict converges by the last judge.

    Columns: ``plurality``, ``unique``, ``votes``, ``n_judges`` (as :func:`plurality_details`),
    ``first_judge`` (the first column's label) and ``converged_at`` (float; NaN = never).

    >>> convergence([[1, 1, 2], [1, 2, 2], [1, 2, 3]])["converged_at"].tolist()
    [1.0, 3.0, nan]
    """
    codes, uniques, numeric = _encode(matrix)
    det = plurality_details(matrix)
    det["first_judge"] = _decode(codes[:, 0], uniques, numeric) if codes.shape[1] else None
    det["converged_at"] = online_convergence(matrix, rule="mode" if strict else "mode_ties_to_first")
    return det


def convergence_summary(conv: pd.DataFrame, *, checkpoints: tuple[int, ...] = (3, 5)) -> dict[str, Any]:
    """Shares of items converged by each checkpoint judge and never, and the first judge's match rate.

    ``conv`` is the output of :func:`convergence`; only items with at least one verdict count.
    ``first_judge_matches``: share of items where the first judge (P1) alone gives the final
    plurality (ties count as matches when the tie-break chose P1's label);
    ``first_judge_matches_unique``: the same among items whose plurality is not tied. A checkpoint
    beyond the number of judges is reported as ``None``.
    """
    c = conv[conv["n_judges"] > 0]
    n = len(c)
    n_judges = int(conv["n_judges"].max()) if len(conv) else 0
    at = c["converged_at"].to_numpy(dtype=float)
    out: dict[str, Any] = {"n_items": n, "n_judges": n_judges}
    for k in checkpoints:
        out[f"by_{k}"] = float(np.mean(at <= k)) if n and k <= n_judges else None
    out["never"] = float(np.mean(np.isnan(at))) if n else None
    out["mean_converged_at"] = float(np.nanmean(at)) if n and (~np.isnan(at)).any() else None
    match = _same(c["first_judge"].to_numpy(), c["plurality"].to_numpy())
    out["first_judge_matches"] = float(match.mean()) if n else None
    uniq = c["unique"].to_numpy(dtype=bool)
    out["first_judge_matches_unique"] = float(match[uniq].mean()) if uniq.any() else None
    out["n_unique"] = int(uniq.sum())
    return out


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.array([(not pd.isna(x)) and (not pd.isna(y)) and x == y for x, y in zip(a, b)], dtype=bool)


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


def _cluster_codes(
    codes: np.ndarray, n_labels: int, need: np.ndarray, *, counts: np.ndarray | None = None
) -> np.ndarray:
    """Per item, the label with at least ``need`` votes (``-1``: none); ``need`` > half the votes."""
    if counts is None:
        counts = _onehot(codes, n_labels).sum(axis=1)
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


#: the running verdict of the first k of J judges, per rule of :func:`online_convergence`
CONVERGENCE_RULES = ("cluster", "majority", "mode", "mode_ties_to_first")


def online_convergence(matrix: Any, *, rule: str = "cluster", n_judges: int | None = None) -> np.ndarray:
    """The call (1-based, judges in column order) from which each item's running verdict of the first
    ``k`` judges is its final verdict of all ``J`` judges and stays so; NaN where there is no final verdict.

    The one convergence function of this project; ``rule`` says what the running verdict is:

    * ``"cluster"`` (default; the prompt-lottery paper's, §5.2: plurality "reached by the third call" /
      "by the fifth call"): the label with ``ceil((J + 1) / 2)`` votes among the first ``k`` judges,
      ``J`` = ``n_judges`` (default: the columns). Once reached it stays, so this is the earliest
      ``k`` at which the item's :func:`plurality_cluster` is reached: the stop a user could make after
      ``k`` calls without seeing the later judges;
    * ``"majority"`` (ours, the verdict's ``k_needed``): the majority of the first ``k`` judges, a
      label with ``ceil((k + 1) / 2)`` of the ``k`` (a missing verdict votes for none): the smallest
      ``k`` from which the running majority equals the final one for every ``k' >= k``;
    * ``"mode"`` (ours, :func:`convergence`): the modal label of the first ``k``, nobody when tied,
      so an item whose final mode is tied never converges;
    * ``"mode_ties_to_first"`` (ours): the modal label, ties broken by the earliest judge as in
      :func:`plurality`, so every item with a verdict converges by the last judge.

    >>> online_convergence([[4, 4, 3, 4, 1], [4, 3, 4, 2, 1], [5, 5, 5, 1, 1], [1, 2, 2, 3, 3]]).tolist()
    [4.0, nan, 3.0, nan]
    >>> online_convergence([["1", "1", "1"], ["2", "1", "1"], ["1", "2", "3"]], rule="majority").tolist()
    [1.0, 3.0, nan]
    >>> online_convergence([[1, 1, 2], [1, 2, 2], [1, 2, 3]], rule="mode").tolist()
    [1.0, 3.0, nan]
    """
    if rule not in CONVERGENCE_RULES:
        raise ValueError(f"unknown convergence rule {rule!r}; valid: {CONVERGENCE_RULES}")
    codes, uniques, _ = _encode(matrix)
    n, j = codes.shape
    if not j:
        return np.full(n, np.nan)
    onehot = _onehot(codes, len(uniques))
    cum = np.cumsum(onehot, axis=1)  # n x k x labels: counts after the first k+1 judges
    first = np.where(onehot.any(axis=1), onehot.argmax(axis=1), j)
    leaders = np.full((n, j), -1, dtype=int)
    for k in range(j):
        if rule in ("cluster", "majority"):
            # more than half of the J judges (cluster) or of the first k + 1 (majority)
            need = cluster_threshold((j if n_judges is None else n_judges) if rule == "cluster" else k + 1)
            leaders[:, k] = _cluster_codes(codes, len(uniques), np.full(n, need), counts=cum[:, k, :])
        else:
            win, uniq, _ = _winner(cum[:, k, :], first, j + 1)
            leaders[:, k] = win if rule == "mode_ties_to_first" else np.where(uniq, win, -1)
    final = leaders[:, -1]
    ok = (leaders == final[:, None]) & (final[:, None] >= 0)
    # converged at k (1-based) when ok holds for every prefix from k to j
    suffix_all = np.flip(np.cumprod(np.flip(ok, axis=1), axis=1), axis=1).astype(bool)
    return np.where(suffix_all.any(axis=1), suffix_all.argmax(axis=1) + 1, np.nan).astype(float)


def convergence_shares(
    converged_at: Any, *, n_judges: int, checkpoints: tuple[int, ...] = (3, 5)
) -> dict[str, float | None]:
    """Incremental shares of items converging by each checkpoint call, and never (they sum to 1).

    As the paper reports them: 37.68% "by the third call", 21.05% more "by the fifth call" and
    41.27% that "require more than five calls". ``converged_by_<k>`` is the share converging after the
    previous checkpoint and at or before call ``k``; ``never_converged`` the share never converging
    within ``n_judges`` calls. A checkpoint beyond ``n_judges`` is None.

    >>> convergence_shares([3, 4, float("nan"), 5], n_judges=5)
    {'converged_by_3': 0.25, 'converged_by_5': 0.5, 'never_converged': 0.25}
    """
    at = np.asarray(converged_at, dtype=float)
    out: dict[str, float | None] = {}
    previous = 0
    for k in checkpoints:
        ok = at.size and k <= n_judges
        out[f"converged_by_{k}"] = float(np.mean((at > previous) & (at <= k))) if ok else None
        previous = k
    out["never_converged"] = float(np.mean(np.isnan(at) | (at > previous))) if at.size else None
    return out


def cluster_match(labels: Any, cluster: Any) -> np.ndarray:
    """Whether each judge's label equals the item's plurality cluster label (no cluster: False).

    >>> cluster_match([1, 2, 3, None], [1.0, 1.0, float("nan"), 1.0]).tolist()
    [True, False, False, False]
    """
    return _same(np.asarray(labels, dtype=object), np.asarray(cluster, dtype=object))

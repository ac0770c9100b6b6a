"""How fast the plurality settles as judges are called in order: the running leader after the first
``k`` judges, the earliest ``k`` from which it stays (hindsight, :func:`convergence`) or at which a
stop could be made online (:func:`online_convergence`), and the shares of items settled by each
call. The aggregations themselves, and the matrix conventions: :mod:`promptlottery.metrics.aggregate`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from promptlottery.metrics.aggregate import (
    cluster_codes,
    cluster_threshold,
    decode_matrix,
    encode_matrix,
    one_hot,
    plurality_details,
    winning_codes,
)

__all__ = [
    "CONVERGENCE_RULES",
    "cluster_match",
    "convergence",
    "convergence_shares",
    "convergence_summary",
    "online_convergence",
]


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
    codes, uniques, numeric = encode_matrix(matrix)
    det = plurality_details(matrix)
    det["first_judge"] = decode_matrix(codes[:, 0], uniques, numeric) if codes.shape[1] else None
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
    codes, uniques, _ = encode_matrix(matrix)
    n, j = codes.shape
    if not j:
        return np.full(n, np.nan)
    onehot = one_hot(codes, len(uniques))
    cum = np.cumsum(onehot, axis=1)  # n x k x labels: counts after the first k+1 judges
    first = np.where(onehot.any(axis=1), onehot.argmax(axis=1), j)
    leaders = np.full((n, j), -1, dtype=int)
    for k in range(j):
        if rule in ("cluster", "majority"):
            # more than half of the J judges (cluster) or of the first k + 1 (majority)
            need = cluster_threshold((j if n_judges is None else n_judges) if rule == "cluster" else k + 1)
            leaders[:, k] = cluster_codes(codes, len(uniques), np.full(n, need), counts=cum[:, k, :])
        else:
            win, uniq, _ = winning_codes(cum[:, k, :], first, j + 1)
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

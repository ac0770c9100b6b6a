"""The estimators that read a sparse plan (:mod:`promptlottery.metrics.sparse_plans`) of an items x
wordings grid.

The estimators take the items x wordings matrix with NaN where a cell was not judged, and the plan:

* :func:`ipw_fleiss_kappa`: Fleiss' kappa of the full grid, its observed pair agreement and label
  shares weighted by the inverse inclusion probabilities (Hajek ratio estimators); on a full plan it
  is Fleiss' kappa exactly;
* :func:`alpha_observed`: Krippendorff's alpha over the observed cells (alpha's own treatment of
  missing values: the design's missing cells are missing at random by construction, up to the anchor's
  over-representation, which is why the weighted kappa is the primary estimate);
* :func:`mean_cohen_observed`: the mean over wording pairs of Cohen's kappa on the items both judged;
* :func:`changed_share`: the share of items whose verdict differs under at least one wording: the
  items with an observed disagreement count as changed, every other item counts with the probability
  that an item of its observed size shows no disagreement and is changed all the same, calibrated on
  the items judged under every wording (model-assisted; named so);
* :func:`ht_system_tau`: the mean over wording pairs of Kendall's tau-b between the systems' mean
  scores, each mean a Hajek (inverse-probability weighted) mean over the items judged.

All are pure functions over arrays (no I/O); the intervals (items resampled with the cells each item
drew, so they include the design's uncertainty) are built by :mod:`promptlottery.analysis.budget.simulation`.
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any

import numpy as np

from promptlottery.metrics._validation import warn_undefined
from promptlottery.metrics.agreement import cohen_kappa
from promptlottery.metrics.sparse_plans import SparsePlan, sparse_plan  # noqa: F401 - sparse_plan: the doctests

__all__ = [
    "alpha_batch",
    "alpha_observed",
    "alpha_parts",
    "changed_batch",
    "changed_parts",
    "changed_share",
    "fleiss_batch",
    "fleiss_parts",
    "ht_system_tau",
    "ipw_fleiss_kappa",
    "mean_cohen_observed",
    "tau_batch",
    "tau_parts",
    "safe_ratio",
    "single_estimate",
]


# --------------------------------------------------------------------------- estimators
# Each estimator is a function of sums over items of per-item parts, so that the estimate under item
# weights ``r`` (1 for the estimate, a bootstrap resample's counts for a replicate) is a matrix product:
# ``<name>_batch(parts, r)`` gives one value per row of ``r`` (R x n_items).


def _codes(labels: Any) -> tuple[np.ndarray, int]:
    """Integer codes of an items x wordings label matrix, -1 where a cell was not judged."""
    arr = np.asarray(labels, dtype=float)
    if arr.ndim != 2:
        raise ValueError(f"labels must be an items x wordings matrix, got shape {arr.shape}")
    seen = np.isfinite(arr)
    values = np.unique(arr[seen])
    codes = np.full(arr.shape, -1, dtype=int)
    codes[seen] = np.searchsorted(values, arr[seen])
    return codes, len(values)


def _counts(codes: np.ndarray, n_lab: int) -> np.ndarray:
    """Items x labels: how many judged cells of each item carry each label."""
    out = np.zeros((codes.shape[0], max(n_lab, 1)))
    rows, cols = np.nonzero(codes >= 0)
    np.add.at(out, (rows, codes[rows, cols]), 1.0)
    return out


def _check_plan(codes: np.ndarray, plan: SparsePlan) -> None:
    if codes.shape != plan.mask.shape:
        raise ValueError(f"labels {codes.shape} and plan {plan.mask.shape} differ in shape")


def single_estimate(batch_value: np.ndarray, what: str) -> float:
    value = float(batch_value[0])
    return value if np.isfinite(value) else warn_undefined(f"{what} is undefined on these cells")


def safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def fleiss_parts(labels: Any, plan: SparsePlan) -> tuple[np.ndarray, ...]:
    """Per item: the weighted agreeing pairs, the weight of its judged pairs, its weighted label counts."""
    codes, n_lab = _codes(labels)
    _check_plan(codes, plan)
    n, k = codes.shape
    seen = codes >= 0
    agree, weight = np.zeros(n), np.zeros(n)
    for a, b in itertools.combinations(range(k), 2):
        both = seen[:, a] & seen[:, b] & (plan.pair_prob[:, a, b] > 0)
        w = np.where(both, 1.0 / np.where(both, plan.pair_prob[:, a, b], 1.0), 0.0)
        agree += w * (codes[:, a] == codes[:, b])
        weight += w
    w_cell = np.where(seen, 1.0 / np.where(seen, plan.prob, 1.0), 0.0)
    labels_w = np.zeros((n, max(n_lab, 1)))
    rows, cols = np.nonzero(seen)
    np.add.at(labels_w, (rows, codes[rows, cols]), w_cell[rows, cols])
    return agree, weight, labels_w


def fleiss_batch(parts: tuple[np.ndarray, ...], r: np.ndarray) -> np.ndarray:
    agree, weight, labels_w = parts
    p_obs = safe_ratio(r @ agree, r @ weight)
    tot = r @ labels_w
    shares = tot / np.where(tot.sum(axis=1, keepdims=True) > 0, tot.sum(axis=1, keepdims=True), 1.0)
    p_exp = (shares**2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (p_obs - p_exp) / (1.0 - p_exp)
    return np.where(np.isclose(p_exp, 1.0), np.nan, out)


def ipw_fleiss_kappa(labels: Any, plan: SparsePlan) -> float:
    """Fleiss' kappa of the full grid, estimated from the judged cells (inverse-probability weighted).

    Fleiss' kappa is ``(P - Pe) / (1 - Pe)``: ``P`` the share of agreeing pairs of ratings of an item,
    averaged over items, ``Pe`` the sum of the squared label shares of all ratings (Fleiss 1971).
    Here ``P`` is the weighted share of agreeing pairs among the judged pairs, each pair weighted by
    ``1 / pair_prob``, and the label shares are weighted by ``1 / prob`` (Hajek ratio estimators of
    the full grid's shares: within its stratum every cell and every pair of an item is equally likely
    to be judged, so the weights undo the strata's and the anchor's over-representation). On a full
    plan it is Fleiss' kappa exactly.
    """
    return single_estimate(
        fleiss_batch(fleiss_parts(labels, plan), np.ones((1, np.shape(labels)[0]))), "Fleiss' kappa"
    )


def alpha_parts(labels: Any) -> tuple[np.ndarray, ...]:
    """Per item: its disagreeing coincidences ``(m^2 - sum v_c^2) / (m - 1)`` and its pairable label counts."""
    codes, n_lab = _codes(labels)
    v = _counts(codes, n_lab)
    m = v.sum(axis=1)
    pairable = m >= 2
    d = np.where(pairable, (m**2 - (v**2).sum(axis=1)) / np.where(pairable, m - 1, 1.0), 0.0)
    return d, v * pairable[:, None]


def alpha_batch(parts: tuple[np.ndarray, ...], r: np.ndarray) -> np.ndarray:
    d, v = parts
    n_c = r @ v
    total = n_c.sum(axis=1)
    expected = total**2 - (n_c**2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(
            expected > 0, 1.0 - (total - 1) * (r @ d) / np.where(expected > 0, expected, 1.0), np.nan
        )


def alpha_observed(labels: Any) -> float:
    """Krippendorff's alpha (nominal) over the judged cells (NaN = not judged): alpha's own handling of
    missing values, ``1 - (n - 1) D_o / D_e`` over the coincidences of the pairable values
    (Krippendorff 2011, "Computing Krippendorff's alpha-reliability")."""
    return single_estimate(
        alpha_batch(alpha_parts(labels), np.ones((1, np.shape(labels)[0]))), "Krippendorff's alpha"
    )


def mean_cohen_observed(labels: Any, *, min_items: int = 2) -> float:
    """The mean over wording pairs of Cohen's kappa on the items both wordings judged.

    Pairs judged together on fewer than ``min_items`` items, or whose kappa is undefined, are left
    out; NaN (with a warning) when no pair is left.
    """
    arr = np.asarray(labels, dtype=float)
    values = []
    for a, b in itertools.combinations(range(arr.shape[1]), 2):
        both = np.isfinite(arr[:, a]) & np.isfinite(arr[:, b])
        if both.sum() < min_items:
            continue
        x, y = arr[both, a], arr[both, b]
        if len(np.unique(np.concatenate([x, y]))) < 2:
            continue
        values.append(cohen_kappa(x, y))
    values = [v for v in values if np.isfinite(v)]
    if not values:
        return warn_undefined(
            "mean Cohen's kappa is undefined: no pair of wordings judged together on enough items"
        )
    return float(np.mean(values))


def changed_parts(labels: Any) -> tuple[np.ndarray, ...]:
    """Per item: observed change, judged or not, the one-hot of its size among the not-yet-changed
    partial items, and (fully judged items) per size the agreeing subsets and those of a changed item."""
    arr = np.asarray(labels, dtype=float)
    n, k = arr.shape
    seen = np.isfinite(arr)
    size = seen.sum(axis=1)
    full = size == k
    changed = np.array([len(np.unique(row[s])) > 1 for row, s in zip(arr, seen, strict=True)])
    partial = np.zeros((n, k + 1))
    open_ = ~changed & ~full & (size > 0)
    partial[np.flatnonzero(open_), size[open_]] = 1.0
    agree_sets, changed_sets = np.zeros((n, k + 1)), np.zeros((n, k + 1))
    for i in np.flatnonzero(full):
        # the s-subsets of a full item's wordings that agree: those inside one label's c wordings, C(c, s)
        # for each label (counted, not enumerated: 2^K subsets would not end for K = 30 wordings)
        counts = np.unique(arr[i], return_counts=True)[1]
        for s in range(1, k):
            agree_sets[i, s] = sum(math.comb(int(c), s) for c in counts)
        changed_sets[i] = agree_sets[i] * changed[i]
    return changed.astype(float), (size > 0).astype(float), partial, agree_sets, changed_sets


def changed_batch(parts: tuple[np.ndarray, ...], r: np.ndarray) -> np.ndarray:
    changed, judged, partial, agree_sets, changed_sets = parts
    q = safe_ratio(r @ changed_sets, r @ agree_sets)  # R x sizes
    need = r @ partial  # weighted partial items of each size
    missing = ((need > 0) & ~np.isfinite(q)).any(axis=1)
    rest = np.where(need > 0, need * np.nan_to_num(q), 0.0).sum(axis=1)
    out = safe_ratio(r @ changed + rest, r @ judged)
    return np.where(missing, np.nan, out)


def changed_share(labels: Any, plan: SparsePlan | None = None) -> float:
    """The share of items that get a different verdict from at least one wording (model-assisted).

    An item with two different observed labels is changed. An item whose ``n`` observed labels agree
    is changed with probability ``q(n)``: among the items judged under every wording, the share of
    changed ones among all ``n``-wording subsets that agree (every subset counted, so ``q`` is exact
    for those items). The estimate is the observed-changed share plus the ``q``-weighted rest; on a
    full grid it is the plain share. NaN (with a warning) when an item needs ``q(n)`` and no fully
    judged item defines it. (``plan`` is accepted for a uniform call signature; the estimate needs
    only which cells were judged.)

    >>> round(changed_share([[1, 1, 1], [1, 2, 1], [3, 3, 3]]), 6)
    0.333333
    """
    del plan
    return single_estimate(
        changed_batch(changed_parts(labels), np.ones((1, np.shape(labels)[0]))),
        "the changed share (no fully judged item to calibrate on, or no judged item)",
    )


def tau_parts(scores: Any, systems: Any, plan: SparsePlan) -> tuple[np.ndarray, ...]:
    """Per item and (system, wording): its weighted score and weight (zero outside its own system)."""
    arr = np.asarray(scores, dtype=float)
    sys = np.asarray(systems, dtype=object)
    names = sorted({s for s in sys if s is not None and s == s})
    seen = np.isfinite(arr)
    w = np.where(seen, 1.0 / np.where(seen, plan.prob, 1.0), 0.0)
    n, k = arr.shape
    num, den = np.zeros((n, len(names), k)), np.zeros((n, len(names), k))
    for s, name in enumerate(names):
        rows = sys == name
        den[rows, s] = w[rows]
        num[rows, s] = np.where(seen[rows], arr[rows], 0.0) * w[rows]
    return num.reshape(n, -1), den.reshape(n, -1), np.array([len(names), k])


def tau_batch(parts: tuple[np.ndarray, ...], r: np.ndarray) -> np.ndarray:
    num, den, (n_sys, k) = parts
    means = safe_ratio(r @ num, r @ den).reshape(len(r), n_sys, k)
    iu = np.triu_indices(n_sys, 1)
    taus = []
    for a, b in itertools.combinations(range(k), 2):
        x, y = means[:, :, a], means[:, :, b]
        sx = np.sign(x[:, iu[0]] - x[:, iu[1]])
        sy = np.sign(y[:, iu[0]] - y[:, iu[1]])
        ok = np.isfinite(sx) & np.isfinite(sy)
        sx, sy = np.where(ok, sx, 0.0), np.where(ok, sy, 0.0)
        den_ = np.sqrt((sx**2).sum(axis=1) * (sy**2).sum(axis=1))
        taus.append(safe_ratio((sx * sy).sum(axis=1), den_))
    if not taus:
        return np.full(len(r), np.nan)
    stacked = np.array(taus)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(stacked, axis=0)


def ht_system_tau(scores: Any, systems: Any, plan: SparsePlan) -> float:
    """The mean over wording pairs of Kendall's tau-b between the systems' mean scores.

    Each system's mean under a wording is the inverse-probability weighted (Hajek) mean of its judged
    items' scores; tau-b over the systems with a mean under both wordings. Pairs where tau is undefined
    (a constant ranking) are left out.

    >>> full = sparse_plan([f"i{k}" for k in range(6)], ["x", "y"], budget=1.0)
    >>> S = [[1, 2], [2, 1], [3, 3], [4, 5], [5, 4], [6, 6]]
    >>> ht_system_tau(S, ["s1", "s1", "s2", "s2", "s3", "s3"], full)
    1.0
    """
    return single_estimate(
        tau_batch(tau_parts(scores, systems, plan), np.ones((1, np.shape(scores)[0]))), "system tau"
    )

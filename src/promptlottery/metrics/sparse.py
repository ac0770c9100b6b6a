"""Sparse designs over an items x wordings grid, and the estimators that read them.

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
drew, so they include the design's uncertainty) are built by :mod:`promptlottery.analysis.budget`.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from promptlottery.metrics._validation import warn_undefined
from promptlottery.metrics.agreement import cohen_kappa

__all__ = [
    "SparsePlan",
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
    "sparse_plan",
    "tau_batch",
    "tau_parts",
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


def _unit(seed: int, *parts: str) -> float:
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
        if _unit(seed, "full", item) < full_share:
            mask[i], prob[i], pair[i] = True, 1.0, 1.0
            continue
        n_i = min(kk, int(math.floor(m + 1 - _unit(seed, "count", item))))
        order = sorted(others, key=lambda w: _unit(seed, "order", item, variants[w]))
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


def _one(batch_value: np.ndarray, what: str) -> float:
    value = float(batch_value[0])
    return value if np.isfinite(value) else warn_undefined(f"{what} is undefined on these cells")


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
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
    p_obs = _ratio(r @ agree, r @ weight)
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
    return _one(fleiss_batch(fleiss_parts(labels, plan), np.ones((1, np.shape(labels)[0]))), "Fleiss' kappa")


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
    return _one(alpha_batch(alpha_parts(labels), np.ones((1, np.shape(labels)[0]))), "Krippendorff's alpha")


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
        for s in range(1, k):
            for sub in itertools.combinations(range(k), s):
                if len(set(arr[i, list(sub)])) == 1:
                    agree_sets[i, s] += 1
                    changed_sets[i, s] += changed[i]
    return changed.astype(float), (size > 0).astype(float), partial, agree_sets, changed_sets


def changed_batch(parts: tuple[np.ndarray, ...], r: np.ndarray) -> np.ndarray:
    changed, judged, partial, agree_sets, changed_sets = parts
    q = _ratio(r @ changed_sets, r @ agree_sets)  # R x sizes
    need = r @ partial  # weighted partial items of each size
    missing = ((need > 0) & ~np.isfinite(q)).any(axis=1)
    rest = np.where(need > 0, need * np.nan_to_num(q), 0.0).sum(axis=1)
    out = _ratio(r @ changed + rest, r @ judged)
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
    return _one(
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
    means = _ratio(r @ num, r @ den).reshape(len(r), n_sys, k)
    iu = np.triu_indices(n_sys, 1)
    taus = []
    for a, b in itertools.combinations(range(k), 2):
        x, y = means[:, :, a], means[:, :, b]
        sx = np.sign(x[:, iu[0]] - x[:, iu[1]])
        sy = np.sign(y[:, iu[0]] - y[:, iu[1]])
        ok = np.isfinite(sx) & np.isfinite(sy)
        sx, sy = np.where(ok, sx, 0.0), np.where(ok, sy, 0.0)
        den_ = np.sqrt((sx**2).sum(axis=1) * (sy**2).sum(axis=1))
        taus.append(_ratio((sx * sy).sum(axis=1), den_))
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
    return _one(tau_batch(tau_parts(scores, systems, plan), np.ones((1, np.shape(scores)[0]))), "system tau")

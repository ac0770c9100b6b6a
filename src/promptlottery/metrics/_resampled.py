"""Agreement statistics on every bootstrap resample at once, from the resample counts.

A resample drawn with replacement only repeats original items. With ``w[r, i]`` the number of
copies of item ``i`` in resample ``r`` (:func:`resample_counts`), every count a statistic is built
from is ``w @ (that count per item)``: a contingency table of two raters (one one-hot cell per
item and rater pair: all pairs, all resamples in one product), a coincidence matrix (each item's
own coincidences, weighted), a category total. The per-item counts do not depend on the resample
and are computed once; the final formula is then applied to all resamples together.

Each ``*_resampled(w, ...)`` function returns, per row of ``w``, what the loop form returns on
that resample (``nan`` where it is undefined), to rounding (tested to 1e-9 against the loop on
data with ties and missing values). Inputs are the integer codes the public functions of
:mod:`promptlottery.metrics.agreement` build (``-1`` = missing).
"""

from __future__ import annotations

import itertools

import numpy as np

_CHUNK_ELEMENTS = 2**22  # cap on the (resamples x cells) intermediates, about 32 MB of float64
_COUNTS_CACHE: list[tuple[np.ndarray, int, np.ndarray]] = []


def resample_counts(indices: np.ndarray, n: int) -> np.ndarray:
    """``(R, n)`` float64: how many times each item is drawn in each resample (row) of ``indices``.

    The last few results (of up to ``2**22`` cells) are kept, keyed by the identity of
    ``indices``: the measures of one matrix are bootstrapped on the same resamples, which are
    then counted once.

    >>> resample_counts(np.array([[3, 2, 2, 1], [1, 0, 0, 0]]), 4).tolist()
    [[0.0, 1.0, 2.0, 1.0], [3.0, 1.0, 0.0, 0.0]]
    """
    for idx, size, w in _COUNTS_CACHE:
        if idx is indices and size == n:
            return w
    n_res = indices.shape[0]
    flat = (np.arange(n_res, dtype=np.int64)[:, None] * n + indices).ravel()
    w = np.bincount(flat, minlength=n_res * n).reshape(n_res, n).astype(np.float64)
    w.setflags(write=False)
    if w.size <= _CHUNK_ELEMENTS:  # a pooled analysis of every item is not worth keeping
        _COUNTS_CACHE.insert(0, (indices, n, w))
        del _COUNTS_CACHE[4:]
    return w


def _row_chunks(n_rows: int, per_row: int):
    step = max(1, _CHUNK_ELEMENTS // max(1, per_row))
    for s in range(0, n_rows, step):
        yield slice(s, min(n_rows, s + step))


def _pairs(n_raters: int) -> list[tuple[int, int]]:
    return list(itertools.combinations(range(n_raters), 2))


def mean_defined(values: np.ndarray) -> np.ndarray:
    """Mean over axis 1 of the defined (non-NaN) values; NaN where none is defined."""
    ok = ~np.isnan(values)
    n_ok = ok.sum(axis=1)
    total = np.where(ok, values, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_ok > 0, total / np.maximum(n_ok, 1), np.nan)


# --------------------------------------------------------------------------- raw agreement


def pairwise_overlap_resampled(w: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``(R, pairs)``: raw agreement of each pair of rater columns on each resample (NaN: no shared item)."""
    pairs = _pairs(codes.shape[1])
    both = np.stack([(codes[:, j] >= 0) & (codes[:, k] >= 0) for j, k in pairs], axis=1)
    same = np.stack([codes[:, j] == codes[:, k] for j, k in pairs], axis=1) & both
    shared, agree = w @ both.astype(np.float64), w @ same.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(shared > 0, agree / np.where(shared > 0, shared, 1.0), np.nan)


# --------------------------------------------------------------------------- Cohen's kappa


def kappa_weights(n_labels: int, weights: str | None) -> np.ndarray:
    """scikit-learn's disagreement weights: 1 off the diagonal, or |i - j|, or (i - j)^2."""
    pos = np.arange(n_labels)
    if weights is None:
        return 1.0 - np.eye(n_labels)
    diff = pos[:, None] - pos[None, :]
    return np.abs(diff).astype(float) if weights == "linear" else (diff**2).astype(float)


def pairwise_kappa_resampled(
    w: np.ndarray, codes: np.ndarray, n_labels: int, weights: str | None
) -> np.ndarray:
    """``(R, pairs)``: Cohen's kappa of each pair of rater columns on each resample.

    The contingency tables of every pair on every resample come from one product: each item puts
    a one in cell ``(a, b)`` of each pair's table; ``w`` weights the items. Then scikit-learn's
    formula, ``1 - sum(W * observed) / sum(W * expected)``. NaN where the loop gives None: fewer
    than two complete pairs, or chance agreement perfect (a zero denominator).
    """
    n_items, _ = codes.shape
    pairs = _pairs(codes.shape[1])
    n_cells = n_labels * n_labels
    onehot = np.zeros((n_items, len(pairs), n_cells + 1))
    for p, (j, k) in enumerate(pairs):
        keep = (codes[:, j] >= 0) & (codes[:, k] >= 0)
        onehot[np.arange(n_items), p, np.where(keep, codes[:, j] * n_labels + codes[:, k], n_cells)] = 1.0
    onehot = onehot[:, :, :n_cells].reshape(n_items, -1)
    wmat = kappa_weights(n_labels, weights)
    out = np.empty((w.shape[0], len(pairs)))
    for rows in _row_chunks(w.shape[0], len(pairs) * n_cells):
        conf = (w[rows] @ onehot).reshape(-1, len(pairs), n_labels, n_labels)
        sum0, sum1 = conf.sum(axis=2), conf.sum(axis=3)  # column totals, row totals (sklearn's names)
        total = sum0.sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            expected = sum0[..., :, None] * sum1[..., None, :] / total[..., None, None]
            k = (wmat * conf).sum(axis=(2, 3)) / (wmat * expected).sum(axis=(2, 3))
        kappa = 1.0 - k
        out[rows] = np.where((total >= 2) & np.isfinite(kappa), kappa, np.nan)
    return out


# --------------------------------------------------------------------------- Fleiss' kappa


def _category_counts(codes: np.ndarray, n_cat: int) -> np.ndarray:
    """``(items, categories)``: how many raters put each item in each category (missing ignored)."""
    n_items = codes.shape[0]
    present = codes >= 0
    rows = np.repeat(np.arange(n_items), codes.shape[1])[present.ravel()]
    return np.bincount(rows * n_cat + codes[present], minlength=n_items * n_cat).reshape(n_items, n_cat)


def fleiss_kappa_resampled(w: np.ndarray, codes: np.ndarray, n_cat: int) -> np.ndarray:
    """Fleiss' kappa (statsmodels' ``method="fleiss"``) on each resample of a complete matrix.

    A resample's size is its total count (``n`` for an item bootstrap; it varies from one cluster
    resample to the next)."""
    n_items, n_raters = codes.shape
    table = _category_counts(codes, n_cat).astype(np.float64)
    p_rat = ((table * table).sum(axis=1) - n_raters) / (n_raters * (n_raters - 1.0))
    size = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_cat = (w @ table) / (size[:, None] * n_raters)
        p_mean = (w @ p_rat) / size
    p_exp = (p_cat * p_cat).sum(axis=1)
    undefined = np.isclose((p_cat**2).sum(axis=1), 1.0, rtol=0, atol=1e-15)
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = (p_mean - p_exp) / (1 - p_exp)
    return np.where(undefined, np.nan, kappa)


# --------------------------------------------------------------------------- Krippendorff's alpha


def krippendorff_alpha_resampled(
    w: np.ndarray, codes: np.ndarray, domain: np.ndarray, level: str
) -> np.ndarray:
    """Krippendorff's alpha on each resample: ``1 - sum(o * d) / sum(e * d)`` as the package computes it.

    ``o`` (coincidences) is the ``w``-weighted sum of each item's own coincidence matrix
    ``(c c^T - diag c) / (m - 1)`` (``c`` its value counts, ``m`` its number of ratings; items
    rated once add nothing), ``n_v`` the pairable value totals and ``e = (n_v n_v^T - diag n_v) /
    (n - 1)``. Nominal and interval distances reduce both sums to per-item numbers, so those cost
    O(resamples x items); ordinal (whose distances depend on ``n_v``) and ratio go through the
    ``(resamples, V, V)`` coincidence matrices. NaN where the loop form is undefined: no pairable
    item, or every pairable rating the same value.
    """
    n_cat = len(domain)
    counts = _category_counts(codes, n_cat).astype(np.float64)
    m = counts.sum(axis=1)
    pairable = m >= 2
    counts_p = counts * pairable[:, None]
    n_v = w @ counts_p  # (R, V) pairable value totals
    n_tot = n_v.sum(axis=1)
    undefined = (n_v > 0).sum(axis=1) < 2  # also covers "no pairable item"
    if level == "nominal":
        alpha = _alpha_nominal(w, counts_p, m, n_v, n_tot)
    elif level == "interval":
        alpha = _alpha_interval(w, codes, np.asarray(domain, dtype=np.float64), pairable, n_tot)
    else:
        alpha = _alpha_general(w, counts_p, m, n_v, n_tot, np.asarray(domain, dtype=np.float64), level)
    return np.where(undefined, np.nan, alpha)


def _alpha_nominal(w, counts_p, m, n_v, n_tot) -> np.ndarray:
    # sum(o * d) = n - trace(o); sum(e * d) = (n^2 - sum n_v^2) / (n - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        same = (counts_p * (counts_p - 1.0)).sum(axis=1) / np.maximum(m - 1.0, 1.0)
        observed = n_tot - w @ same
        expected = (n_tot * n_tot - (n_v * n_v).sum(axis=1)) / (n_tot - 1.0)
        return 1.0 - observed / expected


def _alpha_interval(w, codes, domain, pairable, n_tot) -> np.ndarray:
    # sum(o * d): per item, the sum over ordered pairs of its ratings of (x_j - x_k)^2 / (m - 1);
    # sum(e * d) = 2 n SS / (n - 1), SS the pairable ratings' squared deviations from their mean,
    # pooled from each item's mean and within-item sum of squares (no cancellation)
    x = np.where(codes >= 0, domain[np.maximum(codes, 0)], np.nan)
    present = ~np.isnan(x)
    m = present.sum(axis=1).astype(np.float64)
    x0 = np.where(present, x, 0.0)
    diffs = np.zeros(len(x))
    for j, k in _pairs(x.shape[1]):
        both = present[:, j] & present[:, k]
        diffs += np.where(both, (x0[:, j] - x0[:, k]) ** 2, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        d_item = np.where(pairable, 2.0 * diffs / np.maximum(m - 1.0, 1.0), 0.0)
        mean_i = np.where(pairable, x0.sum(axis=1) / np.maximum(m, 1.0), 0.0)
        within = np.where(pairable, (np.where(present, x0 - mean_i[:, None], 0.0) ** 2).sum(axis=1), 0.0)
        wm = w * np.where(pairable, m, 0.0)
        mu = (wm @ mean_i) / n_tot
        ss = w @ within
        for rows in _row_chunks(w.shape[0], w.shape[1]):
            ss[rows] += (wm[rows] * (mean_i[None, :] - mu[rows, None]) ** 2).sum(axis=1)
        observed = w @ d_item
        expected = 2.0 * n_tot * ss / (n_tot - 1.0)
        return 1.0 - observed / expected


def _alpha_general(w, counts_p, m, n_v, n_tot, domain, level) -> np.ndarray:
    n_cat = counts_p.shape[1]
    coinc = counts_p[:, :, None] * counts_p[:, None, :]
    coinc[:, np.arange(n_cat), np.arange(n_cat)] -= counts_p
    coinc = (coinc / np.maximum(m - 1.0, 1.0)[:, None, None]).reshape(len(m), -1)
    eye = np.eye(n_cat)
    if level == "ratio":
        total = domain[:, None] + domain[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            fixed = np.where(
                total != 0, (domain[:, None] - domain[None, :]) / np.where(total != 0, total, 1.0), 0.0
            )
        fixed = fixed**2
    out = np.empty(w.shape[0])
    for rows in _row_chunks(w.shape[0], n_cat * n_cat):
        o = (w[rows] @ coinc).reshape(-1, n_cat, n_cat)
        nv = n_v[rows]
        if level == "ordinal":  # (sum of n_g from c to k - (n_c + n_k) / 2)^2, c <= k
            cum = np.cumsum(nv, axis=1)
            lo, hi = (
                np.minimum.outer(np.arange(n_cat), np.arange(n_cat)),
                np.maximum.outer(np.arange(n_cat), np.arange(n_cat)),
            )
            between = cum[:, hi] - cum[:, lo] + nv[:, lo]
            d = (between - (nv[:, lo] + nv[:, hi]) / 2) ** 2
        else:
            d = fixed[None, :, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            e = (nv[:, :, None] * nv[:, None, :] - nv[:, :, None] * eye) / (n_tot[rows, None, None] - 1.0)
            out[rows] = 1.0 - (o * d).sum(axis=(1, 2)) / (e * d).sum(axis=(1, 2))
    return out

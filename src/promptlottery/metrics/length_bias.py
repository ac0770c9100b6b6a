"""Length bias of a judge, pointwise and pairwise.

* :func:`length_slope` (pointwise): the within-label regression slope of the judge's score on the
  response length, standardised, holding the human label fixed: ``score_i = a_g(i) + b * z_i + e``
  with one intercept ``a_g`` per human label ``g`` (a fixed-effects regression), so ``b`` is the
  change in the judge's score per standard deviation of length between responses the humans rated
  the same. ``b = 0`` for a judge that does not look at length.
* :func:`length_controlled_win_rate` (pairwise): AlpacaEval 2's length-controlled win rate (Dubois,
  Galambosi, Liang & Hashimoto 2024, "Length-Controlled AlpacaEval", §3; the formula
  ``np.tanh(std_delta_len) + not_gamed_baseline - 1`` of ``length_controlled_minimal`` in
  ``alpaca_eval/metrics/glm_winrate.py``): a logistic GLM
  ``P(model wins) = logistic(theta + phi * tanh(delta / sd(delta)))`` with
  ``delta = len(baseline) - len(model)`` and ``sd`` the sample standard deviation of ``delta``;
  the length-controlled win rate is the prediction at ``delta = 0``: ``logistic(theta)``; ``phi < 0``
  means the judge favours the longer answer (a shorter model answer, ``delta > 0``, wins less). Ties
  count 0.5 (AlpacaEval's preferences are probabilities in [0, 1]). Fitted here by unpenalised
  maximum likelihood (AlpacaEval itself adds an L1 penalty and, in ``length_controlled_v1``, an
  instruction-difficulty term and a regularisation towards gamed baselines, which need its own
  data).

Both intervals are percentile bootstraps over items (or over clusters of items, ``clusters=``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import check_min_items, check_positive_int, to_1d, to_numeric_1d, warn_undefined
from .bootstrap import Seed, check_level, check_seed, percentile_bounds
from .cluster_bootstrap import cluster_weights

__all__ = ["LengthBias", "length_controlled_win_rate", "length_slope"]


@dataclass(frozen=True)
class LengthBias:
    estimate: float  # the slope b (pointwise) or the length-controlled win rate (pairwise)
    low: float
    high: float
    level: float
    n: int
    extra: dict  # pairwise: raw win rate, phi (the length term) with its interval; pointwise: sd of length


def _within_slope(score: np.ndarray, z: np.ndarray, codes: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted within-group slopes, one per row of ``w`` (resample weights)."""
    k = codes.max() + 1
    onehot = np.eye(k)[codes]  # items x groups
    sw = w @ onehot
    with np.errstate(invalid="ignore", divide="ignore"):
        mz = (w * z) @ onehot / sw
        ms = (w * score) @ onehot / sw
    dz = z[None, :] - np.nan_to_num(mz)[:, codes]
    ds = score[None, :] - np.nan_to_num(ms)[:, codes]
    num, den = (w * dz * ds).sum(1), (w * dz * dz).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 1e-12, num / den, np.nan)


def length_slope(
    score,
    length,
    human,
    *,
    clusters=None,
    level: float = 0.95,
    n_resamples: int = 1000,
    seed: Seed = 0,
) -> LengthBias:
    """Within-human-label slope of the judge's ``score`` on standardised ``length``, with interval.

    ``human`` is the label held fixed (rounded scores or categories: one intercept per distinct
    value); items with a missing score, length or label are left out. ``nan`` with a warning where
    no label group has two lengths.

    Two label groups; within each, the longer response gets one more point, lengths 10 / 30 (sd of
    the four lengths 11.547): b = 1 / (20 / 11.547) = 0.5774 per sd.

    >>> r = length_slope([2, 3, 4, 5], [10, 30, 10, 30], [1, 1, 2, 2], n_resamples=10)
    >>> round(r.estimate, 4)
    0.5774
    """
    s, x = to_numeric_1d(score, "score"), to_numeric_1d(length, "length")
    g = to_1d(human, "human")
    if not (s.size == x.size == g.size):
        raise ValueError(
            f"score, length and human must have one value per item; got {s.size}, {x.size}, {g.size}"
        )
    check_level(level)
    n_resamples = check_positive_int("n_resamples", n_resamples)
    check_seed(seed)
    import pandas as pd

    keep = ~np.isnan(s) & ~np.isnan(x) & ~pd.isna(g)
    s, x, g = s[keep], x[keep], g[keep]
    check_min_items(s.size)
    sd = float(np.std(x, ddof=1))
    if not sd > 0:
        warn_undefined("length_slope: every response has the same length")
        return LengthBias(float("nan"), float("nan"), float("nan"), level, int(s.size), {"sd_length": sd})
    z = (x - x.mean()) / sd
    codes = pd.factorize(g)[0]
    est = float(_within_slope(s, z, codes, np.ones((1, s.size)))[0])
    if np.isnan(est):
        warn_undefined("length_slope: no human-label group holds two different lengths")
    cl = np.arange(s.size) if clusters is None else to_1d(clusters, "clusters")[keep]
    dist = _within_slope(s, z, codes, cluster_weights(cl, n_resamples, seed=seed))
    low, high = percentile_bounds(dist, level)
    return LengthBias(est, low, high, level, int(s.size), {"sd_length": sd})


def _fit_logistic(t: np.ndarray, p: np.ndarray, w: np.ndarray, iters: int = 50) -> np.ndarray:
    """``(theta, phi)`` per row of ``w``: Newton's method on the weighted Bernoulli log likelihood
    with fractional targets ``p`` and the one covariate ``t``."""
    beta = np.zeros((w.shape[0], 2))
    for _ in range(iters):
        eta = beta[:, :1] + beta[:, 1:] * t[None, :]
        mu = 1 / (1 + np.exp(-eta))
        r = w * (p[None, :] - mu)
        v = w * mu * (1 - mu)
        g0, g1 = r.sum(1), (r * t).sum(1)
        h00, h01, h11 = v.sum(1), (v * t).sum(1), (v * t * t).sum(1)
        det = h00 * h11 - h01**2
        with np.errstate(invalid="ignore", divide="ignore"):
            step = np.stack([(h11 * g0 - h01 * g1) / det, (h00 * g1 - h01 * g0) / det], axis=1)
        step = np.clip(np.nan_to_num(step), -5, 5)
        beta = beta + step
        if np.abs(step).max() < 1e-12:
            break
    return beta


def length_controlled_win_rate(
    preference,
    len_model,
    len_baseline,
    *,
    clusters=None,
    level: float = 0.95,
    n_resamples: int = 1000,
    seed: Seed = 0,
) -> LengthBias:
    """AlpacaEval 2's length-controlled win rate of a model over a baseline, with interval.

    ``preference``: per pair, 1 where the judge prefers the model, 0 the baseline, 0.5 a tie (or a
    probability in [0, 1]); missing preferences are left out. ``extra`` holds the raw win rate and
    ``phi``, the length term, each with its interval. A win rate of 0 or 1 has no finite GLM fit
    (``nan`` plus a warning).

    Ten pairs with the baseline 10 characters longer (the model wins 4) and ten with the model 10
    longer (the model wins 9): the GLM fits both groups exactly, ``theta = (logit 0.4 + logit 0.9) / 2``
    and the length-controlled win rate is ``logistic(theta) = 0.7101`` against a raw 0.65.

    >>> pref = [1] * 4 + [0] * 6 + [1] * 9 + [0]
    >>> r = length_controlled_win_rate(pref, [100] * 10 + [110] * 10, [110] * 10 + [100] * 10, n_resamples=10)
    >>> round(r.estimate, 4), r.extra["win_rate"]
    (0.7101, 0.65)
    """
    p = to_numeric_1d(preference, "preference")
    lm, lb = to_numeric_1d(len_model, "len_model"), to_numeric_1d(len_baseline, "len_baseline")
    if not (p.size == lm.size == lb.size):
        raise ValueError(
            f"preference, len_model, len_baseline need one value per pair; got {p.size}, {lm.size}, {lb.size}"
        )
    bad = ~np.isnan(p) & ((p < 0) | (p > 1))
    if bad.any():
        raise ValueError(
            f"preference must be in [0, 1]; pair {int(np.flatnonzero(bad)[0])} has {float(p[bad][0])!r}"
        )
    check_level(level)
    n_resamples = check_positive_int("n_resamples", n_resamples)
    check_seed(seed)
    keep = ~np.isnan(p) & ~np.isnan(lm) & ~np.isnan(lb)
    p, delta = p[keep], (lb - lm)[keep]
    check_min_items(p.size, "pairs")
    nan = float("nan")
    wr = float(p.mean())
    sd = float(np.std(delta, ddof=1))
    t = np.tanh(delta / sd) if sd > 0 else np.zeros_like(delta)
    if wr in (0.0, 1.0):
        warn_undefined(f"length_controlled_win_rate: the raw win rate is {wr}; the GLM has no finite fit")
        return LengthBias(
            nan, nan, nan, level, int(p.size), {"win_rate": wr, "phi": nan, "phi_low": nan, "phi_high": nan}
        )
    if sd > 0:
        beta = _fit_logistic(t, p, np.ones((1, p.size)))[0]
    else:  # no length difference at all: nothing to control, the GLM is the intercept alone
        beta = np.array([np.log(wr / (1 - wr)), 0.0])
    cl = np.arange(p.size) if clusters is None else to_1d(clusters, "clusters")[keep]
    w = cluster_weights(cl, n_resamples, seed=seed)
    boot = _fit_logistic(t, p, w) if sd > 0 else np.zeros((n_resamples, 2)) + np.nan
    lc_dist = 1 / (1 + np.exp(-boot[:, 0]))
    low, high = percentile_bounds(lc_dist, level)
    phi_low, phi_high = percentile_bounds(boot[:, 1], level)
    lc = float(1 / (1 + np.exp(-beta[0])))
    return LengthBias(
        lc,
        low,
        high,
        level,
        int(p.size),
        {"win_rate": wr, "phi": float(beta[1]), "phi_low": phi_low, "phi_high": phi_high},
    )

"""Human-corrected estimates of a mean from many judge labels and a few human labels.

* :func:`ppi_mean`: prediction-powered inference with power tuning (PPI++; Angelopoulos, Duchi &
  Zrnic 2023, "PPI++: Efficient Prediction-Powered Inference", §2 and Example 1, mean estimation):
  ``theta_lambda = lambda * mean(f(X~)) + mean(Y - lambda * f(X))`` over ``N`` judge-only
  (unlabelled) items ``X~`` and ``n`` human-labelled items ``X``; unbiased for every ``lambda``,
  with variance ``lambda^2 Var(f) / N + Var(Y - lambda f) / n``, least at
  ``lambda* = Cov(Y, f) / ((1 + n / N) Var(f))``. ``lambda = 0`` is the human-only mean,
  ``lambda = 1`` plain PPI. The interval is the normal (CLT) interval.
* :func:`human_only_mean` and :func:`judge_only_mean`: the two naive intervals beside it.
* :func:`rogan_gladen`: for a binary verdict, the prevalence corrected by the judge's sensitivity
  ``Se`` and specificity ``Sp`` measured on the labelled slice (Rogan & Gladen 1978, Am. J.
  Epidemiol. 107(1):71-76): ``pi = (p + Sp - 1) / (Se + Sp - 1)``, ``p`` the judge's share of
  positives on all items, clipped to [0, 1]; its interval resamples both sets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._validation import check_min_items, check_positive_int, to_numeric_1d, warn_undefined
from .bootstrap import Seed, check_level, check_seed, percentile_bounds

__all__ = ["CorrectedMean", "human_only_mean", "judge_only_mean", "ppi_mean", "rogan_gladen"]


@dataclass(frozen=True)
class CorrectedMean:
    estimate: float
    low: float
    high: float
    level: float
    n_labelled: int  # human-labelled items
    n_unlabelled: int  # judge-only items
    lam: float  # the power-tuning lambda (nan where it does not apply)
    method: str


def _finite(x, name: str) -> np.ndarray:
    a = to_numeric_1d(x, name)
    if np.isnan(a).any():
        raise ValueError(f"{name} has a missing value at item {int(np.flatnonzero(np.isnan(a))[0])}")
    return a


def _z(level: float) -> float:
    return float(stats.norm.ppf(0.5 + level / 2))


def ppi_mean(y, yhat, yhat_unlabelled, *, level: float = 0.9, lam: float | None = None) -> CorrectedMean:
    """PPI++ estimate and ``level`` interval of the mean of ``Y``.

    ``y`` and ``yhat``: the human label and the judge's score on the ``n`` labelled items;
    ``yhat_unlabelled``: the judge's score on the ``N`` other items. ``lam=None`` estimates
    ``lambda*`` from the data the way ``ppi-python`` does (``Cov`` over the labelled items with
    ``1/n``, ``Var(f)`` over all ``n + N`` judge scores with ``1/(n+N-1)``, clipped to [0, 1]); the
    standard errors use ``1/n`` and ``1/N`` variances (``numpy.std``), as ``ppi_mean_ci`` does.

    >>> r = ppi_mean([1, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 0, 1, 1], lam=1.0)
    >>> round(r.estimate, 4)  # mean(f~) + mean(Y - f) = 4/6 + 1/4
    0.9167
    """
    y, f = _finite(y, "y"), _finite(yhat, "yhat")
    fu = _finite(yhat_unlabelled, "yhat_unlabelled")
    check_level(level)
    if y.size != f.size:
        raise ValueError(f"y has {y.size} items but yhat has {f.size}")
    check_min_items(y.size, "labelled items")
    check_min_items(fu.size, "unlabelled items")
    n, big_n = y.size, fu.size
    if lam is None:
        var_f = float(np.var(np.concatenate([f, fu]), ddof=1))
        cov = float(np.mean((y - y.mean()) * (f - f.mean())))
        lam = 0.0 if var_f == 0 else float(np.clip(cov / ((1 + n / big_n) * var_f), 0.0, 1.0))
    elif not np.isfinite(lam):
        raise ValueError(f"lam must be a finite number, got {lam!r}")
    est = lam * fu.mean() + np.mean(y - lam * f)
    se = float(np.sqrt(lam**2 * np.var(fu) / big_n + np.var(y - lam * f) / n))
    z = _z(level)
    return CorrectedMean(float(est), est - z * se, est + z * se, level, n, big_n, float(lam), "ppi++")


def human_only_mean(y, *, level: float = 0.9) -> CorrectedMean:
    """The classical CLT interval on the human labels alone (PPI++ with ``lambda = 0``).

    >>> round(human_only_mean([1, 0, 1, 1]).estimate, 2)
    0.75
    """
    y = _finite(y, "y")
    check_level(level)
    check_min_items(y.size, "labelled items")
    se, z = float(np.std(y) / np.sqrt(y.size)), _z(level)
    m = float(y.mean())
    return CorrectedMean(m, m - z * se, m + z * se, level, y.size, 0, 0.0, "human_only")


def judge_only_mean(yhat, *, level: float = 0.9) -> CorrectedMean:
    """The naive CLT interval on the judge's scores alone: it ignores the judge's bias, so its
    coverage of the human mean can be anywhere in [0, 1].

    >>> round(judge_only_mean([1, 0, 0, 1]).estimate, 2)
    0.5
    """
    f = _finite(yhat, "yhat")
    check_level(level)
    check_min_items(f.size, "judged items")
    se, z = float(np.std(f) / np.sqrt(f.size)), _z(level)
    m = float(f.mean())
    return CorrectedMean(m, m - z * se, m + z * se, level, 0, f.size, float("nan"), "judge_only")


def _rg(p: np.ndarray, se: np.ndarray, sp: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (p + sp - 1) / (se + sp - 1)
    out[(se + sp - 1) <= 0] = np.nan  # a judge no better than chance carries no information
    return np.clip(out, 0.0, 1.0)


def rogan_gladen(
    y,
    yhat,
    yhat_unlabelled,
    *,
    level: float = 0.9,
    n_resamples: int = 2000,
    seed: Seed = 0,
) -> CorrectedMean:
    """Rogan-Gladen corrected share of positives (binary 0/1 verdicts), with a bootstrap interval.

    ``Se = P(judge 1 | human 1)`` and ``Sp = P(judge 0 | human 0)`` come from the labelled items,
    the apparent prevalence ``p`` from the judge on all ``n + N`` items. Undefined (``nan`` plus a
    warning) when ``Se + Sp <= 1`` or the slice lacks a class. The interval resamples the
    labelled and the unlabelled items independently (percentile bootstrap).

    >>> y = [1] * 5 + [0] * 5            # Se = 4/5, Sp = 4/5 on the slice
    >>> f = [1, 1, 1, 1, 0, 0, 0, 0, 0, 1]
    >>> round(rogan_gladen(y, f, [1] * 6 + [0] * 4).estimate, 4)  # p = 11/20: (0.55 + 0.8 - 1) / 0.6
    0.5833
    """
    y, f = _finite(y, "y"), _finite(yhat, "yhat")
    fu = _finite(yhat_unlabelled, "yhat_unlabelled")
    check_level(level)
    n_resamples = check_positive_int("n_resamples", n_resamples)
    check_seed(seed)
    if y.size != f.size:
        raise ValueError(f"y has {y.size} items but yhat has {f.size}")
    for name, a in (("y", y), ("yhat", f), ("yhat_unlabelled", fu)):
        bad = ~np.isin(a, (0.0, 1.0))
        if bad.any():
            raise ValueError(f"{name} must be 0/1 verdicts; found {float(a[bad][0])!r}")
    n, big_n = y.size, fu.size
    nan = float("nan")
    pos, neg = y == 1, y == 0
    if not pos.any() or not neg.any():
        warn_undefined("rogan_gladen: the labelled slice needs both human classes")
        return CorrectedMean(nan, nan, nan, level, n, big_n, nan, "rogan_gladen")
    est = float(
        _rg(np.array([np.r_[f, fu].mean()]), np.array([f[pos].mean()]), np.array([1 - f[neg].mean()]))[0]
    )
    if np.isnan(est):
        warn_undefined("rogan_gladen: sensitivity + specificity <= 1 on the labelled slice")
        return CorrectedMean(nan, nan, nan, level, n, big_n, nan, "rogan_gladen")
    rng = np.random.default_rng(seed)
    il = rng.integers(0, n, size=(n_resamples, n))
    iu = rng.integers(0, big_n, size=(n_resamples, big_n))
    yl, fl = y[il], f[il]
    with np.errstate(invalid="ignore", divide="ignore"):
        se = (fl * yl).sum(1) / yl.sum(1)
        sp = ((1 - fl) * (1 - yl)).sum(1) / (1 - yl).sum(1)
    p = (fl.sum(1) + fu[iu].sum(1)) / (n + big_n)
    dist = _rg(p, se, sp)
    low, high = percentile_bounds(dist, level, finite_only=False)
    return CorrectedMean(est, low, high, level, n, big_n, nan, "rogan_gladen")

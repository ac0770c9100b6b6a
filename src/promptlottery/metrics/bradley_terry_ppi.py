"""A Bradley-Terry ranking of systems from judge preferences, corrected by a human-labelled slice of pairs.

The Bradley-Terry model is a logistic regression: ``P(first beats second) = sigmoid(beta_first -
beta_second)``, the design row of a pair ``e_first - e_second`` with the reference system's column
left out (its strength fixed at 0). Preferences are soft labels in [0, 1] (a tie is 1/2), fitted with
the logistic (cross-entropy) loss ``l(beta; x, y) = -y x'beta + log(1 + exp(x'beta))``.

The corrected estimate is PPI++ for a GLM (Angelopoulos, Duchi & Zrnic 2023, "PPI++: Efficient
Prediction-Powered Inference", §2 and Algorithm 1/Example 3, logistic regression), as
``ppi_py.ppi_logistic_pointestimate`` / ``ppi_logistic_ci`` compute it: with ``n`` labelled pairs
(human ``Y``, judge ``f``) and ``N`` unlabelled ones (judge ``f~``),

    beta_lambda = argmin  (1/n) sum_lab l(beta; X, Y)
                          + lambda [ (1/N) sum_unl l(beta; X~, f~) - (1/n) sum_lab l(beta; X, f) ],

``lambda`` power-tuned (ppi_py's ``_calc_lhat_glm``, clipped to [0, 1]) at the ``lambda = 1``
estimate: ``lambda = tr(H^-1 (C + C') H^-1) / (2 (1 + n/N) tr(H^-1 V H^-1))``, ``C`` the labelled
covariance of the gradients under ``Y`` and under ``f``, ``V`` the variance of the gradients under
``f`` over all ``n + N`` pairs, ``H`` the Hessian averaged over all pairs; then the fit is redone at
that ``lambda``. The interval is the CLT one, ``beta +- z sqrt(diag(Sigma) / n)``, ``Sigma = H^-1
(n/N Var(lambda g~_unl) + Var(g - lambda g~)) H^-1``, ``H`` over all pairs (over the labelled ones
when ``lambda = 0``). As in ``ppi_logistic_ci``, a tuned interval tunes lambda once more at the tuned
estimate and is centred on the fit at that second lambda (so its centre may differ from the point
estimate in the third decimal; both lambdas are kept). ppi_py minimises by L-BFGS; here by Newton
steps (the same minimiser).

With two systems and every pair in one orientation this is the PPI++ mean on the logit scale:
``sigmoid(beta) = lambda mean(f~) + mean(Y) - lambda mean(f)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._validation import check_positive_int, to_numeric_1d

__all__ = ["BradleyTerryPPI", "bt_design", "bt_fit", "ppi_bradley_terry"]


@dataclass(frozen=True)
class BradleyTerryPPI:
    systems: list[str]  # in the order of ``strength``; the reference first (its strength 0)
    strength: np.ndarray  # log-odds against the reference
    low: np.ndarray
    high: np.ndarray
    lam: float  # the point estimate's (ppi_logistic_pointestimate)
    lam_ci: float  # the interval's (ppi_logistic_ci); the same when lambda is given
    level: float
    n_labelled: int
    n_unlabelled: int


def bt_design(first, second, systems: list[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """Pairs x (systems - 1) design rows ``e_first - e_second``, the first system (the reference) left out."""
    first, second = np.asarray(first, dtype=object), np.asarray(second, dtype=object)
    names = list(systems) if systems is not None else sorted(set(first) | set(second), key=str)
    if len(names) < 2:
        raise ValueError(f"a Bradley-Terry ranking needs at least 2 systems, got {names}")
    col = {s: j for j, s in enumerate(names)}
    unknown = (set(first) | set(second)) - set(col)
    if unknown:
        raise ValueError(f"systems {sorted(map(str, unknown))} are not in systems={names}")
    x = np.zeros((first.size, len(names)))
    x[np.arange(first.size), [col[s] for s in first]] += 1.0
    x[np.arange(first.size), [col[s] for s in second]] -= 1.0
    return x[:, 1:], names


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def _newton(parts, d: int, iters: int = 100) -> np.ndarray:
    """Minimise ``sum_k w_k mean_i l(beta; X_k, y_k)`` (``parts``: (X, y, w) with w >= 0 or < 0)."""

    def loss(b):
        return sum(w * np.mean(-y * (x @ b) + np.logaddexp(0.0, x @ b)) for x, y, w in parts if len(y))

    beta = np.zeros(d)
    for _ in range(iters):
        grad, hess = np.zeros(d), np.zeros((d, d))
        for x, y, w in parts:
            if len(y):
                mu = _sigmoid(x @ beta)
                grad += w * x.T @ (mu - y) / len(y)
                hess += w * (x * (mu * (1 - mu))[:, None]).T @ x / len(y)
        step = np.linalg.solve(hess, grad)  # singular where the pairs do not link every system
        t, before = 1.0, loss(beta)
        while loss(beta - t * step) > before + 1e-12 and t > 1e-8:
            t /= 2
        beta = beta - t * step
        if np.max(np.abs(t * step)) < 1e-10:
            break
    return beta


def bt_fit(x: np.ndarray, y) -> np.ndarray:
    """The Bradley-Terry (logistic, soft-label) maximum-likelihood strengths of one set of pairs."""
    return _newton([(x, to_numeric_1d(y, "y"), 1.0)], x.shape[1])


def _stats(beta, x, y, f, xu, fu, use_unlabelled: bool):
    mu, mu_u = _sigmoid(x @ beta), _sigmoid(xu @ beta)
    n, big_n = len(y), len(fu)
    w, wu = (mu * (1 - mu)), (mu_u * (1 - mu_u))
    if use_unlabelled:
        hess = ((x * w[:, None]).T @ x + (xu * wu[:, None]).T @ xu) / (n + big_n)
    else:
        hess = (x * w[:, None]).T @ x / n
    g, g_hat, g_hat_u = x * (mu - y)[:, None], x * (mu - f)[:, None], xu * (mu_u - fu)[:, None]
    return g, g_hat, g_hat_u, np.linalg.inv(hess)


def _lambda(g, g_hat, g_hat_u, inv_h) -> float:
    n, big_n = len(g), len(g_hat_u)
    gc, hc = g - g.mean(0), g_hat - g_hat.mean(0)
    cov = (gc.T @ hc + hc.T @ gc) / n
    var = np.atleast_2d(np.cov(np.concatenate([g_hat, g_hat_u]).T))
    lam = np.trace(inv_h @ cov @ inv_h) / (2 * (1 + n / big_n) * np.trace(inv_h @ var @ inv_h))
    return float(np.clip(lam, 0.0, 1.0))


def ppi_bradley_terry(
    first,
    second,
    y,
    f,
    labelled,
    *,
    systems: list[str] | None = None,
    level: float = 0.9,
    lam: float | None = None,
) -> BradleyTerryPPI:
    """PPI++ Bradley-Terry strengths (see the module docstring) from pairs ``first`` vs ``second``,
    the human preference ``y`` for ``first`` (read on ``labelled`` pairs only), the judge's ``f`` on
    every pair; ``lam=None`` power-tunes lambda."""
    x, names = bt_design(first, second, systems)
    f = to_numeric_1d(f, "f")
    lab = np.asarray(labelled, dtype=bool)
    if not (len(f) == len(lab) == x.shape[0] == len(y)):
        raise ValueError(f"first, second, y, f and labelled must have one entry per pair ({x.shape[0]})")
    yl = to_numeric_1d(np.asarray(y, dtype=float)[lab], "y on the labelled pairs")
    n, big_n = int(lab.sum()), int((~lab).sum())
    check_positive_int("labelled pairs", n)
    check_positive_int("unlabelled pairs", big_n)
    if np.isnan(yl).any() or np.isnan(f).any():
        raise ValueError("y (on the labelled pairs) and f must hold no NaN")
    xl, fl, xu, fu = x[lab], f[lab], x[~lab], f[~lab]

    def fit(lmb: float) -> np.ndarray:
        return _newton([(xl, yl, 1.0), (xu, fu, lmb), (xl, fl, -lmb)], x.shape[1])

    tuned = lam is None
    if tuned:
        lam = _lambda(*_stats(fit(1.0), xl, yl, fl, xu, fu, True))
    beta = fit(lam)
    # ppi_logistic_ci tunes lambda again at the tuned estimate and centres its interval on that refit
    lam_ci = _lambda(*_stats(beta, xl, yl, fl, xu, fu, True)) if tuned else lam
    centre = fit(lam_ci) if tuned else beta
    g, g_hat, g_hat_u, inv_h = _stats(centre, xl, yl, fl, xu, fu, lam_ci != 0)
    d = x.shape[1]
    var_u = np.atleast_2d(np.cov((lam_ci * g_hat_u).T)).reshape(d, d)
    var_l = np.atleast_2d(np.cov((g - lam_ci * g_hat).T)).reshape(d, d)
    sigma = inv_h @ (n / big_n * var_u + var_l) @ inv_h
    half = stats.norm.ppf(0.5 + level / 2) * np.sqrt(np.diag(sigma) / n)
    zero = np.zeros(1)
    low, high = np.r_[zero, centre - half], np.r_[zero, centre + half]
    return BradleyTerryPPI(names, np.r_[zero, beta], low, high, lam, lam_ci, level, n, big_n)

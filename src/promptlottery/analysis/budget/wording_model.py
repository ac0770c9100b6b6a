"""A PromptEval-style model of a sparse items x wordings grid: every wording's agreement, estimated.

PromptEval (Polo et al. 2024, "Efficient multi-prompt evaluation of LLMs", ``felipemaiapolo/prompteval``,
``prompteval/methods.py``: ``ExtendedRaschModel``) fits, on the seen cells of a formats x examples
grid of 0/1 correctness, a logistic regression whose logit is a format effect plus an example effect,
each a linear function of covariates (identity when there are none), L2-regularised (scikit-learn's
``LogisticRegression(C=100)``); its ``get_Y_hat`` keeps the observed cells and fills the unseen ones
with the predicted probability, and a format's performance is the mean of its row. What we take:
that model, its fill-in rule and the quantiles over formats of the per-format mean. What is ours:

* the cell ``y[i, j]`` is whether the judge's verdict on item ``i`` under wording ``j`` agrees
  with the humans (or, without human labels, equals the item's plurality verdict);
* ``logit P(y[i, j] = 1) = mu + a_i + b_j + x_j . beta + u_i . v_j``: ``a_i`` the item effect,
  ``b_j`` a free wording effect beside the covariates ``x_j`` (the paraphrase tags, one-hot, and the
  first principal components of an embedding of the wording text), and, with ``rank >= 1``, a
  low-rank item x wording interaction, which an additive model lacks when a verdict flips for one
  kind of item under one kind of wording;
* the fit is a deterministic L-BFGS on the observed cells' log loss plus ``lam / 2`` times the
  squared norm of every parameter but ``mu`` (``lam_rank`` for ``u``, ``v``; their start is seeded);
  the penalties are tuned on validation items, never on the reported ones
  (:mod:`promptlottery.analysis.budget.wording_model_simulation`);
* intervals: items resampled with their cells, the model refitted on each resample.

All functions are pure (numpy / scipy); :func:`wording_covariates` encodes texts only when asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

__all__ = [
    "QUANTILES",
    "WordingFit",
    "agreement_matrix",
    "agreement_quantiles",
    "fit_wording_model",
    "wording_covariates",
]

#: "the best and worst wording you might have written": quantiles over wordings of their agreement
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclass(frozen=True)
class WordingFit:
    """A fitted model: ``prob[i, j]`` the predicted agreement of every cell, ``filled`` the grid with
    its observed cells kept and its unseen ones predicted (PromptEval's ``get_Y_hat``)."""

    prob: np.ndarray
    filled: np.ndarray
    item_effect: np.ndarray
    wording_effect: np.ndarray
    rank: int
    converged: bool
    #: the fitted parameters (mu, a, b, beta, u, v), a warm start for refits on resampled items
    params: tuple = ()

    @property
    def per_wording(self) -> np.ndarray:
        """Each wording's estimated agreement: the mean over items of its filled column."""
        return self.filled.mean(axis=0)


def _standardise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    keep = x.std(axis=0) > 1e-12
    x = x[:, keep]
    return (x - x.mean(axis=0)) / x.std(axis=0) if x.size else x


def wording_covariates(
    texts: list[str],
    tags: list[dict[str, str]] | None = None,
    *,
    embedding: str = "minilm",
    n_components: int = 3,
) -> tuple[np.ndarray, str]:
    """Covariates of each wording (rows) and a one-line description of what they are.

    ``tags``: one-hot of every tag key with more than one value. ``embedding``: ``minilm`` (the
    shared all-MiniLM-L6-v2 encoder), ``words`` (the cheap fallback: word-count vectors, no model),
    or ``none``; either is reduced to its first ``n_components`` principal components.
    """
    blocks, what = [], []
    if tags:
        keys = sorted({k for t in tags for k in t})
        for key in keys:
            values = sorted({str(t.get(key, "")) for t in tags})
            if len(values) > 1:
                blocks.append(np.array([[str(t.get(key, "")) == v for v in values[1:]] for t in tags], float))
        what.append(f"tags one-hot ({sum(b.shape[1] for b in blocks)} columns)")
    if embedding not in ("minilm", "words", "none"):
        raise ValueError(f"embedding must be minilm, words or none, got {embedding!r}")
    if embedding != "none" and len(texts) > 2:
        if embedding == "minilm":
            from promptlottery.embeddings import encode

            emb = np.asarray(encode(list(texts)), dtype=float)
        else:
            vocab = sorted({w for t in texts for w in t.lower().split()})
            index = {w: k for k, w in enumerate(vocab)}
            emb = np.zeros((len(texts), len(vocab)))
            for r, t in enumerate(texts):
                for w in t.lower().split():
                    emb[r, index[w]] += 1.0
        centred = emb - emb.mean(axis=0)
        u, s, _ = np.linalg.svd(centred, full_matrices=False)
        d = min(n_components, len(texts) - 1, int((s > 1e-9).sum()))
        blocks.append(u[:, :d] * s[:d])
        what.append(f"{embedding} embedding, {d} principal components")
    x = _standardise(np.hstack(blocks)) if blocks else np.zeros((len(texts), 0))
    return x, "; ".join(what) or "none"


def _unpack(theta: np.ndarray, n: int, k: int, p: int, r: int):
    mu = theta[0]
    a = theta[1 : 1 + n]
    b = theta[1 + n : 1 + n + k]
    beta = theta[1 + n + k : 1 + n + k + p]
    rest = theta[1 + n + k + p :]
    u = rest[: n * r].reshape(n, r)
    v = rest[n * r :].reshape(k, r)
    return mu, a, b, beta, u, v


def fit_wording_model(
    y: Any,
    covariates: np.ndarray | None = None,
    *,
    rank: int = 0,
    lam: float = 0.1,
    lam_rank: float = 1.0,
    seed: int = 0,
    max_iter: int = 500,
    start: tuple | None = None,
) -> WordingFit:
    """Fit the model on the observed cells of ``y`` (items x wordings, values in [0, 1], NaN unseen);
    ``start``: parameters ``(mu, a, b, beta, u, v)`` to start from (the optimum does not depend on it
    where the loss is convex, i.e. at rank 0)."""
    y = np.asarray(y, dtype=float)
    if y.ndim != 2 or min(y.shape) < 2:
        raise ValueError(f"y must be an items x wordings matrix with >= 2 of each, got shape {y.shape}")
    seen = np.isfinite(y)
    if not seen.any():
        raise ValueError("no judged cell to fit on")
    if ((y[seen] < 0) | (y[seen] > 1)).any():
        raise ValueError("y must hold agreement in [0, 1] (NaN where a cell was not judged)")
    n, k = y.shape
    x = np.zeros((k, 0)) if covariates is None else np.asarray(covariates, dtype=float)
    if x.shape[0] != k:
        raise ValueError(f"covariates have {x.shape[0]} rows for {k} wordings")
    p, r = x.shape[1], int(rank)
    target = np.where(seen, y, 0.0)
    w = seen.astype(float)
    rng = np.random.default_rng(seed)
    mean = float(np.clip(target.sum() / w.sum(), 1e-3, 1 - 1e-3))
    theta0 = np.concatenate(
        [[np.log(mean / (1 - mean))], np.zeros(n + k + p), 0.1 * rng.standard_normal((n + k) * r)]
    )
    if start is not None:
        theta0 = np.concatenate([np.ravel(part) for part in start])
    pen = np.concatenate([[0.0], np.full(n + k + p, lam), np.full((n + k) * r, lam_rank)])

    def loss(theta):
        mu, a, b, beta, u, v = _unpack(theta, n, k, p, r)
        logit = mu + a[:, None] + (b + x @ beta)[None, :] + u @ v.T
        # log loss: log(1 + e^z) - y z, stable
        ll = (np.logaddexp(0.0, logit) - target * logit) * w
        g = (expit(logit) - target) * w
        grad = np.concatenate(
            [[g.sum()], g.sum(axis=1), g.sum(axis=0), x.T @ g.sum(axis=0), (g @ v).ravel(), (g.T @ u).ravel()]
        )
        return ll.sum() + 0.5 * (pen * theta**2).sum(), grad + pen * theta

    res = minimize(loss, theta0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "gtol": 1e-6})
    mu, a, b, beta, u, v = _unpack(res.x, n, k, p, r)
    prob = expit(mu + a[:, None] + (b + x @ beta)[None, :] + u @ v.T)
    return WordingFit(
        prob, np.where(seen, y, prob), a, b + x @ beta, r, bool(res.success), (mu, a, b, beta, u, v)
    )


def agreement_quantiles(
    y: Any,
    covariates: np.ndarray | None = None,
    *,
    rank: int = 0,
    n_resamples: int = 50,
    level: float = 0.95,
    seed: int = 0,
    quantiles: tuple[float, ...] = QUANTILES,
    **fit_options,
) -> dict[str, Any]:
    """Per-wording agreement and its quantiles over wordings, with bootstrap intervals over items.

    Returns ``per_wording`` (K), ``quantiles`` (the quantiles of ``per_wording`` over wordings),
    ``lo`` / ``hi`` (the bootstrap's ``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles of
    each quantile, every resample refitted) and ``converged`` (every fit's L-BFGS success).
    """
    y = np.asarray(y, dtype=float)
    fit = fit_wording_model(y, covariates, rank=rank, seed=seed, **fit_options)
    per = fit.per_wording
    q = np.quantile(per, quantiles)
    rng = np.random.default_rng(seed)
    reps, ok = [], fit.converged
    for _ in range(n_resamples):
        idx = rng.integers(0, y.shape[0], y.shape[0])
        if not np.isfinite(y[idx]).any():
            continue
        mu, a, b, beta, u, v = fit.params
        start = (mu, a[idx], b, beta, u[idx], v)  # each resampled item starts from its own fit
        f = fit_wording_model(y[idx], covariates, rank=rank, seed=seed, start=start, **fit_options)
        ok = ok and f.converged
        reps.append(np.quantile(f.per_wording, quantiles))
    reps = np.asarray(reps) if reps else np.full((1, len(quantiles)), np.nan)
    alpha = (1 - level) / 2
    return {
        "per_wording": per,
        "quantiles": q,
        "lo": np.quantile(reps, alpha, axis=0),
        "hi": np.quantile(reps, 1 - alpha, axis=0),
        "converged": ok,
        "fit": fit,
    }


def agreement_matrix(labels: Any, human_labels: Any | None = None) -> tuple[np.ndarray, str]:
    """The 0/1 cell outcome (NaN where a cell has no verdict) and its name: a verdict agrees with the
    item's human label (mapped onto the scale) where one is given, else with the item's plurality
    verdict over its judged wordings (ties: the smallest label code)."""
    lab = np.asarray(labels, dtype=float)
    seen = np.isfinite(lab)
    if human_labels is not None:
        h = np.asarray(human_labels, dtype=float)
        return np.where(
            seen, (lab == h[:, None]).astype(float), np.nan
        ), "verdict == human label on the scale"
    out = np.full(lab.shape, np.nan)
    for i, row in enumerate(lab):
        vals, counts = np.unique(row[np.isfinite(row)], return_counts=True)
        if len(vals):
            out[i, seen[i]] = (row[seen[i]] == vals[np.argmax(counts)]).astype(float)
    return out, "verdict == the item's plurality verdict"

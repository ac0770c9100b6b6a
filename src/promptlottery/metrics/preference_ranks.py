"""System scores from pairwise games: win rates (ties as half), Bradley-Terry strengths
(scikit-learn's logistic regression) and the rank flips between the rankings of several wordings.

A game's verdict is in the pair's terms (:mod:`promptlottery.metrics.preference`), an inconsistent
verdict counting as a tie (:func:`~promptlottery.metrics.preference.two_order_verdict`).
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import pandas as pd

from ._coefficients import kendall_tau
from ._validation import UndefinedMetricWarning, check_same_length, to_1d, warn_undefined
from .preference import two_order_verdict

__all__ = [
    "BT_TIE_TOL",
    "bradley_terry",
    "tie_close",
    "rank_flips",
    "rank_flips_resampled",
    "system_ranks",
    "win_rates",
    "win_rates_resampled",
]


#: Bradley-Terry strengths closer than this are one strength (a tie in every rank statistic): the
#: solvers stop within about 1e-7 of the optimum (scikit-learn's lbfgs left two systems with the same
#: record 1.5e-7 apart), far below any difference a game makes
BT_TIE_TOL = 1e-6


def tie_close(b: Any, tol: float = BT_TIE_TOL) -> np.ndarray:
    """``b`` (the last axis: one fit's strengths) with every run of values less than ``tol`` apart,
    in sorted order, set to the run's smallest value, so that equal strengths tie exactly (NaN kept).

    >>> tie_close([0.5, 0.2 + 1e-9, 0.2, -0.7]).tolist()
    [0.5, 0.2, 0.2, -0.7]
    """
    x = np.array(b, dtype=float)
    if x.size == 0:
        return x
    flat = x.reshape(-1, x.shape[-1])
    order = np.argsort(flat, axis=1)  # NaN last
    sv = np.take_along_axis(flat, order, axis=1)
    with np.errstate(invalid="ignore"):
        starts = np.ones_like(sv, dtype=bool)
        starts[:, 1:] = ~(np.diff(sv, axis=1) < tol) | np.isnan(sv[:, 1:])
    idx = np.where(starts, np.arange(sv.shape[1])[None, :], 0)
    first = np.take_along_axis(sv, np.maximum.accumulate(idx, axis=1), axis=1)
    out = np.empty_like(flat)
    np.put_along_axis(out, order, np.where(np.isnan(sv), np.nan, first), axis=1)
    return out.reshape(x.shape)


def _games(system_1: Any, system_2: Any, verdict: Any) -> pd.DataFrame:
    """One row per scored game: the two systems and system_1's points (1 win, 0.5 tie, 0 loss)."""
    s1 = to_1d(np.asarray(system_1, dtype=object), "system_1")
    s2 = to_1d(np.asarray(system_2, dtype=object), "system_2")
    v = two_order_verdict(verdict)
    check_same_length([s1, s2, v], ["system_1", "system_2", "verdict"])
    points = np.array([{"1": 1.0, "2": 0.0, "tie": 0.5}.get(x, np.nan) if x else np.nan for x in v])
    g = pd.DataFrame({"a": s1, "b": s2, "points": points})
    keep = g["a"].notna() & g["b"].notna() & g["points"].notna()
    same = keep & (g["a"].astype(str) == g["b"].astype(str))
    if same.any():
        raise ValueError(
            f"game {int(np.flatnonzero(same)[0])} pits system {g['a'][same].iloc[0]!r} against itself"
        )
    return g[keep].astype({"a": str, "b": str}).reset_index(drop=True)


def win_rates(system_1: Any, system_2: Any, verdict: Any) -> pd.Series:
    """Each system's win rate, ties as half a win: FastChat's ``win_rate_adjusted`` (``show_result.py``).

    ``(wins + 0.5 * ties) / games`` over the games a system played; ``verdict`` in the pair's terms
    (``"1"``: system_1 won), an inconsistent verdict counting as a tie. Games with a missing system
    or verdict are left out. Sorted by system name.

    >>> win_rates(["x", "x", "y"], ["y", "z", "z"], ["1", "tie", "2"]).to_dict()
    {'x': 0.75, 'y': 0.0, 'z': 0.75}
    """
    g = _games(system_1, system_2, verdict)
    pts = pd.concat([g.groupby("a")["points"].sum(), g.groupby("b")["points"].apply(lambda p: (1 - p).sum())])
    games = pd.concat([g["a"].value_counts(), g["b"].value_counts()])
    out = pts.groupby(level=0).sum() / games.groupby(level=0).sum()
    return out.sort_index().rename("win_rate")


def win_rates_resampled(weights: Any, points: Any, codes: Any, n_systems: int) -> np.ndarray:
    """:func:`win_rates` on many resamples of the games at once, per wording: ``(R, systems, wordings)``.

    ``points``: ``(games, wordings)``, system_1's points per game (1 win, 0.5 tie, 0 loss; NaN = no
    verdict, the game left out); ``codes``: ``(games, 2)``, the two systems' indices in
    ``range(n_systems)``; ``weights``: ``(R, games)``, the copies of each game in each resample (a
    cluster bootstrap's counts). A system without a game: NaN. Equal to :func:`win_rates` on the
    unit weights (tested).

    >>> pts = np.array([[1.0], [0.5], [0.0]])  # x-y: x wins; x-z: tie; y-z: z wins
    >>> win_rates_resampled(np.ones((1, 3)), pts, np.array([[0, 1], [0, 2], [1, 2]]), 3)[0, :, 0].tolist()
    [0.75, 0.0, 0.75]
    """
    w, pts, codes = np.asarray(weights, dtype=float), np.asarray(points, dtype=float), np.asarray(codes)
    out = np.full((w.shape[0], n_systems, pts.shape[1]), np.nan)
    for j in range(pts.shape[1]):
        rows = np.flatnonzero(np.isfinite(pts[:, j]))
        won = np.zeros((len(pts), n_systems))
        played = np.zeros((len(pts), n_systems))
        won[rows, codes[rows, 0]] += pts[rows, j]
        won[rows, codes[rows, 1]] += 1.0 - pts[rows, j]
        played[rows, codes[rows, 0]] += 1.0
        played[rows, codes[rows, 1]] += 1.0
        num, den = w @ won, w @ played
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, :, j] = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return out


def bradley_terry(system_1: Any, system_2: Any, verdict: Any, *, C: float = 100.0) -> pd.Series:
    """Bradley-Terry strengths from scikit-learn's ``LogisticRegression`` (centred, log-odds units).

    P(i beats j) = 1 / (1 + exp(-(b_i - b_j))): a logistic regression without intercept on
    ``x = e_i - e_j``, as Chatbot Arena fits its Elo (``compute_mle_elo``). A tie counts half a win
    and half a loss (sample weights 0.5), as does an inconsistent verdict. Each game also enters
    mirrored (``-x``, the other outcome), which leaves the likelihood's maximiser unchanged and gives
    both classes. ``C`` is scikit-learn's inverse L2 strength: the weak default (100) keeps a system
    that wins every game finite. Strengths are shifted to mean 0, rounded to 1e-8, and strengths
    less than :data:`BT_TIE_TOL` apart tie (:func:`tie_close`), as in the sparse fit.

    >>> s = bradley_terry(["x", "x", "x", "x"], ["y", "y", "y", "y"], ["1", "1", "1", "2"], C=1e6)
    >>> round(float(s["x"] - s["y"]), 3)  # the MLE: log(3 wins / 1 loss)
    1.099
    """
    from sklearn.linear_model import LogisticRegression  # slow to import

    if not (isinstance(C, int | float) and C > 0):
        raise ValueError(f"C must be a positive number, got {C!r}")
    g = _games(system_1, system_2, verdict)
    names = sorted(set(g["a"]) | set(g["b"]))
    if len(names) < 2:
        warnings.warn(
            "Bradley-Terry needs games between at least two systems", UndefinedMetricWarning, stacklevel=2
        )
        return pd.Series(np.nan, index=names, name="bradley_terry", dtype=float)
    pos = {n: k for k, n in enumerate(names)}
    x = np.zeros((len(g), len(names)))
    x[np.arange(len(g)), g["a"].map(pos)] = 1.0
    x[np.arange(len(g)), g["b"].map(pos)] = -1.0
    p = g["points"].to_numpy(float)
    xs = np.vstack([x, x, -x, -x])
    ys = np.concatenate([np.ones(len(g)), np.zeros(len(g)), np.ones(len(g)), np.zeros(len(g))])
    ws = np.concatenate([p, 1 - p, 1 - p, p])
    keep = ws > 0
    model = LogisticRegression(fit_intercept=False, C=C, tol=1e-8, max_iter=1000)
    model.fit(xs[keep], ys[keep], sample_weight=ws[keep])
    b = model.coef_[0]
    # systems with the same record tie (BT_TIE_TOL), as in the sparse fit (metrics.sparse_bt)
    return pd.Series(tie_close(np.round(b - b.mean(), 8)) + 0.0, index=names, name="bradley_terry")


def system_ranks(scores: np.ndarray) -> np.ndarray:
    """1 + the number of systems with a strictly higher score (NaN: no score), as analysis 6."""
    higher = (scores[None, :] > scores[:, None]).sum(axis=1)
    return np.where(np.isfinite(scores), 1.0 + higher, np.nan)


def rank_flips(scores: Any) -> dict[str, float]:
    """Rank flips between wordings: the means over every pair of wordings (columns) of

    ``kendall_tau`` (tau-b of the two wordings' system scores, :func:`~promptlottery.metrics.kendall_tau`),
    ``flip_share`` (system pairs in strictly opposite order) and ``rank_change_share`` (systems whose
    rank, 1 + systems scored strictly higher, differs), each on the systems scored under both;
    analysis 6's definitions on the pairwise scores. ``scores``: a systems x wordings matrix
    (DataFrame or array; NaN = a system without a score under that wording).

    >>> s = pd.DataFrame({"P1": [0.9, 0.5, 0.1], "P2": [0.5, 0.9, 0.1]}, index=["x", "y", "z"])
    >>> {k: round(v, 3) for k, v in rank_flips(s).items()}
    {'kendall_tau': 0.333, 'flip_share': 0.333, 'rank_change_share': 0.667}
    """
    x = np.asarray(scores.to_numpy() if isinstance(scores, pd.DataFrame) else scores, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"scores must be a systems x wordings matrix, got shape {x.shape}")
    if x.shape[1] < 2:
        nan = warn_undefined("rank flips need at least two wordings")
        return {"kendall_tau": nan, "flip_share": nan, "rank_change_share": nan}
    taus, flips, changes = [], [], []
    for a, b in itertools.combinations(range(x.shape[1]), 2):
        both = np.isfinite(x[:, a]) & np.isfinite(x[:, b])
        xa, xb = x[both, a], x[both, b]
        if both.sum() < 2:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            taus.append(kendall_tau(xa, xb))
        iu = np.triu_indices(len(xa), 1)
        prod = (np.sign(xa[:, None] - xa[None, :]) * np.sign(xb[:, None] - xb[None, :]))[iu]
        flips.append(float((prod < 0).mean()))
        changes.append(float((system_ranks(xa) != system_ranks(xb)).mean()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return {
            "kendall_tau": float(np.nanmean(taus)) if taus else np.nan,
            "flip_share": float(np.mean(flips)) if flips else np.nan,
            "rank_change_share": float(np.mean(changes)) if changes else np.nan,
        }


def rank_flips_resampled(scores: Any) -> np.ndarray:
    """:func:`rank_flips` on each of many systems x wordings matrices at once: ``(R, 3)`` columns
    ``kendall_tau``, ``flip_share``, ``rank_change_share`` for ``scores`` of shape ``(R, systems,
    wordings)`` (a bootstrap's resampled scores). Tau-b from the pairs' sign products,
    ``sum(dx * dy) / sqrt(n_x * n_y)`` over the system pairs untied on each side (scipy's tau-b);
    equal to :func:`rank_flips` on each matrix to rounding (tested).

    >>> s = np.array([[[0.9, 0.5], [0.5, 0.9], [0.1, 0.1]]])
    >>> np.round(rank_flips_resampled(s), 3).tolist()
    [[0.333, 0.333, 0.667]]
    """
    x = np.asarray(scores, dtype=float)
    if x.ndim != 3:
        raise ValueError(f"scores must be (resamples, systems, wordings), got shape {x.shape}")
    n_res, n_sys, n_w = x.shape
    if n_w < 2:
        return np.full((n_res, 3), np.nan)
    iu = np.triu_indices(n_sys, 1)
    fin = np.isfinite(x)
    taus, flips, changes = [], [], []
    for a, b in itertools.combinations(range(n_w), 2):
        both = fin[:, :, a] & fin[:, :, b]
        n_both = both.sum(axis=1)
        valid = (both[:, :, None] & both[:, None, :])[:, iu[0], iu[1]]
        with np.errstate(invalid="ignore"):
            dx = np.nan_to_num(np.sign(x[:, :, None, a] - x[:, None, :, a])[:, iu[0], iu[1]]) * valid
            dy = np.nan_to_num(np.sign(x[:, :, None, b] - x[:, None, :, b])[:, iu[0], iu[1]]) * valid
            # rank among the systems scored under both: 1 + those scored strictly higher
            hi_a = ((x[:, None, :, a] > x[:, :, None, a]) & both[:, None, :]).sum(axis=2)
            hi_b = ((x[:, None, :, b] > x[:, :, None, b]) & both[:, None, :]).sum(axis=2)
        n1, n2, n_pairs = (dx != 0).sum(axis=1), (dy != 0).sum(axis=1), valid.sum(axis=1)
        enough = n_both >= 2
        with np.errstate(invalid="ignore", divide="ignore"):
            taus.append(
                np.where(
                    enough & (n1 > 0) & (n2 > 0),
                    (dx * dy).sum(axis=1) / np.sqrt(n1 * n2.astype(float)),
                    np.nan,
                )
            )
            flips.append(np.where(enough, (dx * dy < 0).sum(axis=1) / np.maximum(n_pairs, 1), np.nan))
            changes.append(
                np.where(enough, ((hi_a != hi_b) & both).sum(axis=1) / np.maximum(n_both, 1), np.nan)
            )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.column_stack([np.nanmean(np.column_stack(v), axis=1) for v in (taus, flips, changes)])

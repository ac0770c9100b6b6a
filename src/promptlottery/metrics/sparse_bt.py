"""Bradley-Terry rankings per wording from a sparse pairwise grid, and the rank changes between wordings.

Definition (ours). A wording's Bradley-Terry strengths ``b`` maximise the **Horvitz-Thompson estimate
of the full grid's penalised log-likelihood**: every game (a pair under the wording whose two-order
verdict was observed, i.e. both orders judged) counts ``1 / pi``, ``pi`` the probability that the plan
judged both orders (:func:`promptlottery.metrics.sparse_pairwise.pair_probabilities`), so

    ``max_b  sum_games (1 / pi) [p log s(b_1 - b_2) + (1 - p) log s(b_2 - b_1)] - |b|^2 / (4 C)``

with ``p`` system_1's points (1 win, 0.5 tie or inconsistent verdict, 0 loss) and ``s`` the logistic
function: the full-grid fit of :func:`promptlottery.metrics.preference_ranks.bradley_terry` (scikit-
learn's ``LogisticRegression(C)`` on each game and its mirror, whose objective is exactly this one on
unit weights; tested), with design weights. On a full plan it is that fit. Strengths are centred over
the systems with a game; a system without one is NaN. The rank changes between wordings are then
:func:`~promptlottery.metrics.preference_ranks.rank_flips` of the wordings' strengths: ``kendall_tau``
(mean tau-b over wording pairs), ``flip_share`` (system pairs in opposite order) and
``rank_change_share`` (systems whose rank differs), over the ranked systems (a fixed baseline that
plays every game anchors the fit but is not ranked, as the pairwise section does).

The fit reads a game only through the weighted points of each ordered pair of systems, so the fit
under pair weights ``r`` (1 for the estimate, a bootstrap's counts for a replicate) needs the matrix
product ``r @ parts`` and one batched Newton solve (:func:`bt_batch`): every resample is refitted.
Strengths are rounded to 1e-8 and those less than ``BT_TIE_TOL`` (1e-6) apart tie
(:func:`~promptlottery.metrics.preference_ranks.tie_close`), as the full-grid fit does, so that
systems with the same record tie in both (the lottery report and the budget report agree).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .preference_ranks import rank_flips_resampled, tie_close

__all__ = ["bt_batch", "bt_parts", "bt_rank_changes", "fit_weighted_bt"]

#: scikit-learn's inverse L2 strength that ``preference_ranks.bradley_terry`` uses
C_DEFAULT = 100.0


def bt_parts(
    points: Any, observed_prob: Any, system_1: Any, system_2: Any
) -> tuple[np.ndarray, list[str], int]:
    """Per pair: its weighted points against each ordered pair of systems under each wording.

    ``points``: pairs x wordings, system_1's points (1 win, 0.5 tie, 0 loss; NaN: no two-order
    verdict); ``observed_prob``: pairs x wordings, the probability that the verdict was observed.
    Returns ``(parts, systems, K)`` with ``parts`` of shape ``(pairs, S * S * K)``: entry
    ``[i, (a, b, k)]`` the points system ``a`` took from system ``b`` in pair ``i`` under wording
    ``k``, times ``1 / pi`` (a pair without both systems contributes nothing)."""
    pts = np.asarray(points, dtype=float)
    prob = np.asarray(observed_prob, dtype=float)
    if pts.ndim != 2 or prob.shape != pts.shape:
        raise ValueError(
            f"points {pts.shape} and observed_prob {prob.shape} must be the same pairs x wordings"
        )
    s1, s2 = list(system_1), list(system_2)
    if len(s1) != len(pts) or len(s2) != len(pts):
        raise ValueError(f"system_1 / system_2 must name one system per pair ({len(pts)})")
    known = [a is not None and b is not None and a == a and b == b for a, b in zip(s1, s2)]
    names = sorted({str(s) for s, ok in zip(s1 + s2, known + known) if ok})
    code = {name: j for j, name in enumerate(names)}
    n, k, s = pts.shape[0], pts.shape[1], len(names)
    seen = np.isfinite(pts) & np.array(known)[:, None]
    if (seen & ~(prob > 0)).any():
        raise ValueError("an observed game has inclusion probability 0: the plan cannot have drawn it")
    w = np.where(seen, 1.0 / np.where(seen, prob, 1.0), 0.0)
    out = np.zeros((n, s, s, k))
    for i in np.flatnonzero(known):
        a, b = code[str(s1[i])], code[str(s2[i])]
        if a == b:
            raise ValueError(f"pair {i} pits system {s1[i]!r} against itself")
        out[i, a, b] = w[i] * np.nan_to_num(pts[i])
        out[i, b, a] = w[i] * (1.0 - np.nan_to_num(pts[i]))
    return out.reshape(n, -1), names, k


def _objective(b: np.ndarray, wins: np.ndarray, ridge: float) -> np.ndarray:
    d = b[:, :, None] - b[:, None, :]
    return (wins * np.logaddexp(0.0, -d)).sum(axis=(1, 2)) + ridge / 2 * (b**2).sum(axis=1)


def fit_weighted_bt(
    wins: Any, *, C: float = C_DEFAULT, tol: float = 1e-10, max_iter: int = 200
) -> np.ndarray:
    """Bradley-Terry strengths for a batch of weighted win matrices ``wins`` (``(B, S, S)``: entry
    ``[a, b]`` the weighted points of system ``a`` against ``b``): the maximiser of the penalised
    log-likelihood above (Newton's method with backtracking; the objective is strictly convex). A
    system without a weighted game is NaN; the others are centred.

    >>> w = np.array([[[0.0, 3.0], [1.0, 0.0]]])  # x beat y 3 times, lost once
    >>> b = fit_weighted_bt(w, C=1e9)[0]
    >>> round(float(b[0] - b[1]), 4)  # the MLE: log(3 / 1)
    1.0986
    """
    if not (isinstance(C, int | float) and C > 0):
        raise ValueError(f"C must be a positive number, got {C!r}")
    wins = np.asarray(wins, dtype=float)
    if wins.ndim != 3 or wins.shape[1] != wins.shape[2]:
        raise ValueError(f"wins must be (batch, systems, systems), got shape {wins.shape}")
    if (wins < 0).any():
        raise ValueError("wins must be non-negative weighted points")
    ridge = 1.0 / (2.0 * C)
    games = wins + wins.transpose(0, 2, 1)
    bsz, s = wins.shape[:2]
    b = np.zeros((bsz, s))
    eye = np.eye(s)[None]
    f = _objective(b, wins, ridge)
    for _ in range(max_iter):
        p = 1.0 / (1.0 + np.exp(-(b[:, :, None] - b[:, None, :])))
        grad = (games * p - wins).sum(axis=2) + ridge * b
        h = games * p * (1.0 - p)
        hess = eye * (h.sum(axis=2)[:, :, None] + ridge) - h
        step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        t = np.ones(bsz)
        new_b = b - step
        new_f = _objective(new_b, wins, ridge)
        # backtrack where the full step does not decrease the objective enough (Armijo); near the
        # optimum (a Newton decrement at float noise) the full step is taken
        dec = (grad * step).sum(axis=1)
        live = dec > 1e-12 * (1.0 + np.abs(f))
        for _ in range(50):
            bad = np.flatnonzero(live & (new_f > f - 1e-4 * t * dec))
            if not len(bad):
                break
            t[bad] /= 2
            new_b[bad] = b[bad] - t[bad, None] * step[bad]
            new_f[bad] = _objective(new_b[bad], wins[bad], ridge)
        moved = np.abs(new_b - b).max(axis=1)
        b, f = new_b, new_f
        if moved.max(initial=0.0) < tol:
            break
    played = games.sum(axis=2) > 0
    with np.errstate(invalid="ignore"):
        mean = np.where(played, b, 0.0).sum(axis=1) / np.maximum(played.sum(axis=1), 1)
    return tie_close(np.where(played, np.round(b - mean[:, None], 8) + 0.0, np.nan))


def bt_batch(parts: tuple[np.ndarray, list[str], int], r: np.ndarray, *, C: float = C_DEFAULT) -> np.ndarray:
    """The strengths under each row of pair weights ``r``: ``(R, systems, wordings)``, refitted per row
    and wording (NaN: a system without a game under the wording in that resample)."""
    flat, names, k = parts
    s = len(names)
    r = np.asarray(r, dtype=float)
    if s < 2:
        return np.full((len(r), s, k), np.nan)
    wins = (r @ flat).reshape(len(r), s, s, k).transpose(0, 3, 1, 2).reshape(-1, s, s)
    return fit_weighted_bt(wins, C=C).reshape(len(r), k, s).transpose(0, 2, 1)


def bt_rank_changes(strengths: Any, ranked: Any) -> np.ndarray:
    """``(R, 3)``: ``kendall_tau``, ``flip_share``, ``rank_change_share`` between the wordings'
    strengths (``(R, systems, wordings)``) over the systems indexed by ``ranked`` (the baseline left
    out), as :func:`~promptlottery.metrics.preference_ranks.rank_flips` on each resample.

    >>> x = np.array([[[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]]])  # x, y swap places; z stays last
    >>> np.round(bt_rank_changes(x, [0, 1, 2]), 3).tolist()
    [[0.333, 0.333, 0.667]]
    """
    x = np.asarray(strengths, dtype=float)
    if x.ndim != 3:
        raise ValueError(f"strengths must be (resamples, systems, wordings), got shape {x.shape}")
    return rank_flips_resampled(x[:, np.asarray(ranked, dtype=int)])

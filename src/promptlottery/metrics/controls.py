"""Stable, or deaf? The shift of a judge's verdicts under meaning-changing control variants of its
prompt against the shift under meaning-preserving paraphrases.

A judge that ignores its prompt is perfectly stable under paraphrases; what tells it apart from a
faithful one is whether rubric rewrites that change the meaning move it the way they should
(Policy Invariance, arXiv 2605.06161, §3: "meaning-preserving rewrites should leave verdicts
unchanged, meaning-changing ones should move them"). Per item ``i`` and on a scale rescaled to
[0, 1] (``(s - lo) / (hi - lo)``):

* the **noise** ``N_i``: the mean absolute difference between the verdicts of every pair of
  paraphrases (for a binary verdict: the share of paraphrase pairs that disagree);
* the **signal** ``S_i``: the mean over controls ``c`` of the shift of ``c``'s verdict from its base
  paraphrase ``b`` in the direction ``c`` must move it: ``stricter``: ``b - c``;
  ``more_lenient``: ``c - b``; ``reversed`` (the scale or the question turned round): ``|c - b| -
  |(1 - c) - b|``, positive when the reversed verdict is nearer the mirror of the base one than
  the base one itself; ``criterion_dropped``: ``|c - b|`` (a dropped criterion must move the
  verdict, in a direction the rubric does not fix).

Pairwise (``pairwise=True``; ours, the same idea on a preference): a verdict is the preference for
response 1 on [0, 1] (1 = response 1 wins, 0 = response 2 wins, 0.5 = a tie) and ``stricter`` /
``more_lenient`` speak of the threshold for preferring one side: ``stricter``: ``|b - 1/2| - |c -
1/2|`` (toward a tie); ``more_lenient``: ``|c - 1/2| - |b - 1/2|`` (away from a tie); ``reversed``
("prefer the worse response") and ``criterion_dropped`` as above (the mirror ``1 - c`` is the other
side preferred, a tie kept).

The measures are the item means ``S`` and ``N``, the margin ``S - N`` and the ratio ``S / N``
(``+-inf`` when ``N = 0`` and ``S != 0``), each with a (cluster) bootstrap percentile interval over items. The
judge **follows** its controls when the margin's interval lies above 0; otherwise it is **deaf**
(it does not follow its controls, whatever its stability), called ``deaf: stable`` when the
paraphrase noise's upper bound is below ``stable_below`` and ``deaf: wording-sensitive``
otherwise.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from ._validation import check_positive_int, to_numeric_2d, warn_undefined
from .bootstrap import Seed, check_level, check_seed, percentile_bounds
from .cluster_bootstrap import cluster_weights

__all__ = ["DIRECTIONS", "ControlSensitivity", "control_sensitivity", "control_shift"]

DIRECTIONS = ("stricter", "more_lenient", "reversed", "criterion_dropped")


@dataclass(frozen=True)
class ControlSensitivity:
    signal: float
    signal_ci: tuple[float, float]
    noise: float
    noise_ci: tuple[float, float]
    margin: float  # signal - noise
    margin_ci: tuple[float, float]
    ratio: float  # signal / noise
    ratio_ci: tuple[float, float]
    follows: bool  # the margin's interval lies above 0
    verdict: str  # "follows", "deaf: stable" or "deaf: wording-sensitive"
    n_items: int
    n_controls: int
    level: float
    per_direction: dict = field(default_factory=dict)  # direction -> mean signal over items

    @property
    def deaf(self) -> bool:
        return not self.follows


def control_shift(base, control, *, direction: str, pairwise: bool = False) -> np.ndarray:
    """Per-item shift of ``control`` from ``base`` (both on [0, 1]) in the ``direction`` it must move;
    ``pairwise``: both are preferences for response 1 (0.5 a tie), stricter = toward the tie.

    >>> control_shift([1.0, 0.0], [0.0, 0.0], direction="stricter").tolist()
    [1.0, 0.0]
    >>> control_shift([1.0, 0.0], [0.0, 1.0], direction="reversed").tolist()
    [1.0, 1.0]
    >>> control_shift([1.0, 0.5], [0.5, 0.5], direction="stricter", pairwise=True).tolist()
    [0.5, 0.0]
    """
    b, c = np.asarray(base, dtype=float), np.asarray(control, dtype=float)
    if pairwise and direction in ("stricter", "more_lenient"):
        toward_tie = np.abs(b - 0.5) - np.abs(c - 0.5)
        return toward_tie if direction == "stricter" else -toward_tie
    if direction == "stricter":
        return b - c
    if direction == "more_lenient":
        return c - b
    if direction == "reversed":
        return np.abs(c - b) - np.abs((1 - c) - b)
    if direction == "criterion_dropped":
        return np.abs(c - b)
    raise ValueError(f"direction={direction!r} is not valid; choose one of {list(DIRECTIONS)}")


def _nanmean(a: np.ndarray) -> np.ndarray:
    """Row means ignoring NaN; a row with no value is NaN (left out by the caller), silently."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(a, axis=1)


def _pair_noise(p: np.ndarray) -> np.ndarray:
    k = p.shape[1]
    return _nanmean(np.stack([np.abs(p[:, a] - p[:, b]) for a in range(k) for b in range(a + 1, k)], axis=1))


def _ci(dist: np.ndarray, level: float) -> tuple[float, float]:
    return percentile_bounds(dist, level, finite_only=False)  # the ratio is inf where the noise is 0


def _checked(paraphrases, controls, directions, bases, scale) -> tuple[np.ndarray, np.ndarray, list, list]:
    """The two matrices rescaled to [0, 1], the directions and the bases; a bad input is a ValueError."""
    p = to_numeric_2d(paraphrases, "paraphrases")
    c = to_numeric_2d(controls, "controls")
    if p.shape[0] != c.shape[0]:
        raise ValueError(f"paraphrases has {p.shape[0]} items but controls has {c.shape[0]}")
    if p.shape[1] < 2:
        raise ValueError(f"need at least 2 paraphrase columns, got {p.shape[1]}")
    directions = list(directions)
    if len(directions) != c.shape[1]:
        raise ValueError(f"directions names {len(directions)} controls but controls has {c.shape[1]} columns")
    for d in directions:
        if d not in DIRECTIONS:
            raise ValueError(f"direction {d!r} is not valid; choose one of {list(DIRECTIONS)}")
    bases = [0] * c.shape[1] if bases is None else list(bases)
    if len(bases) != c.shape[1] or any(not 0 <= b < p.shape[1] for b in bases):
        raise ValueError(
            f"bases must give one paraphrase column in [0, {p.shape[1]}) per control, got {bases}"
        )
    lo, hi = (float(v) for v in scale)
    if not hi > lo:
        raise ValueError(f"scale must be (lo, hi) with hi > lo, got {scale!r}")
    for name, m in (("paraphrases", p), ("controls", c)):
        bad = ~np.isnan(m) & ((m < lo) | (m > hi))
        if bad.any():
            i, j = (int(v[0]) for v in np.nonzero(bad))
            raise ValueError(f"{name} row {i} column {j} holds {float(m[i, j])!r}, outside the scale {scale}")
    return (p - lo) / (hi - lo), (c - lo) / (hi - lo), directions, bases


def _undefined(n_controls: int, level: float) -> ControlSensitivity:
    warn_undefined("control_sensitivity: no item has both a paraphrase pair and a control verdict")
    nan, nan2 = float("nan"), (float("nan"), float("nan"))
    return ControlSensitivity(
        nan, nan2, nan, nan2, nan, nan2, nan, nan2, False, "undefined", 0, n_controls, level
    )


def control_sensitivity(
    paraphrases,
    controls,
    *,
    directions,
    bases=None,
    scale: tuple[float, float] = (0.0, 1.0),
    pairwise: bool = False,
    clusters=None,
    stable_below: float = 0.05,
    level: float = 0.95,
    n_resamples: int = 1000,
    seed: Seed = 0,
) -> ControlSensitivity:
    """Signal (control shift) against noise (paraphrase shift) of one judge on one prompt group.

    ``paraphrases``: items x k verdicts under the ``k >= 2`` paraphrases; ``controls``: items x c
    verdicts under the controls, ``directions[j]`` the direction control ``j`` must move and
    ``bases[j]`` the column of ``paraphrases`` it rewrites (default 0). Verdicts are on ``scale =
    (lo, hi)``; NaN is a missing verdict (left out of its item's means). Items with no paraphrase
    pair or no control pair are left out. ``pairwise``: verdicts are preferences for response 1
    (see the module docstring); ``clusters``: the bootstrap resamples them (e.g. a pair's two orders).

    Binary verdicts, twenty items (half yes, half no), three paraphrases that agree, a stricter
    control that says no on all: signal = mean(1 - 0, 0 - 0) = 0.5, noise 0, the judge follows.

    >>> r = control_sensitivity([[1, 1, 1], [0, 0, 0]] * 10, [[0], [0]] * 10, directions=["stricter"])
    >>> r.signal, r.noise, r.ratio, r.verdict
    (0.5, 0.0, inf, 'follows')
    """
    p, c, directions, bases = _checked(paraphrases, controls, directions, bases, scale)
    check_level(level)
    n_resamples = check_positive_int("n_resamples", n_resamples)
    check_seed(seed)
    shifts = np.stack(
        [
            control_shift(p[:, b], c[:, j], direction=d, pairwise=pairwise)
            for j, (d, b) in enumerate(zip(directions, bases, strict=True))
        ],
        axis=1,
    )
    s_i, n_i = _nanmean(shifts), _pair_noise(p)
    keep = ~np.isnan(s_i) & ~np.isnan(n_i)
    s_i, n_i, shifts = s_i[keep], n_i[keep], shifts[keep]
    if not keep.any():
        return _undefined(c.shape[1], level)
    cl = np.arange(int(keep.sum())) if clusters is None else np.asarray(clusters)[keep]
    w = cluster_weights(cl, n_resamples, seed=seed)
    tot = w.sum(1)
    s_dist, n_dist = (w @ s_i) / tot, (w @ n_i) / tot
    with np.errstate(divide="ignore", invalid="ignore"):
        r_dist = np.where(
            n_dist > 0, s_dist / np.where(n_dist > 0, n_dist, 1), np.where(s_dist > 0, np.inf, np.nan)
        )
    s, nz = float(s_i.mean()), float(n_i.mean())
    ratio = s / nz if nz > 0 else (float(np.sign(s)) * float("inf") if s != 0 else float("nan"))
    margin_ci, noise_ci = _ci(s_dist - n_dist, level), _ci(n_dist, level)
    follows = bool(margin_ci[0] > 0)
    verdict = (
        "follows"
        if follows
        else ("deaf: stable" if noise_ci[1] < stable_below else "deaf: wording-sensitive")
    )
    per_direction = {
        d: float(np.nanmean(shifts[:, [j for j, dj in enumerate(directions) if dj == d]]))
        for d in dict.fromkeys(directions)
    }
    return ControlSensitivity(
        s, _ci(s_dist, level), nz, noise_ci, s - nz, margin_ci, ratio, _ci(r_dist, level),
        follows, verdict, int(keep.sum()), c.shape[1], level, per_direction,
    )  # fmt: skip

"""Agreement, position and ranking measures of pairwise (A-versus-B) preferences.

Preferences are in a pair's own terms: ``"1"`` = the pair's first response (response_a), ``"2"`` =
its second (response_b), ``"tie"``; None = missing. A pair judged in both orders has two
single-order verdicts: ``first`` (order 12, response_a shown first as "A") and ``second`` (order
21, swapped), both already mapped back to the pair's terms.

* the **order-resolved** verdict: the common verdict when both orders agree, ``"inconsistent"``
  otherwise (FastChat ``fastchat/llm_judge/common.py``, ``load_pairwise_model_judgments``); where a
  two-order preference is needed an inconsistent pair counts as a tie (:func:`two_order_verdict`),
  as FastChat's ``show_result.py`` counts ``g1_winner != g2_winner`` as a tie;
* the **order-averaged** verdict (ours): the two orders' probabilities averaged per response, argmax;
* :func:`position_consistency`, :func:`first_position_rate`: the position bias;
* :func:`preference_agreement`: accuracy against a human preference, MT-Bench's "agreement w/o tie"
  and "w/ tie" (FastChat ``compute_agreement.py``), :func:`autoj_agreement` (Auto-J's rule: both
  orders equal the 3-class gold) and :func:`judgebench_agreement` (JudgeBench's: (correct, tie) is
  correct), each under its own name; :func:`rater_agreement` and
  :func:`judge_rater_agreement` for items with several annotators;
* :func:`win_rates` (ties as half), :func:`bradley_terry` (scikit-learn's logistic regression) and
  :func:`rank_flips` between the rankings of several prompts.

Each share is a ratio of per-item counts (``_*_counts``), so that the analysis can bootstrap it by
resampling clusters of items (:func:`~promptlottery.metrics.clustered_ratio_ci`). ``nan`` with an
:class:`UndefinedMetricWarning` where no item is eligible; a value outside the preferences raises
ValueError naming its position.
"""

from __future__ import annotations

import itertools
import json
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ._coefficients import kendall_tau
from ._validation import UndefinedMetricWarning, check_choice, check_same_length, to_1d, warn_undefined

__all__ = [
    "INCONSISTENT",
    "PREFERENCES",
    "agreement_counts",
    "autoj_agreement",
    "autoj_counts",
    "bradley_terry",
    "consistency_counts",
    "first_counts",
    "first_position_rate",
    "judge_rater_agreement",
    "judge_rater_counts",
    "judgebench_agreement",
    "judgebench_counts",
    "order_averaged",
    "order_resolved",
    "position_consistency",
    "preference_agreement",
    "rank_flips",
    "rank_flips_resampled",
    "rater_agreement",
    "rater_counts",
    "system_ranks",
    "two_order_verdict",
    "win_rates",
    "win_rates_resampled",
]

PREFERENCES = ("1", "2", "tie")
INCONSISTENT = "inconsistent"
_TIES = ("exclude_human", "class", "exclude_both")


# --------------------------------------------------------------------------- checks


def _prefs(x: Any, name: str, allowed: Sequence[str] = PREFERENCES) -> np.ndarray:
    """Object array of preferences (None = missing); a value outside ``allowed`` raises ValueError."""
    arr = to_1d(x, name).astype(object)
    out = np.empty(len(arr), dtype=object)
    for i, v in enumerate(arr):
        if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
            out[i] = None
        elif str(v) in allowed:
            out[i] = str(v)
        else:
            raise ValueError(
                f"{name}[{i}] = {v!r} is not a preference; expected one of {list(allowed)} or None"
            )
    return out


def _paired_prefs(
    a: Any, b: Any, names: tuple[str, str], allowed=PREFERENCES
) -> tuple[np.ndarray, np.ndarray]:
    pa, pb = _prefs(a, names[0], allowed), _prefs(b, names[1], allowed)
    check_same_length([pa, pb], list(names))
    return pa, pb


def _ratio(num: np.ndarray, den: np.ndarray, what: str) -> float:
    if den.sum() == 0:
        return warn_undefined(f"{what} is undefined: no eligible verdict", stacklevel=4)
    return float(num.sum() / den.sum())


# --------------------------------------------------------------------------- verdicts


def order_resolved(first: Any, second: Any) -> np.ndarray:
    """The order-resolved verdict per pair: the common preference of the two orders, else ``"inconsistent"``.

    ``first``: the verdicts of order 12, ``second``: of order 21, both in the pair's terms. None
    where either is missing.

    >>> order_resolved(["1", "1", "tie", None], ["1", "2", "tie", "2"]).tolist()
    ['1', 'inconsistent', 'tie', None]
    """
    a, b = _paired_prefs(first, second, ("first", "second"))
    out = np.empty(len(a), dtype=object)
    for i, (x, y) in enumerate(zip(a, b)):
        out[i] = None if x is None or y is None else (x if x == y else INCONSISTENT)
    return out


def two_order_verdict(resolved: Any) -> np.ndarray:
    """The order-resolved verdict where a preference is needed: ``"inconsistent"`` counts as a tie.

    FastChat's rule: ``show_result.py`` counts ``g1_winner == "tie" or g1_winner != g2_winner``
    as a tie when it scores the pairwise games.

    >>> two_order_verdict(["1", "inconsistent", None]).tolist()
    ['1', 'tie', None]
    """
    r = _prefs(resolved, "resolved", (*PREFERENCES, INCONSISTENT))
    return np.array(["tie" if v == INCONSISTENT else v for v in r], dtype=object)


def order_averaged(probs_12: Any, probs_21: Any) -> np.ndarray:
    """The order-averaged verdict (ours): mean of the two orders' probabilities per response, argmax.

    ``probs_12`` / ``probs_21``: ``(n, 3)`` arrays of ``(p_pref_1, p_pref_2, p_pref_tie)`` in the
    pair's terms (p(first answer wins | 12) sits in the column of response_a, as does p(second
    answer wins | 21)). A NaN tie probability (a scale without a tie label) is 0. None where either
    order lacks p_pref_1 or p_pref_2; ``"tie"`` where responses 1 and 2 share the top probability.

    >>> order_averaged([[0.9, 0.1, 0.0], [0.6, 0.4, 0.0]], [[0.2, 0.8, 0.0], [0.1, 0.9, 0.0]]).tolist()
    ['1', '2']
    """
    a, b = (np.asarray(p, dtype=float) for p in (probs_12, probs_21))
    for p, name in ((a, "probs_12"), (b, "probs_21")):
        if p.ndim != 2 or p.shape[1] != 3:
            raise ValueError(
                f"{name} must be an (n, 3) array of p_pref_1, p_pref_2, p_pref_tie; got {p.shape}"
            )
    check_same_length([a, b], ["probs_12", "probs_21"])
    ok = np.isfinite(a[:, :2]).all(axis=1) & np.isfinite(b[:, :2]).all(axis=1)
    mean = (np.nan_to_num(a) + np.nan_to_num(b)) / 2.0
    top = mean.max(axis=1)
    out = np.empty(len(a), dtype=object)
    for i in range(len(a)):
        if not ok[i]:
            out[i] = None
        elif mean[i, 2] == top[i] or mean[i, 0] == mean[i, 1]:
            out[i] = "tie"
        else:
            out[i] = "1" if mean[i, 0] > mean[i, 1] else "2"
    return out


# --------------------------------------------------------------------------- position


def consistency_counts(first: Any, second: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the (numerator, denominator) of :func:`position_consistency`, for a bootstrap."""
    a, b = _paired_prefs(first, second, ("first", "second"))
    den = np.array([x is not None and y is not None for x, y in zip(a, b)], dtype=float)
    num = np.array([x is not None and x == y for x, y in zip(a, b)], dtype=float) * den
    return num, den


def position_consistency(first: Any, second: Any) -> float:
    """Share of pairs whose ``preferred`` is the same in both orders (issue 25: ``position_consistency``).

    ``first`` / ``second``: the verdicts of orders 12 and 21 in the pair's terms; pairs missing
    either are left out (``nan`` with a warning when none is left). Two ties are consistent.

    >>> position_consistency(["1", "1", "tie", "2"], ["1", "2", "tie", None])
    0.6666666666666666
    """
    return _ratio(*consistency_counts(first, second), "position_consistency")


def first_counts(first: Any, second: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the (numerator, denominator) of :func:`first_position_rate`, for a bootstrap."""
    a, b = _paired_prefs(first, second, ("first", "second"))
    # order 12 shows response_a ("1") first; order 21 shows response_b ("2") first
    num = np.array([(x == "1") + (y == "2") for x, y in zip(a, b)], dtype=float)
    den = np.array([(x in ("1", "2")) + (y in ("1", "2")) for x, y in zip(a, b)], dtype=float)
    return num, den


def first_position_rate(first: Any, second: Any) -> float:
    """Share of single-order verdicts preferring the answer shown first (``first_position_rate``).

    Every verdict of either order counts once; ties and missing verdicts are left out. 0.5 = no
    position bias, 1 = the first answer always wins, 0 = the second always wins.

    >>> first_position_rate(["1", "1", "tie"], ["2", "1", "1"])  # first wins: 1, 1 (12); 2 (21)
    0.6
    """
    return _ratio(*first_counts(first, second), "first_position_rate")


# --------------------------------------------------------------------------- human agreement


def agreement_counts(judge: Any, human: Any, ties: str) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the (numerator, denominator) of :func:`preference_agreement`, for a bootstrap."""
    check_choice("ties", ties, _TIES)
    j = two_order_verdict(judge)
    h = _prefs(human, "human")
    den = np.array([x is not None and y is not None for x, y in zip(j, h)], dtype=bool)
    if ties in ("exclude_human", "exclude_both"):
        den &= np.array([y != "tie" for y in h])
    if ties == "exclude_both":
        den &= np.array([x != "tie" for x in j])
    num = den & np.array([x == y for x, y in zip(j, h)])
    return num.astype(float), den.astype(float)


def preference_agreement(judge: Any, human: Any, *, ties: str = "exclude_human") -> float:
    """Accuracy of the judge's preference against the human one.

    ``judge`` may hold ``"inconsistent"`` (counted as a tie); pairs with a missing verdict or
    human label are left out. ``ties``:

    * ``"exclude_human"`` (``human_agreement``, issue 25): pairs whose human label is a tie are left
      out; a judge tie (or an inconsistent pair) on the others is a disagreement;
    * ``"class"`` (``human_agreement_with_ties``): ties are a third class; MT-Bench's "agreement
      w/ tie" (FastChat ``compute_agreement.py``, ``ban=[]``: two ties agree);
    * ``"exclude_both"`` (``human_agreement_fastchat``): MT-Bench's "agreement w/o tie" exactly
      (``ban=["tie"]``: a pair is skipped when the judge's vote is a tie, and a human vote that is a
      tie is skipped).

    >>> judge, human = ["1", "2", "tie", "inconsistent", "1"], ["1", "1", "2", "tie", "tie"]
    >>> preference_agreement(judge, human)  # 1 right of the 3 with an untied human label
    0.3333333333333333
    >>> preference_agreement(judge, human, ties="class")  # right: 1=1, inconsistent=tie
    0.4
    >>> preference_agreement(judge, human, ties="exclude_both")  # only "1" vs "1", "2" vs "1"
    0.5
    """
    return _ratio(*agreement_counts(judge, human, ties), "human agreement")


def _two_orders(first: Any, second: Any, human: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The two single-order verdicts and the human preference of each pair, checked."""
    f, s = _paired_prefs(first, second, ("first", "second"))
    h = _prefs(human, "human")
    check_same_length([f, h], ["first", "human"])
    return f, s, h


def autoj_counts(first: Any, second: Any, human: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the (numerator, denominator) of :func:`autoj_agreement`, for a bootstrap."""
    f, s, h = _two_orders(first, second, human)
    den = np.array([y is not None for y in h], dtype=bool)
    num = den & np.array([x is not None and x == z == y for x, z, y in zip(f, s, h)])
    return num.astype(float), den.astype(float)


def autoj_agreement(first: Any, second: Any, human: Any) -> float:
    """Auto-J's published pairwise agreement (GAIR-NLP/auto-j ``codes/leaderboard/pairwise_eval.py``):
    a pair is correct only when both orders give the 3-class gold (ties a class of their own).

    Auto-J's ``check_res``: ``if pred_label_exchange == pred_label: agree = 1; if pred_label ==
    gt_label: both_correct = 1``, and the pairwise agreement is ``correct_both / total`` over every
    pair of the test set. ``first`` / ``second``: the verdicts of orders 12 / 21 in the pair's terms
    (Auto-J's ``exchange_to_ori_label`` does that mapping). Every pair with a human label is in the
    denominator, as Auto-J's ``total``: a missing verdict (Auto-J's exchanged prediction may be
    ``None``) is not correct; an inconsistent pair is wrong even on a tie gold.

    >>> autoj_agreement(["1", "tie", "1", "2"], ["1", "tie", "2", None], ["1", "tie", "1", "2"])
    0.5
    """
    return _ratio(*autoj_counts(first, second, human), "Auto-J agreement")


def judgebench_counts(first: Any, second: Any, human: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the (numerator, denominator) of :func:`judgebench_agreement`, for a bootstrap."""
    f, s, h = _two_orders(first, second, human)
    other = {"1": "2", "2": "1"}
    den = np.array([y is not None and y != "tie" for y in h], dtype=bool)
    counter = np.array(
        [sum((d == y) - (d == other.get(y)) for d in (x, z) if d is not None) for x, z, y in zip(f, s, h)]
    )
    return (den & (counter > 0)).astype(float), den.astype(float)


def judgebench_agreement(first: Any, second: Any, human: Any) -> float:
    """JudgeBench's accuracy with both orders (ScalerLab/JudgeBench ``utils/metrics.py``,
    ``compute_final_metrics(reverse_order=True)``): per pair ``counter`` = +1 for each order whose
    decision is the label, -1 for each order whose decision is the other side (a tie or a missing
    decision: 0); ``if counter > 0: n_correct += 1``, accuracy ``n_correct / n_pairs``. So (correct,
    tie) counts as correct and (correct, wrong) does not.

    JudgeBench's labels are ``A>B`` or ``B>A`` (no tie): the pairs with a tied human label are left
    out (ours: the code has no rule for them); every other pair is in ``n_pairs``, a missing verdict
    included (JudgeBench's ``n_nulls`` stay in the denominator).

    >>> judgebench_agreement(["1", "tie", "1", "2", None], ["tie", "1", "2", "2", "1"], ["1", "1", "1", "2", "1"])
    0.8
    """
    return _ratio(*judgebench_counts(first, second, human), "JudgeBench agreement")


def _raters(raters: Any) -> list[list[str] | None]:
    """Per pair, the annotators' votes (a JSON list or a list; None = no annotators)."""
    out: list[list[str] | None] = []
    items = raters.tolist() if isinstance(raters, pd.Series | np.ndarray) else list(raters)
    for i, r in enumerate(items):
        if r is None or (isinstance(r, float) and np.isnan(r)):
            out.append(None)
            continue
        votes = json.loads(r) if isinstance(r, str) else list(r)
        if not isinstance(votes, list):
            raise ValueError(f"raters[{i}] = {r!r} is not a list of votes")
        out.append(list(_prefs(votes, f"raters[{i}]")) if votes else None)
    return out


def rater_counts(raters: Any, ties: str) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the (numerator, denominator) of :func:`rater_agreement`, for a bootstrap."""
    check_choice("ties", ties, ("class", "exclude"))
    num, den = [], []
    for votes in _raters(raters):
        agree = total = 0
        for x, y in itertools.combinations([v for v in (votes or []) if v is not None], 2):
            if ties == "exclude" and "tie" in (x, y):
                continue
            total += 1
            agree += x == y
        num.append(agree)
        den.append(total)
    return np.array(num, dtype=float), np.array(den, dtype=float)


def rater_agreement(raters: Any, *, ties: str = "class") -> float:
    """The annotators' own agreement: FastChat's human-human count (``compute_agreement.py``).

    Over every pair of annotators of every item, the share giving the same vote, pooled over
    items; ``ties="exclude"`` skips an annotator pair when either vote is a tie (FastChat's
    ``ban=["tie"]``), ``"class"`` counts two ties as agreeing. ``raters``: per item a list (or a
    JSON list) of ``"1"`` / ``"2"`` / ``"tie"``.

    >>> rater_agreement([["1", "1", "2"], ["tie", "tie", "1"]])  # pairs: 1 of 3 agree, 1 of 3
    0.3333333333333333
    >>> rater_agreement([["1", "1", "2"], ["tie", "tie", "1"]], ties="exclude")  # 1 of 3, 0 of 0
    0.3333333333333333
    """
    return _ratio(*rater_counts(raters, ties), "rater agreement")


def judge_rater_counts(judge: Any, raters: Any, ties: str) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the (numerator, denominator) of :func:`judge_rater_agreement`, for a bootstrap."""
    check_choice("ties", ties, ("class", "exclude"))
    j = two_order_verdict(judge)
    num, den = [], []
    for v, votes in zip(j, _raters(raters), strict=True):
        agree = total = 0
        if v is not None and not (ties == "exclude" and v == "tie"):
            for h in votes or []:
                if h is None or (ties == "exclude" and h == "tie"):
                    continue
                total += 1
                agree += v == h
        num.append(agree)
        den.append(total)
    return np.array(num, dtype=float), np.array(den, dtype=float)


def judge_rater_agreement(judge: Any, raters: Any, *, ties: str = "class") -> float:
    """The judge against each annotator: FastChat's judge-human count (``compute_agreement.py``).

    Every (item, annotator vote) is one comparison; ``ties="exclude"`` skips an item whose judge
    verdict is a tie (or inconsistent) and every annotator vote that is a tie.

    >>> judge_rater_agreement(["1", "tie"], [["1", "1", "2"], ["tie", "tie", "1"]])  # 2 + 2 of 6
    0.6666666666666666
    >>> judge_rater_agreement(["1", "tie"], [["1", "1", "2"], ["tie", "tie", "1"]], ties="exclude")
    0.6666666666666666
    """
    return _ratio(*judge_rater_counts(judge, raters, ties), "judge-rater agreement")


# --------------------------------------------------------------------------- system scores


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
    that wins every game finite. Strengths are shifted to mean 0.

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
    return pd.Series(b - b.mean(), index=names, name="bradley_terry")


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

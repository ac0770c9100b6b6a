"""Agreement of pairwise preferences with the humans' (a gold preference, or several annotators).

:func:`preference_agreement`: accuracy against a human preference, MT-Bench's "agreement w/o tie"
and "w/ tie" (FastChat ``compute_agreement.py``), :func:`autoj_agreement` (Auto-J's rule: both
orders equal the 3-class gold) and :func:`judgebench_agreement` (JudgeBench's: (correct, tie) is
correct), each under its own name; :func:`rater_agreement` and :func:`judge_rater_agreement` for
items with several annotators. Preferences and verdicts as in :mod:`promptlottery.metrics.preference`;
each measure is the pooled share of its per-item ``*_counts``, which the analysis bootstraps.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np
import pandas as pd

from ._validation import check_choice, check_same_length
from .preference import check_preference_pairs, check_preferences, pooled_share, two_order_verdict

__all__ = [
    "agreement_counts",
    "autoj_agreement",
    "autoj_counts",
    "judge_rater_agreement",
    "judge_rater_counts",
    "judgebench_agreement",
    "judgebench_counts",
    "preference_agreement",
    "rater_agreement",
    "rater_counts",
]

_TIES = ("exclude_human", "class", "exclude_both")


def agreement_counts(judge: Any, human: Any, ties: str) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the (numerator, denominator) of :func:`preference_agreement`, for a bootstrap."""
    check_choice("ties", ties, _TIES)
    j = two_order_verdict(judge)
    h = check_preferences(human, "human")
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
    return pooled_share(*agreement_counts(judge, human, ties), "human agreement")


def _two_orders(first: Any, second: Any, human: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The two single-order verdicts and the human preference of each pair, checked."""
    f, s = check_preference_pairs(first, second, ("first", "second"))
    h = check_preferences(human, "human")
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
    return pooled_share(*autoj_counts(first, second, human), "Auto-J agreement")


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
    return pooled_share(*judgebench_counts(first, second, human), "JudgeBench agreement")


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
        out.append(list(check_preferences(votes, f"raters[{i}]")) if votes else None)
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
    return pooled_share(*rater_counts(raters, ties), "rater agreement")


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
    return pooled_share(*judge_rater_counts(judge, raters, ties), "judge-rater agreement")

"""The alternative annotator test (alt-test): can the judge replace the human annotators?

Calderon, Reichart & Dror (ACL 2025), "The Alternative Annotator Test for LLM-as-a-Judge", §3:
"excluding one annotator at a time and assessing whether the LLM better represents the remaining
annotators than the excluded one". For each held-out annotator ``j`` and each item ``i`` it
labelled, the alignment ``S(x, remaining)`` of the judge's label and of annotator ``j``'s label
with the other annotators of ``i`` gives two indicators, ``W^f_ij = 1[S(f) >= S(h_j)]`` (the judge
wins) and ``W^h_ij = 1[S(h_j) >= S(f)]`` (the human wins). The hypotheses (§3.2) are
``H0_j: rho^h_j - rho^f_j >= epsilon`` against ``H1_j: rho^h_j - rho^f_j < epsilon``, tested by a
one-sided one-sample t-test of ``d_ij = W^h_ij - W^f_ij`` against ``epsilon``; the ``m`` p-values
are corrected by the Benjamini-Yekutieli procedure at ``q = 0.05``. The **winning rate**
``omega`` is the share of annotators whose H0 is rejected; the judge passes when ``omega >= 0.5``.
The **advantage probability** ``rho = mean_j rho^f_j`` is the mean over annotators of the share
of items where the judge wins (§3.3). ``epsilon`` is the cost-benefit allowance (FAQ: 0.2 for
experts, 0.15 for skilled annotators, 0.1 for crowd workers).

Alignment ``S`` is ``accuracy`` (share of the remaining annotators with the same label: labels)
or ``neg_rmse`` (minus the root mean squared difference: scores), the paper's two.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from ._validation import check_choice, check_positive_int, to_numeric_1d, to_numeric_2d, warn_undefined

__all__ = ["EPSILON", "AltTestResult", "alt_test", "benjamini_yekutieli"]

# the paper's rule of thumb (FAQ "How do I select the epsilon value?")
EPSILON = {"expert": 0.2, "skilled": 0.15, "crowd": 0.1}


@dataclass(frozen=True)
class AltTestResult:
    """The alt-test's outcome; ``per_annotator`` holds one row per tested annotator."""

    winning_rate: float  # omega: share of annotators whose H0 is rejected after BY
    advantage_probability: float  # rho: mean over annotators of the judge's winning share
    passed: bool  # omega >= 0.5
    epsilon: float
    q_fdr: float
    n_items: int  # items with >= min_humans_per_item annotators and a judge label
    n_annotators: int  # annotators tested (>= min_items_per_human items)
    per_annotator: dict = field(repr=False)  # annotator -> {n, rho_f, rho_h, p_value, rejected}


def benjamini_yekutieli(p_values, *, q: float = 0.05) -> np.ndarray:
    """Boolean mask of the hypotheses rejected by the Benjamini-Yekutieli step-up procedure.

    Reject the ``k`` smallest p-values, ``k`` the largest rank with
    ``p_(k) <= k / m * q / H_m`` and ``H_m = 1 + 1/2 + ... + 1/m`` (Benjamini & Yekutieli 2001,
    Thm 1.3). A NaN p-value is never rejected.

    >>> benjamini_yekutieli([0.001, 0.02, 0.5], q=0.05).tolist()
    [True, False, False]
    """
    p = to_numeric_1d(p_values, "p_values")
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    m = p.size
    out = np.zeros(m, dtype=bool)
    if m == 0:
        return out
    h_m = np.sum(1.0 / np.arange(1, m + 1))
    order = np.argsort(np.where(np.isnan(p), np.inf, p), kind="stable")
    ok = p[order] <= np.arange(1, m + 1) / m * q / h_m
    if ok.any():
        out[order[: np.flatnonzero(ok)[-1] + 1]] = True
    return out


def _alignment(x: float, others: np.ndarray, scoring: str) -> float:
    if scoring == "accuracy":
        return float(np.mean(others == x))
    return -float(np.sqrt(np.mean((others - x) ** 2)))


def alt_test(
    judge,
    humans,
    *,
    epsilon: float = 0.2,
    scoring: str = "accuracy",
    q_fdr: float = 0.05,
    min_humans_per_item: int = 2,
    min_items_per_human: int = 30,
    annotators=None,
) -> AltTestResult:
    """The alt-test of one judge against an items x annotators matrix of human labels.

    ``judge``: one label or score per item (NaN: no judgment, the item is left out); ``humans``:
    items x annotators, NaN where an annotator did not label an item. Items with fewer than
    ``min_humans_per_item`` human labels are left out; annotators with fewer than
    ``min_items_per_human`` of the kept items are not tested (the paper asks for >= 30: the t-test's
    normality). With no annotator tested the result is ``nan`` with a warning.

    Three annotators, the judge copies annotator 0 and annotator 2 always dissents: held out 0 or 1,
    the judge ties the human on every item (``d = 0 < epsilon``); held out 2, the judge wins every
    item (``d = -1``); every H0 is rejected and the judge wins on every item, so ``omega = rho = 1``.

    >>> h = [[1, 1, 0], [0, 0, 1], [1, 1, 0], [0, 0, 1]] * 10
    >>> r = alt_test([1, 0, 1, 0] * 10, h, epsilon=0.2)
    >>> round(r.advantage_probability, 4), r.winning_rate, r.passed
    (1.0, 1.0, True)
    """
    f = to_numeric_1d(judge, "judge")
    h = to_numeric_2d(humans, "humans")
    if h.shape[0] != f.size:
        raise ValueError(f"judge has {f.size} items but humans has {h.shape[0]} rows")
    check_choice("scoring", scoring, ("accuracy", "neg_rmse"))
    if not 0 <= epsilon < 1:
        raise ValueError(f"epsilon must be in [0, 1), got {epsilon!r}")
    if not 0 < q_fdr < 1:
        raise ValueError(f"q_fdr must be in (0, 1), got {q_fdr!r}")
    min_humans_per_item = check_positive_int("min_humans_per_item", min_humans_per_item, 2)
    min_items_per_human = check_positive_int("min_items_per_human", min_items_per_human, 2)
    names = list(range(h.shape[1])) if annotators is None else list(annotators)
    if len(names) != h.shape[1]:
        raise ValueError(f"annotators names {len(names)} columns but humans has {h.shape[1]}")
    present = ~np.isnan(h)
    keep = (present.sum(axis=1) >= min_humans_per_item) & ~np.isnan(f)
    p_values, rho_f, rows = [], [], {}
    for j, name in enumerate(names):
        items = np.flatnonzero(keep & present[:, j])
        if items.size < min_items_per_human:
            continue
        w_f, w_h = np.empty(items.size), np.empty(items.size)
        for k, i in enumerate(items):
            others = h[i, present[i] & (np.arange(h.shape[1]) != j)]
            s_h, s_f = _alignment(h[i, j], others, scoring), _alignment(f[i], others, scoring)
            w_f[k], w_h[k] = float(s_f >= s_h), float(s_h >= s_f)
        d = w_h - w_f
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # constant d: t = +-inf, as in the paper's code
            p = float(stats.ttest_1samp(d, epsilon, alternative="less").pvalue)
        p_values.append(p)
        rho_f.append(float(w_f.mean()))
        rows[name] = {
            "n": int(items.size),
            "rho_f": float(w_f.mean()),
            "rho_h": float(w_h.mean()),
            "p_value": p,
        }
    n_items = int(keep.sum())
    if not rows:
        warn_undefined(
            f"alt_test: no annotator has >= {min_items_per_human} items with >= {min_humans_per_item} "
            "human labels and a judge label"
        )
        return AltTestResult(float("nan"), float("nan"), False, epsilon, q_fdr, n_items, 0, {})
    rejected = benjamini_yekutieli(p_values, q=q_fdr)
    for row, rej in zip(rows.values(), rejected, strict=True):
        row["rejected"] = bool(rej)
    omega = float(rejected.mean())
    return AltTestResult(omega, float(np.mean(rho_f)), omega >= 0.5, epsilon, q_fdr, n_items, len(rows), rows)

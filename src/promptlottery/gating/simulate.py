"""Selective aggregation, simulated on recorded judgments: how many judge calls does a gate save?

Judges are called in the recorded order (P1, P2, ...). After each call but the last, a policy
either trusts the current verdict (stop: the decision is that verdict) or asks the next variant.
After the last call every verdict is in hand and the decision is the full plurality, so a policy
can only lose decisions by stopping early. Policies:

* ``threshold`` gates: stop when the current judge's score (the learned classifier's probability
  that the verdict is in the plurality cluster, or the judge's own label probability) reaches a
  threshold; a judge without a verdict is never trusted;
* ``first_k``: stop as soon as ``k`` judges have given the same label (decision: that label);
* ``fixed``: always call the first ``n`` judges and take their plurality (n = 1: P1 alone;
  n = all: naive full aggregation).

A decision is *recovered* when it equals the full plurality of all the judges.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from promptlottery.judging.aggregate import plurality

#: the paper's operating point for the learned gate (DeBERTa-v3-large, 35 trials x 2 epochs)
PAPER_REFERENCE = {
    "calls_saved": 0.60,
    "recovered": 0.86,
    "recovered_no_consensus": 0.65,
    "tnr": 0.69,
    "tpr": 0.85,
}


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v))


@dataclass
class ItemBlock:
    """The held-out items as matrices: one row per item, one column per judge in calling order."""

    items: pd.DataFrame  # config_id, item_id, item_key, scale, plurality, human, no_consensus
    labels: np.ndarray  # object, n x J (None = no verdict)
    variants: list[str]

    @property
    def n_judges(self) -> int:
        return self.labels.shape[1]

    @property
    def final(self) -> np.ndarray:
        return self.items["plurality"].to_numpy(dtype=object)

    def scores(self, ex: pd.DataFrame, column: str) -> np.ndarray:
        """An ``n x J`` matrix of ``ex[column]`` aligned with the block (NaN where absent)."""
        m = _wide(ex, column).reindex(columns=self.variants)
        idx = pd.MultiIndex.from_frame(self.items[["config_id", "item_id"]])
        return m.reindex(idx).to_numpy(dtype=float)


def _wide(ex: pd.DataFrame, column: str) -> pd.DataFrame:
    s = ex.drop_duplicates(["config_id", "item_id", "variant"]).set_index(
        ["config_id", "item_id", "variant"]
    )[column]
    return s.unstack("variant")


def item_block(ex: pd.DataFrame, variants: list[str] | None = None) -> ItemBlock:
    """Group gate examples (``data.build_examples`` rows) into an :class:`ItemBlock`."""
    if variants is None:
        variants = list(ex.sort_values("position")["variant"].drop_duplicates())
    items = (
        ex.sort_values(["config_id", "item_id"], kind="mergesort")
        .drop_duplicates(["config_id", "item_id"])[
            ["config_id", "item_id", "item_key", "scale", "plurality", "human", "no_consensus"]
        ]
        .reset_index(drop=True)
    )
    lab = (
        _wide(ex, "label")
        .reindex(columns=variants)
        .reindex(pd.MultiIndex.from_frame(items[["config_id", "item_id"]]))
    )
    labels = lab.to_numpy(dtype=object)
    labels = np.array([[None if _missing(v) else v for v in row] for row in labels], dtype=object).reshape(
        len(items), len(variants)
    )
    return ItemBlock(items=items, labels=labels, variants=list(variants))


# -- policies -------------------------------------------------------------------------------------


def simulate_threshold(
    labels: np.ndarray, scores: np.ndarray, threshold: float, final: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Calls made and decision per item for a "trust the current verdict when score >= threshold" gate.

    >>> labels = np.array([["4", "4", "3"], ["2", "3", "3"]], dtype=object)
    >>> calls, dec = simulate_threshold(labels, np.array([[0.9, 0.1, 0.1], [0.2, 0.3, 0.9]]), 0.5,
    ...                                 np.array(["4", "3"], dtype=object))
    >>> calls.tolist(), dec.tolist()
    ([1, 3], ['4', '3'])
    """
    labels = np.asarray(labels, dtype=object)
    scores = np.asarray(scores, dtype=float)
    n, j = labels.shape
    calls = np.full(n, j, dtype=int)
    decision = np.asarray(final, dtype=object).copy()
    for i in range(n):
        for t in range(j - 1):  # after the last call the full plurality is free
            if not _missing(labels[i, t]) and not np.isnan(scores[i, t]) and scores[i, t] >= threshold:
                calls[i], decision[i] = t + 1, labels[i, t]
                break
    return calls, decision


def simulate_first_k(labels: np.ndarray, k: int, final: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stop as soon as ``k`` of the judges called so far agree; the decision is their label.

    >>> labels = np.array([["4", "4", "3"], ["2", "3", "3"], ["1", "2", "3"]], dtype=object)
    >>> calls, dec = simulate_first_k(labels, 2, np.array(["4", "3", "1"], dtype=object))
    >>> calls.tolist(), dec.tolist()
    ([2, 3, 3], ['4', '3', '1'])
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    labels = np.asarray(labels, dtype=object)
    n, j = labels.shape
    calls = np.full(n, j, dtype=int)
    decision = np.asarray(final, dtype=object).copy()
    for i in range(n):
        counts: dict = {}
        for t in range(j - 1):
            lab = labels[i, t]
            if _missing(lab):
                continue
            counts[lab] = counts.get(lab, 0) + 1
            if counts[lab] >= k:
                calls[i], decision[i] = t + 1, lab
                break
    return calls, decision


def simulate_fixed(labels: np.ndarray, n_calls: int, final: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Always call the first ``n_calls`` judges and take their plurality (ties: earliest judge)."""
    labels = np.asarray(labels, dtype=object)
    n, j = labels.shape
    if not 1 <= n_calls <= j:
        raise ValueError(f"n_calls must be in 1..{j}, got {n_calls}")
    if n_calls == j:
        return np.full(n, j, dtype=int), np.asarray(final, dtype=object).copy()
    sub = plurality(labels[:, :n_calls]) if n else np.zeros(0, dtype=object)
    dec = np.array([None if _missing(v) else v for v in sub], dtype=object)
    return np.full(n, n_calls, dtype=int), dec


# -- metrics --------------------------------------------------------------------------------------


def _values(decisions: np.ndarray, scales: np.ndarray) -> np.ndarray:
    from promptlottery.prompts.scales import get_scale

    cache: dict = {}
    out = np.full(len(decisions), np.nan)
    for i, (d, s) in enumerate(zip(decisions, scales)):
        if _missing(d):
            continue
        sc = cache.setdefault(s, get_scale(s))
        out[i] = sc.score_of(str(d))
    return out


def human_correlation(
    decisions: np.ndarray, block: ItemBlock, mask: np.ndarray | None = None, method: str = "spearman"
) -> float:
    """Item-weighted mean over configurations of the correlation between decisions and human labels."""
    from promptlottery.metrics import kendall_tau, spearman

    fn = {"spearman": spearman, "kendall": kendall_tau}[method]
    items = block.items
    mask = np.ones(len(items), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    vals = _values(decisions, items["scale"].to_numpy())
    human = items["human"].to_numpy(dtype=float)
    total, weight = 0.0, 0
    for cid in items["config_id"].unique():
        sel = mask & (items["config_id"].to_numpy() == cid) & ~np.isnan(vals) & ~np.isnan(human)
        if sel.sum() < 3:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = fn(vals[sel], human[sel])
        if r == r:
            total += r * sel.sum()
            weight += int(sel.sum())
    return total / weight if weight else float("nan")


def policy_metrics(calls: np.ndarray, decisions: np.ndarray, block: ItemBlock) -> dict[str, float]:
    """Mean calls, calls saved vs full aggregation, decisions recovered and human correlation,
    on all items and on the no-consensus items (``_nc``)."""
    final = block.final
    j = block.n_judges
    has_final = np.array([not _missing(v) for v in final])
    same = np.array([not _missing(d) and not _missing(f) and d == f for d, f in zip(decisions, final)])
    nc = block.items["no_consensus"].to_numpy(dtype=bool)
    out: dict[str, float] = {}
    for suffix, mask in (("", np.ones(len(final), dtype=bool)), ("_nc", nc)):
        m = mask & has_final
        out[f"n_items{suffix}"] = int(mask.sum())
        out[f"mean_calls{suffix}"] = float(calls[mask].mean()) if mask.any() else float("nan")
        out[f"calls_saved{suffix}"] = 1 - out[f"mean_calls{suffix}"] / j if mask.any() else float("nan")
        out[f"recovered{suffix}"] = float(same[m].mean()) if m.any() else float("nan")
        out[f"human_spearman{suffix}"] = human_correlation(decisions, block, mask)
    return out


def full_reference(block: ItemBlock) -> dict[str, float]:
    """Human correlation of the full plurality (what every policy is compared with)."""
    nc = block.items["no_consensus"].to_numpy(dtype=bool)
    return {
        "human_spearman_full": human_correlation(block.final, block),
        "human_spearman_full_nc": human_correlation(block.final, block, nc),
        "share_no_consensus": float(nc.mean()) if len(nc) else float("nan"),
    }


def threshold_grid(scores: np.ndarray, n: int = 101) -> np.ndarray:
    """0, 0.01, ..., 1 plus the distinct score quantiles, and one value above every score."""
    s = np.asarray(scores, dtype=float)
    s = s[~np.isnan(s)]
    grid = np.linspace(0.0, 1.0, n)
    if s.size:
        grid = np.concatenate([grid, np.quantile(s, np.linspace(0, 1, n))])
    return np.unique(np.concatenate([grid, [np.inf]]))


def threshold_curve(
    block: ItemBlock, scores: np.ndarray, policy: str, thresholds: np.ndarray | None = None
) -> pd.DataFrame:
    """One row per threshold: the policy's metrics (the cost curve)."""
    thresholds = threshold_grid(scores) if thresholds is None else np.asarray(thresholds, dtype=float)
    rows = []
    for thr in thresholds:
        calls, dec = simulate_threshold(block.labels, scores, float(thr), block.final)
        rows.append({"policy": policy, "threshold": float(thr), **policy_metrics(calls, dec, block)})
    return pd.DataFrame(rows)


def baseline_points(block: ItemBlock, ks: tuple[int, ...] = (2, 3)) -> pd.DataFrame:
    """First-k-agree stopping, P1 alone and full aggregation."""
    rows = []
    for k in ks:
        calls, dec = simulate_first_k(block.labels, k, block.final)
        rows.append({"policy": f"first_{k}_agree", "threshold": np.nan, **policy_metrics(calls, dec, block)})
    calls, dec = simulate_fixed(block.labels, 1, block.final)
    rows.append(
        {"policy": f"{block.variants[0]}_only", "threshold": np.nan, **policy_metrics(calls, dec, block)}
    )
    calls, dec = simulate_fixed(block.labels, block.n_judges, block.final)
    rows.append({"policy": "full_plurality", "threshold": np.nan, **policy_metrics(calls, dec, block)})
    return pd.DataFrame(rows)


def choose_operating_point(curve: pd.DataFrame, target_recovery: float) -> pd.Series:
    """The threshold saving the most calls while recovering at least ``target_recovery`` of the
    decisions (full aggregation always qualifies); ties go to the higher recovery."""
    ok = curve[curve["recovered"] >= target_recovery - 1e-12]
    if ok.empty:  # only possible when no item has a plurality
        ok = curve
    best = ok.sort_values(
        ["calls_saved", "recovered", "threshold"], ascending=[False, False, True], kind="mergesort"
    )
    return best.iloc[0]


def point_at_threshold(block: ItemBlock, scores: np.ndarray, policy: str, threshold: float) -> pd.Series:
    calls, dec = simulate_threshold(block.labels, scores, float(threshold), block.final)
    return pd.Series({"policy": policy, "threshold": float(threshold), **policy_metrics(calls, dec, block)})

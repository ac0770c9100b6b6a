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
  n = all: naive full aggregation);
* the paper's policy (:func:`simulate_paper_policy`): call P1; if the gate trusts it, stop after one
  call; otherwise run the adaptive full aggregation, which calls judges until one label has the
  plurality cluster's votes (:func:`~promptlottery.judging.aggregate.online_convergence`), or all
  of them. Its expected cost from convergence shares is :func:`adaptive_calls` /
  :func:`stable_item_calls` (the paper's 4.247 and 1.99 calls).

A decision is *recovered* when it equals the five-judge decision (the full plurality of all the
judges, ties to the earliest judge: it is the plurality cluster's label whenever there is one).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from promptlottery.judging.aggregate import plurality

#: the paper's operating point for the learned gate (DeBERTa-v3-large, 35 trials x 2 epochs). Its
#: TPR / TNR take "needs aggregation" as the positive class (see :func:`stable_item_calls`);
#: ``human_agreement_nc_*``: agreement with the human label on the no-consensus items, gate vs full
#: aggregation; ``adaptive_calls``: mean calls of the adaptive full aggregation; ``stable_calls``:
#: calls on stable items with the gate
PAPER_REFERENCE = {
    "calls_saved": 0.60,
    "recovered": 0.86,
    "recovered_no_consensus": 0.65,
    "tnr": 0.6942,
    "tpr": 0.8506,
    "human_agreement_nc_gate": 0.65,
    "human_agreement_nc_full": 0.79,
    "adaptive_calls": 4.247,
    "stable_calls": 1.99,
}


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v))


@dataclass
class ItemBlock:
    """The held-out items as matrices: one row per item, one column per judge in calling order."""

    items: pd.DataFrame  # config_id, item_id, item_key, scale, plurality, human, no_consensus, converged_at
    labels: np.ndarray  # object, n x J (None = no verdict)
    variants: list[str]

    @property
    def n_judges(self) -> int:
        return self.labels.shape[1]

    @property
    def final(self) -> np.ndarray:
        return self.items["plurality"].to_numpy(dtype=object)

    @property
    def adaptive_calls(self) -> np.ndarray:
        """Calls the adaptive full aggregation makes per item: its online convergence, else every judge."""
        at = self.items["converged_at"].to_numpy(dtype=float)
        return np.where(np.isnan(at), self.n_judges, at).astype(int)

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
            [
                "config_id",
                "item_id",
                "item_key",
                "scale",
                "plurality",
                "human",
                "no_consensus",
                "converged_at",
            ]
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


def simulate_paper_policy(
    labels: np.ndarray, scores: np.ndarray, threshold: float, final: np.ndarray, adaptive: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The paper's selective aggregation: P1 alone when the gate trusts it (score >= threshold),
    else the adaptive full aggregation (``adaptive`` calls per item, decision ``final``).

    >>> labels = np.array([["4", "4", "4"], ["2", "3", "3"], [None, "1", "1"]], dtype=object)
    >>> calls, dec = simulate_paper_policy(labels, np.array([[0.9] * 3, [0.2] * 3, [0.9] * 3]), 0.5,
    ...                                    np.array(["4", "3", "1"], dtype=object), np.array([2, 3, 3]))
    >>> calls.tolist(), dec.tolist()
    ([1, 3, 3], ['4', '3', '1'])
    """
    labels = np.asarray(labels, dtype=object)
    p1 = np.asarray(scores, dtype=float)[:, 0]
    has = np.array([not _missing(v) for v in labels[:, 0]], dtype=bool)
    trust = has & ~np.isnan(p1) & (np.nan_to_num(p1, nan=-np.inf) >= threshold)
    calls = np.where(trust, 1, np.asarray(adaptive, dtype=int))
    decision = np.where(trust, labels[:, 0], np.asarray(final, dtype=object))
    return calls.astype(int), decision.astype(object)


def adaptive_calls(shares: dict[int, float], never: float, n_judges: int) -> float:
    """Mean calls of the adaptive full aggregation from its convergence shares: each item converging
    at call ``k`` costs ``k``; one that never converges costs every judge.

    The paper (§4, selective aggregation): 37.68% converge by the third call, 21.05% by the fifth and
    41.27% never do within five, so 3 x 0.3768 + 5 x (0.2105 + 0.4127) = 4.2464, its "4.247 calls".
    """
    total = sum(shares.values()) + never
    if not np.isclose(total, 1.0, atol=1e-3):
        raise ValueError(f"convergence shares must sum to 1, got {total:.4f}")
    return float(sum(k * v for k, v in shares.items()) + n_judges * never)


def stable_item_calls(tnr_needs_aggregation: float, adaptive: float) -> float:
    """Calls on a stable item with the paper's gate: one call, plus the rest of the adaptive
    aggregation whenever the gate does not trust P1.

    The paper's derivation "5 -> 1.99 calls" = 1 + (1 - 0.6942) x 3.2464, with 3.2464 = 4.2464 - 1:
    its TNR (0.6942) is the share of stable items whose P1 verdict is trusted, so the paper's positive
    class is "needs aggregation" (ours, ``in_cluster``, is the opposite: its TNR is our TPR).
    """
    return 1.0 + (1.0 - float(tnr_needs_aggregation)) * (float(adaptive) - 1.0)


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


def human_agreement(decisions: np.ndarray, block: ItemBlock, mask: np.ndarray | None = None) -> float:
    """Share of items whose decision's scale value equals the human label, over the items whose human
    label is one of the scale's values (binary tasks, integer Likert labels); NaN when there is none.
    The paper's no-consensus comparison: 65% for the gate against 79% for full aggregation."""
    from promptlottery.prompts.scales import get_scale

    items = block.items
    mask = np.ones(len(items), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    vals = _values(decisions, items["scale"].to_numpy())
    human = items["human"].to_numpy(dtype=float)
    on_scale = np.array(
        [
            h == h and any(abs(h - get_scale(s).score_of(lab)) < 1e-9 for lab in get_scale(s).labels)
            for h, s in zip(human, items["scale"])
        ],
        dtype=bool,
    )
    sel = mask & on_scale
    if not sel.any():
        return float("nan")
    return float(np.mean(np.abs(np.nan_to_num(vals[sel], nan=np.inf) - human[sel]) < 1e-9))


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
        out[f"human_agreement{suffix}"] = human_agreement(decisions, block, mask)
    return out


def full_reference(block: ItemBlock) -> dict[str, float]:
    """Human correlation of the full plurality (what every policy is compared with)."""
    nc = block.items["no_consensus"].to_numpy(dtype=bool)
    return {
        "human_spearman_full": human_correlation(block.final, block),
        "human_spearman_full_nc": human_correlation(block.final, block, nc),
        "human_agreement_full_nc": human_agreement(block.final, block, nc),
        "share_no_consensus": float(nc.mean()) if len(nc) else float("nan"),
        "mean_adaptive_calls": float(block.adaptive_calls.mean()) if len(nc) else float("nan"),
    }


def threshold_grid(scores: np.ndarray, n: int = 101) -> np.ndarray:
    """0, 0.01, ..., 1 plus the distinct score quantiles, and one value above every score."""
    s = np.asarray(scores, dtype=float)
    s = s[~np.isnan(s)]
    grid = np.linspace(0.0, 1.0, n)
    if s.size:
        grid = np.concatenate([grid, np.quantile(s, np.linspace(0, 1, n))])
    return np.unique(np.concatenate([grid, [np.inf]]))


def _simulate(block: ItemBlock, scores: np.ndarray, threshold: float, paper: bool):
    if paper:
        return simulate_paper_policy(block.labels, scores, threshold, block.final, block.adaptive_calls)
    return simulate_threshold(block.labels, scores, threshold, block.final)


def threshold_curve(
    block: ItemBlock,
    scores: np.ndarray,
    policy: str,
    thresholds: np.ndarray | None = None,
    *,
    paper: bool = False,
) -> pd.DataFrame:
    """One row per threshold: the policy's metrics (the cost curve); ``paper``: the paper's policy
    (the gate asked about P1 only), else sequential per-judge gating."""
    thresholds = threshold_grid(scores) if thresholds is None else np.asarray(thresholds, dtype=float)
    rows = []
    for thr in thresholds:
        calls, dec = _simulate(block, scores, float(thr), paper)
        rows.append({"policy": policy, "threshold": float(thr), **policy_metrics(calls, dec, block)})
    return pd.DataFrame(rows)


def baseline_points(block: ItemBlock, ks: tuple[int, ...] = (2, 3)) -> pd.DataFrame:
    """First-k-agree stopping, P1 alone, full aggregation (all judges) and the adaptive full aggregation
    (the paper's: judges called until one label has the plurality cluster's votes)."""
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
    # the paper's full aggregation: stop once a label has the cluster's votes; same decision
    rows.append(
        {
            "policy": "adaptive_full_aggregation",
            "threshold": np.nan,
            **policy_metrics(block.adaptive_calls, block.final.copy(), block),
        }
    )
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


def point_at_threshold(
    block: ItemBlock, scores: np.ndarray, policy: str, threshold: float, *, paper: bool = False
) -> pd.Series:
    calls, dec = _simulate(block, scores, float(threshold), paper)
    return pd.Series({"policy": policy, "threshold": float(threshold), **policy_metrics(calls, dec, block)})

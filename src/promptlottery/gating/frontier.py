"""One cost-robustness frontier for every policy, on the same test items, with item-cluster intervals.

Every policy decides each test item with some judge calls (P1, P2, ... in the recorded order, or an
adaptive rule's seeded order) and is scored on three axes, each a mean over the items:

* **calls per item** (of ``J`` judges; calls saved = ``1 - calls / J``);
* **decisions recovered**: the share of items whose decision equals the five-judge decision (the full
  plurality, :mod:`promptlottery.gating.simulate`);
* **agreement with the human label**: the share of items, among those whose human label is a value
  of the scale, whose decision's value equals it.

Each figure has a percentile interval from the item-cluster bootstrap
(:func:`~promptlottery.metrics.cluster_bootstrap.cluster_resample_counts`, clusters = ``item_key``,
so an item judged under several configurations is drawn with all of them). Thresholds and stopping
confidences are chosen on the validation items (the largest saving that recovers ``target`` of the
decisions there); nothing is chosen on the items scored.

The policies: the paper's (the learned gate asked about P1, else the adaptive full aggregation,
§5.2), our sequential learned gate, P1 alone, the judge's own label probability as a gate,
first-k-agree, the paper's adaptive full aggregation (3 of 5), Adaptive-Consistency's Beta and
Dirichlet stopping (:mod:`promptlottery.metrics.adaptive`), the sparse designs
(:mod:`promptlottery.gating.sparse_policy`: each item's planned wordings only), full aggregation, and
a stacked gate of ours reading the text (the learned gate's probability) and the judge's label
probability together (:func:`stacked_gate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from promptlottery.gating.item_block import ItemBlock, human_agreement_items, is_missing
from promptlottery.gating.simulate import (
    simulate_first_k,
    simulate_fixed,
    simulate_paper_policy,
    simulate_threshold,
    threshold_grid,
)
from promptlottery.gating.sparse_policy import design_name, simulate_sparse
from promptlottery.metrics.adaptive import walk
from promptlottery.metrics.cluster_bootstrap import cluster_resample_counts

__all__ = [
    "PAPER_HEADLINE",
    "Frontier",
    "adaptive_stopping",
    "choose_confidence",
    "cluster_mean_ci",
    "frontier",
    "mcc",
    "mcc_interval",
    "recommendation",
    "stacked_gate",
]

#: the paper's headline (§5.2): "recovers 86% of five-prompt decisions ... at 60% fewer calls"
PAPER_HEADLINE = {"policy": "paper (§5.2, DeBERTa-v3-large)", "calls_saved": 0.60, "recovered": 0.86}

#: the Beta / Dirichlet confidences tried on validation
CONFIDENCES = (0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99)


# -- intervals ------------------------------------------------------------------------------------


def cluster_mean_ci(
    values: np.ndarray, weights: np.ndarray, level: float = 0.95
) -> tuple[float, float, float]:
    """``(mean, lo, hi)`` of the per-item ``values`` (NaN = undefined for that item, left out) under
    the resample counts ``weights`` (``(R, n)``, :func:`cluster_resample_counts`)."""
    v = np.asarray(values, dtype=float)
    ok = ~np.isnan(v)
    if not ok.any():
        return float("nan"), float("nan"), float("nan")
    est = float(v[ok].mean())
    num, den = weights @ np.where(ok, v, 0.0), weights @ ok.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        dist = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    a = (1 - level) / 2
    lo, hi = np.nanquantile(dist, [a, 1 - a]) if np.isfinite(dist).any() else (np.nan, np.nan)
    return est, float(lo), float(hi)


def mcc(y: np.ndarray, pred: np.ndarray) -> float:
    """Matthews correlation of 0/1 arrays; 0 for a constant prediction or label (as sklearn).

    >>> mcc(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0]))  # (1*2 - 0*1) / sqrt(1*3*2*2)
    0.5773502691896258
    """
    y, p = np.asarray(y, dtype=bool), np.asarray(pred, dtype=bool)
    tp, tn = float(np.sum(y & p)), float(np.sum(~y & ~p))
    fp, fn = float(np.sum(~y & p)), float(np.sum(y & ~p))
    den = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / den if den else 0.0


def mcc_interval(
    y: np.ndarray,
    prob: np.ndarray,
    clusters: np.ndarray,
    *,
    cut: float = 0.5,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, float]:
    """The gate's MCC at ``cut`` on the rows, with an item-cluster bootstrap percentile interval
    (every row of a drawn item is kept; the confusion counts are summed over the resample)."""
    y = np.asarray(y, dtype=int)
    p = np.nan_to_num(np.asarray(prob, dtype=float), nan=0.0) >= cut
    w = cluster_resample_counts(np.asarray(clusters), n_resamples, seed=seed)
    tp, tn = w @ (y & p), w @ ((1 - y) & ~p)
    fp, fn = w @ ((1 - y) & p), w @ (y & ~p)
    den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    with np.errstate(invalid="ignore", divide="ignore"):
        dist = np.where(den > 0, (tp * tn - fp * fn) / np.where(den > 0, den, 1.0), 0.0)
    a = (1 - level) / 2
    lo, hi = np.quantile(dist, [a, 1 - a])
    return {"mcc": mcc(y, p), "mcc_lo": float(lo), "mcc_hi": float(hi), "n_rows": len(y)}


# -- policies that the simulate module does not have ---------------------------------------------


def adaptive_stopping(
    block: ItemBlock, rule: str, confidence: float, *, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Calls and decision per item of the adaptive design's walk (``metrics.adaptive.walk``: each
    item's seeded order of the wordings, stop when ``rule`` reaches ``confidence``), replayed on the
    recorded labels: it calls exactly what ``judge.design=adaptive`` would."""
    keys = [f"{c}|{i}" for c, i in zip(block.items["config_id"], block.items["item_id"])]
    row = {k: n for n, k in enumerate(keys)}
    col = {v: j for j, v in enumerate(block.variants)}

    def labels_of(w: str, ask: list[str]) -> dict[str, object]:
        return {k: block.labels[row[k], col[w]] for k in ask}

    walks = walk(keys, block.variants, labels_of, rule=rule, confidence=confidence, seed=seed)
    calls = np.array([walks[k].calls for k in keys], dtype=int)
    dec = np.array([walks[k].plurality for k in keys], dtype=object)
    return calls, dec


def _outcomes(block: ItemBlock, calls: np.ndarray, dec: np.ndarray) -> dict[str, np.ndarray]:
    final = block.final
    has = np.array([not is_missing(f) for f in final])
    same = np.array([float(not is_missing(d) and d == f) for d, f in zip(dec, final)])
    return {
        "calls": np.asarray(calls, dtype=float),
        "recovered": np.where(has, same, np.nan),
        "human_agreement": human_agreement_items(dec, block),
    }


def _recovery(block: ItemBlock, calls, dec) -> tuple[float, float]:
    o = _outcomes(block, calls, dec)
    rec = o["recovered"]
    return float(np.nanmean(rec)) if (~np.isnan(rec)).any() else float("nan"), float(o["calls"].mean())


def _best(candidates: list[tuple[float, float, float]], target: float) -> float:
    """The parameter of ``(param, recovered, calls)`` with the fewest calls among those recovering
    ``target`` (ties: the higher recovery), else the highest recovery."""
    ok = [c for c in candidates if c[1] >= target - 1e-12] or sorted(candidates, key=lambda c: -c[1])[:1]
    return min(ok, key=lambda c: (c[2], -c[1]))[0]


def choose_confidence(val_block: ItemBlock, rule: str, target: float, *, seed: int = 0) -> float:
    """The stopping confidence chosen on the validation items (fewest calls recovering ``target``)."""
    cands = []
    for c in CONFIDENCES:
        rec, calls = _recovery(val_block, *adaptive_stopping(val_block, rule, c, seed=seed))
        cands.append((c, rec, calls))
    return _best(cands, target)


def choose_threshold(val_block: ItemBlock, scores: np.ndarray, target: float, *, paper: bool) -> float:
    """A gate's threshold chosen on the validation items (fewest calls recovering ``target``)."""
    sim = simulate_paper_policy if paper else simulate_threshold
    cands = []
    for t in threshold_grid(scores):
        args = (val_block.labels, scores, float(t), val_block.final)
        calls, dec = sim(*args, val_block.adaptive_calls) if paper else sim(*args)
        cands.append((float(t), *_recovery(val_block, calls, dec)))
    return _best(cands, target)


def stacked_gate(
    val: pd.DataFrame, parts: dict[str, pd.DataFrame], *, seed: int = 0
) -> dict[str, np.ndarray]:
    """Ours: a logistic regression on the text gate's logit, the judge's label-probability logit and
    the judge's position, fitted on the VALIDATION rows (the text gate's training rows would give it
    an over-confident input), applied to every part. P(in the plurality cluster) per row."""
    from sklearn.linear_model import LogisticRegression

    def feats(df: pd.DataFrame) -> np.ndarray:
        def logit(x):
            x = np.clip(np.nan_to_num(np.asarray(x, dtype=float), nan=0.5), 1e-4, 1 - 1e-4)
            return np.log(x / (1 - x))

        return np.column_stack([logit(df["p_gate"]), logit(df["confidence"]), df["position"].to_numpy(float)])

    y = val["in_cluster"].to_numpy()
    if len(set(y)) < 2:
        return {k: np.full(len(df), float(y[0]) if len(y) else 0.5) for k, df in parts.items()}
    lr = LogisticRegression(C=1.0, class_weight="balanced", random_state=seed, max_iter=1000)
    lr.fit(feats(val), y)
    return {k: lr.predict_proba(feats(df))[:, 1] if len(df) else np.zeros(0) for k, df in parts.items()}


# -- the frontier ---------------------------------------------------------------------------------


@dataclass
class Frontier:
    table: pd.DataFrame  # one row per policy: calls, recovered, human agreement, each with (lo, hi)
    headline: pd.DataFrame  # the paper's row beside ours (calls saved at 86% recovered)
    recommendation: str
    parameters: dict[str, float]  # thresholds / confidences chosen on validation


def _policies(
    block: ItemBlock, df: pd.DataFrame, params: dict[str, float], first_k, seed: int, sparse_designs=()
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    runs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    j = block.n_judges
    if "paper_gate" in params:
        runs["paper_gate"] = simulate_paper_policy(
            block.labels, block.scores(df, "p_gate"), params["paper_gate"], block.final, block.adaptive_calls
        )
    for name, col in (
        ("learned_gate", "p_gate"),
        ("confidence_gate", "confidence"),
        ("stacked_gate", "p_stack"),
    ):
        if name in params and col in df.columns:
            runs[name] = simulate_threshold(block.labels, block.scores(df, col), params[name], block.final)
    runs[f"{block.variants[0]}_only"] = simulate_fixed(block.labels, 1, block.final)
    for k in first_k:
        runs[f"first_{k}_agree"] = simulate_first_k(block.labels, int(k), block.final)
    runs["adaptive_3of5"] = (block.adaptive_calls, block.final.copy())
    for rule in ("beta", "dirichlet"):
        if f"adaptive_{rule}" in params:
            runs[f"adaptive_{rule}"] = adaptive_stopping(block, rule, params[f"adaptive_{rule}"], seed=seed)
    for d in sparse_designs:  # dicts of budget, anchor, full_share (gate.sparse_designs)
        runs[design_name(**d)] = simulate_sparse(block, **d, seed=seed)
    runs["full_aggregation"] = simulate_fixed(block.labels, j, block.final)
    return runs


def choose_parameters(
    val_block: ItemBlock, val: pd.DataFrame, target: float, *, seed: int = 0
) -> dict[str, float]:
    """Every tunable policy's threshold / confidence, chosen on the validation items."""
    params: dict[str, float] = {}
    if "p_gate" in val.columns:
        s = val_block.scores(val, "p_gate")
        params["paper_gate"] = choose_threshold(val_block, s, target, paper=True)
        params["learned_gate"] = choose_threshold(val_block, s, target, paper=False)
    for name, col in (("confidence_gate", "confidence"), ("stacked_gate", "p_stack")):
        if col in val.columns and val[col].notna().any():
            params[name] = choose_threshold(val_block, val_block.scores(val, col), target, paper=False)
    for rule in ("beta", "dirichlet"):
        params[f"adaptive_{rule}"] = choose_confidence(val_block, rule, target, seed=seed)
    return params


def frontier(
    block: ItemBlock,
    df: pd.DataFrame,
    params: dict[str, float],
    *,
    first_k=(2, 3),
    sparse_designs=(),
    target: float = 0.86,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    label: str = "test",
) -> Frontier:
    """Every policy on ``block`` (the items of ``df``) at the validation-chosen ``params``."""
    w = cluster_resample_counts(block.items["item_key"].to_numpy(), n_resamples, seed=seed)
    j = block.n_judges
    rows = []
    for name, (calls, dec) in _policies(block, df, params, first_k, seed, sparse_designs).items():
        o = _outcomes(block, calls, dec)
        row: dict[str, object] = {"policy": name, "parameter": params.get(name, np.nan)}
        for axis in ("calls", "recovered", "human_agreement"):
            est, lo, hi = cluster_mean_ci(o[axis], w, level)
            row.update({axis: est, f"{axis}_lo": lo, f"{axis}_hi": hi})
        row["calls_saved"] = 1 - row["calls"] / j
        row["calls_saved_lo"], row["calls_saved_hi"] = 1 - row["calls_hi"] / j, 1 - row["calls_lo"] / j
        row.update(
            {
                "n_items": len(block.items),
                # the items whose human label is a value of the scale: the human-agreement axis's items
                "n_items_human": int((~np.isnan(o["human_agreement"])).sum()),
                "n_configs": block.items["config_id"].nunique(),
                "part": label,
            }
        )
        rows.append(row)
    table = pd.DataFrame(rows)
    ours = table[table["policy"] == "paper_gate"]
    headline = pd.DataFrame(
        [
            {**PAPER_HEADLINE, "calls_saved_lo": np.nan, "calls_saved_hi": np.nan, "recovered_lo": np.nan,
             "recovered_hi": np.nan, "n_items": np.nan},
            *(
                {
                    "policy": f"ours: paper's policy, {label} ({int(r.n_items)} items, threshold chosen on "
                    f"validation for {target:.0%} recovered)",
                    **{k: getattr(r, k) for k in ("calls_saved", "calls_saved_lo", "calls_saved_hi",
                                                    "recovered", "recovered_lo", "recovered_hi", "n_items")},
                }
                for r in ours.itertuples()
            ),
        ]
    )  # fmt: skip
    return Frontier(
        table=table, headline=headline, recommendation=recommendation(table, target), parameters=dict(params)
    )


def by_configuration(block: ItemBlock, df: pd.DataFrame, params: dict[str, float], **kw) -> pd.DataFrame:
    """The frontier of each configuration's items (``config_id`` a column), at the same parameters."""
    tables = []
    for cid in sorted(block.items["config_id"].unique()):
        keep = (block.items["config_id"] == cid).to_numpy()
        sub = ItemBlock(
            items=block.items[keep].reset_index(drop=True), labels=block.labels[keep], variants=block.variants
        )
        tables.append(frontier(sub, df, params, **kw).table.assign(config_id=cid))
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def recommendation(table: pd.DataFrame, target: float) -> str:
    """One plain sentence: the policy with the fewest calls per item among those that recover at
    least ``target`` of the five-judge decisions (ties: the higher human agreement), on how many
    items; a pick that makes one call on every item (a stopping rule whose validation confidence
    stops at the first vote) is named for what it is, one wording's verdict, not an aggregation."""
    ok = table[table["recovered"] >= target - 1e-12]
    if ok.empty:
        return f"No policy recovers {target:.0%} of the five-judge decisions here: call every judge."
    best = ok.sort_values(["calls", "human_agreement"], ascending=[True, False], kind="mergesort").iloc[0]
    p1 = table[table["policy"].str.endswith("_only")]
    tail = ""
    if len(p1) and best["policy"] != p1.iloc[0]["policy"]:
        r = p1.iloc[0]
        tail = f" (one call alone recovers {r['recovered']:.0%} [{r['recovered_lo']:.0%}, {r['recovered_hi']:.0%}])"
    n = best.get("n_items")
    on = f" on {int(n)} items" if n is not None and not pd.isna(n) else ""
    single = best["calls_hi"] <= 1 + 1e-12 and not str(best["policy"]).endswith("_only")
    return (
        f"Take {best['policy']}: it recovers {best['recovered']:.0%} [{best['recovered_lo']:.0%}, "
        f"{best['recovered_hi']:.0%}] of the five-judge decisions at {best['calls']:.2f} "
        f"[{best['calls_lo']:.2f}, {best['calls_hi']:.2f}] calls per item, the fewest of the policies "
        f"recovering >= {target:.0%}{on}{tail}."
        + (" It makes one call on every item: one wording's verdict, no aggregation." if single else "")
    )


def line_points(table: pd.DataFrame) -> pd.DataFrame:
    """The frontier as (calls, recovered, policy) points, for a line plot."""
    return table[["policy", "calls", "recovered", "human_agreement"]].sort_values("calls", ignore_index=True)

"""The held-out items of the gating simulation as matrices, and what a policy's decisions are worth:
calls saved, decisions recovered, agreement and correlation with the human labels.

Split out of :mod:`promptlottery.gating.simulate` (the policies and cost curves), which re-exports
every name here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from promptlottery.metrics import kendall_tau, spearman
from promptlottery.registry import Registry

__all__ = [
    "ItemBlock",
    "item_block",
    "human_agreement",
    "human_agreement_items",
    "human_correlation",
    "policy_metrics",
    "full_reference",
    "is_missing",
]


def is_missing(v) -> bool:
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

    @cached_property
    def human_comparable(self) -> np.ndarray:
        """Per item: whether its human label can be compared with a decision's scale value (what
        :func:`human_agreement_items` keeps): the label is one of the scale's values, and is not a 0 / 1
        verdict (every human label of its configuration is 0 or 1) on a scale of more than two labels.
        Computed once per block: the frontier asks it for every policy and threshold."""
        from promptlottery.prompts.scales import get_scale

        items = self.items
        human = items["human"].to_numpy(dtype=float)
        on_scale = np.array(
            [
                h == h and any(abs(h - get_scale(s).score_of(lab)) < 1e-9 for lab in get_scale(s).labels)
                for h, s in zip(human, items["scale"])
            ],
            dtype=bool,
        )
        # a configuration whose human labels are all 0 / 1 (a correctness verdict, e.g. EvoUNA) judged on
        # a scale of more than two labels: its 1 is "correct", not the scale's 1, so agreement is undefined
        binary = items.groupby("config_id")["human"].transform(
            lambda h: bool(h.notna().any() and h.dropna().isin([0, 1]).all())
        )
        wider = np.array([len(get_scale(s).labels) > 2 for s in items["scale"]], dtype=bool)
        return on_scale & ~(binary.to_numpy(dtype=bool) & wider)

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
    labels = np.array([[None if is_missing(v) else v for v in row] for row in labels], dtype=object).reshape(
        len(items), len(variants)
    )
    return ItemBlock(items=items, labels=labels, variants=list(variants))


# -- metrics --------------------------------------------------------------------------------------


def human_agreement(decisions: np.ndarray, block: ItemBlock, mask: np.ndarray | None = None) -> float:
    """Share of items whose decision's scale value equals the human label, over the items whose human
    label is one of the scale's values (binary tasks, integer Likert labels); NaN when there is none.
    The paper's no-consensus comparison: 65% for the gate against 79% for full aggregation."""
    per_item = human_agreement_items(decisions, block)
    mask = np.ones(len(per_item), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    sel = mask & ~np.isnan(per_item)
    if not sel.any():
        return float("nan")
    return float(np.mean(per_item[sel]))


def human_agreement_items(decisions: np.ndarray, block: ItemBlock) -> np.ndarray:
    """Per item: 1.0 when the decision's scale value equals the human label, 0.0 when not, NaN when
    the human label is not one of the scale's values, or is a 0 / 1 verdict (every human label of its
    configuration is 0 or 1) on a scale of more than two labels (what :func:`human_agreement` averages)."""
    vals = _values(decisions, block.items["scale"].to_numpy())
    human = block.items["human"].to_numpy(dtype=float)
    on_scale = block.human_comparable
    same = (np.abs(np.nan_to_num(vals, nan=np.inf) - human) < 1e-9).astype(float)
    return np.where(on_scale, same, np.nan)


def _values(decisions: np.ndarray, scales: np.ndarray) -> np.ndarray:
    from promptlottery.prompts.scales import get_scale

    cache: dict = {}
    out = np.full(len(decisions), np.nan)
    for i, (d, s) in enumerate(zip(decisions, scales)):
        if is_missing(d):
            continue
        sc = cache.setdefault(s, get_scale(s))
        out[i] = sc.score_of(str(d))
    return out


#: the correlations of decisions with the human labels, by ``method``
HUMAN_CORRELATIONS: Registry[Callable[[np.ndarray, np.ndarray], float]] = Registry("correlation method")
HUMAN_CORRELATIONS.register("spearman", spearman)
HUMAN_CORRELATIONS.register("kendall", kendall_tau)


def human_correlation(
    decisions: np.ndarray, block: ItemBlock, mask: np.ndarray | None = None, method: str = "spearman"
) -> float:
    """Item-weighted mean over configurations of the correlation between decisions and human labels."""
    fn = HUMAN_CORRELATIONS.get(method)
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
    has_final = np.array([not is_missing(v) for v in final])
    same = np.array([not is_missing(d) and not is_missing(f) and d == f for d, f in zip(decisions, final)])
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

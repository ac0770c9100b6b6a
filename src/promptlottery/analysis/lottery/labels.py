"""The verdicts' label distributions per configuration, and when kappa-type measures collapse."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.table import natural_key

if TYPE_CHECKING:
    from promptlottery.analysis.lottery.options import LotteryOptions


def label_distribution(values: Iterable[Any]) -> dict[str, float]:
    """Share of each label among the non-missing verdicts, labels sorted."""
    s = pd.Series([v for v in values if not pd.isna(v)], dtype=object)
    if s.empty:
        return {}
    counts = s.astype(str).value_counts()
    total = counts.sum()
    return {k: float(counts[k] / total) for k in sorted(counts.index, key=natural_key)}


def format_distribution(dist: dict[str, float]) -> str:
    return " ".join(f"{k}:{v:.2f}" for k, v in dist.items()) if dist else "no verdicts"


def collapse_reason(values: Iterable[Any], share: float, by: Iterable[Any] | None = None) -> str | None:
    """Why kappa-type measures are meaningless on these verdicts, or None if they are not: one label
    for (nearly) every verdict, or, with ``by`` (each verdict's judge: its wording or sample), one
    label per judge for every item (the judges differ only in a constant: nothing is measured)."""
    values = list(values)
    dist = label_distribution(values)
    if not dist:
        return "no verdicts"
    top_label, top = max(dist.items(), key=lambda kv: (kv[1], kv[0]))
    if len(dist) == 1:
        return f"labels collapsed: every verdict is {top_label!r}"
    if top >= share:
        return f"labels collapsed: {top:.1%} of verdicts are {top_label!r} (>= {share:.0%}; {format_distribution(dist)})"
    if by is not None:
        per: dict[Any, set] = {}
        for j, v in zip(by, values, strict=True):
            if v is not None and not (isinstance(v, float) and np.isnan(v)):
                per.setdefault(j, set()).add(v)
        if len(per) >= 2 and all(len(labs) == 1 for labs in per.values()):
            each = ", ".join(
                f"{j} {next(iter(labs))!r}"
                for j, labs in sorted(per.items(), key=lambda t: natural_key(str(t[0])))
            )
            return f"labels collapsed within each judge: every item gets one label per wording or sample ({each})"
    return None


def label_table(grid: JudgmentGrid, opts: LotteryOptions) -> pd.DataFrame:
    """The verdicts' label distribution per configuration and setting, and whether they collapse.

    ``per_judge`` gives each judge's (variant's, or sample's) modal label and its share; ``collapsed``
    says why kappa-type measures are meaningless there (empty if they are not; ``opts.thresholds``'
    ``collapse_share``); ``sources`` counts
    where the verdicts came from (``argmax``, ``weighted_rounded``, ``parsed_fallback``,
    ``sampled_parsed``; ``missing`` = no verdict).
    """
    collapse_share = opts.thresholds["collapse_share"]
    out = []
    for conf in grid:
        cid = conf.config_id
        settings = [("paraphrases", conf.paraphrases, "variant")]
        settings += [(f.name, f.rows, "sample_index") for f in conf.fixed]
        for setting, g, by in settings:
            dist = label_distribution(g["label"])
            per_judge = []
            for j, gj in sorted(g.groupby(by), key=lambda t: natural_key(t[0])):
                d = label_distribution(gj["label"])
                if d:
                    lab, share = max(d.items(), key=lambda kv: (kv[1], kv[0]))
                    per_judge.append(f"{j} {lab}:{share:.2f}")
                else:
                    per_judge.append(f"{j} none")
            src = g["verdict_source"].fillna("missing").value_counts()
            out.append(
                {
                    "config_id": cid,
                    "setting": setting,
                    "n_verdicts": int(g["label"].notna().sum()),
                    "n_missing": int(g["label"].isna().sum()),
                    "distribution": format_distribution(dist),
                    "modal_share": max(dist.values()) if dist else np.nan,
                    "per_judge_modal": "; ".join(per_judge),
                    "sources": " ".join(f"{k}:{int(src[k])}" for k in sorted(src.index)),
                    "collapsed": collapse_reason(g["label"], collapse_share, by=g[by]) or "",
                }
            )
    return pd.DataFrame(out)

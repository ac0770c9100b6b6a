"""The human-baseline analysis: human ratings (+ a judgments table with verdicts) in, tables out.

Pure functions over DataFrames; the definitions are in :mod:`promptlottery.human.agreement`
(ours, named so) and the per-rater datasets' in :mod:`promptlottery.human.per_rater`. The lottery
report calls :func:`human_tables_for_report` when ``analysis.human_ratings`` is given; the
``human_analyse`` stage calls it on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.human.agreement import MEASURES, human_tables, judge_tables
from promptlottery.human.degradation import degradation
from promptlottery.judging.table import GREEDY_BELOW, configurations, fixed_settings, paraphrase_rows

ALPHA_LEVELS = ("nominal", "ordinal", "interval")


@dataclass
class HumanAnalysisOptions:
    """How the comparison is computed (the lottery analysis passes its own reference, seed, ...)."""

    reference: str = "P1"
    temperature: float | None = None
    n_resamples: int = 1000
    seed: int = 0
    level: float = 0.95
    alpha_level: str = "nominal"

    def __post_init__(self) -> None:
        if self.alpha_level not in ALPHA_LEVELS:
            raise ValueError(
                f"human.alpha_level={self.alpha_level!r}: must be one of {', '.join(ALPHA_LEVELS)}"
            )

    @property
    def boot(self) -> dict[str, Any]:
        return {
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "level": self.level,
            "alpha_level": self.alpha_level,
        }


def scale_labels(ratings: pd.DataFrame, labels: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The scale's labels: given, or the ``scale`` column's scale, or the sorted labels seen."""
    if labels:
        return tuple(labels)
    if "scale" in ratings.columns and ratings["scale"].notna().any():
        from promptlottery.prompts.scales import get_scale

        return get_scale(str(ratings["scale"].dropna().iloc[0])).labels
    return tuple(sorted(ratings["label"].astype(str).unique()))


def _matching_configurations(df: pd.DataFrame, ratings: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    out = []
    group = (
        ratings["prompt_group"].dropna().iloc[0]
        if "prompt_group" in ratings.columns and ratings["prompt_group"].notna().any()
        else None
    )
    items = set(ratings["item_id"])
    for cid, rows in configurations(df):
        if group is not None and str(rows["prompt_group"].iloc[0]) != str(group):
            continue
        if items & set(rows["item_id"]):
            out.append((cid, rows))
    return out


def _fixed_note(setting) -> str:
    if setting.temperature < GREEDY_BELOW and setting.repeat_source == "none":
        return (
            f"{setting.name}: agrees by construction on a deterministic backend (greedy repeats read the "
            "same label probabilities)"
        )
    return setting.name


def human_vs_judge(
    ratings: pd.DataFrame,
    judgments: pd.DataFrame | None,
    opts: HumanAnalysisOptions,
    *,
    labels: tuple[str, ...] | None = None,
) -> dict[str, pd.DataFrame]:
    """``human_agreement``, ``human_degradation`` and ``human_per_wording`` tables.

    ``judgments`` is a judgments table with verdicts (``add_verdicts``); the configurations of
    the ratings' prompt group that share items with them are compared, each on the items both
    have. Without judgments, the human rows alone (on every rated item).
    """
    labels = scale_labels(ratings, labels)
    wordings = sorted(ratings["wording"].astype(str).unique())
    agree, deg = [], []
    configs = _matching_configurations(judgments, ratings) if judgments is not None and len(judgments) else []
    if not configs:
        items = sorted(ratings["item_id"].astype(str).unique())
        a, _ = degradation(human_tables(ratings, labels, items), {}, len(items), len(labels), **opts.boot)
        if judgments is not None and len(judgments):
            group = (
                ratings["prompt_group"].dropna().unique().tolist()
                if "prompt_group" in ratings.columns
                else []
            )
            miss = f"no judged configuration{' of prompt group ' + str(group[0]) if group else ''} shares items with the ratings"
            a["notes"] = [f"{n}; {miss}" if n else miss for n in a["notes"]]
        agree.append(a.assign(config_id=""))
    for cid, rows in configs:
        para = paraphrase_rows(rows, opts.temperature)
        items = sorted(set(ratings["item_id"]) & set(para["item_id"]))
        fixed = fixed_settings(rows, opts.reference)
        notes = {}
        if fixed:
            notes["within"] = _fixed_note(fixed[0])
        else:
            notes["within"] = (
                f"n/a: no fixed-prompt baseline ({opts.reference} judged with n_samples >= 2) in this configuration"
            )
        h = human_tables(ratings, labels, items)
        j = judge_tables(fixed[0].rows if fixed else None, para, labels, items, wordings)
        missing = sorted(set(wordings) - set(para["variant"]))
        if missing:
            notes["across"] = f"the judge has no verdicts under wording(s) {', '.join(missing)}"
        a, d = degradation(h, {cid: j}, len(items), len(labels), **opts.boot, judge_notes={cid: notes})
        a["config_id"] = cid
        a.loc[a["side"] != "human", "side"] = "judge"
        agree.append(a)
        deg.append(d.rename(columns={"judge": "config_id"}))
    per_wording = []
    for w in wordings:
        sub = ratings[ratings["wording"] == w]
        items = sorted(sub["item_id"].astype(str).unique())
        a, _ = degradation(human_tables(sub, labels, items), {}, len(items), len(labels), **opts.boot)
        per_wording.append(a[a["setting"] == "within"].assign(wording=w))
    agreement = pd.concat(agree, ignore_index=True)
    agreement = agreement[["config_id", *[c for c in agreement.columns if c != "config_id"]]]
    pw = pd.concat(per_wording, ignore_index=True).drop(columns=["side", "setting"])
    pw = pw[["wording", *[c for c in pw.columns if c != "wording"]]]
    degr = pd.concat(deg, ignore_index=True) if deg else pd.DataFrame(columns=["config_id", "measure"])
    return {"human_agreement": agreement, "human_degradation": degr, "human_per_wording": pw}


def human_metrics(tables: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Flat finite numbers for results.json: ``human/<setting>/<measure>`` (the human rows over all
    items, or of the first configuration) and ``human/<config>/<measure>/<key>`` per comparison."""
    out: dict[str, float] = {}
    a = tables.get("human_agreement")
    if a is not None and len(a):
        first = a["config_id"].iloc[0]
        for _, r in a[(a["side"] == "human") & (a["config_id"] == first)].iterrows():
            for m in MEASURES:
                for suffix in ("", "_lo", "_hi"):
                    _put(out, f"human/{r['setting']}/{m}{suffix}", r[f"{m}{suffix}"])
    d = tables.get("human_degradation")
    if d is not None:
        for _, r in d.iterrows():
            for key in ("human_drop", "judge_drop", "drop_difference", "ratio"):
                for suffix in ("", "_lo", "_hi"):
                    _put(out, f"human/{r['config_id']}/{r['measure']}/{key}{suffix}", r[f"{key}{suffix}"])
    p = tables.get("human_raters_agreement")
    if p is not None:
        for _, r in p.iterrows():
            for m in MEASURES:
                _put(out, f"human_raters/{r['config_id']}/{r['side']}/{m}", r[m])
    return out


def _put(out: dict, key: str, value: Any) -> None:
    if value is not None and isinstance(value, (int, float, np.floating)) and np.isfinite(value):
        out[key] = float(value)


def human_tables_for_report(df: pd.DataFrame, opts: Any) -> dict[str, pd.DataFrame]:
    """The lottery report's hook: the human tables of ``opts.human_ratings`` (a ratings file) against
    the judgments ``df`` (with verdicts), and, with ``opts.human_raters``, the per-rater datasets' rows.
    ``opts`` is the lottery's options (reference, temperature, n_resamples, seed, level)."""
    from promptlottery.human.per_rater import per_rater_table
    from promptlottery.human.ratings import load_ratings

    a = HumanAnalysisOptions(opts.reference, opts.temperature, opts.n_resamples, opts.seed, opts.level)
    out: dict[str, pd.DataFrame] = {}
    if getattr(opts, "human_ratings", None):
        out.update(human_vs_judge(load_ratings(opts.human_ratings), df, a))
    if getattr(opts, "human_raters", False):
        out["human_raters_agreement"] = per_rater_table(
            df, reference=opts.reference, n_resamples=opts.n_resamples, seed=opts.seed, level=opts.level
        )
    return out

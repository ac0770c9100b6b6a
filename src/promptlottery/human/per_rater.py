"""Datasets that ship several raters per item: human agreement under one wording (the dataset's own
instruction to its raters) beside the judge's fixed-prompt agreement on the same items.

The judgments table carries each item's per-rater labels (``human_raters``, a JSON list, for the
loaders with ``human_kind="per_rater"``: USR, FED, Newsroom ``source=judge_bench``, ASAP, ...).
JUDGE-BENCH files (DICES, the recipe set; ``individual_human_scores``) are read by
:func:`judge_bench_raters` without a judge. Definitions (ours): a unit is an item; its raters are
the positions in the item's rater list (the list order of the file: the same position is taken as
the same rater across items, which the files do not promise; Fleiss' kappa and Krippendorff's
alpha do not depend on it, the pairwise overlap and Cohen's kappa do); the labels are the distinct
values the raters gave, nominal; the four measures and the item bootstrap of
:mod:`promptlottery.human.agreement`. The judge side is the fixed-prompt setting (items x samples
of the reference variant) on the items with rater labels.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from promptlottery.human.agreement import MEASURES, RaterTable, judge_tables
from promptlottery.human.degradation import degradation
from promptlottery.judging.table import configurations, fixed_settings


def _rater_table(lists: dict[str, list], items: list[str]) -> tuple[RaterTable, int]:
    values = sorted({str(_norm(v)) for vs in lists.values() for v in vs if v is not None}, key=_sort_key)
    pos = {v: i for i, v in enumerate(values)}
    width = max(len(v) for v in lists.values())
    codes = np.full((len(items), width), -1, dtype=np.int64)
    for n, it in enumerate(items):
        for j, v in enumerate(lists[it]):
            if v is not None:
                codes[n, j] = pos[str(_norm(v))]
    unit_item = np.arange(len(items))
    counts = (codes >= 0).sum(axis=1)
    m = int(counts[counts >= 2].min()) if (counts >= 2).any() else 0
    # Fleiss: the first m ratings of every item (m the fewest any item with two ratings has)
    fleiss = np.array([[c for c in row if c >= 0][:m] for row in codes[counts >= 2]], dtype=np.int64).reshape(
        -1, m
    )
    t = RaterTable(codes, unit_item, fleiss, unit_item[counts >= 2], "rater positions")
    if (counts > m).any() and m:
        t.notes.append(
            f"fleiss: the first {m} ratings of each item (items carry {counts.min()}-{counts.max()})"
        )
    return t, len(values)


def _norm(v):
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _sort_key(v: str):
    try:
        return (0, float(v), v)
    except ValueError:
        return (1, 0.0, v)


def raters_agreement(
    lists: dict[str, list], *, n_resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> pd.DataFrame:
    """The human within-one-wording row of one dataset from ``{item_id: [rating, ...]}``."""
    items = sorted(lists)
    t, n_labels = _rater_table(lists, items)
    a, _ = degradation(
        {"within": t}, {}, len(items), n_labels, n_resamples=n_resamples, seed=seed, level=level
    )
    return a[a["setting"] == "within"].reset_index(drop=True)


def per_rater_table(
    df: pd.DataFrame, *, reference: str = "P1", n_resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> pd.DataFrame:
    """Per configuration with per-rater labels: the human row (rater positions) and the judge's
    fixed-prompt row on the same items (``side`` human / judge)."""
    rows = []
    if "human_raters" not in df.columns:
        return pd.DataFrame(columns=["config_id", "side", *MEASURES])
    for cid, g in configurations(df):
        raw = g.dropna(subset=["human_raters"]).drop_duplicates("item_id")
        lists = {str(i): json.loads(s) for i, s in zip(raw["item_id"], raw["human_raters"]) if s}
        lists = {i: v for i, v in lists.items() if sum(x is not None for x in v) >= 2}
        if not lists:
            continue
        items = sorted(lists)
        h, n_h = _rater_table(lists, items)
        fixed = fixed_settings(g, reference)
        from promptlottery.prompts.scales import get_scale

        labels = get_scale(str(g["scale"].iloc[0])).labels
        boot = dict(n_resamples=n_resamples, seed=seed, level=level)
        ha, _ = degradation({"within": h}, {}, len(items), n_h, **boot)
        rec = ha[ha["setting"] == "within"].assign(
            config_id=cid, side="human", wording="the dataset's own instruction"
        )
        rows.append(rec)
        if fixed:
            j = judge_tables(fixed[0].rows, g.iloc[0:0].assign(label=None), labels, items, [])
            ja, _ = degradation({"within": j["within"]}, {}, len(items), len(labels), **boot)
            jr = ja[ja["setting"] == "within"].assign(
                config_id=cid, side="judge", wording=f"{reference} ({fixed[0].name})"
            )
            rows.append(jr)
        else:
            rows.append(
                pd.DataFrame(
                    [
                        {
                            "config_id": cid,
                            "side": "judge",
                            "wording": reference,
                            **dict.fromkeys(MEASURES, np.nan),
                            "notes": f"n/a: no fixed-prompt baseline ({reference} judged with n_samples >= 2)",
                        }
                    ]
                )
            )
    if not rows:
        return pd.DataFrame(columns=["config_id", "side", *MEASURES])
    out = pd.concat(rows, ignore_index=True).drop(columns=["setting"], errors="ignore")
    lead = ["config_id", "side", "wording"]
    return out[[*lead, *[c for c in out.columns if c not in lead]]]


def judge_bench_raters(path: str | Path, metric: str) -> dict[str, list]:
    """``{instance id: individual_human_scores}`` of one JUDGE-BENCH file's ``metric``."""
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    out = {}
    for n, inst in enumerate(data.get("instances", [])):
        ann = (inst.get("annotations") or {}).get(metric)
        if ann is None:
            known = sorted((inst.get("annotations") or {}).keys())
            raise ValueError(f"{path} instance {n}: no annotation {metric!r}; the file has {known}")
        out[str(inst.get("id", n))] = list(ann.get("individual_human_scores") or [])
    return out

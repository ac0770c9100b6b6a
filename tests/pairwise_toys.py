"""Synthetic pairwise judgments tables (the columns of the pairwise contract) for the tests."""

from __future__ import annotations

import json

import pandas as pd

#: the hand-computed toy: per wording, per pair, the verdicts of orders 12 and 21 in the pair's terms
TOY_VERDICTS = {
    "P1": {"q1": ("1", "1"), "q2": ("1", "2"), "q3": ("tie", "tie"), "q4": ("1", "1")},
    "P2": {"q1": ("1", "2"), "q2": ("2", "2"), "q3": ("1", "tie"), "q4": ("2", "1")},
    "P3": {"q1": ("1", "1"), "q2": ("2", "2"), "q3": ("2", "2"), "q4": ("1", "2")},
}
TOY_HUMAN = {"q1": "1", "q2": "2", "q3": "tie", "q4": "1"}
TOY_RATERS = {
    "q1": ["1", "1", "2"],
    "q2": ["2", "2", "2"],
    "q3": ["tie", "tie", "1"],
    "q4": ["1", "tie", "1"],
}
TOY_SYSTEMS = {"q1": ("x", "y"), "q2": ("x", "z"), "q3": ("y", "z"), "q4": ("x", "y")}
TOY_CLUSTERS = {"q1": "i1", "q2": "i1", "q3": "i2", "q4": "i3"}
#: P1's probabilities (p_pref_1, p_pref_2, p_pref_tie) per pair and order; other wordings: by verdict
TOY_P1_PROBS = {
    "q1": ((0.7, 0.3, 0.0), (0.6, 0.4, 0.0)),
    "q2": ((0.6, 0.4, 0.0), (0.2, 0.8, 0.0)),
    "q3": ((0.3, 0.2, 0.5), (0.2, 0.3, 0.5)),
    "q4": ((0.9, 0.1, 0.0), (0.8, 0.2, 0.0)),
}
BY_VERDICT = {"1": (0.8, 0.2, 0.0), "2": (0.2, 0.8, 0.0), "tie": (0.1, 0.1, 0.8)}


def pairwise_rows(
    verdicts: dict,
    human: dict,
    *,
    probs: dict | None = None,
    raters: dict | None = None,
    systems: dict | None = None,
    clusters: dict | None = None,
    dataset: str = "toy",
    backbone: str = "fake",
    run_dir: str = "",
) -> pd.DataFrame:
    """One row per wording x pair x order; ``probs[variant][item] = (p12, p21)`` (default: by verdict)."""
    rows = []
    for variant, per_item in verdicts.items():
        for item, (v12, v21) in per_item.items():
            for k, (order, v) in enumerate((("12", v12), ("21", v21))):
                p = (probs or {}).get(variant, {}).get(item)
                p = p[k] if p is not None else BY_VERDICT.get(v, (float("nan"),) * 3)
                shown = (
                    {"1": "A", "2": "B", "tie": "C"} if order == "12" else {"1": "B", "2": "A", "tie": "C"}
                )
                s = (systems or {}).get(item, (None, None))
                rows.append(
                    {
                        "item_id": item,
                        "variant": variant,
                        "backbone": backbone,
                        "dataset": dataset,
                        "judge_family": "pairwise",
                        "prompt_group": "G17",
                        "scale": "pairwise_abc",
                        "criterion": "",
                        "rubric": "",
                        "temperature": 0.0,
                        "sample_index": 0,
                        "seed": 0,
                        "judge_mode": "pairwise",
                        "order": order,
                        "argmax_label": shown.get(v),
                        "preferred": v,
                        "preferred_parsed": v,
                        "p_pref_1": p[0],
                        "p_pref_2": p[1],
                        "p_pref_tie": p[2],
                        "human_preferred": human.get(item),
                        "human_raters": json.dumps(raters[item]) if raters and item in raters else None,
                        "system_1": s[0],
                        "system_2": s[1],
                        "cluster_id": (clusters or {}).get(item, item),
                        "run_dir": run_dir,
                    }
                )
    return pd.DataFrame(rows)


def toy_table(**kw) -> pd.DataFrame:
    """The hand-computed toy: 4 pairs x 2 orders x 3 wordings."""
    return pairwise_rows(
        TOY_VERDICTS,
        TOY_HUMAN,
        probs={"P1": TOY_P1_PROBS},
        raters=TOY_RATERS,
        systems=TOY_SYSTEMS,
        clusters=TOY_CLUSTERS,
        **kw,
    )

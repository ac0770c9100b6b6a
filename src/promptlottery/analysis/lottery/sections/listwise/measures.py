"""The listwise judge's measures, per configuration and wording, from its rows (``judge_mode ==
"listwise"``; columns: :mod:`promptlottery.modes.listwise`).

Per wording (``listwise_wordings``), the argmax pick unless named otherwise:

* ``top1_agreement``: share of (list, order) judgments whose pick is a human best response (the
  highest mean annotator score; of tied bests, any);
* ``kendall_tau`` (the logprob-weighted verdict): per list, Kendall's tau-b between the judge's
  probability of picking each response (averaged over the orders judged) and the human scores,
  then the mean over the lists where it is defined (``n_tau``: a judge or human ranking with every
  response tied has none);
* ``first_shown_win_rate``: share of judgments that pick the response shown first, beside
  ``chance`` = 1/k (no position bias);
* ``order_consistency``: share of lists whose pick is the same response under every order judged.

Per configuration (``listwise_lottery``): ``kappa_top1`` = Fleiss' kappa of the pick (a response
number) across the wordings, the (list, order) judgments the raters' subjects; the systems' win
rates per wording (``listwise_systems``: share of a wording's judgments that pick the system's
response, ranked 1 = most picked, ties sharing the lower rank) and ``systems_rank_changed``, the
number of systems whose rank is not the same under every wording, ``max_rank_shift`` the largest
difference of one system's ranks.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
from scipy import stats

from promptlottery.judging.table import AnalysisError
from promptlottery.metrics import fleiss_kappa

WORDINGS = "listwise_wordings"
LOTTERY = "listwise_lottery"
SYSTEMS = "listwise_systems"
#: the section's tables, in the order they are built
TABLES = (WORDINGS, LOTTERY, SYSTEMS)
NEEDED = (
    "item_id",
    "variant",
    "order",
    "picked",
    "picked_position",
    "p_responses",
    "human_scores",
    "systems",
)


def judged(rows: pd.DataFrame, config_id: str) -> pd.DataFrame:
    """The greedy sample of each (list, wording, order), checked; a missing column or a judgment
    given twice is one line naming the configuration."""
    missing = [c for c in NEEDED if c not in rows.columns]
    if missing:
        raise AnalysisError(
            f"listwise judgments of {config_id} lack the columns {missing} (judged before the mode?)"
        )
    if "sample_index" in rows.columns:
        rows = rows[rows["sample_index"] == 0]
    dup = rows.duplicated(["item_id", "variant", "order"])
    if dup.any():
        r = rows[dup].iloc[0]
        raise AnalysisError(
            f"listwise judgments of {config_id}: list {r['item_id']!r} wording {r['variant']} order {r['order']} "
            "is judged twice (two runs of one configuration?)"
        )
    return rows


def tau_b(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b of two rankings; nan where either side is all ties.

    >>> round(tau_b([1.0, 0.0, 0.0], [4.7, 3.3, 2.7]), 4)
    0.8165
    """
    if len(set(x)) < 2 or len(set(y)) < 2 or any(math.isnan(v) for v in (*x, *y)):
        return math.nan
    return float(stats.kendalltau(x, y).statistic)


def _best(scores_json: str) -> set[str]:
    scores = json.loads(scores_json)
    return {str(i) for i, s in enumerate(scores, start=1) if s == max(scores)}


def _wording(rows: pd.DataFrame) -> dict:
    picked = rows["picked"].astype("string")
    k = len(str(rows["order"].iloc[0]))
    has_human = rows["human_scores"].notna()
    agree = [
        p in _best(h)
        for p, h in zip(picked[has_human], rows.loc[has_human, "human_scores"])
        if p is not pd.NA
    ]
    taus = []
    for _, lst in rows[has_human].groupby("item_id"):
        p = np.nanmean(np.array([json.loads(v) for v in lst["p_responses"]], dtype=float), axis=0)
        taus.append(tau_b(list(p), json.loads(lst["human_scores"].iloc[0])))
    tau = [t for t in taus if not math.isnan(t)]
    multi = rows.groupby("item_id").filter(lambda g: len(g) > 1)
    same = [g["picked"].notna().all() and g["picked"].nunique() == 1 for _, g in multi.groupby("item_id")]
    pos = pd.to_numeric(rows["picked_position"], errors="coerce").dropna()
    return {
        "n_lists": rows["item_id"].nunique(),
        "k": k,
        "n_judgments": len(rows),
        "missing_share": float(picked.isna().mean()),
        "top1_agreement": float(np.mean(agree)) if agree else math.nan,
        "kendall_tau": float(np.mean(tau)) if tau else math.nan,
        "n_tau": len(tau),
        "first_shown_win_rate": float((pos == 1).mean()) if len(pos) else math.nan,
        "chance": 1.0 / k,
        "order_consistency": float(np.mean(same)) if same else math.nan,
    }


def _system_ranks(config_id: str, rows: pd.DataFrame) -> pd.DataFrame:
    out = []
    for variant, g in rows.groupby("variant", sort=False):
        picks = [json.loads(s)[int(p) - 1] for p, s in zip(g["picked"], g["systems"]) if pd.notna(p)]
        names = sorted({s for v in g["systems"] for s in json.loads(v)})
        share = {s: picks.count(s) / len(g) for s in names}
        rank = pd.Series(share).rank(ascending=False, method="min")
        out += [
            {
                "config_id": config_id,
                "variant": variant,
                "system": s,
                "win_rate": share[s],
                "rank": int(rank[s]),
            }
            for s in names
        ]
    return pd.DataFrame(out)


def _lottery(config_id: str, rows: pd.DataFrame, systems: pd.DataFrame) -> dict:
    wide = rows.pivot(index=["item_id", "order"], columns="variant", values="picked").dropna()
    kappa = fleiss_kappa(wide.to_numpy()) if wide.shape[1] > 1 and len(wide) else math.nan
    ranks = (
        systems.pivot(index="system", columns="variant", values="rank") if len(systems) else pd.DataFrame()
    )
    shift = (ranks.max(axis=1) - ranks.min(axis=1)) if len(ranks) else pd.Series(dtype=float)
    return {
        "config_id": config_id,
        "n_wordings": rows["variant"].nunique(),
        "n_subjects": len(wide),
        "kappa_top1": kappa,
        "systems_rank_changed": int((shift > 0).sum()),
        "max_rank_shift": float(shift.max()) if len(shift) else math.nan,
    }


def listwise_tables(by_config: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The section's tables over ``{config_id: rows}`` (:meth:`JudgmentGrid.rows` of the mode)."""
    wordings, lottery, systems = [], [], []
    for cid, rows in by_config.items():
        rows = judged(rows, cid)
        for variant, g in rows.groupby("variant", sort=False):
            wordings.append({"config_id": cid, "variant": variant, **_wording(g)})
        ranks = _system_ranks(cid, rows)
        systems.append(ranks)
        lottery.append(_lottery(cid, rows, ranks))
    return {
        WORDINGS: pd.DataFrame(wordings),
        LOTTERY: pd.DataFrame(lottery),
        SYSTEMS: pd.concat(systems, ignore_index=True) if systems else pd.DataFrame(),
    }

"""The pairwise section's rankings: per wording each system's win rate (ties half, FastChat's
``win_rate_adjusted``) and Bradley-Terry strength from the two-order verdicts, and the rank flips
between wordings; a fixed baseline (a system in every game) plays but is not ranked."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.common.pairwise.estimates import percentiles
from promptlottery.judging.table import natural_key
from promptlottery.metrics import UndefinedMetricWarning, cluster_resample_counts
from promptlottery.metrics import preference_ranks as pr

SCORES = ("win_rate", "bradley_terry")
RANK_MEASURES = ("kendall_tau", "flip_share", "rank_change_share")


def fixed_baseline(system_1: Any, system_2: Any) -> str | None:
    """The system every game is played against, when there is one: a system in every game while at
    least 3 systems play (with 2 both are in every game and neither is a baseline). MT-Bench's
    pairwise-baseline mode plays every model against gpt-3.5-turbo; FastChat's ``show_result.py``
    then ranks the others only (``# remove baseline model: df = df[df.index != args.baseline_model]``).

    >>> fixed_baseline(["a", "b", "base"], ["base", "base", "c"])
    'base'
    >>> fixed_baseline(["a", "b"], ["b", "a"]) is None
    True
    """
    games = [{str(a), str(b)} for a, b in zip(system_1, system_2)]
    systems = set().union(*games) if games else set()
    if len(systems) < 3:
        return None
    common = set.intersection(*games)
    return next(iter(common)) if len(common) == 1 else None


def _points(
    games: pd.DataFrame, names: list[str], order: list[str]
) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """Per game (a pair with both systems known) and wording: system_1's points (NaN: no verdict),
    the systems' codes and the games' rows."""
    m = games.pivot(index="item_id", columns="variant", values="two_order").reindex(columns=order)
    pts = m.apply(lambda c: c.map({"1": 1.0, "2": 0.0, "tie": 0.5})).to_numpy(dtype=float)
    meta = games.drop_duplicates("item_id").set_index("item_id").loc[m.index]
    codes = np.stack(
        [meta["system_1"].map(names.index).to_numpy(), meta["system_2"].map(names.index).to_numpy()], 1
    )
    return pts, codes, meta.reset_index()


def _scores(
    games: pd.DataFrame, meta: pd.DataFrame, ranked: list[str], order: list[str]
) -> dict[str, np.ndarray]:
    """Systems (``ranked``) x wordings matrices of each score, point estimates."""
    verdicts = games.pivot(index="item_id", columns="variant", values="two_order").reindex(columns=order)
    verdicts = verdicts.loc[meta["item_id"]]
    s1, s2 = meta["system_1"], meta["system_2"]
    columns = {
        "win_rate": [pr.win_rates(s1, s2, verdicts[v].to_numpy(object)) for v in order],
        "bradley_terry": [pr.bradley_terry(s1, s2, verdicts[v].to_numpy(object)) for v in order],
    }
    return {
        s: np.column_stack([c.reindex(ranked).to_numpy(float) for c in cols]) for s, cols in columns.items()
    }


def _unranked(rec0: dict, games: pd.DataFrame, n_ranked: int, why: str) -> list[dict]:
    return [
        {
            **rec0,
            "score": s,
            "n_systems": n_ranked,
            "n_games": games["item_id"].nunique(),
            "note": f"n/a: {why}",
        }
        for s in SCORES
    ]


def _system_rows(rec0: dict, score: str, x: np.ndarray, ranked: list[str], order: list[str]) -> list[dict]:
    rows = []
    for s, name in enumerate(ranked):
        ranks = [pr.system_ranks(x[:, j])[s] for j in range(len(order))]
        for j, var in enumerate(order):
            rows.append(
                {
                    **rec0,
                    "score": score,
                    "system": name,
                    "variant": var,
                    "value": x[s, j],
                    "rank": ranks[j],
                    "best_rank": np.nanmin(ranks),
                    "worst_rank": np.nanmax(ranks),
                }
            )
    return rows


def rank_tables(p: pd.DataFrame, order: list[str], boot: dict, rec0: dict) -> tuple[list[dict], list[dict]]:
    """The rank-summary rows (one per score) and the per-system rows of one configuration's pairs ``p``."""
    games = p[p["system_1"].notna() & p["system_2"].notna()]
    names = sorted(set(games["system_1"].astype(str)) | set(games["system_2"].astype(str)), key=natural_key)
    pairs = games.drop_duplicates("item_id")
    baseline = fixed_baseline(pairs["system_1"], pairs["system_2"])
    # the baseline plays every game (and anchors the Bradley-Terry fit) but is not ranked
    ranked = [n for n in names if n != baseline]
    rec0 = {**rec0, "baseline": baseline or ""}
    if len(ranked) < 2 or len(order) < 2:
        why = "fewer than 2 systems (no system_1 / system_2)" if len(ranked) < 2 else "only one wording"
        return _unranked(rec0, games, len(ranked), why), []
    keep = np.array([names.index(n) for n in ranked])
    games = games.assign(system_1=games["system_1"].astype(str), system_2=games["system_2"].astype(str))
    pts, codes, meta = _points(games, names, order)
    left_out = (
        f"baseline {baseline} (in every game) not ranked, as FastChat's show_result.py" if baseline else ""
    )
    summary, systems = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        for score, x in _scores(games, meta, ranked, order).items():
            rec = {**rec0, "score": score, "n_systems": len(ranked), "n_games": len(pts)}
            rec.update(pr.rank_flips(x))
            if score == "win_rate":  # BT refits per resample would cost a fit per wording each: point only
                w = cluster_resample_counts(
                    meta["cluster_id"].astype(str).to_numpy(), boot["n_resamples"], seed=boot["seed"]
                )
                dist = pr.rank_flips_resampled(pr.win_rates_resampled(w, pts, codes, len(names))[:, keep])
                for k, name in enumerate(RANK_MEASURES):
                    rec[f"{name}_lo"], rec[f"{name}_hi"] = percentiles(dist[:, k], boot["level"])
                notes = []
            else:
                notes = ["point estimates (no bootstrap: a refit per resample and wording)"]
            rec["note"] = "; ".join([*notes, left_out] if left_out else notes)
            summary.append(rec)
            systems += _system_rows(rec0, score, x, ranked, order)
    return summary, systems

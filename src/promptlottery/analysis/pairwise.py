"""The lottery report's "Pairwise judges" section: position bias, the wording lottery of an
A-versus-B prompt, its agreement with the humans, and the system rankings it gives.

Input: the pairwise rows (``judge_mode == "pairwise"``) of a judgments table, with the columns of
the pairwise contract (``docs/pairwise.md``). Per configuration (dataset, judge, prompt group,
backbone) the paraphrase setting is used: sample 0 at the main temperature, both orders of every
pair under every wording. :func:`pair_table` puts one row per configuration x wording x pair with
its two single-order verdicts and the verdicts built from them (:mod:`promptlottery.metrics.preference`);
:func:`pairwise_tables` computes, with cluster-bootstrap CIs over pairs (clusters = the pair's
``cluster_id``: the pairs of one instruction or question resampled together):

* ``pairwise_wordings``: per configuration x wording, ``position_consistency`` and
  ``first_position_rate`` (with the share of ties and of missing verdicts);
* ``pairwise_configurations``: per configuration, ``pairwise_paraphrase_kappa`` (Fleiss' kappa of
  the two-order verdict across the wordings; the paper's measure of §3.2 on pairwise verdicts), the
  share of verdicts changed by swapping the answers vs by swapping the wording (ours, for the
  verdict sentence), and for annotated data (PandaLM) the annotators' own agreement;
* ``pairwise_human_agreement``: ``human_agreement``, ``human_agreement_with_ties`` and
  ``human_agreement_fastchat`` of every verdict kind (single order 12 / 21 / either, order-resolved,
  order-averaged) per wording, on the order-resolved rows also ``human_agreement_autoj`` (Auto-J's
  published rule) and ``human_agreement_judgebench`` (JudgeBench's), each with the ``_n`` pairs it
  rests on (:func:`paper_rows`: the one each dataset's paper reports), and of the aggregations over
  wordings and over orders (the
  prompt-lottery paper's plurality cluster, ``judging.aggregate.plurality_cluster``: a label given by
  at least ceil((J + 1) / 2) of the J judges; §5, Table 6 and §5.2);
* ``pairwise_rank_summary`` / ``pairwise_rank_systems``: per wording, each system's win rate (ties
  half) and Bradley-Terry strength from the two-order verdicts, and the rank flips between wordings;
  a fixed baseline (a system in every game, :func:`fixed_baseline`) is not ranked (column ``baseline``);
* ``pairwise_verdict``: the plain-words sentence (how often the verdict follows the position, how
  often the wording).

:func:`pairwise_metrics` flattens the named measures for ``results.json``; :func:`render_pairwise`
writes the section.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis import report as rp
from promptlottery.judging.aggregate import plurality_cluster
from promptlottery.judging.table import (
    AnalysisError,
    config_ids,
    main_temperature,
    natural_key,
    variant_order,
)
from promptlottery.metrics import (
    UndefinedMetricWarning,
    cluster_resample,
    cluster_resample_counts,
    clustered_ratio_ci,
    fleiss_kappa,
)
from promptlottery.metrics import preference as pm
from promptlottery.metrics._resampled import fleiss_kappa_resampled
from promptlottery.tracking.tables import ci, pct_ci

__all__ = [
    "CONTRACT_COLUMNS",
    "KINDS",
    "ORDERS",
    "check_pairwise_table",
    "is_pairwise",
    "pair_table",
    "pairwise_metrics",
    "pairwise_tables",
    "paper_rows",
    "render_pairwise",
]

ORDERS = ("12", "21")
#: the columns a pairwise judging job writes besides the usual ones (docs/pairwise.md)
CONTRACT_COLUMNS = (
    "judge_mode",
    "order",
    "preferred",
    "preferred_parsed",
    "p_pref_1",
    "p_pref_2",
    "p_pref_tie",
    "human_preferred",
    "human_raters",
    "system_1",
    "system_2",
    "cluster_id",
)
_REQUIRED = ("item_id", "variant", "backbone", *CONTRACT_COLUMNS)
_PROBS = ("p_pref_1", "p_pref_2", "p_pref_tie")
#: the verdicts of one (pair, wording) compared on human agreement
KINDS = {
    "order_12": "single order 12 (response_a shown first)",
    "order_21": "single order 21 (response_b shown first)",
    "single_order": "single order, either (both orders pooled)",
    "resolved": "order-resolved (inconsistent = tie)",
    "averaged": "order-averaged probabilities (ours)",
}
#: the aggregations over wordings (and orders): (judges label, verdict kind, columns of the pair table)
_AGGREGATIONS = (
    ("plurality cluster of the wordings", "resolved"),
    ("plurality cluster of the wordings", "averaged"),
    ("plurality cluster of the wordings", "order_12"),
    ("plurality cluster of the wordings x orders", "single_order"),
)


# --------------------------------------------------------------------------- the table


def is_pairwise(df: pd.DataFrame) -> pd.Series:
    """True for the rows of a pairwise judge (``judge_mode == "pairwise"``; none without the column)."""
    if "judge_mode" not in df.columns:
        return pd.Series(False, index=df.index)
    return df["judge_mode"].fillna("pointwise").astype(str) == "pairwise"


def _source(df: pd.DataFrame, rows: Any = None, source: str | None = None) -> str:
    """The judgments file(s) of ``rows`` (the ``run_dir`` column) for an error message."""
    if source:
        return source
    if "run_dir" in df.columns:
        dirs = sorted({str(d) for d in (df["run_dir"] if rows is None else df.loc[rows, "run_dir"]) if d})
        if dirs:
            shown = ", ".join(str(Path(d) / "judgments.parquet") for d in dirs[:3])
            return shown + (f" (+{len(dirs) - 3} more)" if len(dirs) > 3 else "")
    return "the judgments table"


def check_pairwise_table(df: pd.DataFrame, *, source: str | None = None) -> None:
    """Raise a one-line :class:`AnalysisError` naming the file and the column or row that breaks the
    pairwise contract: a missing column, an order other than 12 / 21, a preference outside
    ``"1"`` / ``"2"`` / ``"tie"``, two rows of one pair, wording and order, a pair whose human label
    differs between its orders."""
    missing = [c for c in _REQUIRED if c not in df.columns]
    if missing:
        raise AnalysisError(
            f"{_source(df, source=source)}: pairwise judgments lack the column(s) {missing} "
            "(the pairwise table contract, docs/pairwise.md)"
        )
    checks = [("order", ORDERS)] + [
        (c, pm.PREFERENCES) for c in ("preferred", "preferred_parsed", "human_preferred")
    ]
    for col, allowed in checks:
        vals = df[col]
        bad = vals.notna() & ~vals.astype(str).isin(allowed)
        if col == "order":
            bad = ~vals.astype(str).isin(allowed)
        if bad.any():
            i = bad.idxmax()
            r = df.loc[i]
            raise AnalysisError(
                f"{_source(df, [i], source)}: row item_id={r['item_id']!r} variant={r['variant']!r} "
                f"has {col}={r[col]!r}; expected one of {list(allowed)}"
                + ("" if col == "order" else " or empty")
            )


def _selected(rows: pd.DataFrame, temperature: float | None) -> pd.DataFrame:
    """The paraphrase setting of one configuration: sample 0 at the main temperature, the lowest
    seed, ordinary rows before repeat-source ones (as :func:`judging.table.paraphrase_rows`, with
    the order in the key)."""
    rows = rows.copy()
    for col, default in (("temperature", 0.0), ("sample_index", 0), ("seed", 0), ("repeat_source", "none")):
        if col not in rows.columns:
            rows[col] = default
    t0 = main_temperature(rows, temperature)
    sel = rows[
        np.isclose(rows["temperature"].astype(float), t0, rtol=1e-6, atol=0) & (rows["sample_index"] == 0)
    ]
    sel = sel[sel["seed"] == sel["seed"].min()]
    extra = sel["repeat_source"].fillna("none").astype(str) != "none"
    return sel.assign(_extra=extra).sort_values("_extra", kind="mergesort")


def _verdicts(rows: pd.DataFrame, verdict: str) -> pd.Series:
    """The single-order verdict of each row: ``preferred`` (argmax; the parsed label where no label
    probabilities were read, as ``add_verdicts`` falls back), or ``preferred_parsed``."""
    if verdict == "parsed":
        return rows["preferred_parsed"]
    return rows["preferred"].where(rows["preferred"].notna(), rows["preferred_parsed"])


def pair_table(
    df: pd.DataFrame,
    *,
    verdict: str = "argmax",
    reference: str = "P1",
    temperature: float | None = None,
    source: str | None = None,
) -> pd.DataFrame:
    """One row per configuration x wording x pair: the two single-order verdicts and what they make.

    Columns: ``config_id``, ``dataset``, ``backbone``, ``variant``, ``item_id``, ``cluster_id``,
    ``system_1``, ``system_2``, ``human``, ``raters``, ``first`` / ``second`` (the verdicts of
    orders 12 / 21 in the pair's terms; None if missing), ``p12_*`` / ``p21_*`` (the probabilities),
    ``resolved`` (order-resolved, with ``"inconsistent"``), ``two_order`` (inconsistent = tie) and
    ``averaged``. ``verdict``: ``"argmax"`` (``preferred``) or ``"parsed"`` (``preferred_parsed``);
    ``"weighted"`` reads as argmax (a preference has no scale score to round). Bad input raises a
    one-line :class:`AnalysisError` naming the file and row.
    """
    check_pairwise_table(df, source=source)
    df = df.copy()
    for col in ("dataset", "judge_family", "prompt_group", "criterion", "rubric"):
        df[col] = df[col].fillna("").astype(str) if col in df.columns else ""
    ids = pd.Series(config_ids(df), index=df.index)
    df["config_id"] = (
        df["config_id"].where(df["config_id"].notna(), ids) if "config_id" in df.columns else ids
    )
    df["cluster_id"] = df["cluster_id"].where(df["cluster_id"].notna(), df["item_id"]).astype(str)
    df["item_id"] = df["item_id"].astype(str)
    df["order"] = df["order"].astype(str)
    out = []
    for cid in sorted(df["config_id"].unique(), key=natural_key):
        rows = _selected(df[df["config_id"] == cid], temperature)
        key = ["variant", "item_id", "order"]
        dup = rows[~rows["_extra"]].duplicated(key).reindex(rows.index, fill_value=False)
        if dup.any():
            r = rows[dup].iloc[0]
            raise AnalysisError(
                f"{_source(df, [rows[dup].index[0]], source)}: two judgments of item_id={r['item_id']!r} "
                f"variant={r['variant']!r} order={r['order']!r} in configuration {cid} (one expected)"
            )
        rows = rows.drop_duplicates(key).drop(columns="_extra")  # a repeat row only where no ordinary one
        rows = rows.assign(_v=_verdicts(rows, verdict))
        order = variant_order(rows["variant"], reference)
        for var in order:
            g = rows[rows["variant"] == var]
            by = {o: g[g["order"] == o].set_index("item_id") for o in ORDERS}
            items = sorted(set(g["item_id"]), key=natural_key)
            first = by["12"].reindex(items)
            second = by["21"].reindex(items)
            meta = first.combine_first(second)
            h12, h21 = first["human_preferred"], second["human_preferred"]
            clash = h12.notna() & h21.notna() & (h12.astype(str) != h21.astype(str))
            if clash.any():
                item = clash.idxmax()
                raise AnalysisError(
                    f"{_source(df, g.index[g['item_id'] == item], source)}: item_id={item!r} variant={var!r} has "
                    f"human_preferred={h12[item]!r} in order 12 but {h21[item]!r} in order 21 (the pair's own "
                    "terms are the same in both orders)"
                )
            p12 = first[list(_PROBS)].to_numpy(dtype=float)
            p21 = second[list(_PROBS)].to_numpy(dtype=float)
            resolved = pm.order_resolved(first["_v"].to_numpy(object), second["_v"].to_numpy(object))
            part = pd.DataFrame(
                {
                    "config_id": cid,
                    "dataset": meta["dataset"].to_numpy(object) if "dataset" in meta else "",
                    "backbone": meta["backbone"].to_numpy(object),
                    "variant": var,
                    "item_id": items,
                    "cluster_id": meta["cluster_id"].to_numpy(object),
                    "system_1": meta["system_1"].to_numpy(object),
                    "system_2": meta["system_2"].to_numpy(object),
                    "human": meta["human_preferred"].to_numpy(object),
                    "raters": meta["human_raters"].to_numpy(object),
                    "first": first["_v"].to_numpy(object),
                    "second": second["_v"].to_numpy(object),
                    **{f"p12_{c[7:]}": p12[:, k] for k, c in enumerate(_PROBS)},
                    **{f"p21_{c[7:]}": p21[:, k] for k, c in enumerate(_PROBS)},
                    "resolved": resolved,
                    "two_order": pm.two_order_verdict(resolved),
                    "averaged": pm.order_averaged(p12, p21),
                }
            )
            out.append(part)
    if not out:
        return pd.DataFrame()
    t = pd.concat(out, ignore_index=True)
    for c in ("first", "second", "human", "resolved", "two_order", "averaged", "system_1", "system_2"):
        t[c] = t[c].astype(object).where(t[c].notna(), None)
    return t


# --------------------------------------------------------------------------- estimates


def _ci(rec: dict, name: str, num: np.ndarray, den: np.ndarray, clusters: np.ndarray, boot: dict) -> None:
    """``rec[name]``, ``_lo``, ``_hi`` and ``_n`` (events) of a pooled share, cluster bootstrap."""
    rec[f"{name}_n"] = int(den.sum())
    if den.sum() == 0:
        rec[name] = rec[f"{name}_lo"] = rec[f"{name}_hi"] = np.nan
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        r = clustered_ratio_ci(num, den, clusters=clusters, **boot)
    rec[name], rec[f"{name}_lo"], rec[f"{name}_hi"] = r.estimate, r.low, r.high


def _kind_verdicts(p: pd.DataFrame, kind: str) -> list[np.ndarray]:
    """The verdict arrays of one kind (two for ``single_order``: each order counts once)."""
    return {
        "order_12": [p["first"].to_numpy(object)],
        "order_21": [p["second"].to_numpy(object)],
        "single_order": [p["first"].to_numpy(object), p["second"].to_numpy(object)],
        "resolved": [p["resolved"].to_numpy(object)],
        "averaged": [p["averaged"].to_numpy(object)],
    }[kind]


def _summed(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    return sum(n for n, _ in parts), sum(d for _, d in parts)


def _human_row(
    rec: dict, verdicts: list[np.ndarray], p: pd.DataFrame, boot: dict, *, both_orders: bool = False
) -> dict:
    """The human-agreement measures of one set of verdicts on the pairs ``p`` (one row per pair);
    ``both_orders``: also the rules that read the two orders of a pair (Auto-J's, JudgeBench's)."""
    cl = p["cluster_id"].to_numpy(object)
    human = p["human"].to_numpy(object)
    for name, ties in (
        ("human_agreement", "exclude_human"),
        ("human_agreement_with_ties", "class"),
        ("human_agreement_fastchat", "exclude_both"),
    ):
        _ci(rec, name, *_summed([pm._agreement_counts(v, human, ties) for v in verdicts]), cl, boot)
    if both_orders:
        orders = (p["first"].to_numpy(object), p["second"].to_numpy(object))
        _ci(rec, "human_agreement_autoj", *pm._autoj_counts(*orders, human), cl, boot)
        _ci(rec, "human_agreement_judgebench", *pm._judgebench_counts(*orders, human), cl, boot)
    raters = p["raters"].to_numpy(object)
    if any(r is not None and not (isinstance(r, float) and np.isnan(r)) for r in raters):
        for name, ties in (
            ("judge_rater_agreement", "exclude"),
            ("judge_rater_agreement_with_ties", "class"),
        ):
            _ci(rec, name, *_summed([pm._judge_rater_counts(v, raters, ties) for v in verdicts]), cl, boot)
    return rec


def _cluster_verdict(p: pd.DataFrame, kind: str, order: list[str]) -> tuple[np.ndarray, pd.DataFrame]:
    """The plurality cluster of the wordings (x orders) for each pair, and the pairs (one row each)."""
    col = {"resolved": "two_order", "averaged": "averaged", "order_12": "first"}.get(kind)
    if col is not None:
        m = p.pivot(index="item_id", columns="variant", values=col).reindex(columns=order)
        n_judges = len(order)
    else:  # both orders of every wording: 2J judges
        m = pd.concat(
            [
                p.pivot(index="item_id", columns="variant", values=c)
                .reindex(columns=order)
                .add_suffix(f"/{c}")
                for c in ("first", "second")
            ],
            axis=1,
        )
        n_judges = 2 * len(order)
    m = m.astype(object).where(m.notna(), None)
    cluster = plurality_cluster(m.to_numpy(object), n_judges=n_judges)
    pairs = p.drop_duplicates("item_id").set_index("item_id").loc[m.index].reset_index()
    return np.array([None if pd.isna(c) else c for c in cluster], dtype=object), pairs


def _fleiss(matrix: np.ndarray) -> float:
    return fleiss_kappa(matrix, labels=list(pm.PREFERENCES))


def _changes(
    p: pd.DataFrame, order: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, pd.DataFrame]:
    """Per pair: verdicts changed by swapping the order (of those compared) and by swapping the wording."""
    pairs = p.drop_duplicates("item_id").set_index("item_id")
    items = sorted(pairs.index, key=natural_key)
    f = p.pivot(index="item_id", columns="variant", values="first").reindex(index=items, columns=order)
    s = p.pivot(index="item_id", columns="variant", values="second").reindex(index=items, columns=order)
    fa, sa = f.to_numpy(object), s.to_numpy(object)
    ok = pd.notna(fa) & pd.notna(sa)
    pos_den = ok.sum(axis=1).astype(float)
    pos_num = ((fa != sa) & ok).sum(axis=1).astype(float)
    w_num, w_den = np.zeros(len(items)), np.zeros(len(items))
    for a, b in itertools.combinations(range(len(order)), 2):
        for m in (fa, sa):
            both = pd.notna(m[:, a]) & pd.notna(m[:, b])
            w_den += both
            w_num += both & (m[:, a] != m[:, b])
    return pos_num, pos_den, w_num, w_den, pairs.loc[items].reset_index()


# --------------------------------------------------------------------------- rank flips


def _points(
    p: pd.DataFrame, names: list[str], order: list[str]
) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """Per game (a pair with both systems known) and wording: system_1's points (NaN: no verdict),
    and the systems' codes."""
    games = p[p["system_1"].notna() & p["system_2"].notna()]
    m = games.pivot(index="item_id", columns="variant", values="two_order").reindex(columns=order)
    pts = m.apply(lambda c: c.map({"1": 1.0, "2": 0.0, "tie": 0.5})).to_numpy(dtype=float)
    meta = games.drop_duplicates("item_id").set_index("item_id").loc[m.index]
    codes = np.stack(
        [meta["system_1"].map(names.index).to_numpy(), meta["system_2"].map(names.index).to_numpy()], 1
    )
    return pts, codes, meta.reset_index()


def _win_rate_resampled(w: np.ndarray, pts: np.ndarray, codes: np.ndarray, n_sys: int) -> np.ndarray:
    """``(R, systems, wordings)`` win rates (ties half) on each resample ``w`` (copies per game)."""
    out = np.full((w.shape[0], n_sys, pts.shape[1]), np.nan)
    for j in range(pts.shape[1]):
        ok = np.isfinite(pts[:, j])
        won = np.zeros((len(pts), n_sys))
        played = np.zeros((len(pts), n_sys))
        rows = np.flatnonzero(ok)
        won[rows, codes[rows, 0]] += pts[rows, j]
        won[rows, codes[rows, 1]] += 1.0 - pts[rows, j]
        played[rows, codes[rows, 0]] += 1.0
        played[rows, codes[rows, 1]] += 1.0
        num, den = w @ won, w @ played
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, :, j] = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return out


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


def _rank_tables(p: pd.DataFrame, order: list[str], boot: dict, rec0: dict) -> tuple[list[dict], list[dict]]:
    games = p[p["system_1"].notna() & p["system_2"].notna()]
    names = sorted(set(games["system_1"].astype(str)) | set(games["system_2"].astype(str)), key=natural_key)
    pairs = games.drop_duplicates("item_id")
    baseline = fixed_baseline(pairs["system_1"], pairs["system_2"])
    # the baseline plays every game (and anchors the Bradley-Terry fit) but is not ranked
    ranked = [n for n in names if n != baseline]
    rec0 = {**rec0, "baseline": baseline or ""}
    if len(ranked) < 2 or len(order) < 2:
        why = "fewer than 2 systems (no system_1 / system_2)" if len(ranked) < 2 else "only one wording"
        return [
            {
                **rec0,
                "score": s,
                "n_systems": len(ranked),
                "n_games": games["item_id"].nunique(),
                "note": f"n/a: {why}",
            }
            for s in ("win_rate", "bradley_terry")
        ], []
    keep = np.array([names.index(n) for n in ranked])
    games = games.assign(system_1=games["system_1"].astype(str), system_2=games["system_2"].astype(str))
    pts, codes, meta = _points(games, names, order)
    summary, systems = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        verdicts = games.pivot(index="item_id", columns="variant", values="two_order").reindex(columns=order)
        verdicts = verdicts.loc[meta["item_id"]]
        bt = [
            pm.bradley_terry(meta["system_1"], meta["system_2"], verdicts[v].to_numpy(object)) for v in order
        ]
        scores = {
            "win_rate": _win_rate_resampled(np.ones((1, len(pts))), pts, codes, len(names))[0][keep],
            "bradley_terry": np.column_stack([b.reindex(ranked).to_numpy(float) for b in bt]),
        }
        left_out = (
            f"baseline {baseline} (in every game) not ranked, as FastChat's show_result.py"
            if baseline
            else ""
        )
        for score, x in scores.items():
            rec = {**rec0, "score": score, "n_systems": len(ranked), "n_games": len(pts)}
            rec.update(pm.rank_flips(x))
            if score == "win_rate":  # BT refits per resample would cost a fit per wording each: point only
                w = cluster_resample_counts(
                    meta["cluster_id"].astype(str).to_numpy(), boot["n_resamples"], seed=boot["seed"]
                )
                reps = _win_rate_resampled(w, pts, codes, len(names))[:, keep]
                dist = pm.rank_flips_resampled(reps)
                for k, name in enumerate(("kendall_tau", "flip_share", "rank_change_share")):
                    rec[f"{name}_lo"], rec[f"{name}_hi"] = _percentiles(dist[:, k], boot["level"])
                notes = []
            else:
                notes = ["point estimates (no bootstrap: a refit per resample and wording)"]
            rec["note"] = "; ".join([*notes, left_out] if left_out else notes)
            summary.append(rec)
            for s, name in enumerate(ranked):
                ranks = [pm._rank(x[:, j])[s] for j in range(len(order))]
                for j, var in enumerate(order):
                    systems.append(
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
    return summary, systems


def _kappa_interval(codes: np.ndarray, clusters: np.ndarray, percentile, boot: dict, kind: str):
    """The ``kind`` interval of the Fleiss' kappa of ``codes``: the percentile one
    given, or the bootstrap-t over the same cluster draws (a cluster is the jackknife's unit)."""
    from promptlottery.metrics.kappa_interval import NEAR_NOMINAL_ITEMS, fleiss_studentized

    kind, notes = str(kind), []
    low, high = percentile
    if kind == "studentized":
        draws, _ = cluster_resample(clusters, boot["n_resamples"], seed=boot["seed"])
        units = pd.factorize(np.asarray(clusters))[0]  # as cluster_resample numbers them
        w = np.zeros((len(draws), int(units.max()) + 1))
        np.add.at(w, (np.repeat(np.arange(len(draws)), draws.shape[1]), draws.ravel()), 1.0)
        res = fleiss_studentized(codes, len(pm.PREFERENCES), w, level=boot["level"], units=units)
        low, high = res.low, res.high
        if res.n_undefined:
            notes.append(f"studentized interval: {res.n_undefined} of {len(w)} resamples without a t")
    if len(codes) < NEAR_NOMINAL_ITEMS[kind]:
        notes.append(
            f"{kind} interval on {len(codes)} pairs: its coverage was measured near nominal from "
            f"{NEAR_NOMINAL_ITEMS[kind]} items only (docs/analysis.md)"
        )
    return low, high, notes


def _percentiles(dist: np.ndarray, level: float) -> tuple[float, float]:
    ok = dist[np.isfinite(dist)]
    if ok.size == 0:
        return np.nan, np.nan
    lo, hi = np.percentile(ok, [50.0 * (1.0 - level), 50.0 * (1.0 + level)])
    return float(lo), float(hi)


# --------------------------------------------------------------------------- all tables


def pairwise_tables(
    df: pd.DataFrame,
    *,
    verdict: str = "argmax",
    reference: str = "P1",
    temperature: float | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    source: str | None = None,
    kappa_interval: str = "studentized",
) -> dict[str, pd.DataFrame]:
    """The tables of the "Pairwise judges" section (module docstring) from the pairwise rows ``df``.

    Empty tables when ``df`` has no pairwise row. Every CI is a percentile cluster bootstrap over
    pairs (``n_resamples`` draws of the clusters, ``seed``, ``level``) but the Fleiss' kappa's with
    ``kappa_interval="studentized"``: the bootstrap-t on the same draws.
    """
    names = ("wordings", "configurations", "human_agreement", "rank_summary", "rank_systems", "verdict")
    if df is None or df.empty:
        return {f"pairwise_{n}": pd.DataFrame() for n in names}
    pt = pair_table(df, verdict=verdict, reference=reference, temperature=temperature, source=source)
    boot = dict(n_resamples=n_resamples, seed=seed, level=level)
    wordings, configs, human, ranks, rank_sys = [], [], [], [], []
    for cid in sorted(pt["config_id"].unique(), key=natural_key):
        c = pt[pt["config_id"] == cid]
        order = list(dict.fromkeys(c["variant"]))
        rec0 = {"config_id": cid, "dataset": c["dataset"].iloc[0], "backbone": c["backbone"].iloc[0]}
        for var in order:
            p = c[c["variant"] == var]
            cl = p["cluster_id"].to_numpy(object)
            first, second = p["first"].to_numpy(object), p["second"].to_numpy(object)
            rec = {**rec0, "variant": var, "n_pairs": len(p)}
            _ci(rec, "position_consistency", *pm._consistency_counts(first, second), cl, boot)
            _ci(rec, "first_position_rate", *pm._first_counts(first, second), cl, boot)
            single = np.concatenate([first, second])
            given = [v for v in single if v is not None]
            rec["tie_share"] = float(np.mean([v == "tie" for v in given])) if given else np.nan
            rec["missing_share"] = float(1 - len(given) / len(single)) if len(single) else np.nan
            rec["inconsistent_share"] = (
                float(np.mean([v == pm.INCONSISTENT for v in p["resolved"] if v is not None]))
                if p["resolved"].notna().any()
                else np.nan
            )
            wordings.append(rec)
            for kind in KINDS:
                row = {**rec0, "judges": var, "verdict": kind, "n_pairs": len(p)}
                vs = _kind_verdicts(p, kind)
                row["coverage"] = float(np.mean([v is not None for v in np.concatenate(vs)]))
                human.append(_human_row(row, vs, p, boot, both_orders=kind == "resolved"))
        for judges, kind in _AGGREGATIONS:
            if len(order) < 2:
                break
            cluster, pairs = _cluster_verdict(c, kind, order)
            row = {**rec0, "judges": judges, "verdict": kind, "n_pairs": len(pairs)}
            row["coverage"] = float(np.mean([v is not None for v in cluster]))
            # a pair without a cluster has no preference: a tie, as an inconsistent pair
            scored = np.array(["tie" if v is None else v for v in cluster], dtype=object)
            human.append(_human_row(row, [scored], pairs, boot))
        configs.append(_config_row(c, order, rec0, boot, kappa_interval))
        summary, systems = _rank_tables(c, order, boot, rec0)
        ranks += summary
        rank_sys += systems
    tables = {
        "pairwise_wordings": pd.DataFrame(wordings),
        "pairwise_configurations": pd.DataFrame(configs),
        "pairwise_human_agreement": pd.DataFrame(human),
        "pairwise_rank_summary": pd.DataFrame(ranks),
        "pairwise_rank_systems": pd.DataFrame(rank_sys),
    }
    tables["pairwise_verdict"] = pairwise_verdict(tables)
    return tables


def _config_row(c: pd.DataFrame, order: list[str], rec0: dict, boot: dict, kappa_interval: str) -> dict:
    rec = {
        **rec0,
        "n_wordings": len(order),
        "wordings": ",".join(order),
        "n_pairs": c["item_id"].nunique(),
        "n_clusters": c["cluster_id"].nunique(),
    }
    m = c.pivot(index="item_id", columns="variant", values="two_order").reindex(columns=order)
    complete = m.notna().all(axis=1)
    mm = m[complete].to_numpy(object)
    cl = (
        c.drop_duplicates("item_id")
        .set_index("item_id")
        .loc[m.index[complete], "cluster_id"]
        .to_numpy(object)
    )
    rec["kappa_n"] = int(complete.sum())
    rec["kappa_note"] = ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UndefinedMetricWarning)
        try:
            est = _fleiss(mm) if len(order) >= 2 and len(mm) >= 2 else np.nan
        except ValueError as exc:
            est, rec["kappa_note"] = np.nan, f"n/a: {exc}"
    rec["pairwise_paraphrase_kappa"] = est
    rec["pairwise_paraphrase_kappa_lo"] = rec["pairwise_paraphrase_kappa_hi"] = np.nan
    if np.isfinite(est):
        # every cluster resample at once from its item counts: the loop of clustered_bootstrap_ci(_fleiss, ...)
        w = cluster_resample_counts(cl, boot["n_resamples"], seed=boot["seed"])
        codes = np.vectorize(pm.PREFERENCES.index, otypes=[int])(mm)
        dist = fleiss_kappa_resampled(w, codes, len(pm.PREFERENCES))
        lo, hi = _percentiles(dist, boot["level"])
        undefined = int(np.isnan(dist).sum())
        if undefined:
            rec["kappa_note"] = f"undefined on {undefined} of {len(dist)} resamples (left out of the CI)"
        lo, hi, notes = _kappa_interval(codes, cl, (lo, hi), boot, kappa_interval)
        rec["pairwise_paraphrase_kappa_lo"], rec["pairwise_paraphrase_kappa_hi"] = lo, hi
        rec["kappa_note"] = "; ".join([n for n in (rec["kappa_note"], *notes) if n])
    elif not rec["kappa_note"]:
        rec["kappa_note"] = "n/a: " + (
            "one wording"
            if len(order) < 2
            else str(caught[0].message)
            if caught
            else "fewer than 2 complete pairs"
        )
    pos_num, pos_den, w_num, w_den, pairs = _changes(c, order)
    cl_pairs = pairs["cluster_id"].to_numpy(object)
    _ci(rec, "position_change_share", pos_num, pos_den, cl_pairs, boot)
    _ci(rec, "wording_change_share", w_num, w_den, cl_pairs, boot)
    f, s = (
        c.pivot(index="item_id", columns="variant", values=k).reindex(index=pairs["item_id"], columns=order)
        for k in ("first", "second")
    )
    fp = [pm._first_counts(f[v].to_numpy(object), s[v].to_numpy(object)) for v in order]
    _ci(rec, "first_position_rate", *_summed(fp), cl_pairs, boot)
    changed = m.apply(lambda r: r.dropna().nunique() > 1 if r.notna().sum() >= 2 else np.nan, axis=1)
    rec["changed_by_wording"] = (
        float(changed.dropna().astype(float).mean()) if changed.notna().any() else np.nan
    )
    raters = pairs["raters"].to_numpy(object)
    if any(r is not None and not (isinstance(r, float) and np.isnan(r)) for r in raters):
        _ci(rec, "annotator_agreement", *pm._rater_counts(raters, "exclude"), cl_pairs, boot)
        _ci(rec, "annotator_agreement_with_ties", *pm._rater_counts(raters, "class"), cl_pairs, boot)
    return rec


# --------------------------------------------------------------------------- verdict sentence


def _overlap(a: tuple, b: tuple) -> bool:
    """Whether two ``(estimate, lo, hi)`` intervals overlap (an undefined bound: the estimate)."""
    lo_a, hi_a = (a[0] if not np.isfinite(x) else x for x in a[1:])
    lo_b, hi_b = (b[0] if not np.isfinite(x) else x for x in b[1:])
    return not (hi_a < lo_b or hi_b < lo_a)


def _est(rec: Any, name: str) -> tuple[float, float, float]:
    return tuple(float(rec.get(f"{name}{s}", np.nan)) for s in ("", "_lo", "_hi"))


def pairwise_sentence(rec: dict, human: pd.DataFrame) -> str:
    """The plain-words verdict of one pairwise configuration: how often the verdict follows the
    position (it changes when the two answers swap places), how often it follows the wording (it
    changes when one wording replaces another, same order), and what the order-resolved and
    order-averaged verdicts agree with the humans on.

    "Follows the position more than the wording" is said only when the two shares' CIs do not
    overlap (ours: a conservative reading, not a test).
    """
    pos, word, first = (
        _est(rec, n) for n in ("position_change_share", "wording_change_share", "first_position_rate")
    )
    cid, j = rec["config_id"], int(rec["n_wordings"])
    if not np.isfinite(pos[0]):
        return f"{cid} (pairwise): no pair has verdicts in both orders, so position and wording cannot be told apart."
    if j < 2 or not np.isfinite(word[0]):
        lead = "one wording only: the wording lottery is not measured"
    elif _overlap(pos, word):
        lead = "the verdict follows the position about as often as the wording"
    elif pos[0] > word[0]:
        lead = "the verdict follows the position more than the wording"
    else:
        lead = "the verdict follows the wording more than the position"
    parts = [
        f"{cid} (pairwise): {lead}. Swapping the two answers changes the verdict on {pct_ci(*pos)} of "
        f"{int(rec.get('position_change_share_n', 0))} (pair, wording) cases"
    ]
    if np.isfinite(first[0]):
        side = (
            "the answer shown first"
            if first[1] > 0.5
            else "the answer shown second"
            if first[2] < 0.5
            else None
        )
        bias = f", a bias towards {side}" if side else ", no position bias shown (CI includes 50%)"
        parts.append(
            f"the answer shown first wins {pct_ci(*first)} of the untied single-order verdicts{bias}"
        )
    if j >= 2 and np.isfinite(word[0]):
        kappa = _est(rec, "pairwise_paraphrase_kappa")
        parts.append(
            f"replacing one wording by another (same order) changes it on {pct_ci(*word)} of the comparisons; "
            f"Fleiss' kappa of the order-resolved verdict across the {j} wordings = {ci(*kappa)}"
        )
    h = human[(human["config_id"] == cid)] if not human.empty else human
    if not h.empty and "human_agreement" in h.columns:
        per = h[~h["judges"].str.startswith("plurality")]
        means = per.groupby("verdict")["human_agreement"].mean()
        if means.notna().any():
            shown = [
                f"{KINDS[k].split(' (')[0]} {means[k]:.0%}"
                for k in ("single_order", "resolved", "averaged")
                if k in means and np.isfinite(means[k])
            ]
            parts.append("agreement with the humans (ties excluded, mean over wordings): " + ", ".join(shown))
    return "; ".join(parts) + "."


def pairwise_verdict(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per pairwise configuration: ``config_id`` and the ``sentence`` (the verdict table's columns)."""
    cfg = tables["pairwise_configurations"]
    if cfg.empty:
        return pd.DataFrame(columns=["config_id", "sentence"])
    human = tables["pairwise_human_agreement"]
    return pd.DataFrame(
        [
            {"config_id": r["config_id"], "sentence": pairwise_sentence(r, human)}
            for r in cfg.to_dict("records")
        ]
    )


#: the agreement a dataset's own paper reports, as one of our named measures: (measure, the paper's rule), by
#: the ``dataset`` column (the LLMBar subsets share the name ``llmbar``, so MT-Bench's is not told apart here)
PAPER_AGREEMENT = {
    "autoj_pairwise": (
        "human_agreement_autoj",
        "Auto-J (pairwise_eval.py): both orders equal the 3-class gold",
    ),
}


def paper_rows(human: pd.DataFrame) -> pd.DataFrame:
    """Per configuration x wording of a dataset in :data:`PAPER_AGREEMENT`, its paper's agreement on
    the order-resolved verdicts: ``measure``, ``paper`` (the rule), ``value`` with ``_lo`` / ``_hi``
    / ``_n``. Empty when no configuration's dataset has one."""
    if human is None or human.empty or "dataset" not in human.columns:
        return pd.DataFrame()
    rows = []
    for r in human[human["verdict"] == "resolved"].to_dict("records"):
        if r["dataset"] not in PAPER_AGREEMENT or r["judges"].startswith("plurality"):
            continue
        measure, rule = PAPER_AGREEMENT[r["dataset"]]
        rec = {k: r[k] for k in ("config_id", "dataset", "judges")}
        rec.update(measure=measure, paper=rule)
        for suffix in ("", "_lo", "_hi", "_n"):
            rec[f"value{suffix}"] = r.get(f"{measure}{suffix}", np.nan)
        rows.append(rec)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- results.json


_WORDING_MEASURES = ("position_consistency", "first_position_rate")
_HUMAN_MEASURES = (
    "human_agreement",
    "human_agreement_with_ties",
    "human_agreement_fastchat",
    "human_agreement_autoj",
    "human_agreement_judgebench",
    "judge_rater_agreement",
    "judge_rater_agreement_with_ties",
)
_CONFIG_MEASURES = (
    "pairwise_paraphrase_kappa",
    "position_change_share",
    "wording_change_share",
    "first_position_rate",
    "annotator_agreement",
    "annotator_agreement_with_ties",
)
_RANK_MEASURES = ("kendall_tau", "flip_share", "rank_change_share")


def _put(out: dict, key: str, rec: Any, name: str) -> None:
    for suffix in ("", "_lo", "_hi"):
        v = rec.get(f"{name}{suffix}", np.nan) if hasattr(rec, "get") else np.nan
        if v is not None and not pd.isna(v) and np.isfinite(float(v)):
            out[f"{key}{suffix}"] = float(v)


def pairwise_metrics(tables: dict[str, pd.DataFrame]) -> dict[str, float]:
    """The named measures, flat, for ``results.json`` ``metrics`` (finite values only):

    ``pairwise/<config>/<wording>/<measure>`` per wording (the order-resolved verdict's human
    agreement without a verdict segment; ``.../<verdict kind>/<measure>`` for the other kinds),
    ``pairwise/<config>/<measure>`` per configuration, ``pairwise/<config>/<aggregation>/<kind>/<measure>``
    for the plurality clusters and ``pairwise/<config>/<win_rate|bradley_terry>/<measure>`` for the
    rank flips; each with ``_lo`` / ``_hi``.
    """
    out: dict[str, float] = {}
    for r in tables.get("pairwise_wordings", pd.DataFrame()).to_dict("records"):
        for m in _WORDING_MEASURES:
            _put(out, f"pairwise/{r['config_id']}/{r['variant']}/{m}", r, m)
    for r in tables.get("pairwise_human_agreement", pd.DataFrame()).to_dict("records"):
        judges = r["judges"] if not r["judges"].startswith("plurality") else r["judges"].replace(" ", "_")
        kind = "" if r["verdict"] == "resolved" and not judges.startswith("plurality") else f"/{r['verdict']}"
        for m in _HUMAN_MEASURES:
            _put(out, f"pairwise/{r['config_id']}/{judges}{kind}/{m}", r, m)
    for r in tables.get("pairwise_configurations", pd.DataFrame()).to_dict("records"):
        for m in _CONFIG_MEASURES:
            _put(out, f"pairwise/{r['config_id']}/{m}", r, m)
    for r in tables.get("pairwise_rank_summary", pd.DataFrame()).to_dict("records"):
        for m in _RANK_MEASURES:
            _put(out, f"pairwise/{r['config_id']}/{r['score']}/{m}", r, m)
    return out


# --------------------------------------------------------------------------- report


def render_pairwise(R: rp.Report, tables: dict[str, pd.DataFrame]) -> None:
    """The "Pairwise judges" section of report.md (nothing when no pairwise configuration)."""
    cfg = tables.get("pairwise_configurations", pd.DataFrame())
    if cfg is None or cfg.empty:
        return
    R.h("Pairwise judges")
    R.p(
        'Every pair is judged in both orders (12 = response_a shown first as "A", 21 = swapped); verdicts are '
        "mapped back to the pair's terms (1 = response_a, 2 = response_b, tie). The order-resolved verdict is the "
        'common verdict of the two orders and "inconsistent" otherwise; where a two-order verdict is needed '
        "(agreement, kappa, win rates, aggregation) an inconsistent pair counts as a tie, as FastChat does "
        "(show_result.py). The order-averaged verdict (ours) averages the two orders' probabilities per response "
        "and takes the argmax. CIs: percentile cluster bootstrap over pairs, the pairs of one instruction "
        "(cluster_id) resampled together."
    )
    R.bullets(tables["pairwise_verdict"]["sentence"].tolist())
    R.p(
        "Per wording: position_consistency = share of pairs whose verdict is the same in both orders; "
        "first_position_rate = share of single-order verdicts preferring the answer shown first (ties excluded; "
        "0.5 = no position bias)."
    )
    R.table(
        rp.with_ci_columns(tables["pairwise_wordings"], list(_WORDING_MEASURES), with_n=True),
        {
            "config_id": "configuration",
            "variant": "wording",
            "n_pairs": "pairs",
            "position_consistency": "position consistency",
            "first_position_rate": "first position wins",
            "tie_share": "ties",
            "inconsistent_share": "inconsistent",
            "missing_share": "missing",
        },
    )
    R.p(
        "Per configuration: pairwise_paraphrase_kappa = Fleiss' kappa of the order-resolved verdict (inconsistent = "
        "tie) across the wordings, on the pairs every wording judged; swap changes = share of (pair, wording) whose "
        "verdict differs between the two orders; wording changes (ours) = share of (pair, order, two wordings) "
        "whose verdicts differ; annotators = FastChat's human-human agreement (pairs of annotators; without / with "
        "ties)."
    )
    shown = rp.with_ci_columns(cfg, list(_CONFIG_MEASURES), with_n=True)
    R.table(
        shown,
        {
            "config_id": "configuration",
            "n_wordings": "wordings",
            "n_pairs": "pairs",
            "n_clusters": "clusters",
            "pairwise_paraphrase_kappa": "Fleiss kappa",
            "kappa_n": "kappa pairs",
            "position_change_share": "swap changes",
            "wording_change_share": "wording changes",
            "changed_by_wording": "pairs changed by a wording",
            "annotator_agreement": "annotators w/o tie",
            "annotator_agreement_with_ties": "annotators w/ tie",
            "kappa_note": "note",
        },
    )
    R.p(
        "Against the humans: human_agreement = accuracy on pairs whose human label is not a tie (a judge tie or an "
        'inconsistent pair counts as wrong); with ties = ties a third class (MT-Bench\'s "agreement w/ tie"); '
        'FastChat = MT-Bench\'s "agreement w/o tie" exactly (pairs where either side is a tie left out). '
        "On the order-resolved rows, two rules that read both orders: Auto-J = a pair is right only when both "
        "orders give the 3-class gold (Auto-J's pairwise_eval.py; every pair counted, a missing verdict wrong); "
        "JudgeBench = +1 per order giving the gold, -1 per order giving the other side, right when the sum is > 0, "
        "so (right, tie) is right (JudgeBench's utils/metrics.py; untied gold only). "
        "judge-annotator: FastChat's count over every (pair, annotator vote). Plurality cluster = a verdict given by "
        "at least ceil((J + 1) / 2) of the J judges (the paper's §5.2); a pair without one counts as a tie "
        "(coverage = share with a cluster). Every measure shows the pairs (or votes) it rests on, `(n=k)`."
    )
    R.table(
        rp.with_ci_columns(tables["pairwise_human_agreement"], list(_HUMAN_MEASURES), with_n=True),
        {
            "config_id": "configuration",
            "judges": "judges",
            "verdict": "verdict",
            "n_pairs": "pairs",
            "human_agreement": "human agreement",
            "human_agreement_with_ties": "with ties",
            "human_agreement_fastchat": "FastChat w/o tie",
            "human_agreement_autoj": "Auto-J (both orders)",
            "human_agreement_judgebench": "JudgeBench (both orders)",
            "judge_rater_agreement": "judge-annotator w/o tie",
            "judge_rater_agreement_with_ties": "judge-annotator w/ tie",
            "coverage": "coverage",
        },
    )
    papers = paper_rows(tables["pairwise_human_agreement"])
    if not papers.empty:
        R.p(
            "The row comparable to each dataset's own paper (the rule that paper's code counts), per wording, "
            "order-resolved verdicts:"
        )
        R.table(
            rp.with_ci_columns(papers, ["value"], with_n=True),
            {
                "config_id": "configuration",
                "judges": "wording",
                "paper": "paper",
                "measure": "measure",
                "value": "agreement",
            },
        )
    R.p(
        "Rankings: per wording each system's win rate (ties and inconsistent pairs half a win; FastChat's "
        "win_rate_adjusted) and its Bradley-Terry strength (scikit-learn LogisticRegression without intercept, "
        "weak L2, C = 100; ties half a win and half a loss); between every two wordings Kendall's tau-b of the scores, "
        "the share of system pairs in opposite order and the share of systems whose rank changes (means over the "
        "pairs of wordings, as section 6). A system in every game (a fixed baseline, MT-Bench's gpt-3.5-turbo) plays "
        "in the fits but is not ranked, as FastChat's show_result.py."
    )
    R.table(
        rp.with_ci_columns(tables["pairwise_rank_summary"], list(_RANK_MEASURES)),
        {
            "config_id": "configuration",
            "score": "score",
            "n_systems": "systems",
            "baseline": "baseline (not ranked)",
            "n_games": "games",
            "kendall_tau": "mean tau",
            "flip_share": "pairs flipped",
            "rank_change_share": "systems changing rank",
            "note": "note",
        },
        empty="no configuration with systems",
    )

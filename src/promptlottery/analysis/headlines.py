"""The headline rows of the lottery report: the paper's numbers beside ours, one spec per row.

Each :class:`Headline` names what it measures, the paper's figure and the function that computes
ours from the analysis tables; :func:`headlines` is one loop over :data:`HEADLINES`. A spec may
yield no row (e.g. the task-type rows when no configuration was analysed) or several (one
fixed-prompt row per temperature).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis import report as rp

COLUMNS = ("key", "finding", "paper", "ours", "ours_lo", "ours_hi", "pct", "n", "backbones", "note")


@dataclass(frozen=True)
class Context:
    """What a headline reads: the analysis tables, the bootstrap replicates, the options."""

    tables: dict[str, pd.DataFrame]
    dists: dict
    rank_dists: dict
    level: float

    @property
    def collapse(self) -> pd.DataFrame:
        return self.tables["agreement_collapse"]


@dataclass(frozen=True)
class Headline:
    key: str
    finding: str
    paper: str
    #: yields ``(key, finding, estimate, lo, hi, n, backbones, note)`` for each row of this spec
    compute: Callable[[Headline, Context], Iterator[tuple]]
    pct: bool = False
    #: the dataset the paper measured this on (its rows are preferred when present) and its name
    dataset: str | None = None
    dataset_name: str = ""
    #: extra selection for the kappa rows (a column of the collapse table and its value)
    where: tuple[str, str] | None = None
    #: the finding's wording on an n/a row (default: ``finding``)
    finding_na: str = ""

    def na(self, why: str) -> tuple:
        return self.key, self.finding_na or self.finding, *_NAN3, 0, "", why


def backbones(sub: pd.DataFrame | None) -> str:
    if sub is None or sub.empty:
        return ""
    pairs = sorted({f"{b} ({m})" if m and m != b else str(b) for b, m in zip(sub["backbone"], sub["model"])})
    return ", ".join(pairs)


def _replicate_ci(reps: list, level: float) -> tuple[float, float]:
    """Percentile CI of the mean of equally long bootstrap replicates (one array per configuration)."""
    if not reps or len({len(r) for r in reps}) != 1:
        return np.nan, np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean_rep = np.nanmean(np.vstack(reps), axis=0)
    mean_rep = mean_rep[np.isfinite(mean_rep)]
    if not mean_rep.size:
        return np.nan, np.nan
    lo, hi = np.percentile(mean_rep, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def _stratified_mean(collapse: pd.DataFrame, dists: dict, mask: pd.Series, measure: str, level: float):
    sub = collapse[mask]
    ok = sub[np.isfinite(sub[measure].astype(float))]
    if ok.empty:
        return np.nan, np.nan, np.nan, 0, len(sub)
    reps = [dists.get((c, s, measure)) for c, s in zip(ok["config_id"], ok["setting"])]
    lo, hi = _replicate_ci([r for r in reps if r is not None], level)
    return float(ok[measure].mean()), lo, hi, len(ok), len(sub)


def _mean_row(df: pd.DataFrame, m: str, dists: dict | None, level: float) -> tuple[float, float, float]:
    """Mean over configurations with a stratified CI (the configurations' replicates averaged)."""
    reps = [(dists or {}).get((cid, m)) for cid in df["config_id"]]
    lo, hi = _replicate_ci(reps, level) if all(r is not None for r in reps) else (np.nan, np.nan)
    return float(df[m].astype(float).mean()), lo, hi


def _n_note(n: int, total: int) -> str:
    if total == 0:
        return "n/a: no configuration"
    if n == 0:
        return f"n/a: kappa undefined in all {total} configurations (labels collapsed, see the label table)"
    if n < total:
        return f"mean over {n} of {total} configurations (kappa undefined in the others)"
    return f"mean over {n} configuration{'s' if n != 1 else ''}; CI: items resampled within each"


_MEASURE = "mean_kappa"
_NAN3 = (np.nan, np.nan, np.nan)


def _kappa(h: Headline, mask: pd.Series, key: str, finding: str, ctx: Context, note=None):
    est, lo, hi, n, total = _stratified_mean(ctx.collapse, ctx.dists, mask, _MEASURE, ctx.level)
    return (
        key,
        finding,
        est,
        lo,
        hi,
        n,
        backbones(ctx.collapse[mask]),
        note(n, total) if note else _n_note(n, total),
    )


def fixed_kappa(h: Headline, ctx: Context) -> Iterator[tuple]:
    col = ctx.collapse
    if col.empty:
        return
    fixed = col[col["setting"] != "paraphrases"]
    for t in sorted(fixed["temperature"].unique()):
        mask = (col["setting"] != "paraphrases") & np.isclose(col["temperature"], t)
        yield _kappa(h, mask, f"{h.key}_T{t:g}", f"{h.finding} (T = {t:g})", ctx)
    if fixed.empty:
        yield h.na("n/a: no fixed-prompt baseline (run P1 with n_samples=5 at T=1e-5 and T=0.7)")


def paraphrase_kappa(h: Headline, ctx: Context) -> Iterator[tuple]:
    col = ctx.collapse
    if col.empty:
        if h.where is None:
            yield h.na("n/a: no configuration")
        return
    mask = col["setting"] == "paraphrases"
    if h.where is None:
        yield _kappa(h, mask, h.key, h.finding, ctx)
    else:
        column, value = h.where
        mask_t = mask & (col[column] == value)

        def note(n, total):
            return _n_note(n, total) if total else f"n/a: no {value} judge family in these runs"

        yield _kappa(h, mask_t, h.key, h.finding, ctx, note)


def similarity_r(h: Headline, ctx: Context) -> Iterator[tuple]:
    sim = ctx.tables["similarity_stability"]
    if sim.empty:
        return
    s = sim[sim["agreement"] == "kappa"].iloc[0]
    note = s["note"] or f"p = {s['p']:.3f}"
    yield h.key, h.finding, s["r"], s["r_lo"], s["r_hi"], int(s["n_points"]), backbones(ctx.collapse), note


def rank_mean(measure: str) -> Callable[[Headline, Context], Iterator[tuple]]:
    """Mean ``measure`` of the rank-summary table, over the paper's dataset when it is present."""

    def compute(h: Headline, ctx: Context) -> Iterator[tuple]:
        rs = ctx.tables["rank_summary"]
        ranked = (
            rs[np.isfinite(rs["kendall_tau"].astype(float))] if "kendall_tau" in rs.columns else rs.iloc[0:0]
        )
        own = ranked[ranked["dataset"] == h.dataset] if not ranked.empty else ranked
        use, where = (own, h.dataset_name) if not own.empty else (ranked, "all configurations with systems")
        if use.empty:
            yield h.na("n/a: no configuration with >= 2 evaluated systems (the `system` column)")
            return
        note = "" if not own.empty else f"no {h.dataset_name} with systems in these runs: mean over {where}"
        finding = h.finding.format(where=where)
        est = _mean_row(use, measure, ctx.rank_dists, ctx.level)
        yield h.key, finding, *est, len(use), backbones(use.assign(model=use["backbone"])), note

    return compute


def p1_match(group: str, label: str) -> Callable[[Headline, Context], Iterator[tuple]]:
    def compute(h: Headline, ctx: Context) -> Iterator[tuple]:
        conv = ctx.tables["convergence_summary"]
        r = conv[conv["group"] == group] if not conv.empty else conv
        if r.empty or not np.isfinite(float(r["p1_match"].iloc[0]) if "p1_match" in r else np.nan):
            yield h.na(f"n/a: no {label} configuration" if label == "binary" else "n/a: no items")
            return
        r = r.iloc[0]
        note = "ties broken by P1 count as matches; " + (
            f"untied only: {rp.pct_ci(r['p1_match_unique'], r['p1_match_unique_lo'], r['p1_match_unique_hi'])}"
        )
        est = (r["p1_match"], r["p1_match_lo"], r["p1_match_hi"])
        yield h.key, h.finding, *est, int(r["n_items"]), backbones(ctx.collapse), note

    return compute


_SYSTEMS = dict(dataset="squad_v2", dataset_name="SQuAD v2")

#: the headline rows, in report order
HEADLINES: tuple[Headline, ...] = (
    Headline("fixed_kappa", "kappa, fixed prompt P1 repeated", rp.PAPER["fixed_kappa"], fixed_kappa),
    Headline(
        "paraphrase_kappa",
        "kappa across the five paraphrases",
        rp.PAPER["paraphrase_kappa"],
        paraphrase_kappa,
    ),
    Headline(
        "objective_kappa",
        "kappa across paraphrases, objective families",
        rp.PAPER["objective_kappa"],
        paraphrase_kappa,
        where=("family_type", "objective"),
    ),
    Headline(
        "subjective_kappa",
        "kappa across paraphrases, subjective families",
        rp.PAPER["subjective_kappa"],
        paraphrase_kappa,
        where=("family_type", "subjective"),
    ),
    Headline(
        "similarity_r",
        "similarity to P1 vs stability (Pearson r, kappa with others)",
        rp.PAPER["similarity_r"],
        similarity_r,
    ),
    Headline(
        "rank_tau",
        "rank agreement between variants, {where} (Kendall tau)",
        rp.PAPER["squad_tau"],
        rank_mean("kendall_tau"),
        finding_na="rank agreement between variants (Kendall tau of system rankings)",
        **_SYSTEMS,
    ),
    Headline(
        "rank_changes",
        "systems whose rank changes between variants, {where}",
        rp.PAPER["squad_rank_changes"],
        rank_mean("rank_change_share"),
        pct=True,
        finding_na="share of systems whose rank changes between variants",
        **_SYSTEMS,
    ),
    Headline(
        "p1_match_binary",
        "P1 alone matches the five-judge plurality (binary scales)",
        rp.PAPER["p1_match_binary"],
        p1_match("pooled: binary", "binary"),
        pct=True,
        finding_na="P1 alone matches the five-judge plurality (binary)",
    ),
    Headline(
        "p1_match_all",
        "P1 alone matches the five-judge plurality (all scales)",
        rp.PAPER["p1_match_all"],
        p1_match("pooled: all", "all"),
        pct=True,
        finding_na="P1 alone matches the five-judge plurality (all)",
    ),
)


def headlines(
    tables: dict[str, pd.DataFrame], dists: dict, opts: Any, rank_dists: dict | None = None
) -> pd.DataFrame:
    """The paper's headline numbers next to ours (value, CI, n, backbones, note)."""
    ctx = Context(tables, dists, rank_dists or {}, opts.level)
    rows = []
    for h in HEADLINES:
        for key, finding, est, lo, hi, n, bb, note in h.compute(h, ctx):
            rows.append(dict(zip(COLUMNS, (key, finding, h.paper, est, lo, hi, h.pct, n, bb, note))))
    return pd.DataFrame(rows)

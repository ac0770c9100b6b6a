"""How each headline row is computed: what a row reads (:class:`Context`), the spec of a row
(:class:`Headline`) and the compute functions the specs of :data:`~promptlottery.analysis.lottery.headlines.HEADLINES`
name (kappa rows, similarity, ranks, convergence shares, adaptive cost).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from promptlottery.analysis.common import report as rp
from promptlottery.analysis.lottery import table_names as lt
from promptlottery.judging.table import GREEDY_BELOW
from promptlottery.tracking import tables

#: the verdicts of repeated greedy calls agree by construction unless something makes them differ
BY_CONSTRUCTION = (
    "agrees by construction (deterministic backend): every repeat reads the same label probabilities; "
    "for repeats that differ as the paper's GPU runs did, judge P1 again with repeat_source=batch "
    "(each repeat in its own batch composition)"
)
#: the note of a fixed-prompt row whose repeats differ by batch composition
BATCH_REPEATS = (
    "ours: repeats differ by batch composition (repeat_source=batch: each repeat in its own shuffled "
    "batches of B, B/2 and 1 requests), an emulation of the paper's GPU nondeterminism, not its runs"
)


@dataclass(frozen=True)
class Context:
    """What a headline reads: the analysis tables, the bootstrap replicates, the options."""

    tables: dict[str, pd.DataFrame]
    #: bootstrap replicates of each agreement table, ``{table: {(config_id, setting, measure): reps}}``
    dists: dict[str, dict]
    rank_dists: dict
    level: float

    @property
    def collapse(self) -> pd.DataFrame:
        return self.tables[lt.AGREEMENT_COLLAPSE]


@dataclass(frozen=True)
class Headline:
    key: str
    finding: str
    paper: str
    #: yields ``(key, finding, estimate, lo, hi, n, backbones, note[, paper])`` for each row of this spec
    compute: Callable[[Headline, Context], Iterator[tuple]]
    pct: bool = False
    #: the dataset the paper measured this on (its rows are preferred when present) and its name
    dataset: str | None = None
    dataset_name: str = ""
    #: extra selection for the kappa rows (a column of the collapse table and its value)
    where: tuple[str, str] | None = None
    #: the finding's wording on an n/a row (default: ``finding``)
    finding_na: str = ""
    #: the paper's definition (quoted, with its section) or ours (named)
    definition: str = ""
    #: the agreement measure (kappa rows) and the agreement table it is read from
    measure: str = "fleiss_kappa"
    table: str = lt.AGREEMENT_COLLAPSE
    #: the pooled group of the convergence summary and its column (cluster rows)
    group: str = "pooled: all"
    column: str = ""

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
    if len(ok) == 1 and {f"{measure}_lo", f"{measure}_hi"} <= set(ok.columns):
        # one configuration: its own interval (section 1's, e.g. Fleiss' studentized one), so the
        # report gives one number one interval
        r = ok.iloc[0]
        return float(r[measure]), float(r[f"{measure}_lo"]), float(r[f"{measure}_hi"]), 1, len(sub)
    reps = [dists.get((c, s, measure)) for c, s in zip(ok["config_id"], ok["setting"])]
    lo, hi = _replicate_ci([r for r in reps if r is not None], level)
    return float(ok[measure].mean()), lo, hi, len(ok), len(sub)


def _mean_row(df: pd.DataFrame, m: str, dists: dict | None, level: float) -> tuple[float, float, float]:
    """Mean over configurations with a stratified CI (the configurations' replicates averaged)."""
    reps = [(dists or {}).get((cid, m)) for cid in df["config_id"]]
    lo, hi = _replicate_ci(reps, level) if all(r is not None for r in reps) else (np.nan, np.nan)
    return float(df[m].astype(float).mean()), lo, hi


def _n_note(n: int, total: int, measure: str = "") -> str:
    if total == 0:
        return "n/a: no configuration"
    filtered = measure in ("fleiss_kappa", "mean_kappa")
    why = (
        "labels collapsed: >= 95% of the verdicts one label, see the label table"
        if filtered
        else "every verdict one label"
    )
    if n == 0:
        return f"n/a: kappa undefined in all {total} configurations ({why})"
    if n < total:
        return f"mean over {n} of {total} configurations (kappa undefined in the others: {why})"
    if n == 1:
        return "1 configuration; its CI as in section 1"
    return f"mean over {n} of {total} configurations; CI: items resampled within each"


def _filtered_note(h: Headline, mask: pd.Series, ctx: Context) -> str:
    """The collapse-filtered mean (ours) of an unfiltered paper row, with its n of m."""
    if h.measure not in _UNFILTERED:
        return ""
    measure = _UNFILTERED[h.measure]
    est, lo, hi, n, total = _stratified_mean(
        ctx.tables[h.table], ctx.dists.get(h.table, {}), mask, measure, ctx.level
    )
    if not total:
        return ""
    value = tables.ci(est, lo, hi) if np.isfinite(est) else "n/a"
    return f"collapse-filtered (ours, >= 95% one label left out): {value} over {n} of {total} configurations"


#: the paper's unfiltered kappa measures and the collapse-filtered ones of ours beside them
_UNFILTERED = {"fleiss_kappa_all": "fleiss_kappa", "mean_kappa_all": "mean_kappa"}
_NAN3 = (np.nan, np.nan, np.nan)


def _kappa(h: Headline, mask: pd.Series, key: str, finding: str, ctx: Context, note=None):
    col = ctx.tables[h.table]
    est, lo, hi, n, total = _stratified_mean(col, ctx.dists.get(h.table, {}), mask, h.measure, ctx.level)
    text = note(n, total) if note else _n_note(n, total, h.measure)
    extra = _filtered_note(h, mask, ctx) if total else ""
    return key, finding, est, lo, hi, n, backbones(col[mask]), f"{text}; {extra}" if extra else text


def _fixed_paper(h: Headline, t: float) -> str:
    """The paper's fixed-prompt figure at temperature ``t`` (§3.2: 0.89 / 0.86 at T = 1e-5, 0.39 at 0.7)."""
    cohen = h.measure.startswith("mean_kappa")
    if t < GREEDY_BELOW:
        return rp.PAPER["fixed_kappa_cohen" if cohen else "fixed_kappa"]
    if np.isclose(t, 0.7):
        return rp.PAPER["fixed_kappa_cohen_t07" if cohen else "fixed_kappa_t07"]
    return rp.PAPER["fixed_kappa_other_t"]


def fixed_kappa(h: Headline, ctx: Context) -> Iterator[tuple]:
    """One row per fixed-prompt baseline (temperature x repeat source).

    Greedy repeats without a repeat source on a deterministic backend agree by construction: the row
    says so instead of reporting 1.000. With ``repeat_source=batch`` the agreement is measured (it may
    still be 1.000: then batch composition moved no label) and the note names the source.
    """
    col = ctx.collapse
    if col.empty:
        return
    para_sources = set(col.loc[col["setting"] == "paraphrases", "verdict_source"])
    fixed = col[col["setting"] != "paraphrases"]
    for t, source in sorted(
        {(float(t), str(r)) for t, r in zip(fixed["temperature"], fixed["repeat_source"])}
    ):
        mask = (
            (col["setting"] != "paraphrases")
            & np.isclose(col["temperature"], t)
            & (col["repeat_source"] == source)
        )
        key, finding = f"{h.key}_T{t:g}", f"{h.finding} (T = {t:g})"
        if source != "none":
            key, finding = f"{key}_{source}", f"{h.finding} (T = {t:g}, repeats in other batches)"
        paper = _fixed_paper(h, t)
        if source == "none" and t < GREEDY_BELOW and (col.loc[mask, "overlap"].astype(float) == 1.0).all():
            yield key, finding, *_NAN3, int(mask.sum()), backbones(col[mask]), BY_CONSTRUCTION, paper
            continue
        row = _kappa(h, mask, key, finding, ctx)
        if source != "none":
            spread = col.loc[mask, "cont_range_max"].astype(float).max()
            moved = (
                f"; the weighted score moved by at most {spread:.2g} between repeats"
                if np.isfinite(spread)
                else ""
            )
            row = (*row[:-1], f"{row[-1]}; {BATCH_REPEATS}{moved}")
        sources = set(col.loc[mask, "verdict_source"])
        if sources - para_sources:
            same = "paraphrase_kappa_parsed" if sources == {"sampled_parsed"} else "none computed"
            row = (
                *row[:-1],
                f"{row[-1]}; verdict source {','.join(sorted(sources))}, not the paraphrase "
                f"rows' ({','.join(sorted(para_sources))}): the same-source paraphrase row is {same}",
            )
        yield (*row, paper)
    if fixed.empty:
        yield h.na(
            "n/a: no fixed-prompt baseline (run P1 with n_samples=5 at T=0.7, and at T=1e-5 with repeat_source=batch)"
        )


def paraphrase_kappa(h: Headline, ctx: Context) -> Iterator[tuple]:
    col = ctx.tables.get(h.table)
    if col is None or col.empty:
        if h.where is None and h.table == lt.AGREEMENT_COLLAPSE:
            yield h.na("n/a: no configuration")
        return
    mask = col["setting"] == "paraphrases"
    if h.where is None:
        yield _kappa(h, mask, h.key, h.finding, ctx)
    else:
        column, value = h.where
        mask_t = mask & (col[column] == value)

        def note(n, total):
            return _n_note(n, total, h.measure) if total else f"n/a: no {value} judge family in these runs"

        yield _kappa(h, mask_t, h.key, h.finding, ctx, note)


def similarity_r(h: Headline, ctx: Context) -> Iterator[tuple]:
    sim = ctx.tables[lt.SIMILARITY_STABILITY]
    if sim.empty:
        return
    s = sim[sim["agreement"] == "kappa"].iloc[0]
    note = s["note"] or f"p = {s['p']:.3f}"
    yield h.key, h.finding, s["r"], s["r_lo"], s["r_hi"], int(s["n_points"]), backbones(ctx.collapse), note


def rank_mean(measure: str, *, fallback: bool = True) -> Callable[[Headline, Context], Iterator[tuple]]:
    """Mean ``measure`` of the rank-summary table, over the paper's dataset when it is present;
    without it, over every configuration with systems (``fallback``) or n/a (``fallback=False``)."""

    def compute(h: Headline, ctx: Context) -> Iterator[tuple]:
        rs = ctx.tables[lt.RANK_SUMMARY]
        ranked = (
            rs[np.isfinite(rs["kendall_tau"].astype(float))] if "kendall_tau" in rs.columns else rs.iloc[0:0]
        )
        own = ranked[ranked["dataset"] == h.dataset] if not ranked.empty else ranked
        if own.empty and not fallback:
            yield h.na(f"n/a: no {h.dataset_name} configuration with >= 2 evaluated systems in these runs")
            return
        use, where = (own, h.dataset_name) if not own.empty else (ranked, "all configurations with systems")
        if use.empty:
            yield h.na("n/a: no configuration with >= 2 evaluated systems (the `system` column)")
            return
        note = "" if not own.empty else f"no {h.dataset_name} with systems in these runs: mean over {where}"
        finding = h.finding.format(where=where)
        est = _mean_row(use, measure, ctx.rank_dists, ctx.level)
        yield h.key, finding, *est, len(use), backbones(use.assign(model=use["backbone"])), note

    return compute


def _why_na(h: Headline, r: pd.DataFrame) -> str:
    if r.empty or not r["n_items"].iloc[0]:
        kind = h.group.removeprefix("pooled: ")
        return f"n/a: no {kind} configuration" if kind != "all" else "n/a: no items"
    for part in str(r["note"].iloc[0]).split("; "):  # e.g. "converged_by_5: n/a: fewer than 5 judges"
        if part.startswith(f"{h.column}: "):
            return part[len(h.column) + 2 :]
    return "n/a: undefined"


def cluster_share(h: Headline, ctx: Context) -> Iterator[tuple]:
    """A share of items from the convergence summary (``h.column`` of the pooled ``h.group``)."""
    conv = ctx.tables[lt.CONVERGENCE_SUMMARY]
    r = conv[conv["group"] == h.group] if not conv.empty else conv
    est = float(r[h.column].iloc[0]) if len(r) and h.column in r else np.nan
    if not np.isfinite(est):
        yield h.na(_why_na(h, r))
        return
    r = r.iloc[0]
    note = ""
    if h.column == "p1_match":
        tied = r["p1_match_ties_to_p1"]
        note = f"no cluster = no match; ties broken toward P1 (ours): {tables.pct_ci(tied, r['p1_match_ties_to_p1_lo'], r['p1_match_ties_to_p1_hi'])}"
    elif h.column == "p1_match_ties_to_p1":
        note = f"untied pluralities only: {tables.pct_ci(r['p1_match_unique'], r['p1_match_unique_lo'], r['p1_match_unique_hi'])}"
    est3 = (r[h.column], r[f"{h.column}_lo"], r[f"{h.column}_hi"])
    yield h.key, h.finding, *est3, int(r["n_items"]), backbones(ctx.collapse), note


def adaptive_cost(h: Headline, ctx: Context) -> Iterator[tuple]:
    """Mean calls of adaptive full aggregation, derived from the pooled convergence shares (§5.2.1).

    The paper: "37.68% of non-binary cases reach plurality by three calls, 21.05% by five calls, and
    41.27% require more than five calls" and "full aggregation at 4.247 calls": an item converging by
    the third call costs 3, every other one 5, so 3 x 0.3768 + 5 x (0.2105 + 0.4127) = 4.2464
    (:func:`promptlottery.gating.simulate.adaptive_calls`, the same formula).
    """
    conv = ctx.tables[lt.CONVERGENCE_SUMMARY]
    r = conv[conv["group"] == h.group] if not conv.empty else conv
    cols = ("converged_by_3", "converged_by_5", "never_converged")
    if r.empty or not all(c in r for c in cols) or not np.isfinite(r[list(cols)].iloc[0].astype(float)).all():
        yield h.na(_why_na(replace(h, column="converged_by_5"), r) if len(r) else "n/a: no items")
        return
    r = r.iloc[0]

    def cost(b3, b5, never):
        return 3.0 * b3 + 5.0 * (b5 + never)

    est = cost(*(float(r[c]) for c in cols))
    note = (
        f"3 x {r['converged_by_3']:.4f} + 5 x ({r['converged_by_5']:.4f} + {r['never_converged']:.4f}); "
        "CI: n/a (derived from the shares)"
    )
    yield h.key, h.finding, est, np.nan, np.nan, int(r["n_items"]), backbones(ctx.collapse), note

"""The headline rows of the lottery report: the paper's numbers beside ours, one spec per row.

Each :class:`Headline` names what it measures, the paper's figure and the function that computes
ours from the analysis tables (the compute functions: :mod:`promptlottery.analysis.lottery.headline_rows`);
:func:`headlines` is one loop over :data:`HEADLINES`. A spec may
yield no row (e.g. the task-type rows when no configuration was analysed) or several (one
fixed-prompt row per temperature). ``definition`` says whether a row measures what the paper
defines (quoting it) or is our own variant, named as such.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from promptlottery.analysis.common import report as rp
from promptlottery.analysis.lottery import table_names as lt
from promptlottery.analysis.lottery.headline_rows import (
    Context,
    Headline,
    adaptive_cost,
    cluster_share,
    fixed_kappa,
    paraphrase_kappa,
    rank_mean,
    similarity_r,
)
from promptlottery.tracking import tables

COLUMNS = (
    "key",
    "finding",
    "paper",
    "ours",
    "ours_lo",
    "ours_hi",
    "pct",
    "n",
    "backbones",
    "note",
    "definition",
)
_SYSTEMS = dict(dataset="squad_v2", dataset_name="SQuAD v2")
ON_OURS = tables.ON_OURS  # every headline row is computed on our runs, never on the paper's population
_FLEISS = (
    f"{ON_OURS} (§3.2, §C.3: Fleiss' kappa, 0.89 fixed at T = 1e-5 -> 0.24 paraphrased), averaged over every "
    "configuration where it is defined"
)
_CLUSTER = f'{ON_OURS}: a label given by "at least three of five" judges (§F.2); no such label = no consensus'
_ONLINE_RULE = "online: earliest call k with 3 of 5 votes among the first k calls, no hindsight"
_ONLINE = f"{ON_OURS} ({_ONLINE_RULE})"
_TIES = "ours (ties_to_P1: the modal label, ties broken toward P1, so a tie counts as a match)"
_P1 = "P1 alone gives the label of the five-judge plurality cluster"


def _p1(key: str, group: str, scales: str, paper: str, column: str, definition: str) -> Headline:
    finding = _P1 if column == "p1_match" else "P1 alone equals the tie-broken plurality"
    return Headline(
        key,
        f"{finding} ({scales} scales)",
        paper,
        cluster_share,
        pct=True,
        finding_na=f"{finding} ({scales})",
        definition=definition,
        group=group,
        column=column,
    )


def _share(key: str, finding: str, definition: str, *, ours_all: bool = False) -> Headline:
    """A convergence share: the paper's on the non-binary pool (§5.2), or ours on all scales pooled."""
    if ours_all:
        return Headline(
            f"{key}_all",
            f"{finding} (all scales pooled)",
            rp.OURS_ALL_SCALES,
            cluster_share,
            pct=True,
            definition=f"ours: {definition}, on every configuration (binary included)",
            column=key,
            group="pooled: all",
        )
    return Headline(
        key,
        f"{finding} (non-binary scales)",
        rp.PAPER[key],
        cluster_share,
        pct=True,
        definition=definition,
        column=key,
        group="pooled: non-binary",
    )


def _adaptive(*, ours_all: bool = False) -> Headline:
    finding = "adaptive full aggregation, mean calls derived from the convergence shares"
    rule = '(§5.2.1): "full aggregation at 4.247 calls" = 3 x by-3rd + 5 x (by-5th + never)'
    definition = f"{ON_OURS} {rule}"
    if ours_all:
        return Headline(
            "adaptive_calls_all",
            f"{finding} (all scales pooled)",
            rp.OURS_ALL_SCALES,
            adaptive_cost,
            definition=f"ours: the paper's rule {rule}, on every configuration (binary included)",
            group="pooled: all",
        )
    return Headline(
        "adaptive_calls",
        f"{finding} (non-binary scales)",
        rp.PAPER["adaptive_calls"],
        adaptive_cost,
        definition=definition,
        group="pooled: non-binary",
    )


_ONLINE_ALL = f"({_ONLINE_RULE})"
_CLUSTER_ALL = "a label given by at least three of five judges"
_TASK_TYPE = (
    "ours: which judge families count as objective or subjective (the summary names the split, §4.2 / "
    "§C.3, but lists no family under it); the measure, Fleiss' kappa as in §3.2, on our population"
)


def _task_type(family_type: str) -> Headline:
    """Fleiss' kappa across the paraphrases on the judge families of one task type (``objective`` or
    ``subjective``, §4.2's split)."""
    return Headline(
        f"{family_type}_kappa",
        f"Fleiss' kappa across paraphrases, {family_type} families",
        rp.PAPER[f"{family_type}_kappa"],
        paraphrase_kappa,
        where=("family_type", family_type),
        definition=_TASK_TYPE,
        measure="fleiss_kappa_all",
    )


#: the headline rows, in report order
HEADLINES: tuple[Headline, ...] = (
    Headline(
        "fixed_kappa",
        "Fleiss' kappa, fixed prompt P1 repeated",
        rp.PAPER["fixed_kappa"],
        fixed_kappa,
        definition=_FLEISS,
        measure="fleiss_kappa_all",
    ),
    Headline(
        "fixed_kappa_cohen",
        "mean pairwise Cohen's kappa, fixed prompt P1 repeated",
        rp.PAPER["fixed_kappa_cohen"],
        fixed_kappa,
        definition=f"{ON_OURS}: the paper's second figure (§3.2: pairwise Cohen 0.86 at T = 1e-5); mean over "
        "configurations",
        measure="mean_kappa_all",
    ),
    Headline(
        "paraphrase_kappa",
        "Fleiss' kappa across the five paraphrases",
        rp.PAPER["paraphrase_kappa"],
        paraphrase_kappa,
        definition=_FLEISS,
        measure="fleiss_kappa_all",
    ),
    Headline(
        "paraphrase_kappa_filtered",
        "Fleiss' kappa across the five paraphrases, collapsed configurations left out",
        "(ours: the paper's mean keeps every configuration where kappa is defined)",
        paraphrase_kappa,
        definition="ours (Fleiss' kappa; configurations with >= 95% of verdicts one label left out)",
    ),
    Headline(
        "paraphrase_kappa_cohen",
        "mean pairwise Cohen's kappa across the five paraphrases",
        rp.PAPER["paraphrase_kappa_cohen"],
        paraphrase_kappa,
        definition="ours (mean pairwise Cohen's kappa, beside the paper's Fleiss)",
        measure="mean_kappa",
    ),
    Headline(
        "paraphrase_kappa_parsed",
        "Fleiss' kappa across the paraphrases, labels parsed from the text (the sampled baseline's source)",
        rp.PAPER["paraphrase_kappa"],
        paraphrase_kappa,
        definition="ours (the paper's Fleiss on the verdict source of the sampled fixed-prompt rows)",
        table=lt.PARSED_COLLAPSE,
    ),
    _task_type("objective"),
    _task_type("subjective"),
    Headline(
        "similarity_r",
        "similarity to P1 vs stability (Pearson r, kappa with others)",
        rp.PAPER["similarity_r"],
        similarity_r,
        definition="ours (MiniLM cosine to P1 vs mean pairwise Cohen's kappa with the other variants)",
    ),
    Headline(
        "rank_tau",
        "rank agreement between variants, {where} (Kendall tau)",
        rp.PAPER["squad_tau"],
        rank_mean("kendall_tau"),
        finding_na="rank agreement between variants (Kendall tau of system rankings)",
        definition="ours (mean Kendall tau between the variants' system rankings); the paper's is on SQuAD v2",
        **_SYSTEMS,
    ),
    Headline(
        "rank_changes",
        "systems whose rank changes between variants, {where}",
        rp.PAPER["squad_rank_changes"],
        rank_mean("rank_change_share"),
        pct=True,
        finding_na="share of systems whose rank changes between variants",
        definition="ours (systems whose rank differs between variants); the paper's is on SQuAD v2",
        **_SYSTEMS,
    ),
    Headline(
        "summeval_reversals",
        "system pairs whose order flips between variants, SummEval",
        rp.PAPER["summeval_reversals"],
        rank_mean("flip_share", fallback=False),
        pct=True,
        definition="ours (App. E shows SummEval's rank trajectories and prints no number: the share of system "
        "pairs in strictly opposite order between two variants, mean over variant pairs and SummEval "
        "configurations)",
        dataset="summeval",
        dataset_name="SummEval",
    ),
    _p1("p1_match_binary", "pooled: binary", "binary", rp.PAPER["p1_match_binary"], "p1_match", _CLUSTER),
    _p1("p1_match_all", "pooled: all", "all", rp.PAPER["p1_match_all"], "p1_match", _CLUSTER),
    _p1("p1_match_binary_ties_to_p1", "pooled: binary", "binary", "(ours)", "p1_match_ties_to_p1", _TIES),
    _p1("p1_match_all_ties_to_p1", "pooled: all", "all", "(ours)", "p1_match_ties_to_p1", _TIES),
    _share("cluster_share", "items with a plurality cluster", _CLUSTER),
    _share("converged_by_3", "items whose cluster is reached by the 3rd call", _ONLINE),
    _share("converged_by_5", "items whose cluster is reached at the 4th or 5th call", _ONLINE),
    _share("never_converged", "items with no cluster within five calls", _ONLINE),
    _adaptive(),
    _share("cluster_share", "items with a plurality cluster", _CLUSTER_ALL, ours_all=True),
    _share("converged_by_3", "items whose cluster is reached by the 3rd call", _ONLINE_ALL, ours_all=True),
    _share(
        "converged_by_5", "items whose cluster is reached at the 4th or 5th call", _ONLINE_ALL, ours_all=True
    ),
    _share("never_converged", "items with no cluster within five calls", _ONLINE_ALL, ours_all=True),
    _adaptive(ours_all=True),
)


def paper_keys() -> list[str]:
    """The keys of the headline rows that carry a figure of the paper (not ours, not "not reported"),
    in report order: the rows the paper's reader compares first."""
    return [
        h.key for h in HEADLINES if h.paper and not h.paper.startswith("(ours") and h.paper != "not reported"
    ]


def headlines(
    tables: dict[str, pd.DataFrame], dists: dict[str, dict], opts: Any, rank_dists: dict | None = None
) -> pd.DataFrame:
    """The paper's headline numbers next to ours (value, CI, n, backbones, note, definition).

    ``dists``: the bootstrap replicates of each agreement table, keyed by the table's name.
    """
    ctx = Context(tables, dists, rank_dists or {}, opts.level)
    rows = []
    for h in HEADLINES:
        for row in h.compute(h, ctx):
            key, finding, est, lo, hi, n, bb, note = row[:8]
            paper = row[8] if len(row) > 8 else h.paper  # a spec may name the paper's figure per row
            values = (key, finding, paper, est, lo, hi, h.pct, n, bb, note, h.definition)
            rows.append(dict(zip(COLUMNS, values)))
    return pd.DataFrame(rows)

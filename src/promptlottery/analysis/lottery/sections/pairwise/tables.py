"""Every table of the "Pairwise judges" section from the pairwise rows of a judgments table.

Per configuration (dataset, judge, prompt group, backbone) the paraphrase setting is used: sample 0
at the main temperature, both orders of every pair under every wording (:func:`pair_table`). With
cluster-bootstrap CIs over pairs (clusters = the pair's ``cluster_id``: the pairs of one instruction
or question resampled together):

* :data:`WORDINGS`: per configuration x wording, ``position_consistency`` and
  ``first_position_rate`` (with the share of ties and of missing verdicts);
* :data:`CONFIGURATIONS`: per configuration, ``pairwise_paraphrase_kappa`` (Fleiss' kappa of the
  two-order verdict across the wordings; the paper's measure of §3.2 on pairwise verdicts), the
  share of verdicts changed by swapping the answers vs by swapping the wording (ours, for the
  verdict sentence), and for annotated data (PandaLM) the annotators' own agreement;
* :data:`HUMAN_AGREEMENT`: ``human_agreement``, ``human_agreement_with_ties`` and
  ``human_agreement_fastchat`` of every verdict kind (single order 12 / 21 / either, order-resolved,
  order-averaged) per wording, on the order-resolved rows also ``human_agreement_autoj`` (Auto-J's
  published rule) and ``human_agreement_judgebench`` (JudgeBench's), each with the ``_n`` pairs it
  rests on (:func:`~promptlottery.analysis.lottery.sections.pairwise.sentence.paper_rows`: the one each
  dataset's paper reports), and of the aggregations over wordings and over orders (the
  prompt-lottery paper's plurality cluster, ``metrics.aggregate.plurality_cluster``: a label given by
  at least ceil((J + 1) / 2) of the J judges; §5, Table 6 and §5.2);
* :data:`RANK_SUMMARY` / :data:`RANK_SYSTEMS`: per wording, each system's win rate (ties half) and
  Bradley-Terry strength from the two-order verdicts, and the rank flips between wordings;
* :data:`VERDICT`: the plain-words sentence (how often the verdict follows the position, how often
  the wording).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from promptlottery.analysis.common.pairwise.estimates import (
    AGGREGATIONS,
    KINDS,
    cluster_verdict,
    config_row,
    human_row,
    kind_verdicts,
    share_ci,
)
from promptlottery.analysis.common.pairwise.pairs import pair_table
from promptlottery.analysis.common.pairwise.ranks import rank_tables
from promptlottery.analysis.lottery.sections.pairwise.names import (
    CONFIGURATIONS,
    HUMAN_AGREEMENT,
    RANK_SUMMARY,
    RANK_SYSTEMS,
    TABLES,
    VERDICT,
    WORDINGS,
)
from promptlottery.analysis.lottery.sections.pairwise.sentence import pairwise_verdict
from promptlottery.judging.table import natural_key
from promptlottery.metrics import preference as pm


def _wording_row(p: pd.DataFrame, rec0: dict, var: str, boot: dict) -> dict:
    """The position measures of one wording's pairs ``p``."""
    cl = p["cluster_id"].to_numpy(object)
    first, second = p["first"].to_numpy(object), p["second"].to_numpy(object)
    rec = {**rec0, "variant": var, "n_pairs": len(p)}
    share_ci(rec, "position_consistency", *pm.consistency_counts(first, second), cl, boot)
    share_ci(rec, "first_position_rate", *pm.first_counts(first, second), cl, boot)
    single = np.concatenate([first, second])
    given = [v for v in single if v is not None]
    rec["tie_share"] = float(np.mean([v == "tie" for v in given])) if given else np.nan
    rec["missing_share"] = float(1 - len(given) / len(single)) if len(single) else np.nan
    rec["inconsistent_share"] = (
        float(np.mean([v == pm.INCONSISTENT for v in p["resolved"] if v is not None]))
        if p["resolved"].notna().any()
        else np.nan
    )
    return rec


def _human_rows(c: pd.DataFrame, order: list[str], rec0: dict, boot: dict) -> list[dict]:
    """The human-agreement rows of one configuration: every wording x verdict kind, then the
    plurality clusters of the wordings (a pair without a cluster has no preference: a tie)."""
    rows = []
    for var in order:
        p = c[c["variant"] == var]
        for kind in KINDS:
            row = {**rec0, "judges": var, "verdict": kind, "n_pairs": len(p)}
            vs = kind_verdicts(p, kind)
            row["coverage"] = float(np.mean([v is not None for v in np.concatenate(vs)]))
            rows.append(human_row(row, vs, p, boot, both_orders=kind == "resolved"))
    if len(order) < 2:
        return rows
    for judges, kind in AGGREGATIONS:
        cluster, pairs = cluster_verdict(c, kind, order)
        row = {**rec0, "judges": judges, "verdict": kind, "n_pairs": len(pairs)}
        row["coverage"] = float(np.mean([v is not None for v in cluster]))
        scored = np.array(["tie" if v is None else v for v in cluster], dtype=object)
        rows.append(human_row(row, [scored], pairs, boot))
    return rows


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
    pairs: pd.DataFrame | None = None,
) -> dict[str, pd.DataFrame]:
    """The tables of the "Pairwise judges" section (module docstring) from the pairwise rows ``df``.

    Empty tables when ``df`` has no pairwise row. Every CI is a percentile cluster bootstrap over
    pairs (``n_resamples`` draws of the clusters, ``seed``, ``level``) but the Fleiss' kappa's with
    ``kappa_interval="studentized"``: the bootstrap-t on the same draws. ``pairs``: the
    :func:`pair_table` of ``df`` under these options, when it is built already.
    """
    if df is None or df.empty:
        return {name: pd.DataFrame() for name in TABLES}
    pt = pairs
    if pt is None:
        pt = pair_table(df, verdict=verdict, reference=reference, temperature=temperature, source=source)
    boot = dict(n_resamples=n_resamples, seed=seed, level=level)
    rows: dict[str, list[dict]] = {name: [] for name in TABLES[:-1]}
    for cid in sorted(pt["config_id"].unique(), key=natural_key):
        c = pt[pt["config_id"] == cid]
        order = list(dict.fromkeys(c["variant"]))
        rec0 = {"config_id": cid, "dataset": c["dataset"].iloc[0], "backbone": c["backbone"].iloc[0]}
        rows[WORDINGS] += [_wording_row(c[c["variant"] == var], rec0, var, boot) for var in order]
        rows[HUMAN_AGREEMENT] += _human_rows(c, order, rec0, boot)
        rows[CONFIGURATIONS].append(config_row(c, order, rec0, boot, kappa_interval))
        summary, systems = rank_tables(c, order, boot, rec0)
        rows[RANK_SUMMARY] += summary
        rows[RANK_SYSTEMS] += systems
    tables = {name: pd.DataFrame(rows[name]) for name in TABLES[:-1]}
    tables[VERDICT] = pairwise_verdict(tables)
    return tables

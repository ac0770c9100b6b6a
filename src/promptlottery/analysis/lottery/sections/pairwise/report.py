"""The pairwise section's output: its named measures flattened for ``results.json`` and the
"Pairwise judges" section of report.md."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.common import report as rp
from promptlottery.analysis.common.pairwise.ranks import RANK_MEASURES
from promptlottery.analysis.lottery.sections.pairwise.names import (
    CONFIGURATIONS,
    HUMAN_AGREEMENT,
    RANK_SUMMARY,
    VERDICT,
    WORDINGS,
)
from promptlottery.analysis.lottery.sections.pairwise.sentence import paper_rows

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
_RANK_MEASURES = RANK_MEASURES


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
    for r in tables.get(WORDINGS, pd.DataFrame()).to_dict("records"):
        for m in _WORDING_MEASURES:
            _put(out, f"pairwise/{r['config_id']}/{r['variant']}/{m}", r, m)
    for r in tables.get(HUMAN_AGREEMENT, pd.DataFrame()).to_dict("records"):
        judges = r["judges"] if not r["judges"].startswith("plurality") else r["judges"].replace(" ", "_")
        kind = "" if r["verdict"] == "resolved" and not judges.startswith("plurality") else f"/{r['verdict']}"
        for m in _HUMAN_MEASURES:
            _put(out, f"pairwise/{r['config_id']}/{judges}{kind}/{m}", r, m)
    for r in tables.get(CONFIGURATIONS, pd.DataFrame()).to_dict("records"):
        for m in _CONFIG_MEASURES:
            _put(out, f"pairwise/{r['config_id']}/{m}", r, m)
    for r in tables.get(RANK_SUMMARY, pd.DataFrame()).to_dict("records"):
        for m in _RANK_MEASURES:
            _put(out, f"pairwise/{r['config_id']}/{r['score']}/{m}", r, m)
    return out


def render_pairwise(R: rp.Report, tables: dict[str, pd.DataFrame]) -> None:
    """The "Pairwise judges" section of report.md (nothing when no pairwise configuration)."""
    cfg = tables.get(CONFIGURATIONS, pd.DataFrame())
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
    R.bullets(tables[VERDICT]["sentence"].tolist())
    R.p(
        "Per wording: position_consistency = share of pairs whose verdict is the same in both orders; "
        "first_position_rate = share of single-order verdicts preferring the answer shown first (ties excluded; "
        "0.5 = no position bias)."
    )
    R.table(
        rp.with_ci_columns(tables[WORDINGS], list(_WORDING_MEASURES), with_n=True),
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
    _render_human_and_ranks(R, tables)


def _render_human_and_ranks(R: rp.Report, tables: dict[str, pd.DataFrame]) -> None:
    """The human-agreement and the ranking tables of the "Pairwise judges" section."""
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
        rp.with_ci_columns(tables[HUMAN_AGREEMENT], list(_HUMAN_MEASURES), with_n=True),
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
    papers = paper_rows(tables[HUMAN_AGREEMENT])
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
        rp.with_ci_columns(tables[RANK_SUMMARY], list(_RANK_MEASURES)),
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

"""Tables (CSV + Markdown), the cost-curve figure and report.md of the gate stage."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from promptlottery.gating.simulate import PAPER_REFERENCE
from promptlottery.tracking import tables

#: policy name -> legend label
POLICY_LABELS = {
    "paper_gate": "the paper's policy: gate on P1, else adaptive aggregation",
    "learned_gate": "learned gate, sequential per judge (ours)",
    "confidence": "judge's own label probability",
    "embedding_lr_gate": "embedding + logistic regression",
    "llm_prompt_gate": "LLM prompt classifier",
    "first_2_agree": "stop when 2 judges agree",
    "first_3_agree": "stop when 3 judges agree",
    "full_plurality": "five-prompt plurality",
    "adaptive_full_aggregation": "adaptive full aggregation (stop at 3 agreeing)",
}


def fmt(v: Any, digits: int = 3) -> str:
    """A gate value's text: the one table writer's (``tracking.tables.fmt``), small numbers (a learning
    rate, a threshold near 0) with significant digits."""
    return tables.fmt(v, digits, small="significant")


def to_markdown(df: pd.DataFrame, digits: int = 3) -> str:
    return tables.markdown_table(df, digits=digits, small="significant") + "\n"


def write_table(df: pd.DataFrame, out_dir: Path, name: str) -> None:
    tables.write_table(df, out_dir, name, markdown=to_markdown(df))


def pct(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * float(v):.0f}%"


#: §5.2's no-consensus sentence, as the paper words it (it is not on the decisions-recovered axis)
NO_CONSENSUS_NOTE = (
    "paper, no-consensus cases: 'Performance falls to 65% ...; full aggregation achieves 79%'\n"
    "(the measure is not named; not decisions recovered, so not plotted here)"
)


def plot_cost_curves(
    curves: pd.DataFrame, points: pd.DataFrame, chosen: pd.DataFrame, path: Path, *, title: str = ""
) -> None:
    """Calls saved vs decisions recovered, on all held-out items and on the no-consensus items."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    for ax, suffix, sub in ((axes[0], "", "all test items"), (axes[1], "_nc", "no-consensus test items")):
        colors = {}
        for policy, g in curves.groupby("policy", sort=False):
            g = g.sort_values(f"calls_saved{suffix}")
            style = "-" if policy in ("learned_gate", "paper_gate") else "--"
            (line,) = ax.plot(
                100 * g[f"calls_saved{suffix}"],
                100 * g[f"recovered{suffix}"],
                style,
                label=POLICY_LABELS.get(policy, policy),
                linewidth=2 if policy in ("learned_gate", "paper_gate") else 1.2,
            )
            colors[policy] = line.get_color()
        markers = iter("sD^vPh")
        for row in points.itertuples(index=False):
            ax.plot(
                100 * getattr(row, f"calls_saved{suffix}"),
                100 * getattr(row, f"recovered{suffix}"),
                next(markers, "o"),
                markersize=8,
                label=POLICY_LABELS.get(row.policy, row.policy.replace("_", " ")),
            )
        for row in chosen.itertuples(index=False):  # each threshold gate's operating point
            ax.plot(
                100 * getattr(row, f"calls_saved{suffix}"),
                100 * getattr(row, f"recovered{suffix}"),
                "*",
                markersize=16 if row.policy == "paper_gate" else 11,
                color=colors.get(row.policy, "black"),
                markeredgecolor="black",
            )
        if not suffix:
            ax.plot(
                100 * PAPER_REFERENCE["calls_saved"],
                100 * PAPER_REFERENCE["recovered"],
                "X",
                color="red",
                markersize=10,
                label="paper's learned gate",
            )
        else:  # the paper's no-consensus 65% is a "performance" of an unnamed measure, not decisions recovered
            ax.text(
                0.02, 0.02, NO_CONSENSUS_NOTE, transform=ax.transAxes, fontsize=7, color="red", va="bottom"
            )
        if suffix and not (curves[f"recovered{suffix}"].notna().any() if len(curves) else False):
            ax.text(
                0.5,
                0.5,
                "no test item without a plurality cluster:\nthese curves are undefined",
                transform=ax.transAxes,
                ha="center",
                va="center",
                color="gray",
            )
        ax.set_xlabel("judge calls saved vs five-prompt aggregation (%)")
        ax.set_title(sub)
        ax.set_xlim(-3, 83)
        ax.set_ylim(0, 103)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("full-aggregation decisions recovered (%)")
    axes[1].legend(loc="lower left", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


ON_OURS = tables.ON_OURS  # every comparison row is computed on our judgments
_NC_PERFORMANCE = (
    "ours (agreement with the human label); the paper's value is its 'performance' in no-consensus cases "
    "(§5.2, measure not named)"
)

#: the paper comparison: (measure, our value's key, the paper's key or None, whose definition, format)
COMPARISON_ROWS = [
    ("judge calls saved vs five-prompt aggregation (paper's policy)", "gate.calls_saved", "calls_saved", ON_OURS, "%"),
    ("five-judge decisions recovered (paper's policy)", "gate.recovered", "recovered", ON_OURS, "%"),
    ("no-consensus items: five-judge decision recovered (paper's policy)", "gate.recovered_nc", None, "ours", "%"),
    ("no-consensus items: agreement with the human label, paper's policy", "gate.human_agreement_nc",
     "no_consensus_performance_gate", _NC_PERFORMANCE, "%"),
    ("no-consensus items: agreement with the human label, full aggregation", "full.human_agreement_nc",
     "no_consensus_performance_full", _NC_PERFORMANCE, "%"),
    ("gate TPR on P1, positive = needs aggregation (threshold)", "p1.tpr_needs_aggregation", "tpr",
     f"{ON_OURS} (its polarity)", "%"),
    ("gate TNR on P1, positive = needs aggregation (threshold)", "p1.tnr_needs_aggregation", "tnr",
     f"{ON_OURS} (its polarity)", "%"),
    ("gate TPR on P1, positive = in the cluster (threshold)", "p1.tpr_in_cluster", None, "ours", "%"),
    ("gate TNR on P1, positive = in the cluster (threshold)", "p1.tnr_in_cluster", None, "ours", "%"),
    ("adaptive full aggregation, mean calls (observed)", "s.adaptive_calls_observed", "adaptive_calls",
     ON_OURS, "n"),
    ("adaptive full aggregation, mean calls (derived from shares by 3 / by 5 / never)",
     "s.adaptive_calls_derived", "adaptive_calls", f"{ON_OURS} (its derivation)", "n"),
    ("calls on stable items (P1 in the cluster), simulated", "s.stable_calls_simulated", "stable_calls",
     ON_OURS, "n"),
    ("calls on stable items, derived 1 + (1 - TNR) x (adaptive - 1)", "s.stable_calls_derived", "stable_calls",
     f"{ON_OURS} (its derivation)", "n"),
]  # fmt: skip


#: the held-out transfer row (§5.2): ours is the held-out prompt group's P1 verdicts
TRANSFER_ROW = (
    "gate TNR on P1, held-out prompt group (unseen prompts), positive = needs aggregation (threshold)",
    f"{ON_OURS} (its polarity); ours: a held-out prompt group (G15) on items the gate never saw, the paper: "
    "a held-out dataset with unseen Prometheus prompts",
)


def comparison_table(sim, summary: dict[str, Any], transfer: dict[str, Any] | None = None) -> pd.DataFrame:
    """Ours (test items) beside the paper, each row saying whose definition it uses, and the split
    and search objective the run used (``gate.split``, the objective of ``gate.best_params``)."""
    sources = {
        "gate": sim.row("paper_gate"),
        "full": sim.row("adaptive_full_aggregation"),
        "p1": sim.clf("paper_gate@P1@operating_threshold"),
        "s": summary,
    }
    rows = []
    for measure, key, paper_key, definition, kind in COMPARISON_ROWS:
        src, name = key.split(".")
        show = pct if kind == "%" else (lambda v: fmt(v, 2))
        paper = show(PAPER_REFERENCE[paper_key]) if paper_key else "n/a"
        rows.append((measure, show(sources[src].get(name, float("nan"))), paper, definition))
    p1 = (transfer or {}).get("paper_gate_p1")
    ours = (
        f"{100 * float(p1['tnr_needs_aggregation']):.2f}%"
        if p1
        else "n/a: no held-out prompt group judged (gate.transfer_runs)"
    )
    rows.append((TRANSFER_ROW[0], ours, f"{100 * PAPER_REFERENCE['transfer_tnr']:.2f}%", TRANSFER_ROW[1]))
    out = pd.DataFrame(rows, columns=["measure", "ours", "paper", "definition"])
    out["split"] = summary.get("split_protocol", "")
    out["objective"] = summary.get("objective", "")
    return out


OP_COLUMNS = [
    "policy",
    "threshold",
    "mean_calls",
    "calls_saved",
    "recovered",
    "human_spearman",
    "human_agreement",
    "n_items",
    "mean_calls_nc",
    "calls_saved_nc",
    "recovered_nc",
    "human_spearman_nc",
    "human_agreement_nc",
    "n_items_nc",
]


def write_report(
    path: Path,
    *,
    summary: dict[str, Any],
    clf_table: pd.DataFrame,
    operating: pd.DataFrame,
    comparison: pd.DataFrame,
    transfer: dict[str, Any],
    notes: list[str],
    matched: pd.DataFrame | None = None,
) -> None:
    lines = [*_intro(summary), *_policy_lines(summary, comparison, operating)]
    if matched is not None and len(matched):
        lines += [
            "## Calls saved at matched recovery (test)",
            "",
            "For each recovery level: each threshold policy at the threshold that reached it with the largest "
            "saving on the validation items, scored on the test items (so `recovered` may fall short of the "
            "target), and the fixed baselines that reach it on the test items.",
            "",
            to_markdown(matched),
        ]
    lines += [
        "## Classifiers on the test examples",
        "",
        "Will the judge's verdict fall in the plurality cluster? Rates under both polarities, cut at 0.5 "
        "unless named; `paper_gate@P1` counts the P1 verdicts only (what the paper's policy asks about).",
        "",
        to_markdown(clf_table),
        "## Transfer to the held-out prompt group",
        "",
    ]
    if transfer.get("evaluated"):
        lines += [
            transfer["note"],
            "",
            to_markdown(transfer["operating"][[c for c in OP_COLUMNS if c in transfer["operating"].columns]]),
            to_markdown(transfer["classifiers"]),
        ]
        if transfer.get("matched") is not None and len(transfer["matched"]):
            lines += [
                "At the thresholds chosen for each recovery level on the validation items:",
                "",
                to_markdown(transfer["matched"]),
            ]
    else:
        lines += [transfer["note"], ""]
    lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    path.write_text("\n".join(lines))


def _intro(s: dict[str, Any]) -> list[str]:
    """The report's opening: the judgments, the gate's label, the split, convergence, the classifier."""
    sp, conv = s["split"], s["convergence"]
    return [
        "# Selective aggregation: a learned gate over five prompt variants",
        "",
        f"Judgments: `{s['runs']}` ({s['n_configs']} configuration(s): {', '.join(s['configs'])}; "
        f"backbones: {', '.join(s['backbones'])}).",
        f"Judges called in the recorded order {' > '.join(s['variants'])}. The gate's label is the paper's: "
        "a verdict is positive when it equals the item's plurality cluster label (a label given by at least "
        f"{len(s['variants']) // 2 + 1} of the {len(s['variants'])} judges); an item without one is no-consensus "
        "and all its verdicts are negative. The reference decision (*five-judge decision*) is the cluster label, "
        "or on no-consensus items the plurality with ties to the earliest judge (P1).",
        f"Items: {sp['train']} train / {sp['validation']} validation / {sp['test']} test (instance-disjoint: "
        f"{fmt(sp['disjoint'])}, stratified by the label). Validation picks the epoch, the Optuna trial and every "
        f"threshold; **every figure below is on the {sp['test']} test items**. Examples (item x judge) "
        f"{s['n_train']} / {s['n_val']} / {s['n_test']}; share in the cluster {pct(s['positive_rate_train'])} / "
        f"{pct(s['positive_rate_val'])} / {pct(s['positive_rate_test'])}; no-consensus test items: "
        f"{s['n_test_nc']} ({pct(s['share_no_consensus'])}).",
        f"Split: {s.get('split_protocol', 'three_way')}. Search objective: {s.get('objective', 'n/a')}.",
        f"Online convergence on the test items (the paper's 37.68% / 21.05% / 41.27%): "
        f"{pct(conv.get('converged_by_3'))} by the third call, {pct(conv.get('converged_by_5'))} more by the fifth, "
        f"{pct(conv.get('never_converged'))} never.",
        f"Classifier: `{s['classifier']}` with LoRA (r={s['lora_r']}), {s['trainable_params']:,} of "
        f"{s['total_params']:,} parameters trained, {s['epochs_run']} epoch(s), best epoch {s['best_epoch']} "
        f"by {s['monitor']} on validation, {s['train_seconds']:.0f} s.",
    ]


def _policy_lines(s: dict[str, Any], comparison: pd.DataFrame, operating: pd.DataFrame) -> list[str]:
    """The paper's policy beside the paper, and the operating points on the test items."""
    return [
        "",
        "## The paper's policy beside the paper",
        "",
        "Call P1; if the gate trusts its verdict (probability >= threshold "
        f"{fmt(s['threshold'])}, {s['threshold_rule']}), stop after one call; otherwise run the adaptive full "
        "aggregation (call judges until one label has the cluster's votes, else all five). The paper's TPR/TNR "
        "take *needs aggregation* as the positive class (the polarity that reproduces its 5 -> 1.99 calls "
        "derivation); ours (*in the cluster*) are given beside them, each named.",
        "",
        to_markdown(comparison),
        "## Operating points on the test items",
        "",
        "`paper_gate` is the headline; `learned_gate` (sequential per-judge gating), `confidence`, the "
        "embedding and LLM gates and `first_k_agree` are our extensions on the same cost curve. "
        "`calls_saved` = 1 - mean calls / five; `recovered` = share of items whose decision equals the "
        "five-judge decision; on no-consensus items (`_nc`) that is agreement with the five-judge tie-broken "
        "plurality, and `human_agreement_nc` is agreement with the human label (over items whose human label "
        "is one of the scale's values; the paper: 65% gate, 79% full aggregation); `human_spearman` = "
        f"Spearman correlation with the human labels (five-judge decision: {fmt(s['human_spearman_full'])}; "
        f"no-consensus items {fmt(s['human_spearman_full_nc'])}).",
        "",
        to_markdown(operating[[c for c in OP_COLUMNS if c in operating.columns]]),
        "![cost curve](cost_curve.png)",
        "",
    ]

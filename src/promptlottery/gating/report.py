"""Tables (CSV + Markdown), the cost-curve figure and report.md of the gate stage."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.gating.simulate import PAPER_REFERENCE

#: policy name -> legend label
POLICY_LABELS = {
    "learned_gate": "learned gate (LoRA classifier)",
    "confidence": "judge's own label probability",
    "embedding_lr_gate": "embedding + logistic regression",
    "llm_prompt_gate": "LLM prompt classifier",
    "first_2_agree": "stop when 2 judges agree",
    "first_3_agree": "stop when 3 judges agree",
    "full_plurality": "five-prompt plurality",
}


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if math.isnan(v):
            return "n/a"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v != 0 and abs(v) < 10 ** (-digits + 1):  # e.g. a learning rate: significant digits
            return f"{v:.{digits}g}"
        return f"{v:.{digits}f}"
    return str(v).replace("|", "\\|")


def to_markdown(df: pd.DataFrame, digits: int = 3) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(str(c) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v, digits) for v in row) + " |")
    return "\n".join(lines) + "\n"


def write_table(df: pd.DataFrame, out_dir: Path, name: str) -> None:
    df.to_csv(out_dir / f"{name}.csv", index=False)
    (out_dir / f"{name}.md").write_text(to_markdown(df))


def pct(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * float(v):.0f}%"


def plot_cost_curves(
    curves: pd.DataFrame, points: pd.DataFrame, chosen: pd.DataFrame, path: Path, *, title: str = ""
) -> None:
    """Calls saved vs decisions recovered, on all held-out items and on the no-consensus items."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    for ax, suffix, sub in ((axes[0], "", "all held-out items"), (axes[1], "_nc", "no-consensus items")):
        colors = {}
        for policy, g in curves.groupby("policy", sort=False):
            g = g.sort_values(f"calls_saved{suffix}")
            style = "-" if policy == "learned_gate" else "--"
            (line,) = ax.plot(
                100 * g[f"calls_saved{suffix}"],
                100 * g[f"recovered{suffix}"],
                style,
                label=POLICY_LABELS.get(policy, policy),
                linewidth=2 if policy == "learned_gate" else 1.2,
            )
            colors[policy] = line.get_color()
        markers = iter("sD^vP")
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
                markersize=16 if row.policy == "learned_gate" else 11,
                color=colors.get(row.policy, "black"),
                markeredgecolor="black",
            )
        ref = PAPER_REFERENCE["recovered" if not suffix else "recovered_no_consensus"]
        ax.plot(
            100 * PAPER_REFERENCE["calls_saved"],
            100 * ref,
            "X",
            color="red",
            markersize=10,
            label="paper's learned gate",
        )
        if suffix and not (curves[f"recovered{suffix}"].notna().any() if len(curves) else False):
            ax.text(
                0.5,
                0.5,
                "no held-out item without a strict majority:\nthese curves are undefined",
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


def comparison_table(
    learned: pd.Series, clf_half: dict[str, float], clf_op: dict[str, float]
) -> pd.DataFrame:
    """Ours beside the paper's reference point (classifier rates at the 0.5 cut and at the gate's threshold)."""
    nan = float("nan")
    rows = [
        ("judge calls saved vs five-prompt aggregation", learned.get("calls_saved", nan), "calls_saved"),
        ("full-aggregation decisions recovered", learned.get("recovered", nan), "recovered"),
        (
            "decisions recovered, no-consensus items",
            learned.get("recovered_nc", nan),
            "recovered_no_consensus",
        ),
        ("classifier TNR (cut 0.5)", clf_half.get("tnr", nan), "tnr"),
        ("classifier TPR (cut 0.5)", clf_half.get("tpr", nan), "tpr"),
        ("classifier TNR (gate threshold)", clf_op.get("tnr", nan), "tnr"),
        ("classifier TPR (gate threshold)", clf_op.get("tpr", nan), "tpr"),
    ]
    return pd.DataFrame(
        [{"measure": m, "ours": pct(v), "paper": pct(PAPER_REFERENCE[k])} for m, v, k in rows]
    )


OP_COLUMNS = [
    "policy",
    "threshold",
    "mean_calls",
    "calls_saved",
    "recovered",
    "human_spearman",
    "n_items",
    "mean_calls_nc",
    "calls_saved_nc",
    "recovered_nc",
    "human_spearman_nc",
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
    s = summary
    lines = [
        "# Selective aggregation: a learned gate over five prompt variants",
        "",
        f"Judgments: `{s['runs']}` ({s['n_configs']} configuration(s): {', '.join(s['configs'])}; "
        f"backbones: {', '.join(s['backbones'])}).",
        f"Judges called in the recorded order {' > '.join(s['variants'])}; the reference decision is their "
        "plurality (ties broken by the earliest judge, P1).",
        f"Items: {s['n_train_items']} training / {s['n_val_items']} held-out (instance-disjoint, stratified); "
        f"examples (item x judge): {s['n_train']} / {s['n_val']}; share in the plurality cluster: "
        f"{pct(s['positive_rate_train'])} / {pct(s['positive_rate_val'])}; no-consensus held-out items "
        f"(no label with a strict majority): {s['n_val_nc']} ({pct(s['share_no_consensus'])}).",
        f"Classifier: `{s['classifier']}` with LoRA (r={s['lora_r']}) on query/key/value, "
        f"{s['trainable_params']:,} of {s['total_params']:,} parameters trained, {s['epochs_run']} epoch(s), "
        f"best epoch {s['best_epoch']} by {s['monitor']}, {s['train_seconds']:.0f} s.",
        "",
        "## Ours beside the paper",
        "",
        f"Learned gate at threshold {fmt(s['threshold'])} ({s['threshold_rule']}); TPR/TNR of the classifier "
        "on the held-out examples (positive = the verdict is in the plurality cluster).",
        "",
        to_markdown(comparison),
        "## Operating points on the held-out items",
        "",
        "`calls_saved` = 1 - mean calls / five; `recovered` = share of items whose decision equals the "
        "five-prompt plurality; `human_spearman` = Spearman correlation of the decisions with the human "
        f"labels (five-prompt plurality: {fmt(s['human_spearman_full'])}; on no-consensus items "
        f"{fmt(s['human_spearman_full_nc'])}); `_nc` = the same on the no-consensus items.",
        "",
        to_markdown(operating[[c for c in OP_COLUMNS if c in operating.columns]]),
        "![cost curve](cost_curve.png)",
        "",
    ]
    if matched is not None and len(matched):
        lines += [
            "## Calls saved at matched recovery",
            "",
            "For each recovery level: every threshold policy's largest saving that recovers at least that "
            "share of the full-aggregation decisions (threshold chosen on these same items), and the fixed "
            "baselines that reach it.",
            "",
            to_markdown(matched),
        ]
    lines += [
        "## Classifiers on the held-out examples",
        "",
        "Will the judge's verdict fall in the five-judge plurality cluster? (positive = yes; cut at 0.5)",
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
                "At the thresholds chosen for each recovery level on the held-out items of the training groups:",
                "",
                to_markdown(transfer["matched"]),
            ]
    else:
        lines += [transfer["note"], ""]
    lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    path.write_text("\n".join(lines))

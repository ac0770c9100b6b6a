"""What the gate stage reports: the summary, the notes, the results.json metrics and the log lines."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.gating import report as rep
from promptlottery.gating.config import GateConfig

#: judge backends that are test doubles (their ``backend`` identity field): their verdicts say
#: nothing about real judges, and the report says so
TEST_DOUBLE_BACKENDS = {"fake": "the fake backend (hash-derived verdicts)"}


def test_double_judges(ex: pd.DataFrame) -> list[str]:
    """The test-double backends named in the judgments' recorded backend identities."""
    found = set()
    for ident in ex.get("backend_identity", pd.Series(dtype=object)).dropna().unique():
        try:
            kind = json.loads(ident).get("backend") if ident else None
        except (ValueError, AttributeError):
            kind = None
        if kind in TEST_DOUBLE_BACKENDS:
            found.add(kind)
    return sorted(found)


def gate_notes(g: GateConfig, sim, val: pd.DataFrame) -> list[str]:
    notes = []
    rule = (
        f"chosen on the held-out items as the largest saving with >= {rep.pct(g.target_recovery)} of the "
        "decisions recovered, so optimistic for these items"
        if g.threshold == "auto"
        else "fixed in advance"
    )
    p1 = sim.operating[sim.operating["policy"] == "P1_only"]
    if g.threshold == "auto" and len(p1) and float(p1["recovered"].iloc[0]) >= g.target_recovery:
        notes.append(
            f"P1 alone already recovers {rep.pct(float(p1['recovered'].iloc[0]))} of the decisions on these "
            f"items (>= the {rep.pct(g.target_recovery)} target), so every threshold policy can stop after one "
            "call at that target; compare the policies at the higher recovery levels of `savings_at_recovery`."
        )
    notes += [
        f"The learned gate's threshold was {rule}; the baselines' thresholds were chosen by the same rule.",
        "After the last judge every verdict is in hand, so a gate that never stops returns the full plurality.",
        "The best epoch is chosen by validation " + g.classifier.monitor + " on the same held-out items.",
    ]
    for kind in test_double_judges(val):
        notes.append(
            f"The judgments come from {TEST_DOUBLE_BACKENDS[kind]}: the numbers exercise the "
            "pipeline and say nothing about real judges."
        )
    return notes


def gate_summary(g: GateConfig, data, res, history: pd.DataFrame, sim) -> dict[str, Any]:
    train, val = data.train, data.val
    both = pd.concat([train, val])
    return {
        "runs": g.runs,
        "n_configs": int(both["config_id"].nunique()),
        "configs": sorted(both["config_id"].unique()),
        "backbones": sorted(val["backbone"].unique()),
        "variants": data.variants,
        "n_train_items": int(train["item_key"].nunique()),
        "n_val_items": int(val["item_key"].nunique()),
        "n_train": len(train),
        "n_val": len(val),
        "positive_rate_train": float(train["in_cluster"].mean()),
        "positive_rate_val": float(val["in_cluster"].mean()),
        "n_val_nc": int(sim.block.items["no_consensus"].sum()),
        "classifier": g.classifier.name,
        "lora_r": g.classifier.lora.r,
        "trainable_params": res.trainable_params,
        "total_params": res.total_params,
        "epochs_run": len(history),
        "best_epoch": res.best.get("epoch"),
        "monitor": g.classifier.monitor,
        "train_seconds": res.seconds,
        "threshold": float(sim.row("learned_gate")["threshold"]),
        "threshold_rule": "auto" if g.threshold == "auto" else "fixed",
        **sim.reference,
    }


def _rates(d: dict[str, Any]) -> dict[str, Any]:
    return {k: d[k] for k in ("mcc", "balanced_accuracy", "tpr", "tnr")}


def gate_metrics(res, base, sim, transfer: dict[str, Any]) -> dict[str, Any]:
    learned = sim.row("learned_gate")
    metrics = {
        "learned_gate": {k: learned[k] for k in rep.OP_COLUMNS if k != "policy"},
        "classifier": _rates(sim.clf("learned_gate")),
        "classifier_at_threshold": _rates(sim.clf("learned_gate@operating_threshold")),
        "baselines": {
            row.policy: {
                "calls_saved": row.calls_saved,
                "recovered": row.recovered,
                "recovered_nc": row.recovered_nc,
                "threshold": row.threshold,
            }
            for row in sim.operating.itertuples(index=False)
            if row.policy != "learned_gate"
        },
        "reference": sim.reference,
        "best_validation": res.best,
        "llm_baseline_error": base.llm_error,
        "savings_at_recovery": [
            {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()}
            for r in sim.matched.to_dict("records")
        ],
    }
    if transfer["evaluated"]:
        t_learned = transfer["operating"][transfer["operating"]["policy"] == "learned_gate"].iloc[0]
        metrics["transfer"] = {
            k: t_learned[k] for k in ("calls_saved", "recovered", "recovered_nc", "mean_calls")
        }
    return metrics


def log_and_print(tracker, g: GateConfig, metrics, tables, transfer, summary, sim, out) -> None:
    tracker.log_metrics({"gate": metrics})
    for name, df in tables.items():
        tracker.log_table(name, df)
    if transfer["evaluated"]:
        tracker.log_table("transfer_operating_points", transfer["operating"])
    tracker.log_image("cost_curve", str(out / "cost_curve.png"))
    clf = metrics["classifier"]
    print(
        f"gate classifier={g.classifier.name} held_out_items={summary['n_val_items']} "
        f"mcc={clf['mcc']:.3f} tpr={clf['tpr']:.3f} tnr={clf['tnr']:.3f}"
    )
    for row in sim.operating.itertuples(index=False):
        print(
            f"gate policy={row.policy} threshold={row.threshold:.3f} mean_calls={row.mean_calls:.2f} "
            f"calls_saved={row.calls_saved:.1%} recovered={row.recovered:.1%} "
            f"recovered_nc={row.recovered_nc:.1%} human_spearman={row.human_spearman:.3f}"
        )
    print(f"gate transfer: {transfer['note']}")
    print(f"gate report={out / 'report.md'}")

"""What the gate stage reports: the summary, the notes, the results.json metrics and the log lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.gating import report as rep
from promptlottery.gating.config import GateConfig
from promptlottery.gating.objective import SPLITS, objective_name
from promptlottery.gating.simulate import adaptive_calls, simulate_paper_policy, stable_item_calls
from promptlottery.metrics.convergence import convergence_shares

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


def gate_notes(g: GateConfig, sim, test: pd.DataFrame) -> list[str]:
    notes = []
    rule = (
        f"chosen on the validation items as the largest saving with >= {rep.pct(g.target_recovery)} of the "
        "five-judge decisions recovered there, then applied unchanged to the test items"
        if g.threshold == "auto"
        else "fixed in advance"
    )
    p1 = sim.operating[sim.operating["policy"] == "P1_only"]
    notes += _by_construction(sim, test)
    if g.threshold == "auto" and len(p1) and float(p1["recovered"].iloc[0]) >= g.target_recovery:
        notes.append(
            f"P1 alone already recovers {rep.pct(float(p1['recovered'].iloc[0]))} of the decisions on the test "
            f"items (>= the {rep.pct(g.target_recovery)} target), so a threshold policy can stop after one "
            "call at that target; compare the policies at the higher recovery levels of `savings_at_recovery`."
        )
    notes += [
        (
            f"Every threshold was {rule}; every figure above is computed on the {sim.block.items.shape[0]} test "
            "items, which no choice (epoch, Optuna trial, threshold) has seen."
            if g.split != "holdout"
            else f"gate.split=holdout (the paper's 80/20 stratified holdout, §F.1): every threshold was {rule}; "
            f"the 'test' figures above are on the same {sim.block.items.shape[0]} holdout items that chose the "
            "epoch, the Optuna trial and the threshold, so they are not on untouched items."
        ),
        "True by construction (not measurements): `full_plurality` and `adaptive_full_aggregation` recover "
        "100% of the five-judge decisions (they are that decision); a sequential gate that never stops "
        "returns the full plurality; on validation the learned gate's recovery is >= the target at "
        "threshold=auto (`validation_operating_points`).",
        "The best epoch is chosen on the validation items by "
        + (
            "the paper's TNR (val/tpr in our polarity)"
            if g.select_for == "paper_tnr"
            else g.classifier.monitor
        )
        + ".",
    ]
    for kind in test_double_judges(test):
        notes.append(
            f"The judgments come from {TEST_DOUBLE_BACKENDS[kind]}: the numbers exercise the "
            "pipeline and say nothing about real judges."
        )
    return notes


def _by_construction(sim, test: pd.DataFrame) -> list[str]:
    """The figures these judgments fix whatever the gate learned, and the ones they leave undefined."""
    notes = []
    p1 = test[test["position"] == 0]["in_cluster"]
    if len(p1) and p1.all():
        notes.append(
            "True by construction of these judgments (not a measurement of the gate): P1's verdict is in the "
            "plurality cluster on every test item, so every policy that calls P1 first recovers 100% of the "
            "five-judge decisions whatever it trusts, P1 alone included; only the calls differ. The P1 rates "
            "whose class is absent (TPR needs aggregation, TNR in cluster), the MCC and the balanced accuracy "
            "of `paper_gate@P1` are undefined (n/a)."
        )
    if not int(sim.block.items["no_consensus"].sum()):
        notes.append(
            "No test item lacks a plurality cluster: every no-consensus figure (`_nc`) is undefined (n/a)."
        )
    return notes


def split_record(data) -> dict[str, Any]:
    """Item counts of the train / validation / test parts and whether they are disjoint."""
    by = "source_key" if getattr(data, "split_by", "item") == "source" else "item_key"
    keys = {p: set(getattr(data, p)[by]) for p in ("train", "val", "test")}
    disjoint = not (keys["train"] & keys["val"] or keys["train"] & keys["test"] or keys["val"] & keys["test"])
    items = {p: set(getattr(data, p)["item_key"]) for p in ("train", "val", "test")}
    out = {
        "train": len(items["train"]),
        "validation": len(items["val"]),
        "test": len(items["test"]),
        "disjoint": disjoint,
    }
    if by == "source_key":  # split by source: the parts' sources, disjoint as a whole
        out |= {"by": "source", "sources": {"train": len(keys["train"]), "validation": len(keys["val"]),
                                            "test": len(keys["test"])}}  # fmt: skip
    return out


def stable_calls(data, sim) -> dict[str, float]:
    """Calls on the stable test items (P1 in the plurality cluster): the paper's policy simulated, and
    derived as the paper did from its TNR and the mean adaptive aggregation cost."""
    block = sim.block
    stable = np.array(
        [lab is not None and lab == c for lab, c in zip(block.labels[:, 0], _cluster_of(data.test, block))]
    )
    scores = block.scores(data.test, "p_gate")
    calls, _ = simulate_paper_policy(
        block.labels, scores, sim.thresholds["paper_gate"], block.final, block.adaptive_calls
    )
    p1_rates = sim.clf("paper_gate@P1@operating_threshold")
    adaptive = float(block.adaptive_calls.mean()) if len(block.final) else float("nan")
    return {
        "n_stable_items": int(stable.sum()),
        "stable_calls_simulated": float(calls[stable].mean()) if stable.any() else float("nan"),
        "stable_calls_derived": stable_item_calls(p1_rates["tnr_needs_aggregation"], adaptive),
        "adaptive_calls_observed": adaptive,
    }


def _cluster_of(ex: pd.DataFrame, block) -> list:
    c = ex.drop_duplicates(["config_id", "item_id"]).set_index(["config_id", "item_id"])["cluster"]
    return [c.get((r.config_id, r.item_id)) for r in block.items.itertuples(index=False)]


def gate_summary(g: GateConfig, data, res, history: pd.DataFrame, sim) -> dict[str, Any]:
    train, val, test = data.train, data.val, data.test
    parts = pd.concat([train, val, test])
    j = sim.block.n_judges
    shares = convergence_shares(sim.block.items["converged_at"].to_numpy(dtype=float), n_judges=j)
    paper_shares = {3: shares.get("converged_by_3") or 0.0, j: shares.get(f"converged_by_{j}") or 0.0}
    return {
        "runs": g.runs,
        "n_configs": int(parts["config_id"].nunique()),
        "configs": sorted(parts["config_id"].unique()),
        "backbones": sorted(parts["backbone"].unique()),
        "variants": data.variants,
        "split": split_record(data),
        "n_train": len(train),
        "n_val": len(val),
        "n_test": len(test),
        "positive_rate_train": float(train["in_cluster"].mean()),
        "positive_rate_val": float(val["in_cluster"].mean()),
        "positive_rate_test": float(test["in_cluster"].mean()),
        "n_test_nc": int(sim.block.items["no_consensus"].sum()),
        "convergence": shares,
        "adaptive_calls_derived": adaptive_calls(paper_shares, shares["never_converged"] or 0.0, j)
        if j >= 3 and len(test)
        else float("nan"),
        **stable_calls(data, sim),
        "classifier": g.classifier.name,
        "lora_r": g.classifier.lora.r,
        "trainable_params": res.trainable_params,
        "total_params": res.total_params,
        "epochs_run": len(history),
        "best_epoch": res.best.get("epoch"),
        "monitor": "val/tpr (the paper's TNR)" if g.select_for == "paper_tnr" else g.classifier.monitor,
        "train_seconds": res.seconds,
        "threshold": float(sim.thresholds["paper_gate"]),
        "threshold_sequential": float(sim.thresholds["learned_gate"]),
        "threshold_rule": "auto (chosen on validation)" if g.threshold == "auto" else "fixed",
        "split_protocol": f"{g.split} - {SPLITS[str(g.split)]}"
        + (
            "; split by source (ours: a question's answers, an article's summaries in one part)"
            if str(g.split_by) == "source"
            else ""
        ),  # fmt: skip
        "objective": tuning_objective(g),
        **sim.reference,
    }


def tuning_objective(g: GateConfig) -> str:
    """The search objective behind the classifier's hyperparameters: the metric recorded in
    ``gate.best_params`` (sweeps/tune_gate.py), else none."""
    if not g.best_params:
        return objective_name(None)
    try:
        best = json.loads(Path(g.best_params).read_text())
    except (OSError, ValueError) as e:
        return f"unknown: gate.best_params={g.best_params} unreadable ({type(e).__name__})"
    return objective_name(best.get("metric")) + (f"; split {best['split']}" if best.get("split") else "")


RATE_KEYS = (
    "mcc",
    "balanced_accuracy",
    "tpr_in_cluster",
    "tnr_in_cluster",
    "tpr_needs_aggregation",
    "tnr_needs_aggregation",
)


def _rates(d: dict[str, Any]) -> dict[str, Any]:
    return {k: d[k] for k in RATE_KEYS}


def _op(row: pd.Series) -> dict[str, Any]:
    return {k: row[k] for k in rep.OP_COLUMNS if k != "policy" and k in row}


def gate_metrics(res, base, sim, transfer: dict[str, Any]) -> dict[str, Any]:
    """results.json ``metrics``: every figure on the test items (``validation``: the same thresholds on
    the validation items, where the recovery target holds by construction)."""
    metrics = {
        "paper_gate": _op(sim.row("paper_gate")),
        "learned_gate": _op(sim.row("learned_gate")),
        "validation": {p: _op(sim.row(p, validation=True)) for p in ("paper_gate", "learned_gate")},
        "classifier": _rates(sim.clf("learned_gate")),
        "classifier_at_threshold": _rates(sim.clf("learned_gate@operating_threshold")),
        "paper_gate_classifier_p1": _rates(sim.clf("paper_gate@P1@operating_threshold")),
        "thresholds": sim.thresholds,
        "baselines": {
            row.policy: {
                "calls_saved": row.calls_saved,
                "recovered": row.recovered,
                "recovered_nc": row.recovered_nc,
                "human_agreement_nc": row.human_agreement_nc,
                "threshold": row.threshold,
            }
            for row in sim.operating.itertuples(index=False)
            if row.policy not in ("learned_gate", "paper_gate")
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


def _share(v: float) -> str:
    """A share as the log line prints it; an undefined one as n/a (the report's notes say why)."""
    return "n/a" if v is None or v != v else f"{v:.1%}"


def log_and_print(tracker, g: GateConfig, metrics, tables, transfer, summary, sim, out) -> None:
    tracker.log_metrics({"gate": metrics})
    for name, df in tables.items():
        tracker.log_table(name, df)
    if transfer["evaluated"]:
        tracker.log_table("transfer_operating_points", transfer["operating"])
    tracker.log_image("cost_curve", str(out / "cost_curve.png"))
    for suffix, items in (("", "all test items"), ("_nc", "no-consensus test items")):  # native W&B charts
        tracker.log_line(
            f"cost_curves/{items.split()[0]}", tables["cost_curve"], x=f"calls_saved{suffix}",
            y=f"recovered{suffix}", stroke="policy", title=f"calls saved vs decisions recovered, {items}",
        )  # fmt: skip
    clf, split = metrics["paper_gate_classifier_p1"], summary["split"]
    print(
        f"gate classifier={g.classifier.name} train_items={split['train']} validation_items={split['validation']} "
        f"test_items={split['test']} paper_gate_p1 tpr_needs_aggregation={clf['tpr_needs_aggregation']:.3f} "
        f"tnr_needs_aggregation={clf['tnr_needs_aggregation']:.3f} (test)"
    )
    for row in sim.operating.itertuples(index=False):
        print(
            f"gate policy={row.policy} threshold={row.threshold:.3f} mean_calls={row.mean_calls:.2f} "
            f"calls_saved={_share(row.calls_saved)} recovered={_share(row.recovered)} "
            f"recovered_nc={_share(row.recovered_nc)} human_agreement_nc={_share(row.human_agreement_nc)} "
            f"human_spearman={row.human_spearman:.3f}"
        )
    print(f"gate transfer: {transfer['note']}")
    print(f"gate report={out / 'report.md'}")

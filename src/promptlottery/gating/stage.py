"""The ``gate`` stage: train the gate, simulate selective aggregation, write tables, figure and report.

    python -m run +gate=selective gate.runs='outputs/judge/multiruns/*'

:func:`gate` is five steps over the split of :func:`~promptlottery.gating.split.prepare`:
:func:`train_gate`, :func:`run_baselines`, :func:`simulate_gate`, :func:`evaluate_transfer` and
:func:`write_outputs` (``classifier_metrics``, ``operating_points``, ``cost_curve``,
``training_history`` and, with held-out group judgments, ``transfer_*`` tables as CSV and Markdown,
``heldout_predictions.parquet``, ``cost_curve.png``, ``report.md``, ``results.json`` and the LoRA
adapter ``adapter/``; everything is logged to W&B as well). The steps compute; :func:`write_outputs`
alone writes, through the one writer (:class:`~promptlottery.tracking.staging.staged_outputs`), so a
gate killed mid-way (training, the baselines' calls, a table) leaves the previous run's files as they were.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from promptlottery.calls.loop import CallStats
from promptlottery.gating import report as rep
from promptlottery.gating.baselines import run_llm_baseline
from promptlottery.gating.config import GateConfig
from promptlottery.gating.frontier_stage import (
    append_frontier,
    evaluate_frontier,
    frontier_tables,
    log_frontier,
)
from promptlottery.gating.points import (
    PAPER_POLICIES,
    choose_thresholds,
    classifier_rows,
    curves_for,
    operating_points,
    savings_at_recovery,
    transfer_at_matched,
)
from promptlottery.gating.simulate import full_reference, item_block
from promptlottery.gating.split import GateData, prepare
from promptlottery.tracking.job import StageJob
from promptlottery.tracking.staging import staged_outputs

logger = logging.getLogger(__name__)


@dataclass
class Baselines:
    """The scorers simulated as threshold gates (policy -> column) and what the baselines left."""

    scorers: dict[str, str]
    notes: list[str] = field(default_factory=list)
    llm_only: dict[str, pd.Series] = field(default_factory=dict)  # on the test rows
    llm_error: str | None = None
    llm_stats: CallStats = field(default_factory=CallStats)


@dataclass
class Simulation:
    """Thresholds chosen on validation (``val_curves``); every other table is on the test items."""

    block: Any  # test items
    curves: pd.DataFrame  # test: each policy over every threshold (the figure)
    val_curves: pd.DataFrame
    operating: pd.DataFrame  # test, at the validation thresholds
    val_operating: pd.DataFrame  # validation, at the same thresholds (true by construction at auto)
    reference: dict[str, float]
    matched: pd.DataFrame  # test, at the thresholds chosen per recovery level on validation
    thresholds: dict[str, float]
    clf_table: pd.DataFrame

    def row(self, policy: str, *, validation: bool = False) -> pd.Series:
        ops = self.val_operating if validation else self.operating
        return ops[ops["policy"] == policy].iloc[0]

    def clf(self, name: str) -> dict[str, Any]:
        return self.clf_table[self.clf_table["classifier"] == name].iloc[0].to_dict()


def gate(cfg: DictConfig, job: StageJob) -> dict[str, Any]:
    """Stage ``gate``: the gate's options (checked with the config), then the five steps."""
    g = GateConfig.from_dict(job.config.get("gate"))
    data = prepare(g)
    job.track(
        name=f"gate/{g.classifier.name}",
        group="gate",
        job_type="gate",
        config=run_config(job.config, g, data),
    )
    res = train_gate(g, data, job.output_dir, tracker=job.tracker)
    base = run_baselines(cfg, g, data)
    sim = simulate_gate(g, data, base)
    transfer = evaluate_transfer(g, data, base, sim)
    fr = evaluate_frontier(g, data)
    return write_outputs(g, data, res, base, sim, transfer, job, fr)


#: the composed config's keys a gate run's W&B config keeps (the gate's own); the judge's groups
#: (backbone, decoding) only under ``llm_baseline_judge`` when the LLM baseline calls that judge:
#: otherwise they are the composition's defaults (backbone smollm2), not what was judged
RUN_KEYS = ("stage", "task_name", "seed", "gate", "logger", "paths")


def run_config(config: dict, g: GateConfig, data: GateData) -> dict[str, Any]:
    """The gate run's W&B config: :data:`RUN_KEYS`, the LLM baseline's judge when it runs, and
    ``judged``: the judgments' datasets, backbones (from the configuration ids), wordings,
    configuration ids and items, so that runs over different grids are told apart."""
    out = {k: config[k] for k in RUN_KEYS if k in config}
    if g.llm_baseline.enabled:
        out["llm_baseline_judge"] = {k: config[k] for k in ("backbone", "decoding") if k in config}
    frames = [data.train, data.val, data.test, data.transfer, data.config_transfer]
    ex = pd.concat([f for f in frames if len(f)], ignore_index=True)
    ids = sorted(ex["config_id"].astype(str).unique())

    def joined(values) -> str:
        values = sorted(set(values))
        return values[0] if len(values) == 1 else ", ".join(values)

    out["judged"] = {
        "dataset": joined(i.split("/", 1)[0] for i in ids),
        "backbone": joined(i.rsplit("/", 1)[-1] for i in ids),
        "wording": ", ".join(data.variants),
        "config_ids": ids,
        "n_items": int(ex["item_key"].nunique()),
    }
    return out


def selection_config(g: GateConfig):
    """The classifier config with the best-epoch rule of ``gate.select_for``."""
    if g.select_for == "classifier":
        return g.classifier
    # the paper's TNR (positive = needs aggregation) is the share of in-cluster verdicts trusted:
    # our recall of the in-cluster class, val/tpr
    return replace(g.classifier, monitor="val/tpr", monitor_mode="max")


def train_gate(g: GateConfig, data: GateData, out: Path, tracker=None):
    """Train on train, pick the epoch on validation, add ``p_gate`` to validation, test and transfer.
    With a W&B tracker, Lightning's per-epoch metrics go to its run as curves. Writes nothing: the
    adapter, the history and the predictions are :func:`write_outputs`'."""
    from promptlottery.gating.model import lightning_wandb_logger, predict_proba, train_classifier

    run = getattr(tracker, "run", None)
    lw = lightning_wandb_logger({"name": "wandb"}, run=run) if run is not None else None
    res = train_classifier(
        selection_config(g), data.train, data.val, default_root_dir=str(out), loggers=[lw] if lw else None
    )
    for part in ("val", "test", "transfer", "config_transfer"):
        df = getattr(data, part).copy()
        if len(df):
            df["p_gate"] = predict_proba(res, df)
        setattr(data, part, df)
    return res


def run_baselines(cfg: DictConfig, g: GateConfig, data: GateData) -> Baselines:
    """The judge's own confidence, the embedding gate and the LLM prompt classifier, on the same split."""
    base = Baselines(scorers={"paper_gate": "p_gate", "learned_gate": "p_gate", "confidence": "confidence"})
    parts = {
        "val": data.val,
        "test": data.test,
        **({"transfer": data.transfer} if len(data.transfer) else {}),
    }
    if g.embedding_baseline.enabled:
        from promptlottery.gating.baselines import embedding_logreg

        emb_probs = embedding_logreg(data.train, parts, C=g.embedding_baseline.C, seed=g.seed)
        for part, df in parts.items():
            df["p_embed"] = emb_probs[part]
        base.scorers["embedding_lr_gate"] = "p_embed"
    if not g.llm_baseline.enabled:
        return base
    try:
        llm = run_llm_baseline(cfg, g, data, base.llm_stats)
    except Exception as e:  # noqa: BLE001 - the gate and the other baselines are kept
        base.llm_error = f"{type(e).__name__}: {e}"
        logger.error("gate llm baseline failed (the rest of the gate stage goes on): %s", base.llm_error)
        base.notes.append(
            f"n/a: the LLM prompt classifier failed ({base.llm_error}); its calls made so far are cached, "
            "a re-run completes it."
        )
        return base
    for part, (probs, mask) in llm.items():
        parts[part]["p_llm"] = np.nan
        parts[part].loc[mask.to_numpy(), "p_llm"] = probs
    test_mask = llm["test"][1]
    base.llm_only["llm_prompt_gate"] = test_mask
    if test_mask.all() and llm["val"][1].all():
        base.scorers["llm_prompt_gate"] = "p_llm"
    else:
        base.notes.append(
            f"The LLM prompt classifier was asked about {int(test_mask.sum())} of {len(data.test)} test "
            f"examples (whole items, gate.llm_baseline.max_rows); it has no cost curve."
        )
    return base


def simulate_gate(g: GateConfig, data: GateData, base: Baselines) -> Simulation:
    """Thresholds chosen on the validation items; cost curves, operating points and classifier rows
    on the test items."""
    val, test, scorers = data.val, data.test, base.scorers
    val_block, block = item_block(val, data.variants), item_block(test, data.variants)
    val_curves = curves_for(val_block, val, scorers)
    thresholds = choose_thresholds(val_curves, scorers, g)
    val_operating = operating_points(val_block, val, scorers, g, thresholds)
    operating = operating_points(block, test, scorers, g, thresholds)
    fixed = ~val_operating["policy"].isin(scorers)
    matched_val = savings_at_recovery(val_curves, val_operating[fixed], g.recovery_targets)
    matched = pd.concat(
        [
            transfer_at_matched(block, test, scorers, matched_val),
            savings_at_recovery(
                pd.DataFrame(), operating[~operating["policy"].isin(scorers)], g.recovery_targets
            ),
        ],
        ignore_index=True,
    ).sort_values(["target"], kind="mergesort", ignore_index=True)
    clf_scorers = {k: v for k, v in scorers.items() if k not in PAPER_POLICIES}
    if "p_llm" in test.columns and "llm_prompt_gate" not in clf_scorers:
        clf_scorers["llm_prompt_gate"] = "p_llm"
    p1 = test["position"].to_numpy() == 0
    clf_table = pd.concat(
        [
            classifier_rows(
                test,
                clf_scorers,
                extra={"learned_gate@operating_threshold": ("p_gate", thresholds["learned_gate"])},
                only=base.llm_only,
            ),
            # the paper's gate is asked about P1 only: its rates on the P1 verdicts
            classifier_rows(
                test[p1],
                {},
                extra={"paper_gate@P1@operating_threshold": ("p_gate", thresholds["paper_gate"])},
            ).iloc[:1],
        ],
        ignore_index=True,
    )
    return Simulation(
        block=block,
        curves=curves_for(block, test, scorers),
        val_curves=val_curves,
        operating=operating,
        val_operating=val_operating,
        reference=full_reference(block),
        matched=matched,
        thresholds=thresholds,
        clf_table=clf_table,
    )


def evaluate_transfer(g: GateConfig, data: GateData, base: Baselines, sim: Simulation) -> dict[str, Any]:
    """The gates on held-out prompt groups, at the thresholds chosen on the validation items (its
    ``transfer_*`` tables are written by :func:`write_outputs`)."""
    transfer = data.transfer
    if not len(transfer):
        return {"evaluated": False, "note": data.transfer_note}
    t_scorers = {k: v for k, v in base.scorers.items() if v in transfer.columns}
    t_block = item_block(transfer, data.variants)
    t_operating = operating_points(t_block, transfer, t_scorers, g, sim.thresholds)
    t_clf = classifier_rows(transfer, {k: v for k, v in t_scorers.items() if k not in PAPER_POLICIES})
    t_matched = transfer_at_matched(t_block, transfer, t_scorers, sim.matched)
    p1 = transfer["position"].to_numpy() == 0
    t_p1 = classifier_rows(
        transfer[p1],
        {},
        extra={"paper_gate@P1@operating_threshold": ("p_gate", sim.thresholds["paper_gate"])},
    ).iloc[:1]
    t_clf = pd.concat([t_clf, t_p1], ignore_index=True)
    return {
        "evaluated": True,
        "note": data.transfer_note + " Thresholds as chosen on the validation items of the training groups.",
        "operating": t_operating,
        "classifiers": t_clf,
        "matched": t_matched,
        "paper_gate_p1": t_p1.iloc[0].to_dict() if p1.any() else None,
        **{f"reference_{k}": v for k, v in full_reference(t_block).items()},
    }


def write_outputs(
    g: GateConfig,
    data: GateData,
    res,
    base: Baselines,
    sim: Simulation,
    transfer: dict,
    job: StageJob,
    fr_out: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Tables, figure, report.md, the W&B log and the result record."""
    from promptlottery.gating.outputs import gate_metrics, gate_summary, log_and_print, split_record

    out = job.output_dir
    history = pd.DataFrame(res.history)
    summary = gate_summary(g, data, res, history, sim)
    tables = {
        "classifier_metrics": sim.clf_table,
        "operating_points": sim.operating,
        "validation_operating_points": sim.val_operating,
        "cost_curve": sim.curves,
        "training_history": history,
        "paper_comparison": rep.comparison_table(sim, summary, transfer),
        "savings_at_recovery": sim.matched,
    }
    frontier_record: dict[str, Any] = {}
    with staged_outputs(out) as staging:  # the one writer: staged, then published together
        _write_files(staging, g, data, res, base, sim, transfer, tables, summary)
        if fr_out is not None:
            frontier_record = append_frontier(staging / "report.md", fr_out, g)
            for name, df in frontier_tables(fr_out).items():
                rep.write_table(df, staging, name)
    metrics = gate_metrics(res, base, sim, transfer)
    record = job.ok(
        **frontier_record,
        metrics=metrics,
        calls=base.llm_stats.counts(),
        summary=summary,
        split=split_record(data),
        threshold_source="validation" if g.threshold == "auto" else "fixed",
        transfer_note=transfer["note"],
    )
    log_and_print(job.tracker, g, metrics, tables, transfer, summary, sim, out)
    if fr_out is not None:
        log_frontier(job.tracker, fr_out)
    return record


def _write_files(
    staging: Path, g: GateConfig, data: GateData, res, base: Baselines, sim: Simulation, transfer: dict,
    tables: dict[str, pd.DataFrame], summary: dict[str, Any],
) -> None:  # fmt: skip
    """The gate's own files into ``staging``: ``tables`` and the transfer tables (CSV and Markdown), the
    held-out predictions, the cost-curve figure, report.md and the LoRA adapter."""
    from promptlottery.gating.model import save_adapter
    from promptlottery.gating.outputs import gate_notes

    if transfer.get("evaluated"):
        tables = {
            **tables,
            "transfer_operating_points": transfer["operating"],
            "transfer_classifier_metrics": transfer["classifiers"],
            "transfer_savings_at_recovery": transfer["matched"],
        }
    for name, df in tables.items():
        rep.write_table(df, staging, name)
    test = data.test
    test[[c for c in test.columns if c != "query"]].to_parquet(
        staging / "heldout_predictions.parquet", index=False
    )
    rep.plot_cost_curves(
        sim.curves,
        sim.operating[~sim.operating["policy"].isin(base.scorers)],
        sim.operating[sim.operating["policy"].isin(base.scorers)],
        staging / "cost_curve.png",
        title=f"{g.classifier.name} gate, {sim.block.items.shape[0]} test items",
    )
    rep.write_report(
        staging / "report.md",
        summary=summary,
        clf_table=sim.clf_table,
        operating=sim.operating,
        comparison=tables["paper_comparison"],
        matched=sim.matched,
        transfer=transfer,
        notes=base.notes + gate_notes(g, sim, test),
    )
    if g.save_adapter:
        save_adapter(res, staging / "adapter")

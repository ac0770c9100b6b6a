"""The ``gate`` stage: train the gate, simulate selective aggregation, write tables, figure and report.

    python -m run +gate=selective gate.runs='outputs/judge/multiruns/*'

:func:`run` is five steps over the split of :func:`~promptlottery.gating.split.prepare`:
:func:`train_gate`, :func:`run_baselines`, :func:`simulate_gate`, :func:`evaluate_transfer` and
:func:`write_outputs` (``classifier_metrics``, ``operating_points``, ``cost_curve``,
``training_history`` and, with held-out group judgments, ``transfer_*`` tables as CSV and Markdown,
``heldout_predictions.parquet``, ``cost_curve.png``, ``report.md``, ``results.json`` and the LoRA
adapter ``adapter/``; everything is logged to W&B as well).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf

from promptlottery.gating import report as rep
from promptlottery.gating.config import GateConfig
from promptlottery.gating.points import (  # noqa: F401 - savings_at_recovery re-exported
    classifier_rows,
    operating_points,
    savings_at_recovery,
    transfer_at_matched,
)
from promptlottery.gating.simulate import full_reference, item_block
from promptlottery.gating.split import GateData, prepare  # noqa: F401 - prepare re-exported (tune)
from promptlottery.judging.calls import CallStats
from promptlottery.stages import StageJob, run_stage

logger = logging.getLogger(__name__)


def _llm_subset(val: pd.DataFrame, max_rows: int | None, n_judges: int, seed: int) -> pd.Series:
    """Whole held-out items, seeded, up to ``max_rows`` examples."""
    if not max_rows or len(val) <= max_rows:
        return pd.Series(True, index=val.index)
    items = sorted(val["item_key"].unique())
    chosen = set(random.Random(seed).sample(items, max(1, int(max_rows) // max(n_judges, 1))))
    return val["item_key"].isin(chosen)


def _run_llm_baseline(cfg: DictConfig, g: GateConfig, data: GateData, stats) -> tuple[np.ndarray, pd.Series]:
    from hydra.utils import instantiate

    from promptlottery.backends.base import Decoding
    from promptlottery.gating.baselines import llm_prompt_classifier
    from promptlottery.judging.cache import CallCache, cache_location

    backend = instantiate(cfg.backbone.backend)
    cache = CallCache(cache_location(cfg.paths))
    decoding = Decoding(**OmegaConf.to_container(cfg.decoding, resolve=True))
    mask = _llm_subset(data.val, g.llm_baseline.max_rows, len(data.variants), g.llm_baseline.seed)
    probs = llm_prompt_classifier(
        data.val[mask],
        data.train,
        backend,
        cache,
        decoding,
        g.llm_baseline,
        n_total=len(data.variants),
        stats=stats,
    )
    cache.close()
    return probs, mask


@dataclass
class Baselines:
    """The scorers simulated as threshold gates (policy -> column) and what the baselines left."""

    scorers: dict[str, str]
    notes: list[str] = field(default_factory=list)
    llm_only: dict[str, pd.Series] = field(default_factory=dict)
    llm_error: str | None = None
    llm_stats: CallStats = field(default_factory=CallStats)


@dataclass
class Simulation:
    block: Any
    curves: pd.DataFrame
    operating: pd.DataFrame
    reference: dict[str, float]
    matched: pd.DataFrame
    thresholds: dict[str, float]
    clf_table: pd.DataFrame

    def row(self, policy: str) -> pd.Series:
        return self.operating[self.operating["policy"] == policy].iloc[0]

    def clf(self, name: str) -> dict[str, Any]:
        return self.clf_table[self.clf_table["classifier"] == name].iloc[0].to_dict()


def run(cfg: DictConfig, output_dir: str | Path) -> dict[str, Any]:
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = OmegaConf.to_container(cfg, resolve=True)
    g = GateConfig.from_dict(config.get("gate"))
    tracker = {"name": f"gate/{g.classifier.name}", "group": "gate", "job_type": "gate"}
    job = StageJob("gate", out, config=config, root=cfg.paths.root_dir, tracker=tracker)
    return run_stage(job, lambda job: _run(cfg, g, job))


def _run(cfg: DictConfig, g: GateConfig, job: StageJob) -> dict[str, Any]:
    data = prepare(g)
    res = train_gate(g, data, job.output_dir)
    base = run_baselines(cfg, g, data)
    sim = simulate_gate(g, data, base)
    transfer = evaluate_transfer(g, data, base, sim, job.output_dir)
    return write_outputs(g, data, res, base, sim, transfer, job)


def train_gate(g: GateConfig, data: GateData, out: Path):
    """Train the classifier, add its probability ``p_gate`` to the held-out and transfer rows."""
    from promptlottery.gating.model import predict_proba, save_adapter, train_classifier

    res = train_classifier(g.classifier, data.train, data.val, default_root_dir=str(out))
    data.val = data.val.copy()
    data.val["p_gate"] = predict_proba(res, data.val)
    if len(data.transfer):
        data.transfer = data.transfer.copy()
        data.transfer["p_gate"] = predict_proba(res, data.transfer)
    if g.save_adapter:
        save_adapter(res, out / "adapter")
    # kept at once, before the baselines run: rewritten with their columns at the end
    rep.write_table(pd.DataFrame(res.history), out, "training_history")
    data.val.drop(columns=["query"]).to_parquet(out / "heldout_predictions.parquet", index=False)
    return res


def run_baselines(cfg: DictConfig, g: GateConfig, data: GateData) -> Baselines:
    """The judge's own confidence, the embedding gate and the LLM prompt classifier, on the same split."""
    val, transfer = data.val, data.transfer
    base = Baselines(scorers={"learned_gate": "p_gate", "confidence": "confidence"})
    if g.embedding_baseline.enabled:
        from promptlottery.gating.baselines import embedding_logreg

        frames = {"val": val, **({"transfer": transfer} if len(transfer) else {})}
        emb_probs = embedding_logreg(data.train, frames, C=g.embedding_baseline.C, seed=g.seed)
        val["p_embed"] = emb_probs["val"]
        if len(transfer):
            transfer["p_embed"] = emb_probs["transfer"]
        base.scorers["embedding_lr_gate"] = "p_embed"
    if not g.llm_baseline.enabled:
        return base
    try:
        probs, mask = _run_llm_baseline(cfg, g, data, base.llm_stats)
    except Exception as e:  # noqa: BLE001 - the gate and the other baselines are kept
        base.llm_error = f"{type(e).__name__}: {e}"
        logger.error("gate llm baseline failed (the rest of the gate stage goes on): %s", base.llm_error)
        base.notes.append(
            f"n/a: the LLM prompt classifier failed ({base.llm_error}); its calls made so far are cached, "
            "a re-run completes it."
        )
        return base
    val["p_llm"] = np.nan
    val.loc[mask.to_numpy(), "p_llm"] = probs
    base.llm_only["llm_prompt_gate"] = mask
    if mask.all():
        base.scorers["llm_prompt_gate"] = "p_llm"
    else:
        base.notes.append(
            f"The LLM prompt classifier was asked about {int(mask.sum())} of {len(val)} held-out "
            f"examples (whole items, gate.llm_baseline.max_rows); it has no cost curve."
        )
    return base


def simulate_gate(g: GateConfig, data: GateData, base: Baselines) -> Simulation:
    """Selective aggregation on the held-out items: cost curves, operating points, classifier rows."""
    val, scorers = data.val, base.scorers
    block = item_block(val, data.variants)
    curves, operating = operating_points(block, val, scorers, g)
    matched = savings_at_recovery(curves, operating[~operating["policy"].isin(scorers)], g.recovery_targets)
    thresholds = {
        row.policy: float(row.threshold) for row in operating.itertuples(index=False) if row.policy in scorers
    }
    clf_scorers = dict(scorers)
    if "p_llm" in val.columns and "llm_prompt_gate" not in clf_scorers:
        clf_scorers["llm_prompt_gate"] = "p_llm"
    clf_table = classifier_rows(
        val,
        clf_scorers,
        extra={"learned_gate@operating_threshold": ("p_gate", thresholds["learned_gate"])},
        only=base.llm_only,
    )
    return Simulation(block, curves, operating, full_reference(block), matched, thresholds, clf_table)


def evaluate_transfer(
    g: GateConfig, data: GateData, base: Baselines, sim: Simulation, out: Path
) -> dict[str, Any]:
    """The gates on held-out prompt groups, at the thresholds chosen on the held-out items."""
    transfer = data.transfer
    if not len(transfer):
        return {"evaluated": False, "note": data.transfer_note}
    t_scorers = {k: v for k, v in base.scorers.items() if v in transfer.columns}
    t_block = item_block(transfer, data.variants)
    _, t_operating = operating_points(t_block, transfer, t_scorers, g, thresholds=sim.thresholds)
    t_clf = classifier_rows(transfer, t_scorers)
    t_matched = transfer_at_matched(t_block, transfer, t_scorers, sim.matched)
    rep.write_table(t_operating, out, "transfer_operating_points")
    rep.write_table(t_clf, out, "transfer_classifier_metrics")
    rep.write_table(t_matched, out, "transfer_savings_at_recovery")
    return {
        "evaluated": True,
        "note": data.transfer_note + " Thresholds as chosen on the held-out items of the training groups.",
        "operating": t_operating,
        "classifiers": t_clf,
        "matched": t_matched,
        **{f"reference_{k}": v for k, v in full_reference(t_block).items()},
    }


def write_outputs(
    g: GateConfig, data: GateData, res, base: Baselines, sim: Simulation, transfer: dict, job: StageJob
) -> dict[str, Any]:
    """Tables, figure, report.md, the W&B log and the result record."""
    from promptlottery.gating.outputs import gate_metrics, gate_notes, gate_summary, log_and_print

    out, val = job.output_dir, data.val
    history = pd.DataFrame(res.history)
    learned = sim.row("learned_gate")
    comparison = rep.comparison_table(
        learned, sim.clf("learned_gate"), sim.clf("learned_gate@operating_threshold")
    )
    tables = {
        "classifier_metrics": sim.clf_table,
        "operating_points": sim.operating,
        "cost_curve": sim.curves,
        "training_history": history,
        "paper_comparison": comparison,
        "savings_at_recovery": sim.matched,
    }
    for name in ("classifier_metrics", "operating_points", "cost_curve", "training_history"):
        rep.write_table(tables[name], out, name)
    val[[c for c in val.columns if c != "query"]].to_parquet(out / "heldout_predictions.parquet", index=False)
    fixed = sim.operating[~sim.operating["policy"].isin(base.scorers)]
    rep.plot_cost_curves(
        sim.curves,
        fixed,
        sim.operating[sim.operating["policy"].isin(base.scorers)],
        out / "cost_curve.png",
        title=f"{g.classifier.name} gate, {sim.block.items.shape[0]} held-out items",
    )
    for name in ("savings_at_recovery", "paper_comparison"):
        rep.write_table(tables[name], out, name)
    summary = gate_summary(g, data, res, history, sim)
    rep.write_report(
        out / "report.md",
        summary=summary,
        clf_table=sim.clf_table,
        operating=sim.operating,
        comparison=comparison,
        matched=sim.matched,
        transfer=transfer,
        notes=base.notes + gate_notes(g, sim, val),
    )
    metrics = gate_metrics(res, base, sim, transfer)
    record = job.ok(
        metrics=metrics, calls=base.llm_stats.counts(), summary=summary, transfer_note=transfer["note"]
    )
    log_and_print(job.tracker, g, metrics, tables, transfer, summary, sim, out)
    return record

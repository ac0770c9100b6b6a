"""The ``gate`` stage: train the gate, simulate selective aggregation, write tables, figure and report.

    python -m run +gate=selective gate.runs='outputs/judge/multiruns/*'

Writes to its output dir: ``classifier_metrics``, ``operating_points``, ``cost_curve``,
``training_history`` and (when held-out group judgments exist) ``transfer_*`` tables as CSV and
Markdown, ``heldout_predictions.parquet``, ``cost_curve.png``, ``report.md``, ``results.json`` and the
LoRA adapter (``adapter/``); everything is logged to W&B as well.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf

from promptlottery.gating import report as rep
from promptlottery.gating.baselines import classification_metrics
from promptlottery.gating.config import GateConfig
from promptlottery.gating.data import (
    GateDataError,
    attach_texts,
    held_out_groups,
    instance_split,
    load_examples,
)
from promptlottery.gating.simulate import (
    baseline_points,
    choose_operating_point,
    full_reference,
    item_block,
    point_at_threshold,
    threshold_curve,
)
from promptlottery.stages import StageJob, run_stage

logger = logging.getLogger(__name__)


@dataclass
class GateData:
    train: pd.DataFrame
    val: pd.DataFrame
    transfer: pd.DataFrame  # may be empty
    transfer_note: str
    held_out: list[str]
    variants: list[str]


def _load(runs, g: GateConfig) -> pd.DataFrame:
    return load_examples(
        runs,
        verdict=g.verdict,
        reference=g.reference,
        variants=g.variants,
        temperature=g.temperature,
        min_judges=g.min_judges,
    )


def prepare(g: GateConfig) -> GateData:
    """Examples with texts, the instance-disjoint split, and the held-out-group (transfer) rows."""
    t0 = time.perf_counter()
    ex = _load(g.runs, g)
    if g.transfer_runs:
        try:
            ex = pd.concat([ex, _load(g.transfer_runs, g)], ignore_index=True)
        except Exception as e:  # noqa: BLE001 - no transfer judgments is reported, not fatal
            logger.warning("gate.transfer_runs=%s: %s", g.transfer_runs, e)
        ex = ex.drop_duplicates(["config_id", "item_id", "variant"]).reset_index(drop=True)
    variants = (
        list(g.variants) if g.variants else list(ex.sort_values("position")["variant"].drop_duplicates())
    )
    held = held_out_groups(ex["prompt_group"].unique())
    is_held = ex["prompt_group"].isin(held).to_numpy()
    if is_held.all():
        raise GateDataError(f"every judgment is from a held-out prompt group {held}: nothing to train on")
    ex = attach_texts(ex, allow_missing=g.allow_missing_query)
    main = ex[~is_held].reset_index(drop=True)
    transfer = ex[is_held].reset_index(drop=True)
    train_items, val_items = instance_split(main, val_size=g.val_size, seed=g.seed)
    if g.max_train_items and len(train_items) > g.max_train_items:
        train_items = set(random.Random(g.seed).sample(sorted(train_items), int(g.max_train_items)))
    train = main[main["item_key"].isin(train_items)].reset_index(drop=True)
    val = main[main["item_key"].isin(val_items)].reset_index(drop=True)
    if held and len(transfer):
        seen = transfer["item_key"].isin(train_items)
        if seen.all():
            note = (
                f"Held-out group(s) {', '.join(held)}: every item was also a training item (under other "
                "prompts); evaluated on all of them."
            )
        else:
            transfer = transfer[~seen].reset_index(drop=True)
            note = (
                f"Held-out group(s) {', '.join(held)}: {transfer['item_key'].nunique()} items judged with prompts "
                f"the gate never saw ({int(seen.sum())} examples of items seen in training dropped)."
            )
    else:
        note = (
            "No judgments of a held-out prompt group (G15) were found under gate.runs"
            + (" or gate.transfer_runs" if g.transfer_runs else "")
            + ": transfer to unseen prompts was not evaluated. Run a G15 sweep (e.g. "
            "`judge.family=qa_correctness judge.prompt_group=G15 judge.variant=P1,P2,P3,P4,P5`) and pass it "
            "as gate.transfer_runs."
        )
    logger.info(
        "gate data: train=%d val=%d transfer=%d examples (%.1f s)",
        len(train),
        len(val),
        len(transfer),
        time.perf_counter() - t0,
    )
    return GateData(
        train=train, val=val, transfer=transfer, transfer_note=note, held_out=held, variants=variants
    )


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


def _operating_points(
    block,
    df: pd.DataFrame,
    scorers: dict[str, str],
    g: GateConfig,
    thresholds: dict[str, float] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cost curves of the threshold gates and their operating points, plus the baseline points."""
    curves, chosen = [], []
    for name, col in scorers.items():
        scores = block.scores(df, col)
        if thresholds is not None:  # transfer: the thresholds chosen on the held-out items
            chosen.append(point_at_threshold(block, scores, name, thresholds[name]))
            continue
        curve = threshold_curve(block, scores, name)
        curves.append(curve)
        if g.threshold == "auto":
            chosen.append(choose_operating_point(curve, g.target_recovery))
        else:
            chosen.append(point_at_threshold(block, scores, name, float(g.threshold)))
    chosen_df = pd.DataFrame(chosen)
    points = baseline_points(block, tuple(g.first_k))
    curves_df = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame()
    return curves_df, pd.concat([chosen_df, points], ignore_index=True)


def savings_at_recovery(curves: pd.DataFrame, points: pd.DataFrame, targets) -> pd.DataFrame:
    """Each threshold policy's largest call saving with at least ``t`` of the decisions recovered, per
    target ``t`` (the thresholds are chosen on the same items), beside the fixed baselines' points."""
    rows = []
    for t in targets:
        for policy, curve in curves.groupby("policy", sort=False) if len(curves) else []:
            best = choose_operating_point(curve, float(t))
            rows.append(
                {
                    "target": float(t),
                    "policy": policy,
                    "threshold": float(best["threshold"]),
                    "calls_saved": float(best["calls_saved"]),
                    "recovered": float(best["recovered"]),
                }
            )
        for p in points.itertuples(index=False):
            if p.recovered >= float(t) - 1e-12:
                rows.append(
                    {
                        "target": float(t),
                        "policy": p.policy,
                        "threshold": float("nan"),
                        "calls_saved": float(p.calls_saved),
                        "recovered": float(p.recovered),
                    }
                )
    return pd.DataFrame(rows, columns=["target", "policy", "threshold", "calls_saved", "recovered"])


def transfer_at_matched(
    block, df: pd.DataFrame, scorers: dict[str, str], matched: pd.DataFrame
) -> pd.DataFrame:
    """The threshold policies on the transfer items at the thresholds ``matched`` chose per recovery
    level on the held-out items (nothing is re-chosen on the transfer items)."""
    rows = []
    for r in matched.itertuples(index=False):
        if r.policy not in scorers:
            continue
        pt = point_at_threshold(block, block.scores(df, scorers[r.policy]), r.policy, r.threshold)
        rows.append(
            {
                "target": r.target,
                "policy": r.policy,
                "threshold": r.threshold,
                "calls_saved": float(pt["calls_saved"]),
                "recovered": float(pt["recovered"]),
            }
        )
    return pd.DataFrame(rows, columns=["target", "policy", "threshold", "calls_saved", "recovered"])


def _clf_rows(
    df: pd.DataFrame,
    scorers: dict[str, str],
    extra: dict[str, tuple[str, float]] | None = None,
    only: dict[str, pd.Series] | None = None,
) -> pd.DataFrame:
    rows = []
    y = df["in_cluster"].to_numpy()
    for name, col in scorers.items():
        sel = (only or {}).get(name, pd.Series(True, index=df.index)).to_numpy()
        rows.append(
            {"classifier": name, "cut": 0.5, **classification_metrics(y[sel], df.loc[sel, col].to_numpy())}
        )
    for name, (col, thr) in (extra or {}).items():
        rows.append({"classifier": name, "cut": thr, **classification_metrics(y, df[col].to_numpy(), thr)})
    rows.append({"classifier": "always_trust", "cut": 0.0, **classification_metrics(y, np.ones(len(y)))})
    return pd.DataFrame(rows)


def run(cfg: DictConfig, output_dir: str | Path) -> dict[str, Any]:
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = OmegaConf.to_container(cfg, resolve=True)
    g = GateConfig.from_dict(config.get("gate"))
    tracker = {"name": f"gate/{g.classifier.name}", "group": "gate", "job_type": "gate"}
    job = StageJob("gate", out, config=config, root=cfg.paths.root_dir, tracker=tracker)
    return run_stage(job, lambda job: _run(cfg, g, job))


def _run(cfg: DictConfig, g: GateConfig, job: StageJob) -> dict[str, Any]:
    from promptlottery.gating.model import predict_proba, save_adapter, train_classifier
    from promptlottery.judging.calls import CallStats

    out, tracker = job.output_dir, job.tracker
    data = prepare(g)
    train, val, transfer = data.train, data.val.copy(), data.transfer.copy()

    # 1. the learned gate
    res = train_classifier(g.classifier, train, val, default_root_dir=str(out))
    val["p_gate"] = predict_proba(res, val)
    if len(transfer):
        transfer["p_gate"] = predict_proba(res, transfer)
    if g.save_adapter:
        save_adapter(res, out / "adapter")
    history = pd.DataFrame(res.history)
    # kept at once, before the baselines run: rewritten with their columns at the end
    rep.write_table(history, out, "training_history")
    val.drop(columns=["query"]).to_parquet(out / "heldout_predictions.parquet", index=False)

    # 2. classifier baselines on the same split
    scorers = {"learned_gate": "p_gate", "confidence": "confidence"}
    notes: list[str] = []
    if g.embedding_baseline.enabled:
        from promptlottery.gating.baselines import embedding_logreg

        frames = {"val": val, **({"transfer": transfer} if len(transfer) else {})}
        emb_probs = embedding_logreg(train, frames, C=g.embedding_baseline.C, seed=g.seed)
        val["p_embed"] = emb_probs["val"]
        if len(transfer):
            transfer["p_embed"] = emb_probs["transfer"]
        scorers["embedding_lr_gate"] = "p_embed"
    llm_stats = CallStats()
    llm_only: dict[str, pd.Series] = {}
    llm_error = None
    if g.llm_baseline.enabled:
        try:
            probs, mask = _run_llm_baseline(cfg, g, data, llm_stats)
        except Exception as e:  # noqa: BLE001 - the gate and the other baselines are kept
            llm_error = f"{type(e).__name__}: {e}"
            logger.error("gate llm baseline failed (the rest of the gate stage goes on): %s", llm_error)
            notes.append(
                f"n/a: the LLM prompt classifier failed ({llm_error}); its calls made so far are cached, "
                "a re-run completes it."
            )
    if g.llm_baseline.enabled and llm_error is None:
        val["p_llm"] = np.nan
        val.loc[mask.to_numpy(), "p_llm"] = probs
        llm_only["llm_prompt_gate"] = mask
        if mask.all():
            scorers["llm_prompt_gate"] = "p_llm"
        else:
            notes.append(
                f"The LLM prompt classifier was asked about {int(mask.sum())} of {len(val)} held-out "
                f"examples (whole items, gate.llm_baseline.max_rows); it has no cost curve."
            )

    # 3. gating simulation on the held-out items
    block = item_block(val, data.variants)
    curves, operating = _operating_points(block, val, scorers, g)
    ref = full_reference(block)
    matched = savings_at_recovery(curves, operating[~operating["policy"].isin(scorers)], g.recovery_targets)
    learned = operating[operating["policy"] == "learned_gate"].iloc[0]
    chosen_thresholds = {
        row.policy: float(row.threshold) for row in operating.itertuples(index=False) if row.policy in scorers
    }
    clf_scorers = dict(scorers)
    if "p_llm" in val.columns and "llm_prompt_gate" not in clf_scorers:
        clf_scorers["llm_prompt_gate"] = "p_llm"
    clf_table = _clf_rows(
        val,
        clf_scorers,
        extra={"learned_gate@operating_threshold": ("p_gate", chosen_thresholds["learned_gate"])},
        only=llm_only,
    )
    learned_clf = clf_table[clf_table["classifier"] == "learned_gate"].iloc[0].to_dict()
    learned_clf_op = (
        clf_table[clf_table["classifier"] == "learned_gate@operating_threshold"].iloc[0].to_dict()
    )

    # 4. transfer to held-out prompt groups
    transfer_out: dict[str, Any] = {"evaluated": False, "note": data.transfer_note}
    if len(transfer):
        t_scorers = {k: v for k, v in scorers.items() if v in transfer.columns}
        t_block = item_block(transfer, data.variants)
        _, t_operating = _operating_points(t_block, transfer, t_scorers, g, thresholds=chosen_thresholds)
        t_clf = _clf_rows(transfer, t_scorers)
        t_matched = transfer_at_matched(t_block, transfer, t_scorers, matched)
        transfer_out = {
            "evaluated": True,
            "note": data.transfer_note + " Thresholds as chosen on the held-out "
            "items of the training groups.",
            "operating": t_operating,
            "classifiers": t_clf,
            "matched": t_matched,
            **{f"reference_{k}": v for k, v in full_reference(t_block).items()},
        }
        rep.write_table(t_operating, out, "transfer_operating_points")
        rep.write_table(t_clf, out, "transfer_classifier_metrics")
        rep.write_table(t_matched, out, "transfer_savings_at_recovery")

    # 5. tables, figure, report
    rep.write_table(clf_table, out, "classifier_metrics")
    rep.write_table(operating, out, "operating_points")
    rep.write_table(curves, out, "cost_curve")
    rep.write_table(history, out, "training_history")
    keep = [c for c in val.columns if c not in ("query",)]
    val[keep].to_parquet(out / "heldout_predictions.parquet", index=False)
    title = f"{g.classifier.name} gate, {block.items.shape[0]} held-out items"
    rep.plot_cost_curves(
        curves,
        operating[~operating["policy"].isin(scorers)],
        operating[operating["policy"].isin(scorers)],
        out / "cost_curve.png",
        title=title,
    )
    rep.write_table(matched, out, "savings_at_recovery")
    comparison = rep.comparison_table(learned, learned_clf, learned_clf_op)
    rep.write_table(comparison, out, "paper_comparison")
    rule = (
        f"chosen on the held-out items as the largest saving with >= {rep.pct(g.target_recovery)} of the "
        "decisions recovered, so optimistic for these items"
        if g.threshold == "auto"
        else "fixed in advance"
    )
    p1 = operating[operating["policy"] == "P1_only"]
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
    backbones = sorted(val["backbone"].unique())
    if "fake" in backbones:
        notes.append(
            "The judgments come from the fake backend (hash-derived verdicts): the numbers exercise the "
            "pipeline and say nothing about real judges."
        )
    summary = {
        "runs": g.runs,
        "n_configs": int(pd.concat([train, val])["config_id"].nunique()),
        "configs": sorted(pd.concat([train, val])["config_id"].unique()),
        "backbones": backbones,
        "variants": data.variants,
        "n_train_items": int(train["item_key"].nunique()),
        "n_val_items": int(val["item_key"].nunique()),
        "n_train": len(train),
        "n_val": len(val),
        "positive_rate_train": float(train["in_cluster"].mean()),
        "positive_rate_val": float(val["in_cluster"].mean()),
        "n_val_nc": int(block.items["no_consensus"].sum()),
        "classifier": g.classifier.name,
        "lora_r": g.classifier.lora.r,
        "trainable_params": res.trainable_params,
        "total_params": res.total_params,
        "epochs_run": len(history),
        "best_epoch": res.best.get("epoch"),
        "monitor": g.classifier.monitor,
        "train_seconds": res.seconds,
        "threshold": float(learned["threshold"]),
        "threshold_rule": "auto" if g.threshold == "auto" else "fixed",
        **ref,
    }
    rep.write_report(
        out / "report.md",
        summary=summary,
        clf_table=clf_table,
        operating=operating,
        comparison=comparison,
        matched=matched,
        transfer=transfer_out,
        notes=notes,
    )

    metrics = {
        "learned_gate": {k: learned[k] for k in rep.OP_COLUMNS if k != "policy"},
        "classifier": {k: learned_clf[k] for k in ("mcc", "balanced_accuracy", "tpr", "tnr")},
        "classifier_at_threshold": {k: learned_clf_op[k] for k in ("mcc", "balanced_accuracy", "tpr", "tnr")},
        "baselines": {
            row.policy: {
                "calls_saved": row.calls_saved,
                "recovered": row.recovered,
                "recovered_nc": row.recovered_nc,
                "threshold": row.threshold,
            }
            for row in operating.itertuples(index=False)
            if row.policy != "learned_gate"
        },
        "reference": ref,
        "best_validation": res.best,
        "llm_baseline_error": llm_error,
        "savings_at_recovery": [
            {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()}
            for r in matched.to_dict("records")
        ],
    }
    if transfer_out["evaluated"]:
        t_learned = transfer_out["operating"][transfer_out["operating"]["policy"] == "learned_gate"].iloc[0]
        metrics["transfer"] = {
            k: t_learned[k] for k in ("calls_saved", "recovered", "recovered_nc", "mean_calls")
        }
    calls = llm_stats.counts()
    record = job.ok(metrics=metrics, calls=calls, summary=summary, transfer_note=transfer_out["note"])
    tracker.log_metrics({"gate": metrics})
    for name, df in (
        ("classifier_metrics", clf_table),
        ("operating_points", operating),
        ("cost_curve", curves),
        ("training_history", history),
        ("paper_comparison", comparison),
        ("savings_at_recovery", matched),
    ):
        tracker.log_table(name, df)
    if transfer_out["evaluated"]:
        tracker.log_table("transfer_operating_points", transfer_out["operating"])
    tracker.log_image("cost_curve", str(out / "cost_curve.png"))
    print(
        f"gate classifier={g.classifier.name} held_out_items={summary['n_val_items']} "
        f"mcc={learned_clf['mcc']:.3f} tpr={learned_clf['tpr']:.3f} tnr={learned_clf['tnr']:.3f}"
    )
    for row in operating.itertuples(index=False):
        print(
            f"gate policy={row.policy} threshold={row.threshold:.3f} mean_calls={row.mean_calls:.2f} "
            f"calls_saved={row.calls_saved:.1%} recovered={row.recovered:.1%} "
            f"recovered_nc={row.recovered_nc:.1%} human_spearman={row.human_spearman:.3f}"
        )
    print(f"gate transfer: {transfer_out['note']}")
    print(f"gate report={out / 'report.md'}")
    return record

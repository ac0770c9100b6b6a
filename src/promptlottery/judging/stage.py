"""The ``judge`` stage: one condition of the grid, from config to judgments, metrics and records.

``judge(cfg, job) -> dict`` is pure with respect to Hydra: it reads the composed config, builds the
backend, cache and decoding with ``calls.compose.build_judge_runtime`` and passes plain objects down to the library; it runs
inside the job wrapper (``promptlottery.stages.run_stage``), which checked the config. Its inputs
(items, design, examples, rendered prompts) are the preflight's (:func:`~promptlottery.judging.inputs.judge_inputs`),
and its judging one :class:`~promptlottery.judging.judge_job.JudgeJob` passed whole to the runner.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from promptlottery.atomic import atomic_write
from promptlottery.calls.compose import build_calls, build_judge_runtime, build_spend, run_decoding
from promptlottery.judging import runner
from promptlottery.judging.adaptive_job import judge_adaptive
from promptlottery.judging.before_calls import check_lost_cache, dry_run
from promptlottery.judging.inputs import check_items, group_condition, judge_inputs
from promptlottery.judging.judge_job import Condition, JudgeJob
from promptlottery.judging.runner import condition_metrics
from promptlottery.prompts.group_text import dump_group
from promptlottery.prompts.groups import PromptGroup
from promptlottery.tracking.job import StageJob
from promptlottery.tracking.jobdir import file_sha256

logger = logging.getLogger(__name__)

JUDGMENTS = "judgments.parquet"


def judge(cfg: DictConfig, job: StageJob, *, backend=None) -> dict[str, Any]:
    """Judge one condition and write ``judgments.parquet`` + ``results.json`` to ``job.output_dir``."""
    output_dir = job.output_dir
    options = OmegaConf.to_container(cfg.dataset.options, resolve=True)
    predicted = bool(cfg.predict and cfg.predict.get("systems"))
    # the preflight's inputs; a job that generates the responses it judges loads them after that
    inputs = None if predicted else judge_inputs(cfg, options, take=True)
    condition = group_condition(cfg)[1] if inputs is None else inputs.condition
    job.label = "condition"
    job.fields["condition"] = condition.id
    job.track(name=condition.id, group=condition.configuration)
    decoding = run_decoding(cfg)
    if inputs is None:
        _add_predictions(cfg, options, decoding, output_dir)
        inputs = judge_inputs(cfg, options, take=True)
    group = inputs.group
    check_items(cfg, inputs, inputs.items)
    backend, cache, _ = build_judge_runtime(cfg, backend=backend)
    judged = JudgeJob(
        inputs.items, condition, group, backend, decoding, cache=cache, n_samples=cfg.n_samples,
        examples=inputs.examples, repeat_source=cfg.repeat_source, human_range=tuple(cfg.dataset.human_range),
        orders_of=inputs.orders_of, max_retries=cfg.max_retries, backoff_s=cfg.backoff_s, rendered=inputs.rendered,
    )  # fmt: skip
    # a mode asking in rounds: the first round's keys, the only ones known before any answer
    check_lost_cache(cfg, cache, output_dir, keys=lambda: judged.keys(round_k=0))
    if cfg.dry_run:
        return dry_run(cfg, judged, job)
    # a sweep's jobs share one budget (Hydra writes multirun.yaml in the sweep dir); a single job its own
    sweep = output_dir.parent if (output_dir.parent / "multirun.yaml").exists() else output_dir
    judged.spend = build_spend(cfg, ledger=sweep / "spend.json")
    if judged.spend.active:  # the dry run's count against the cap, before the first call
        judged.spend.check_pending(
            [r for _, r in judged.requests()], backend, cache, decoding, where=f"condition {condition.id}"
        )
    job.tracker  # noqa: B018 - the W&B run starts before the calls, so it times them

    def judge_cells(cells: list, cond: Condition, orders_of=judged.orders_of):
        return runner.run(judged.replace(items=cells, condition=cond, orders_of=orders_of))

    walk_summary = {}
    try:
        if inputs.adaptive is None:
            df, stats = runner.run(judged)
        else:  # the walk asks every wording it reaches; this job keeps its own wording's rows
            df, stats, walk_summary = judge_adaptive(
                inputs.items, condition, list(group.variants), inputs.adaptive, judge_cells
            )
    finally:  # closed, so the SQLite WAL is checkpointed: a read-only (immutable) reader sees every answer
        cache.close()
    df = _with_job_columns(cfg, df, inputs.items, inputs.design, group, inputs.from_file, output_dir)
    return _write(job, df, stats, backend, walk_summary)


def _add_predictions(cfg: DictConfig, options: dict, decoding, output_dir: Path) -> None:
    """The judged responses of a dataset with candidate systems: the systems' predictions, generated
    (or, in a dry run, placeholders to count with), passed to the loader in ``options``."""
    if not (cfg.predict and cfg.predict.get("systems")):
        return
    if cfg.dry_run:  # count, never generate
        from promptlottery.judging.predict import placeholder_predictions

        options["predictions"] = str(
            placeholder_predictions(
                cfg.predict, dataset=cfg.dataset.name, data_dir=cfg.paths.data_dir, output_dir=output_dir
            )
        )
        return
    from promptlottery.judging.predict import ensure_predictions

    if str(cfg.backbone.backend.get("_target_", "")).endswith("FakeBackend"):  # never hides real model work
        print(
            f"note: backbone=fake judges, but the {len(cfg.predict.systems)} candidate systems' answers it judges "
            f"are written by real models first ({cfg.predict.output}; answers in the call cache are reused)",
            file=sys.stderr,
        )
    options["predictions"] = str(
        ensure_predictions(
            cfg.predict,
            dataset=cfg.dataset.name,
            data_dir=cfg.paths.data_dir,
            cache=build_calls(cfg)[0],
            decoding=decoding,
        )
    )


def _with_job_columns(cfg, df, items, design, group: PromptGroup, from_file: bool, output_dir: Path):
    """The judgments with what the analysis reads beside them: a table's input texts, a sparse
    design's columns, the table's and the wording's hashes, the file of a group given as a file."""
    saved_group = group if from_file else None
    if cfg.dataset.name == "table":  # unstable_items.csv shows the user's texts next to the ids
        inputs = {it.id: it.inputs for it in items}
        for name in sorted(set().union(*inputs.values())):
            df[f"input_{name}"] = [inputs[i].get(name) for i in df["item_id"]]
    if design is not None:  # the analysis rebuilds the plan from these columns and checks the cells
        keys = zip(df["item_id"], df["order"]) if "orders_of" in design else df["item_id"]
        df = df.assign(**design["columns"], design_prob=[design["prob"][k] for k in keys])
    path = cfg.dataset.get("path")  # what was judged: one analysis refuses two (judging.load.check_one_text)
    df["table_sha256"] = file_sha256(Path(path)) if path and Path(path).is_file() else ""
    df["wording_sha"] = group.text_hash(cfg.judge.variant)
    if saved_group is not None:  # the analysis reads the judged texts from here (analysis 4-5)
        # through a temporary file and a rename: a link planted at the path is replaced, not followed
        saved = atomic_write(output_dir / "prompt_group.yaml", lambda tmp: dump_group(saved_group, tmp))
        df["group_file"] = str(saved.resolve())
    return df


def _write(job: StageJob, df, stats, backend, walk_summary: dict) -> dict[str, Any]:
    """``judgments.parquet`` first, ``results.json`` last, each atomically: a results.json saying
    ``ok`` always describes the parquet next to it (its hash is recorded, see judging.jobs)."""
    metrics = condition_metrics(df)
    calls = {**stats.counts(), "parse_failures": stats.parse_failures}
    parquet = atomic_write(job.output_dir / JUDGMENTS, lambda tmp: df.to_parquet(tmp, index=False))
    record = job.ok(
        backend=backend.identity(),
        judgments={"file": JUDGMENTS, "sha256": file_sha256(parquet), "n_rows": len(df)},
        metrics=metrics,
        calls=calls,
        **({"adaptive": walk_summary} if walk_summary else {}),
    )
    if len(df):  # W&B's run table sorts and groups by these: one run per condition
        job.tracker.update_config(
            {"condition": str(df["condition"].iloc[0]), "wording": str(df["variant"].iloc[0])}
        )
    job.tracker.log_metrics({"metrics": metrics, "calls": calls})
    job.tracker.log_table("judgments", df.drop(columns=["cache_key", "query"]))
    job.note(
        n=len(df),
        cache_hits=stats.cache_hits,
        cache_misses=stats.cache_misses,
        parse_failures=stats.parse_failures,
        **walk_summary,
    )
    return record

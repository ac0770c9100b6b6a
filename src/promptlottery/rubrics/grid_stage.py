"""The rubric study on the judge grid: one judge job per condition and backbone, then its tables.

``stage=rubric_judge`` judges one condition (``rubric.condition``, a key of ``rubric.conditions``)
with the job's ``backbone`` through the judge grid (its group from
:func:`~promptlottery.rubrics.grid_groups.condition_group`, ``judging.runner.judge``, the call
cache), into the job's ``judgments.parquet``; so the study runs as a sweep (a re-run answers from
the cache, ``hydra/launcher=submitit_slurm`` runs the jobs apart, ``dry_run=true`` counts each
job's calls, tokens and cost)::

    python -m run -m +experiment=rubric_asap_set1 stage=rubric_judge \\
      rubric.condition=holistic_all,holistic_three,analytic_separate,analytic_batch,analytic_edited \\
      backbone=smollm2,gemma3_270m
    python -m run +experiment=rubric_asap_set1 stage=rubric_tables rubric.runs=<sweep dir>

``stage=rubric_tables`` reads every ``judgments.parquet`` under ``rubric.runs`` and writes the
``rubric`` stage's tables from them (the same files, byte for byte on rubric set 1:
``tests/test_rubric_grid_stage.py``; on InFoBench, whose criteria differ per item, too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from promptlottery.atomic import atomic_write
from promptlottery.calls.compose import build_judge_runtime
from promptlottery.data import load_items
from promptlottery.errors import ConfigError
from promptlottery.judging import runner
from promptlottery.judging.stage import dry_run
from promptlottery.rubrics.grid_groups import condition_group, grid_items, scores_from_judgments
from promptlottery.rubrics.prompts import PromptBuilder, RubricCondition
from promptlottery.rubrics.stage import _conditions, _header, draw_sample, write_tables
from promptlottery.rubrics.tables import Settings, StudyData, build_tables
from promptlottery.rubrics.tasks import make_task
from promptlottery.tracking.job import StageJob

JUDGMENTS = "judgments.parquet"


def _study(cfg: DictConfig, job: StageJob):
    """The study's task, sample, prompt builder and conditions, as ``stage=rubric`` draws them."""
    if cfg.get("rubric") is None:
        raise ConfigError(
            "the rubric stages need a rubric: config; run an experiment, e.g. +experiment=rubric_asap_set1"
        )
    rc = job.config["rubric"]
    options = job.config["dataset"]["options"]
    task = make_task(
        cfg.dataset.name, cfg.paths.data_dir, options, dict(rc.get("settings") or {}),
        human_holistic=rc.get("human_holistic"),
    )  # fmt: skip
    items = load_items(cfg.dataset.name, data_dir=cfg.paths.data_dir, **options)
    sample, pool = draw_sample(task, items, cfg.dataset.limit, cfg.dataset.seed)
    return task, sample, PromptBuilder(task, cfg.dataset.name, pool, cfg.dataset.seed), _conditions(rc)


def grid_condition(
    dataset: str, cond: RubricCondition, group, mode: str, backbone: str, prompt_format: str
) -> runner.Condition:
    """The grid's condition of rubric condition ``cond`` (its group's one variant, named after it)."""
    return runner.Condition(
        dataset, group.judge_family, group.id, cond.name, backbone, "holistic",
        prompt_format=prompt_format, judge_mode=mode,
    )  # fmt: skip


def scale_range(group) -> tuple[float, float]:
    """The human range a known-answer judge maps from: the group's own scale (the task's human
    values are on the scales it judges with)."""
    return min(group.scale.scores), max(group.scale.scores)


def rubric_judge(cfg: DictConfig, job: StageJob, *, backend=None) -> dict[str, Any]:
    """Stage ``rubric_judge``: condition ``rubric.condition`` of the study judged by ``backbone``."""
    job.label = "rubric judge"
    task, sample, builder, conditions = _study(cfg, job)
    name = job.config["rubric"].get("condition") or ""
    by_name = {c.name: c for c in conditions}
    if name not in by_name:
        raise ConfigError(f"rubric.condition={name or None!r}: must be one of {list(by_name)}")
    cond = by_name[name]
    group, mode = condition_group(builder, cond, sample)
    condition = grid_condition(
        cfg.dataset.name, cond, group, mode, cfg.backbone.name, cfg.backbone.get("prompt_format", "chat")
    )
    items = grid_items(builder, cond, sample)
    backend, cache, decoding = build_judge_runtime(cfg, backend=backend)
    if condition.prompt_format == "chat" and not backend.supports_assistant_prefix:
        raise ConfigError(
            f"backbone {cfg.backbone.name}: backend {type(backend).__name__} does not honour "
            "JudgeRequest.assistant_prefix (each answer is read after '<name>:' in the chat turn); use "
            "backbone.prompt_format=completion"
        )
    if cfg.dry_run:
        return dry_run(cfg, items, condition, group, backend, cache, decoding, [], job)
    job.track(name=f"rubric/{cfg.dataset.name}/{name}", group=f"rubric/{cfg.dataset.name}", job_type="rubric")
    try:
        df, stats = runner.judge(
            items, condition, group, backend, cache, decoding,
            max_retries=cfg.max_retries, backoff_s=cfg.backoff_s, human_range=scale_range(group),
        )  # fmt: skip
    finally:
        cache.close()
    df = df.assign(rubric_condition=name)
    atomic_write(job.output_dir / JUDGMENTS, lambda tmp: df.to_parquet(tmp, index=False))
    calls = {**stats.counts(), "parse_failures": stats.parse_failures}
    job.note(n=len(df), condition=name, **calls)
    return job.ok(
        backend=backend.identity(),
        condition=name,
        judgments={"file": JUDGMENTS, "n_rows": len(df)},
        calls=calls,
    )


def rubric_tables(cfg: DictConfig, job: StageJob) -> dict[str, Any]:
    """Stage ``rubric_tables``: the study's tables from the judgments of the jobs under ``rubric.runs``."""
    job.label = "rubric tables"
    task, sample, builder, conditions = _study(cfg, job)
    rc = job.config["rubric"]
    runs = Path(str(rc.get("runs") or ""))
    paths = sorted(runs.glob(f"**/{JUDGMENTS}")) if rc.get("runs") else []
    if not paths:
        raise ConfigError(
            f"rubric.runs={rc.get('runs')!r}: no {JUDGMENTS} under it; run stage=rubric_judge first"
        )
    groups = {c.name: condition_group(builder, c, sample)[0] for c in conditions}
    shown = {c.name: grid_items(builder, c, sample) for c in conditions}
    by_name = {c.name: c for c in conditions}
    scores, seen, ids = [], set(), {it.id for it in sample}
    for path in paths:
        df = pd.read_parquet(path)
        if set(df["item_id"]) != ids:
            raise ConfigError(
                f"rubric.runs: {path} judged other items than this sample of {len(ids)} (dataset.limit / "
                "dataset.seed must be the sweep's)"
            )
        name, backbone = df["rubric_condition"].iloc[0], df["backbone"].iloc[0]
        if (backbone, name) in seen:
            raise ConfigError(
                f"rubric.runs: two jobs judged condition {name} with backbone {backbone} ({path})"
            )
        seen.add((backbone, name))
        scores.append(scores_from_judgments(df, by_name[name], groups[name], backbone, task, shown[name]))
    backbones = [b for b in rc.get("backbones") or {} if any(b == s for s, _ in seen)]
    backbones += sorted({b for b, _ in seen} - set(backbones))
    missing = [(b, c.name) for b in backbones for c in conditions if (b, c.name) not in seen]
    if missing:
        raise ConfigError(
            f"rubric.runs: no judgments of {missing[0][1]} by {missing[0][0]} (of {len(missing)} missing)"
        )
    data = StudyData(task, sample, pd.concat(scores, ignore_index=True), conditions, backbones)
    tables, tests = build_tables(data, Settings(**{"seed": cfg.seed, **(rc.get("stats") or {})}))
    header = _header(cfg, task, sample, conditions, backbones, dict(rc.get("settings") or {}))
    write_tables(job.output_dir, tables, tests, header=header)
    summary = {t.id: {f"{c.block} | {c.row} | {c.column}": c.estimate for c in t.cells} for t in tables}
    return job.ok(runs=str(runs), n_jobs=len(paths), sample={"n": len(sample)}, tables=summary)

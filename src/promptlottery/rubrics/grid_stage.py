"""The rubric study on the judge grid: one judge job per condition and backbone, then its tables.

``stage=rubric_judge`` judges one condition (``rubric.condition``, a key of ``rubric.conditions``)
with the job's ``backbone`` through the judge grid (:func:`judge_job`: its group from
:func:`~promptlottery.rubrics.grid_groups.condition_group`, ``judging.runner.judge``, the call
cache), into the job's ``judgments.parquet`` (its sha256 in the job's record; a call cache found
emptied where this job or the jobs beside it cached calls is named before any call, and refused on a
paid API, as the judge stage does); so the study runs as
a sweep (a re-run answers from the cache, ``hydra/launcher=submitit_slurm`` runs the jobs apart,
``dry_run=true`` counts each job's calls, tokens and cost; each job's dir is named by its condition
and backbone)::

    python -m run -m +experiment=rubric_asap_set1 stage=rubric_judge \\
      rubric.condition=holistic_all,holistic_three,analytic_separate,analytic_batch,analytic_edited \\
      backbone=smollm2,gemma3_270m
    python -m run +experiment=rubric_asap_set1 stage=rubric_tables rubric.runs=<sweep dir>

``stage=rubric_tables`` reads every ``judgments.parquet`` under ``rubric.runs`` and writes the
study's tables from them (:func:`study_tables`; the same files, byte for byte, as the study's
former engine on rubric set 1 and on InFoBench: ``tests/test_rubric_grid_stage.py``).
``stage=rubric`` (:mod:`promptlottery.rubrics.stage`) runs both in one job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from promptlottery.atomic import atomic_write
from promptlottery.calls.compose import build_judge_runtime
from promptlottery.calls.loop import CallStats
from promptlottery.errors import ConfigError
from promptlottery.judging import runner
from promptlottery.judging.before_calls import check_lost_cache, dry_run
from promptlottery.rubrics.grid_groups import condition_group, grid_items, scores_from_judgments
from promptlottery.rubrics.prompts import RubricCondition
from promptlottery.rubrics.study import Study, header, load_study, write_tables
from promptlottery.rubrics.tables import Settings, StudyData, build_tables
from promptlottery.tracking.job import StageJob
from promptlottery.tracking.jobdir import file_sha256
from promptlottery.tracking.staging import staged_outputs

JUDGMENTS = "judgments.parquet"


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


def job_grid(study: Study, cond: RubricCondition, dataset: str, backbone: str, prompt_format: str, backend):
    """``(items, condition, group)`` of one judge job; a chat backbone's backend must honour the
    answer prefix (each answer is read after ``<name>:`` in the assistant turn)."""
    group, mode = condition_group(study.builder, cond, study.sample)
    if prompt_format == "chat" and not backend.supports_assistant_prefix:
        raise ConfigError(
            f"backbone {backbone}: backend {type(backend).__name__} does not honour "
            "JudgeRequest.assistant_prefix (each answer is read after '<name>:' in the chat turn); use "
            "backbone.prompt_format=completion"
        )
    condition = grid_condition(dataset, cond, group, mode, backbone, prompt_format)
    return grid_items(study.builder, cond, study.sample), condition, group


def judge_job(
    study: Study, cond: RubricCondition, dataset: str, backbone: str, prompt_format: str, runtime,
    output_dir: Path, *, max_retries: int, backoff_s: float,
) -> tuple[pd.DataFrame, CallStats]:  # fmt: skip
    """One judge job: ``cond`` judged by ``backbone`` (``runtime``: its backend, the call cache and
    the decoding) through the grid, into ``output_dir/judgments.parquet``."""
    backend, cache, decoding = runtime
    items, condition, group = job_grid(study, cond, dataset, backbone, prompt_format, backend)
    df, stats = runner.judge(
        items, condition, group, backend, cache, decoding,
        max_retries=max_retries, backoff_s=backoff_s, human_range=scale_range(group),
    )  # fmt: skip
    df = df.assign(rubric_condition=cond.name)
    output_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(output_dir / JUDGMENTS, lambda tmp: df.to_parquet(tmp, index=False))
    return df, stats


def rubric_judge(cfg: DictConfig, job: StageJob, *, backend=None) -> dict[str, Any]:
    """Stage ``rubric_judge``: condition ``rubric.condition`` of the study judged by ``backbone``."""
    job.label = "rubric judge"
    study = load_study(cfg, job)
    name = job.config["rubric"].get("condition") or ""
    cond = study.condition(name)
    runtime = build_judge_runtime(cfg, backend=backend)
    fmt = cfg.backbone.get("prompt_format", "chat")
    items, condition, group = job_grid(study, cond, cfg.dataset.name, cfg.backbone.name, fmt, runtime.backend)
    check_lost_cache(
        cfg,
        runtime.cache,
        job.output_dir,
        # a batch condition's first round: the only keys known before any answer
        keys=lambda: [r.key for _, r in runner.build_requests(items, condition, group, runtime.backend, runtime.decoding, round_k=0)],
    )  # fmt: skip
    if cfg.dry_run:
        counted = runner.JudgeJob(
            items, condition, group, runtime.backend, runtime.decoding, cache=runtime.cache,
            n_samples=cfg.n_samples, repeat_source=cfg.repeat_source,
        )  # fmt: skip
        return dry_run(cfg, counted, job)
    job.track(name=f"rubric/{cfg.dataset.name}/{name}", group=f"rubric/{cfg.dataset.name}", job_type="rubric")
    try:
        df, stats = judge_job(
            study, cond, cfg.dataset.name, cfg.backbone.name, fmt, runtime, job.output_dir,
            max_retries=cfg.max_retries, backoff_s=cfg.backoff_s,
        )  # fmt: skip
    finally:
        runtime.cache.close()
    calls = {**stats.counts(), "parse_failures": stats.parse_failures}
    job.note(n=len(df), condition=name, **calls)
    return job.ok(
        backend=runtime.backend.identity(),
        condition=name,
        judgments={"file": JUDGMENTS, "sha256": file_sha256(job.output_dir / JUDGMENTS), "n_rows": len(df)},
        calls=calls,
    )


def study_tables(cfg: DictConfig, study: Study, rc, runs: Path, paths: list[Path]):
    """``(tables, tests, data)`` of the study from the judgments at ``paths`` (under ``runs``):
    one job per condition and backbone, of this sample; backbones in ``rubric.backbones``' order."""
    groups = {c.name: condition_group(study.builder, c, study.sample)[0] for c in study.conditions}
    shown = {c.name: grid_items(study.builder, c, study.sample) for c in study.conditions}
    scores, seen, ids = [], set(), {it.id for it in study.sample}
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
        cond = study.condition(name)
        scores.append(scores_from_judgments(df, cond, groups[name], backbone, study.task, shown[name]))
    backbones = [b for b in rc.get("backbones") or {} if any(b == s for s, _ in seen)]
    backbones += sorted({b for b, _ in seen} - set(backbones))
    missing = [(b, c.name) for b in backbones for c in study.conditions if (b, c.name) not in seen]
    if missing:
        raise ConfigError(
            f"rubric.runs: no judgments of {missing[0][1]} by {missing[0][0]} (of {len(missing)} missing)"
        )
    data = StudyData(
        study.task, study.sample, pd.concat(scores, ignore_index=True), study.conditions, backbones
    )
    tables, tests = build_tables(data, Settings(**{"seed": cfg.seed, **(rc.get("stats") or {})}))
    return tables, tests, data


def write_study_tables(cfg: DictConfig, study: Study, rc, output_dir: Path, tables, tests, backbones) -> dict:
    """The tables' files under ``output_dir``; returns each table's estimates (the record's ``tables``)."""
    settings = dict(rc.get("settings") or {})
    head = header(cfg, study.task, study.sample, study.conditions, backbones, settings)
    write_tables(output_dir, tables, tests, header=head)
    return {t.id: {f"{c.block} | {c.row} | {c.column}": c.estimate for c in t.cells} for t in tables}


def rubric_tables(cfg: DictConfig, job: StageJob) -> dict[str, Any]:
    """Stage ``rubric_tables``: the study's tables from the judgments of the jobs under ``rubric.runs``."""
    job.label = "rubric tables"
    study = load_study(cfg, job)
    rc = job.config["rubric"]
    runs = Path(str(rc.get("runs") or ""))
    paths = sorted(runs.glob(f"**/{JUDGMENTS}")) if rc.get("runs") else []
    if not paths:
        raise ConfigError(
            f"rubric.runs={rc.get('runs')!r}: no {JUDGMENTS} under it; run stage=rubric_judge first"
        )
    tables, tests, data = study_tables(cfg, study, rc, runs, paths)
    with staged_outputs(job.output_dir) as staging:  # the one writer: staged, then published together
        summary = write_study_tables(cfg, study, rc, staging, tables, tests, data.backbones)
    return job.ok(runs=str(runs), n_jobs=len(paths), sample={"n": len(study.sample)}, tables=summary)

"""The ``rubric`` stage: every rubric condition x every configured backbone, then the tables, in one job.

``rubric(cfg, job) -> dict`` reads the composed config (an ``experiment=rubric_*`` overlay, see
:mod:`promptlottery.rubrics.study`): ``rubric.backbones`` (``conf/backbone/*.yaml`` files,
instantiated one after the other inside this job) and ``rubric.stats`` (bootstrap). It is a thin
driver over the grid's rubric jobs (:mod:`promptlottery.rubrics.grid_stage`): each condition x
backbone is the judge job ``stage=rubric_judge`` runs (:func:`~.grid_stage.judge_job`, its
``judgments.parquet`` under ``jobs/<condition>_<backbone>/``), then the ``rubric_tables`` body
over them. Every model call goes through the call cache (``paths.cache_dir``), so a re-run makes
no call.

Writes to ``output_dir``: ``scores.parquet`` (one row per judged item x criterion x condition x
backbone), ``tables/<table>.csv`` + ``.md`` (paper-shaped, display text), ``cells.csv`` (every
cell's numbers), ``significance.csv`` (every paired test), ``rubric_tables.md``, ``results.json``
and ``jobs/``.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from promptlottery.calls.compose import JudgeRuntime, build_backend, build_calls
from promptlottery.judging import runner
from promptlottery.rubrics.grid_stage import JUDGMENTS, job_grid, judge_job, study_tables, write_study_tables
from promptlottery.rubrics.strata import two_strata
from promptlottery.rubrics.study import Study, load_study
from promptlottery.tracking.job import StageJob
from promptlottery.tracking.staging import staged_outputs

logger = logging.getLogger(__name__)
#: the run dir's folder of the judge jobs, one ``<condition>_<backbone>`` folder each
JOBS = "jobs"


def rubric(cfg: DictConfig, job: StageJob, *, backends: dict[str, Any] | None = None) -> dict[str, Any]:
    """Stage ``rubric``: the rubric study of one dataset: calls (cached), scores, tables; ``backends``
    by backbone name replace instantiating ``rubric.backbones[name].backend`` (tests pass fakes)."""
    job.label = "rubric study"
    job.track(name=f"rubric/{cfg.dataset.name}", group=f"rubric/{cfg.dataset.name}", job_type="rubric")
    study = load_study(cfg, job)
    rc = job.config["rubric"]
    if not rc.get("backbones"):
        raise ValueError("rubric study: rubric.backbones is empty; compose conf/backbone/*.yaml into it")
    rc = {**rc, "backbones": study_backbones(job.config.get("backbone") or {}, rc["backbones"])}
    backbones = rc["backbones"]
    cache, decoding = build_calls(cfg)
    logger.info(
        "rubric study dataset=%s n=%d conditions=%s backbones=%s",
        cfg.dataset.name, len(study.sample), [c.name for c in study.conditions], list(backbones),
    )  # fmt: skip
    calls = {"total": 0, "cache_hits": 0, "cache_misses": 0, "unscored": 0}
    identities, seconds, estimate = {}, {}, {}
    for name, bcfg in backbones.items():
        tb = time.perf_counter()
        runtime = JudgeRuntime(build_backend(bcfg["backend"], (backends or {}).get(name)), cache, decoding)
        identities[name] = runtime.backend.identity()
        fmt = bcfg.get("prompt_format", "chat")
        if cfg.dry_run:
            estimate[name] = {
                c.name: _estimate(study, c, cfg.dataset.name, name, fmt, runtime) for c in study.conditions
            }
            continue
        for cond in study.conditions:
            df, stats = judge_job(
                study, cond, cfg.dataset.name, name, fmt, runtime, job.output_dir / JOBS / f"{cond.name}_{name}",
                max_retries=cfg.max_retries, backoff_s=cfg.backoff_s,
            )  # fmt: skip
            for k in ("total", "cache_hits", "cache_misses"):
                calls[k] += getattr(stats, k)
            calls["unscored"] += int(df["score"].isna().sum())
            logger.info(
                "condition done backbone=%s condition=%s calls_total=%d", name, cond.name, calls["total"]
            )
        seconds[name] = round(time.perf_counter() - tb, 1)
        del runtime
        gc.collect()
    if cfg.dry_run:
        for name, per in estimate.items():
            tot = {k: sum(v[k] for v in per.values()) for k in next(iter(per.values()))}
            print(f"dry_run backbone={name} " + " ".join(f"{k}={v}" for k, v in tot.items()))
        return job.write("dry_run", n_items=len(study.sample), estimate=estimate)
    runs = job.output_dir / JOBS
    paths = [runs / f"{c.name}_{b}" / JUDGMENTS for b in backbones for c in study.conditions]
    tables, tests, data = study_tables(cfg, study, rc, runs, paths)
    with staged_outputs(job.output_dir) as staging:  # the one writer: staged, then published together
        data.scores.to_parquet(staging / "scores.parquet", index=False)
        summary = write_study_tables(cfg, study, rc, staging, tables, tests, list(backbones))
    return _record(job, study, data, tables, tests, summary, calls, identities, seconds)


def study_backbones(backbone: dict, backbones: dict[str, dict]) -> dict[str, dict]:
    """The study's judges by the names its tables print. ``backbone=fake`` (the run's own backbone)
    puts the fake judge in every backbone's place, ``fake-<name>`` its model so that two hash judges
    differ; a judge whose backend is the fake one is named ``fake-<name>`` (never ``smollm2``)."""
    if backbone.get("name") == "fake":
        logger.info(
            "rubric study backbone=fake: the fake judge replaces %s; no model is loaded", list(backbones)
        )
        fake = backbone.get("backend") or {}
        # each stand-in keeps its backbone's prompt format; in a chat turn it reads the answer prefix
        backbones = {
            name: {
                **backbone,
                "prompt_format": b.get("prompt_format", "chat"),
                "backend": {**fake, "model": f"fake-{name}", "honour_prefix": True},
            }
            for name, b in backbones.items()
        }
    out = {}
    for name, bcfg in backbones.items():
        target = str((bcfg.get("backend") or {}).get("_target_", ""))
        is_fake = target.endswith(".FakeBackend") and not name.startswith("fake")
        out[f"fake-{name}" if is_fake else name] = bcfg
    return out


def _estimate(study: Study, cond, dataset: str, backbone: str, fmt: str, runtime) -> dict[str, int]:
    """One job's requests and prompt tokens, without calling the model (batch: every position
    after placeholder answers)."""
    items, condition, group = job_grid(study, cond, dataset, backbone, fmt, runtime.backend)
    reqs = [r for _, r in runner.build_requests(items, condition, group, runtime.backend, runtime.decoding)]
    cached = runtime.cache.get_many([r.key for r in reqs])
    count = runtime.backend.count_tokens
    return {
        "calls": len(reqs),
        "cached_calls": len(cached),
        "prompt_tokens": sum(count(r) for r in reqs),
        "uncached_prompt_tokens": sum(count(r) for r in reqs if r.key not in cached),
    }


def _record(job: StageJob, study: Study, data, tables, tests, summary, calls, identities, seconds) -> dict:
    """The job's record (results.json) and what the tracker logs."""
    strata = pd.Series([s for s in data.strata if s]).value_counts().to_dict()
    strata.update(pd.Series([s for s in two_strata(data.strata) if s]).value_counts().to_dict())
    record = job.ok(
        backends=identities,
        calls=calls,
        seconds_by_backbone=seconds,
        sample={"n": len(study.sample), "item_ids": [it.id for it in study.sample], "strata": strata},
        human_holistic=study.task.human_holistic_source,
        tables=summary,
        n_significant=_significant(tests, "paired"),
        n_strata_significant=_significant(tests, "unpaired strata"),
    )
    tracker = job.tracker
    tracker.log_metrics(
        {
            "calls": calls,
            **{t: {k: v for k, v in cells.items() if v is not None} for t, cells in summary.items()},
        }
    )
    for t in tables:
        tracker.log_table(t.id, t.wide())
    tracker.log_table("significance", tests)
    tracker.log_table("scores", data.scores.drop(columns=["cache_key"]))
    job.note(n=len(study.sample), calls=calls)
    return record


def _significant(tests: pd.DataFrame, kind: str) -> int:
    """Significant tests of one kind (paired between conditions / unpaired between strata)."""
    if "significant" not in tests:
        return 0
    return int(tests.loc[tests["test"] == kind, "significant"].fillna(False).astype(bool).sum())

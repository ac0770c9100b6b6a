"""The ``rubric`` stage: every rubric condition x every configured backbone, then the tables.

``rubric(cfg, job) -> dict`` reads the composed config (an ``experiment=rubric_*`` overlay):
``rubric.conditions`` (``conf/rubric/*.yaml`` files), ``rubric.backbones`` (``conf/backbone/*.yaml``
files, instantiated one after the other inside this job, since the tables need them together),
``rubric.settings`` (CPU sizing: words kept of examples / source texts / responses),
``rubric.stats`` (bootstrap) and ``rubric.human_holistic`` (the human holistic label's definition,
``RubricTask.HUMAN_HOLISTIC``; null: the task's default). The sample is ``dataset.limit``
eligible items drawn with ``dataset.seed``; solved examples come from the other eligible items,
never from the sample.

Every model call goes through the call cache (``paths.cache_dir``), so a re-run makes no call.
Writes to ``output_dir``: ``scores.parquet`` (one row per judged item x criterion x condition x
backbone), ``tables/<table>.csv`` + ``.md`` (paper-shaped, display text), ``cells.csv`` (every
cell's numbers), ``significance.csv`` (every paired test), ``rubric_tables.md`` and ``results.json``.
"""

from __future__ import annotations

import gc
import json
import logging
import random
import time
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from promptlottery.calls.compose import build_backend, build_calls
from promptlottery.calls.loop import CallStats
from promptlottery.data import load_items
from promptlottery.data.schema import Item
from promptlottery.rubrics.prompts import PromptBuilder, RubricCondition
from promptlottery.rubrics.rubric_judge import Judge
from promptlottery.rubrics.strata import two_strata
from promptlottery.rubrics.tables import Settings, StudyData, build_tables
from promptlottery.rubrics.task_base import RubricTask, load_text
from promptlottery.rubrics.tasks import make_task
from promptlottery.tracking.job import StageJob
from promptlottery.tracking.tables import write_table

logger = logging.getLogger(__name__)


# ================================================================================== the sample
def draw_sample(
    task: RubricTask, all_items: list[Item], limit: int | None, seed: int
) -> tuple[list[Item], list[Item]]:
    """(sample, example pool): the first ``limit`` eligible items of a ``seed``-shuffled order (so a
    smaller sample is part of a larger one, and its cached calls carry over), and the rest; the
    task's reserved items (the paper's example essays) are never drawn."""
    eligible = sorted(task.eligible(all_items), key=lambda it: it.id)
    if not eligible:
        raise ValueError("rubric study: no eligible item (complete human / reference labels) in the dataset")
    reserved = set(task.reserved_ids())  # the paper's examples are "excluded from analysis" (§4.1)
    order = [it for it in eligible if it.id not in reserved]
    random.Random(seed).shuffle(order)
    chosen = order[:limit] if limit else order
    ids = {it.id for it in chosen}
    return sorted(chosen, key=lambda it: it.id), [it for it in eligible if it.id not in ids]


# ===================================================================================== the stage
def _conditions(rc: dict[str, Any]) -> list[RubricCondition]:
    nodes = rc.get("conditions") or {}
    if not nodes:
        raise ValueError("rubric study: rubric.conditions is empty; compose conf/rubric/*.yaml into it")
    conds = [RubricCondition.from_config({"name": key, **node}) for key, node in nodes.items()]
    order = rc.get("order") or []
    rank = {name: i for i, name in enumerate(order)}
    return sorted(conds, key=lambda c: rank.get(c.name, len(rank)))


def rubric(cfg: DictConfig, job: StageJob, *, backends: dict[str, Any] | None = None) -> dict[str, Any]:
    """Stage ``rubric``: the rubric study of one dataset: calls (cached), scores, tables; ``backends``
    by backbone name replace instantiating ``rubric.backbones[name].backend`` (tests pass fakes)."""
    output_dir = job.output_dir
    job.label = "rubric study"
    job.track(name=f"rubric/{cfg.dataset.name}", group=f"rubric/{cfg.dataset.name}", job_type="rubric")
    if cfg.get("rubric") is None:
        raise ValueError(
            "stage=rubric needs a rubric: config; run an experiment, e.g. +experiment=rubric_asap_set1"
        )
    config = job.config
    rc = config["rubric"]
    settings = dict(rc.get("settings") or {})
    stats_cfg = Settings(**{"seed": cfg.seed, **(rc.get("stats") or {})})
    conditions = _conditions(rc)
    backbones = rc.get("backbones") or {}
    if not backbones:
        raise ValueError("rubric study: rubric.backbones is empty; compose conf/backbone/*.yaml into it")
    options = config["dataset"]["options"]
    task = make_task(
        cfg.dataset.name, cfg.paths.data_dir, options, settings, human_holistic=rc.get("human_holistic")
    )
    all_items = load_items(cfg.dataset.name, data_dir=cfg.paths.data_dir, **options)
    sample, pool = draw_sample(task, all_items, cfg.dataset.limit, cfg.dataset.seed)
    builder = PromptBuilder(task, cfg.dataset.name, pool, cfg.dataset.seed)
    texts_version = {
        "prompts": load_text("prompts")["version"],
        "settings": settings,
        "asap_traits": load_text("asap_traits")["version"],
        "infobench": load_text("infobench")["version"],
    }
    cache, decoding = build_calls(cfg)
    logger.info(
        "rubric study dataset=%s n=%d pool=%d conditions=%s backbones=%s",
        cfg.dataset.name,
        len(sample),
        len(pool),
        [c.name for c in conditions],
        list(backbones),
    )
    stats = CallStats()
    rows: list[dict] = []
    identities, seconds, estimate = {}, {}, {}
    for name, bcfg in backbones.items():
        tb = time.perf_counter()
        backend = build_backend(bcfg["backend"], (backends or {}).get(name))
        judge = Judge(
            task,
            builder,
            backbone=name,
            backend=backend,
            prompt_format=bcfg.get("prompt_format", "chat"),
            cache=cache,
            decoding=decoding,
            stats=stats,
            texts_version=texts_version,
            max_retries=cfg.max_retries,
            backoff_s=cfg.backoff_s,
        )
        identities[name] = judge.identity
        if cfg.dry_run:
            estimate[name] = {c.name: judge.dry_run(sample, c) for c in conditions}
            continue
        for cond in conditions:
            rows += judge.condition(sample, cond)
            logger.info(
                "condition done backbone=%s condition=%s calls_total=%d cache_misses=%d",
                name,
                cond.name,
                stats.total,
                stats.cache_misses,
            )
        seconds[name] = round(time.perf_counter() - tb, 1)
        del backend, judge
        gc.collect()
    if cfg.dry_run:
        for name, per in estimate.items():
            tot = {
                k: sum(v[k] for v in per.values())
                for k in ("calls", "cached_calls", "prompt_tokens", "uncached_prompt_tokens")
            }
            print(f"dry_run backbone={name} " + " ".join(f"{k}={v}" for k, v in tot.items()))
        return job.write("dry_run", n_items=len(sample), estimate=estimate)
    scores = pd.DataFrame(rows)
    scores.to_parquet(output_dir / "scores.parquet", index=False)
    data = StudyData(task, sample, scores, conditions, list(backbones))
    tables, tests = build_tables(data, stats_cfg)
    write_tables(
        output_dir, tables, tests, header=_header(cfg, task, sample, conditions, backbones, settings)
    )
    calls = {**stats.counts(), "unscored": stats.parse_failures}
    summary = {t.id: {f"{c.block} | {c.row} | {c.column}": c.estimate for c in t.cells} for t in tables}
    strata = pd.Series([s for s in data.strata if s]).value_counts().to_dict()
    strata.update(pd.Series([s for s in two_strata(data.strata) if s]).value_counts().to_dict())
    record = job.ok(
        backends=identities,
        calls=calls,
        seconds_by_backbone=seconds,
        sample={"n": len(sample), "item_ids": [it.id for it in sample], "strata": strata},
        human_holistic=task.human_holistic_source,
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
    tracker.log_table("scores", scores.drop(columns=["cache_key"]))
    job.note(n=len(sample), calls=calls)
    return record


def _significant(tests: pd.DataFrame, kind: str) -> int:
    """Significant tests of one kind (paired between conditions / unpaired between strata)."""
    if "significant" not in tests:
        return 0
    return int(tests.loc[tests["test"] == kind, "significant"].fillna(False).astype(bool).sum())


def _header(cfg, task: RubricTask, sample: list[Item], conditions, backbones, settings) -> str:
    return "\n".join(
        [
            f"# Rubric study: {cfg.dataset.name} {dict(cfg.dataset.options)}",
            "",
            f"- sample: {len(sample)} items drawn with seed {cfg.dataset.seed} from the eligible items",
            f"- backbones: {', '.join(backbones)}",
            f"- conditions: {', '.join(f'{c.name} ({c.display})' for c in conditions)}",
            f"- settings: {json.dumps(settings)}",
            f"- examples (3ex, edited): {task.examples_source}",
            "- scores: logprob-weighted rating r = sum_i p_i s_i / sum_j p_j over the scale labels"
            + (" (yes = 1, no = 0)" if task.aggregate == "ratio" else ""),
            f"- human labels: {task.human_note or 'yes'}"
            + (f"; holistic = {task.human_holistic_source}" if task.human_holistic_source else ""),
            "",
        ]
    )


def write_tables(output_dir: Path, tables, tests: pd.DataFrame, *, header: str = "") -> None:
    """Each table as CSV (display text) and Markdown, all cells' numbers, and the paired tests."""
    folder = output_dir / "tables"
    folder.mkdir(parents=True, exist_ok=True)
    md = [header]
    for t in tables:
        write_table(t.wide(), folder, t.id, markdown=t.markdown())
        md.append(t.markdown())
    pd.concat([t.long() for t in tables], ignore_index=True).to_csv(output_dir / "cells.csv", index=False)
    tests.to_csv(output_dir / "significance.csv", index=False)
    (output_dir / "rubric_tables.md").write_text("\n".join(md))

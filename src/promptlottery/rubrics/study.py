"""What every rubric stage shares: the study of one composed config (task, sample, prompt builder,
conditions) and the tables' files.

The sample is ``dataset.limit`` eligible items drawn with ``dataset.seed``; solved examples come
from the other eligible items, never from the sample. ``rubric.conditions`` are the
``conf/rubric/*.yaml`` files (in ``rubric.order``), ``rubric.settings`` the CPU sizing (words kept
of examples / source texts / responses) and ``rubric.human_holistic`` the human holistic label's
definition (``RubricTask.HUMAN_HOLISTIC``; null: the task's default).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from promptlottery.data import load_items
from promptlottery.data.schema import Item
from promptlottery.errors import ConfigError
from promptlottery.rubrics.prompts import PromptBuilder, RubricCondition
from promptlottery.rubrics.task_base import RubricTask
from promptlottery.rubrics.tasks import make_task
from promptlottery.tracking.job import StageJob
from promptlottery.tracking.tables import write_table


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


def conditions(rc: dict[str, Any]) -> list[RubricCondition]:
    """``rubric.conditions`` in ``rubric.order`` (the rest after, as given)."""
    nodes = rc.get("conditions") or {}
    if not nodes:
        raise ValueError("rubric study: rubric.conditions is empty; compose conf/rubric/*.yaml into it")
    conds = [RubricCondition.from_config({"name": key, **node}) for key, node in nodes.items()]
    order = rc.get("order") or []
    rank = {name: i for i, name in enumerate(order)}
    return sorted(conds, key=lambda c: rank.get(c.name, len(rank)))


@dataclass(frozen=True)
class Study:
    """One composed rubric study: its task, sample, prompt builder and conditions."""

    task: RubricTask
    sample: list[Item]
    builder: PromptBuilder
    conditions: list[RubricCondition]

    def condition(self, name: str) -> RubricCondition:
        by_name = {c.name: c for c in self.conditions}
        if name not in by_name:
            raise ConfigError(f"rubric.condition={name or None!r}: must be one of {list(by_name)}")
        return by_name[name]


def load_study(cfg: DictConfig, job: StageJob) -> Study:
    """The study of ``cfg`` (an ``experiment=rubric_*`` overlay), as every rubric stage draws it."""
    if cfg.get("rubric") is None:
        raise ConfigError(
            f"stage={cfg.stage} needs a rubric: config; run an experiment, e.g. +experiment=rubric_asap_set1"
        )
    rc = job.config["rubric"]
    options = job.config["dataset"]["options"]
    task = make_task(
        cfg.dataset.name, cfg.paths.data_dir, options, dict(rc.get("settings") or {}),
        human_holistic=rc.get("human_holistic"),
    )  # fmt: skip
    items = load_items(cfg.dataset.name, data_dir=cfg.paths.data_dir, **options)
    sample, pool = draw_sample(task, items, cfg.dataset.limit, cfg.dataset.seed)
    return Study(task, sample, PromptBuilder(task, cfg.dataset.name, pool, cfg.dataset.seed), conditions(rc))


def header(cfg, task: RubricTask, sample: list[Item], conds, backbones, settings) -> str:
    """The first lines of ``rubric_tables.md``: the sample, backbones, conditions and settings."""
    return "\n".join(
        [
            f"# Rubric study: {cfg.dataset.name} {dict(cfg.dataset.options)}",
            "",
            f"- sample: {len(sample)} items drawn with seed {cfg.dataset.seed} from the eligible items",
            f"- backbones: {', '.join(backbones)}",
            f"- conditions: {', '.join(f'{c.name} ({c.display})' for c in conds)}",
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

"""The judge stage's inputs, built and checked once: the preflight's :class:`JudgeInputs`.

:func:`judge_inputs` reads a job's config into what its judging needs (the prompt group, the grid
cell, the sampled items, a sparse or adaptive design, a completion prompt's solved examples) and
checks it (the mode, the table's rows, every presentation's prompt rendered in the sandbox), before
any model is built. The prompts it rendered go to the job (:attr:`JudgeInputs.rendered`, read by
:meth:`~promptlottery.judging.judge_job.JudgeJob.render`). A sweep's preflight, each job's own
preflight and the judge stage ask for the same config's inputs in one process: they are built once
(kept by the config's content and the stat of the files it names, until the stage takes them).
"""

from __future__ import annotations

import json
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from promptlottery.data import load_items
from promptlottery.data.registry import dataset_id
from promptlottery.data.schema import Item, check_text
from promptlottery.errors import ConfigError
from promptlottery.judging.adaptive_job import adaptive_design
from promptlottery.judging.job_inputs import few_shot_examples, job_examples, job_sample  # noqa: F401
from promptlottery.judging.judge_job import Condition, JudgeJob
from promptlottery.judging.sparse_job import sparse_design
from promptlottery.modes import DEFAULT_MODE, check_mode, default_group, get_mode
from promptlottery.prompts.group_text import check_variables
from promptlottery.prompts.groups import (
    PromptError,
    PromptGroup,
    own_default_group,
    resolve_group,
)
from promptlottery.prompts.requests import check_rendering

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class JudgeInputs:
    """A judge job's inputs: ``items`` are the sample (a sparse design's judged items only), drawn
    from ``all_items``; ``rendered``: every prompt of theirs the job judges, rendered once."""

    group: PromptGroup
    condition: Condition
    from_file: bool
    all_items: list[Item]
    items: list[Item]
    design: dict | None = None
    adaptive: Any = None
    examples: list[tuple[Item, str]] = field(default_factory=list)
    rendered: dict = field(default_factory=dict, repr=False)

    @property
    def orders_of(self) -> dict | None:
        return (self.design or {}).get("orders_of")


def build_condition(cfg: DictConfig, group: PromptGroup | None = None) -> Condition:
    """The grid cell; a prompt group loaded from a file (judge.group_file / template) names itself."""
    return Condition(
        dataset=dataset_id(cfg.dataset),
        judge_family=group.judge_family if group is not None else cfg.judge.family,
        prompt_group=group.id if group is not None else cfg.judge.prompt_group,
        variant=cfg.judge.variant,
        backbone=cfg.backbone.name,
        criterion=cfg.judge.criterion,
        prompt_format=cfg.backbone.prompt_format,
        judge_mode=cfg.judge.get("mode", DEFAULT_MODE),
        position_swap=bool(cfg.judge.get("position_swap", True)),
    )


def _group_where(cfg: DictConfig, group: PromptGroup) -> str:
    src = cfg.judge.get("group_file") or cfg.judge.get("template")
    return f"{src} (prompt group {group.id})" if src else f"prompt group {group.id}"


def group_condition(cfg: DictConfig) -> tuple[PromptGroup, Condition, bool]:
    """The prompt group, the grid cell and whether the group came from the user's file."""
    group = resolve_group(cfg.judge, default_group(cfg.judge))
    from_file = bool(cfg.judge.get("group_file") or cfg.judge.get("template"))
    # your own judge without a file judges its mode's built-in group (G17), which names its own family
    named_by_group = from_file or own_default_group(cfg.judge, default_group(cfg.judge))
    condition = build_condition(cfg, group)
    if not named_by_group and group.judge_family != cfg.judge.family:
        raise ConfigError(
            f"judge.family={cfg.judge.family!r} but prompt group {group.id} is {group.judge_family!r}"
        )
    group.variant(condition.variant)  # judge.variant=P9: one line naming the group's variants
    if condition.variant in group.controls and not cfg.judge.get("controls", False):
        raise ConfigError(
            f"judge.variant={condition.variant} is a control variant of prompt group {group.id} "
            "(it must move the verdict); judge it only with judge.controls=true"
        )
    return group, condition, from_file


def check_items(cfg: DictConfig, inputs: JudgeInputs, items: list[Item]) -> None:
    """The mode's checks of ``items`` (and, for a group from the user's file, its placeholders)."""
    group, condition = inputs.group, inputs.condition
    check_mode(
        condition.judge_mode,
        group.scale,
        group=_group_where(cfg, group),
        items=items,
        where=dataset_where(cfg),
        options=cfg.judge,
        criteria=group.criteria,
    )
    if (
        inputs.from_file
    ):  # built-in groups are checked by their tests (and may use optional {% if x %} inputs)
        mode = get_mode(condition.judge_mode)
        shown = (p.item for it in items for p in mode.presentations(it, group=group, position_swap=False))
        check_variables(group, set().union(*(it.inputs for it in shown)), where=_group_where(cfg, group))


def dataset_where(cfg: DictConfig) -> str:
    return f"dataset {cfg.dataset.name}" + (f" ({cfg.dataset.path})" if cfg.dataset.get("path") else "")


def _has_predictions(cfg: DictConfig) -> bool:
    return bool(cfg.predict and cfg.predict.get("systems"))


def check_inputs(cfg: DictConfig) -> None:
    """The judge stage's inputs, checked before any job of a sweep starts (``stages.preflight``): the
    prompt group and variant, the mode, the table and its rows, every item's prompt rendered in the
    sandbox. Each refusal is a one-line :class:`~promptlottery.errors.UserError`; no model is built."""
    if _has_predictions(cfg):  # the judged responses are generated by the job itself: no items to check
        group_condition(cfg)
        return
    judge_inputs(cfg)


#: the inputs built for a config not yet judged (its key: :func:`_key`), a sweep's at most
_KEPT: OrderedDict[str, JudgeInputs] = OrderedDict()
_KEEP = 64


def judge_inputs(cfg: DictConfig, options: dict | None = None, *, take: bool = False) -> JudgeInputs:
    """The checked inputs of ``cfg``'s judge job (``options``: the loader's, default the config's),
    built once for a config: a later call for the same config (and the same files) gets them again,
    the stage's (``take``) for the last time. A job whose judged responses it generates itself
    (``predict.systems``) builds its own each time."""
    options = OmegaConf.to_container(cfg.dataset.options, resolve=True) if options is None else options
    if _has_predictions(cfg):
        return _build(cfg, options)
    try:
        key = _key(cfg, options)
    except Exception:  # noqa: BLE001 - a value only the job resolves (or a bad one): built, not kept
        return _build(cfg, options)
    inputs = _KEPT.pop(key, None) or _build(cfg, options)
    if not take:
        _KEPT[key] = inputs
        while len(_KEPT) > _KEEP:
            _KEPT.popitem(last=False)
    return inputs


def _key(cfg: DictConfig, options: dict) -> str:
    """What the inputs are built from: the dataset's and the judge's config, the backbone's name and
    prompt format, the data dir, the working dir, and the files the config names (as they are now)."""
    files = [cfg.dataset.get("path"), cfg.judge.get("group_file"), cfg.judge.get("template")]
    stats = [(f, _stat(f)) for f in files if f]
    parts = {
        "dataset": OmegaConf.to_container(cfg.dataset, resolve=True),
        "judge": OmegaConf.to_container(cfg.judge, resolve=True),
        "backbone": [cfg.backbone.name, cfg.backbone.prompt_format, cfg.backbone.n_shot],
        "run": [str(cfg.paths.data_dir), cfg.n_samples, os.getcwd()],
        "options": options,
        "files": stats,
    }
    return json.dumps(parts, sort_keys=True, default=str)


def _stat(path: str) -> tuple | None:
    try:
        s = Path(path).stat()
    except OSError:
        return None
    return (s.st_ino, s.st_size, s.st_mtime_ns)


def _build(cfg: DictConfig, options: dict) -> JudgeInputs:
    group, condition, from_file = group_condition(cfg)
    all_items = load_items(cfg.dataset.name, data_dir=cfg.paths.data_dir, **options)
    sampled = job_sample(cfg, all_items)
    design = sparse_design(cfg.judge, group, sampled, condition.judge_mode)  # a bad design refused first
    adaptive = adaptive_design(cfg.judge, condition.judge_mode, cfg.n_samples)
    items = sampled if design is None else [it for it, j in zip(sampled, design["judged"], strict=True) if j]
    inputs = JudgeInputs(group, condition, from_file, all_items, items, design, adaptive)
    if not _has_predictions(cfg):  # generated responses are checked by the job that judges them
        check_items(cfg, inputs, sampled)
        check_text(sampled, where=dataset_where(cfg))
    inputs.examples = job_examples(cfg, all_items, items, group)
    src = cfg.judge.get("group_file") or cfg.judge.get("template")
    inputs.rendered = render_all(inputs, sampled, source=src)
    return inputs


def render_all(inputs: JudgeInputs, sampled: list[Item], *, source: str | None) -> dict:
    """Every prompt of the ``sampled`` items the job judges, rendered once in the sandbox (a mode
    asking in rounds: each item's first presentation, checked and not kept: its later rounds follow
    the answers). The first failure is one :class:`PromptError` naming the file ``source``."""
    group, condition = inputs.group, inputs.condition
    mode = get_mode(condition.judge_mode)
    if mode.rounds(group, sampled) > 1:
        shown = (mode.presentations(it, group=group, position_swap=False)[0].item for it in sampled)
        check_rendering(group, condition.variant, shown, condition.prompt_format, source=source)
        return {}
    job = JudgeJob(sampled, condition, group, None, None, examples=inputs.examples)
    if inputs.orders_of is not None:  # a sparse plan's items: every order it may judge
        job.orders_of = {it.id: tuple(p.order for p in mode.presentations(it, group=group)) for it in sampled}
    prefix = mode.assistant_prefix(group)
    for item in sampled:
        for shown in job._presentations(item):
            try:
                job.render(shown, prefix if shown.prefix is None else shown.prefix)
            except PromptError as e:
                raise PromptError(
                    f"{source}: {e}" if source and str(source) not in str(e) else str(e)
                ) from None
    return job.rendered

"""What a judging job judges and shows: its sample of the dataset and its few-shot examples, drawn
alike by the judge stage (:mod:`promptlottery.judging.stage`) and the study plan
(:mod:`promptlottery.stages.study_plan`), so the plan counts the very requests the jobs send."""

from __future__ import annotations

import logging
import random

from omegaconf import DictConfig

from promptlottery.data.registry import sample_items
from promptlottery.data.schema import Item
from promptlottery.prompts.groups import PromptGroup
from promptlottery.prompts.requests import to_scale_label

logger = logging.getLogger(__name__)

__all__ = ["few_shot_examples", "job_examples", "job_sample"]


def few_shot_examples(
    all_items: list[Item], sample: list[Item], *, n_shot: int, criterion: str, human_range, scale, seed: int
) -> list[tuple[Item, str]]:
    """``n_shot`` solved examples for completion prompts, drawn from items outside the sample."""
    if n_shot <= 0:
        return []
    taken = {it.id for it in sample}
    pool = [it for it in all_items if it.id not in taken and it.human_score(criterion) is not None]
    if len(pool) < n_shot:
        # e.g. SQuAD v2 answers have no human correctness labels to solve examples with
        logger.warning(
            "zero-shot prompts: need %d examples with a human %r label, found %d",
            n_shot,
            criterion,
            len(pool),
        )
        return []
    chosen = random.Random(seed + 1).sample(pool, n_shot)
    return [(it, to_scale_label(it.human_score(criterion), tuple(human_range), scale)) for it in chosen]


def job_sample(cfg: DictConfig, all_items: list[Item]) -> list[Item]:
    """The items a job judges: ``dataset.limit`` items (or groups, ``dataset.sample_by``) seeded by
    ``dataset.seed``; the judge stage and the study plan draw them alike."""
    by = cfg.dataset.get("sample_by", "item")
    return sample_items(all_items, limit=cfg.dataset.limit, seed=cfg.dataset.seed, by=by)


def job_examples(cfg: DictConfig, all_items: list[Item], items: list[Item], group: PromptGroup) -> list:
    """A job's few-shot examples (``backbone.n_shot``, from outside ``items``), as the judge stage
    and the study plan build its prompts."""
    return few_shot_examples(
        all_items,
        items,
        n_shot=cfg.backbone.n_shot,
        criterion=cfg.judge.criterion,
        human_range=cfg.dataset.human_range,
        scale=group.scale,
        seed=cfg.dataset.seed,
    )

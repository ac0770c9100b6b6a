"""Analytic judging: an item scored on each criterion of a rubric, each criterion a call of its own.

The rubric study's analytic *separate* condition (Sec. 3.1 of the rubric paper: "each sub-criterion
is scored in a separate prompt") on the judge grid: the prompt group names its criteria
(``criteria:`` criterion -> description, in order, :attr:`PromptGroup.criteria`) and its template
the criterion judged (``{{ criterion }}``, ``{{ criterion_description }}``). Every criterion's
answer is read on the group's scale and its row carries the criterion as its ``criterion`` and the
item's human label for it (``human[criterion]``, e.g. the ASAP++ traits of an ASAP essay), so each
criterion is a configuration of its own in the grid and the lottery analysis measures the
wording sensitivity per criterion. Missing here: the study's *batch* condition (all criteria in one
reply, scored position by position) and its examples and context (rubrics/prompts.py).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from promptlottery.data.schema import Item
from promptlottery.modes.base import JudgeMode, ModeError, Presentation
from promptlottery.modes.registry import MODES
from promptlottery.prompts.requests import to_scale_label
from promptlottery.prompts.scales import Scale

NAME = "analytic"


class Analytic(JudgeMode):
    """One request per item, criterion and sample; the criterion a named part of the key."""

    name = NAME
    scale_kind = "pointwise"
    label_matrix = True
    by_criterion = True

    def check_items(
        self,
        scale: Scale,
        *,
        group: str,
        items: list[Item],
        where: str,
        identical_pairs: str = "warn",
        criteria: tuple = (),
    ) -> None:
        unlabelled = [c for c, _ in criteria if items and not any(c in it.human for it in items)]
        if unlabelled:
            raise ModeError(
                f"{where}: no item has a human label for criterion {unlabelled[0]!r} of {group} "
                f"(the items' labels: {sorted(set().union(*(it.human for it in items)))})"
            )

    def presentations(self, item: Item, *, group, position_swap: bool = True) -> list[Presentation]:
        return [
            Presentation(
                dataclasses.replace(item, inputs={**item.inputs, "criterion": c, "criterion_description": d}),
                part=c,
            )
            for c, d in group.criteria
        ]

    def key_parts(self, p: Presentation, prefix: str | None) -> dict[str, Any]:
        return {"criterion": p.part}

    def known_label(
        self, item: Item, criterion: str, scale: Scale, p: Presentation, human_range
    ) -> str | None:
        """The item's human value for criterion ``p.part`` mapped onto the scale, its nearest label."""
        value = item.human_score(p.part)
        return None if value is None or human_range is None else to_scale_label(value, human_range, scale)

    def human_raters(self, raw: Any) -> str | None:
        return None  # given per criterion by columns()

    def columns(self, item: Item, order: str | None, scale: Scale, scored, label_probs, raw: Any) -> dict:
        """The criterion judged and its human label, in the place of the condition's."""
        criterion = item.inputs["criterion"]
        own = item.human.get(criterion)
        return {
            "criterion": criterion,
            "human": item.human_score(criterion),
            "human_raters": json.dumps(own) if isinstance(own, (list, tuple)) else None,
        }


MODES.register(Analytic.name, Analytic())

"""Pointwise judging: a rating of one response on the group's scale, each item shown once."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from promptlottery.data.schema import Item
from promptlottery.modes.base import JudgeMode, ModeError, Presentation
from promptlottery.modes.registry import MODES, mode_of_scale
from promptlottery.prompts.requests import to_scale_label
from promptlottery.prompts.scales import RATING, Scale


class Pointwise(JudgeMode):
    """One request per item (and sample), the ordinary cache key (with the group's answer prefix,
    where it has one), no columns of its own."""

    name = "pointwise"
    scale_kind = RATING
    default = True
    label_matrix = True
    sparse = True
    adaptive = True

    def wrong_scale(self, scale: Scale, group: str) -> str:
        return (
            f"{group} is {scale.kind} (scale {scale.name}) but judge.mode={self.name}; set "
            f"judge.mode={mode_of_scale(scale).name}"
        )

    def check_items(
        self,
        scale: Scale,
        *,
        group: str,
        items: list[Item],
        where: str,
        options: Mapping[str, Any] | None = None,
        criteria: tuple = (),
    ) -> None:
        for name, other in MODES.items():  # items made for another mode (its fields, no response)
            need = other.fields
            if (
                need
                and items
                and all(set(need) <= set(it.inputs) and "response" not in it.inputs for it in items)
            ):
                raise ModeError(
                    f"{where}: {group} is pointwise (scale {scale.name}) but the items are {other.item_noun} "
                    f"({'/'.join(need)}, no response); use judge.mode={name} with a {other.scale_kind} group "
                    f"({other.default_group})"
                )

    def presentations(self, item: Item, *, group=None, position_swap: bool = True) -> list[Presentation]:
        return [Presentation(item)]

    def assistant_prefix(self, group) -> str | None:
        """The group's answer prefix (a rubric's ``"Score:"``); most pointwise groups have none."""
        return group.assistant_prefix

    def key_parts(self, p: Presentation, prefix: str | None) -> dict[str, Any]:
        """The ordinary key; a group's answer prefix is a named part of it."""
        return {"assistant_prefix": prefix} if prefix else {}

    def known_label(
        self, item: Item, criterion: str, scale: Scale, p: Presentation | None, human_range
    ) -> str | None:
        """The human value mapped from ``human_range`` onto the scale, its nearest label (None
        without a human label or without ``human_range``)."""
        value = item.human_score(criterion)
        return None if value is None or human_range is None else to_scale_label(value, human_range, scale)

    def human_raters(self, raw: Any) -> str | None:
        return json.dumps(raw) if isinstance(raw, (list, tuple)) else None


MODES.register(Pointwise.name, Pointwise())

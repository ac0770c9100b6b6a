"""Listwise judging: the judge is shown k answers to one question and picks the best, in rotated orders.

A list item has ``inputs["response_1"]`` ... ``inputs["response_k"]`` (k >= 3; the
``topical_chat_usr_lists`` loader) and its human scores ``human[criterion]``: a list of k numbers,
one per response (each the mean of its annotators). The judge's scale holds the k shown positions
(``listwise_1_3``: labels ``1``, ``2``, ``3``): its answer names the position of the best response.

Orders. An order is the item's response numbers in the order shown: ``"123"`` shows response_1
first. ``judge.position_swap=true`` (the default) judges every list under its k rotations
(``"123"``, ``"231"``, ``"312"``), each a call of its own, so each response is shown first once;
``false``: ``"123"`` only. The order is a named part of the cache key.

Columns: ``judge_mode``, ``order``, ``k``, ``picked`` (the response number of the argmax label,
the parsed label without label probabilities), ``picked_parsed`` (the same from the parsed label),
``picked_position`` (the shown position of the argmax pick, 1 = first shown), ``p_responses``
(JSON: the label probabilities normalised over the scale and mapped to response numbers, the
logprob-weighted verdict), ``human_scores`` (JSON: the k human scores), ``systems`` (JSON: the k
systems) and ``cluster_id``; ``human`` is empty (a list has no one human value).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

from promptlottery.data.schema import Item
from promptlottery.modes.base import JudgeMode, ModeError, Presentation
from promptlottery.modes.registry import MODES
from promptlottery.prompts.scales import Scale, register_scale

NAME = "listwise"
#: the :attr:`Scale.kind` of the listwise scales (registered here)
SCALE_KIND = NAME

# the shown position of the best of three responses
register_scale("listwise_1_3", "123", (1.0, 2.0, 3.0), kind=SCALE_KIND)


def responses(item: Item) -> int:
    """How many responses ``item`` lists (``response_1`` ... ``response_k``, no gap)."""
    k = 0
    while f"response_{k + 1}" in item.inputs:
        k += 1
    return k


def rotations(k: int, rotate: bool = True) -> tuple[str, ...]:
    """The orders of a list of ``k``: each a string of response numbers, first shown first.

    >>> rotations(3)
    ('123', '231', '312')
    """
    base = [str(i) for i in range(1, k + 1)]
    return tuple("".join(base[r:] + base[:r]) for r in range(k if rotate else 1))


def shown(item: Item, order: str) -> Item:
    """The item as the judge sees it in ``order``: position i shows response ``order[i]``."""
    inputs = dict(item.inputs)
    for pos, num in enumerate(order, start=1):
        inputs[f"response_{pos}"] = item.inputs[f"response_{num}"]
    return dataclasses.replace(item, inputs=inputs)


def human_best(scores: list[float]) -> set[str]:
    """The response numbers with the highest human score (ties: all of them)."""
    top = max(scores)
    return {str(i) for i, s in enumerate(scores, start=1) if s == top}


def human_scores(item: Item, criterion: str) -> list[float] | None:
    raw = item.human.get(criterion)
    return None if raw is None else [float(v) for v in raw]


class Listwise(JudgeMode):
    """Each list under its k rotations, the order a named part of the key, the pick recorded in the
    list's own terms (response numbers)."""

    name = NAME
    scale_kind = SCALE_KIND
    sections = ("promptlottery.analysis.lottery.sections.listwise.section:ListwiseSection",)

    def wrong_scale(self, scale: Scale, group: str) -> str:
        return (
            f"judge.mode={self.name} but {group} has the {scale.kind} scale {scale.name}; use a listwise "
            "group (G18, scale listwise_1_3)"
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
        """Every item lists as many non-empty responses as the scale has positions, and its human
        scores (if any) are one number per response."""
        k = len(scale.labels)
        for it in items:
            n = responses(it)
            if n != k:
                raise ModeError(
                    f"{where}: judge.mode={self.name} with {group} (scale {scale.name}) needs items with "
                    f"response_1..response_{k}; item {it.id!r} lists {n} responses (inputs {sorted(it.inputs)})"
                )
            for i in range(1, k + 1):
                if not str(it.inputs[f"response_{i}"]).strip():
                    raise ModeError(f"{where}: item {it.id!r} has an empty response_{i}")
            for crit, raw in it.human.items():
                if not isinstance(raw, (list, tuple)) or len(raw) != k:
                    raise ModeError(
                        f"{where}: item {it.id!r} human[{crit!r}] must be {k} scores (one per response), got {raw!r}"
                    )

    def presentations(self, item: Item, *, group=None, position_swap: bool = True) -> list[Presentation]:
        return [Presentation(shown(item, o), o) for o in rotations(responses(item), position_swap)]

    def assistant_prefix(self, group) -> str | None:
        return group.assistant_prefix

    def key_parts(self, p: Presentation, prefix: str | None) -> dict[str, Any]:
        return {"order": p.order, "assistant_prefix": prefix}

    def known_label(
        self, item: Item, criterion: str, scale: Scale, p: Presentation, human_range
    ) -> str | None:
        """The shown position of the human best response (of tied bests, the first shown)."""
        scores = human_scores(item, criterion)
        if scores is None:
            return None
        best = human_best(scores)
        return next(str(pos) for pos, num in enumerate(p.order, start=1) if num in best)

    def human_raters(self, raw: Any) -> str | None:
        return None

    def columns(self, item: Item, order: str | None, scale: Scale, scored, label_probs, raw: Any) -> dict:
        """The pick in the list's terms (``item`` is the list as shown in ``order``)."""
        terms = {lab: order[i] for i, lab in enumerate(scale.labels)}
        argmax = scored.argmax_label if label_probs else scored.parsed_label
        p = [math.nan] * len(order)
        if label_probs:
            probs = {lab: float(label_probs.get(lab, 0.0)) for lab in scale.labels}
            mass = sum(probs.values())
            if mass > 0:
                for lab, v in probs.items():
                    p[int(terms[lab]) - 1] = v / mass
        meta = item.meta or {}
        return {
            "judge_mode": NAME,
            "order": order,
            "k": len(order),
            "human": math.nan,
            "picked": terms.get(argmax),
            "picked_parsed": terms.get(scored.parsed_label),
            "picked_position": None if argmax is None else scale.labels.index(argmax) + 1,
            "p_responses": json.dumps(p),
            "human_scores": None if raw is None else json.dumps([float(v) for v in raw]),
            "systems": json.dumps(meta.get("systems", [])),
            "cluster_id": str(meta.get("cluster") or item.id),
        }


MODES.register(Listwise.name, Listwise())

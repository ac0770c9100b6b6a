"""Analytic judging: an item scored on each criterion of a rubric, each criterion a call of its own.

The rubric study's analytic *separate* condition (Sec. 3.1 of the rubric paper: "each sub-criterion
is scored in a separate prompt") on the judge grid: the prompt group names its criteria
(``criteria:`` criterion -> description, in order, :attr:`PromptGroup.criteria`) and its template
the criterion judged (``{{ criterion }}``, ``{{ criterion_description }}``). Every criterion's
answer is read on the group's scale and its row carries the criterion as its ``criterion`` and the
item's human label for it (``human[criterion]``, e.g. the ASAP++ traits of an ASAP essay), so each
criterion is a configuration of its own in the grid and the lottery analysis measures the
wording sensitivity per criterion.

A criterion entry may be a mapping with a ``name`` (``{{ criterion_name }}``, and how a batch
reply names it), a ``context`` (the edited rubric's added context, ``{{ criterion_context }}``) and
``examples`` (the solved examples shown for it, ``{{ criterion_examples }}``: the study's ``3ex``
and edited conditions show each criterion's scored example essays). A group whose entries give
any of these has all three variables, empty where an entry gives none.

**Batch** (``criteria_call: batch`` in the group; the study's "all sub-criteria in one prompt"): the
prompt lists every criterion (``{{ criteria }}``: one ``name: description`` line each;
``{{ criteria_context }}``: one ``name: context`` line per criterion that has one) and asks for all
the answers in one reply. A backend reads label probabilities at one position only, so criterion
k is asked in round k with the reply so far as the answer's start, teacher-forced with the model's
own greedy answers (the most probable scale label, else the parsed one) of the earlier criteria::

    Content: 4\nOrganization: 3\nWord Choice:        <- p(label) read here, for criterion 3

An item whose earlier answer has no label stops there. The reply so far is a named part of the key
(``assistant_prefix``) and the row's ``criterion_position`` is k (from 1).

**Criteria per item** (``criteria: from_item``, :attr:`PromptGroup.criteria_from_item`): each item
names its own in ``Item.meta["criteria"]`` (a ``criteria:`` mapping, as a group file gives it), for
a rubric decomposed per item (InFoBench's questions); a batch asks as many rounds as the longest
item has criteria.

A separate group's ``assistant_prefix`` is rendered per criterion (``"{{ criterion_name }}:"``:
each answer read after the criterion's name, as the rubric study reads it) and keyed as well; a
group without one keeps the key of the criterion alone.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from promptlottery.data.schema import Item
from promptlottery.modes.base import JudgeMode, ModeError, Presentation
from promptlottery.modes.registry import MODES
from promptlottery.prompts.groups import criteria_of, render
from promptlottery.prompts.requests import to_scale_label
from promptlottery.prompts.scales import RATING, Scale

NAME = "analytic"


class Analytic(JudgeMode):
    """One request per item, criterion and sample; the criterion a named part of the key."""

    name = NAME
    scale_kind = RATING
    label_matrix = True
    by_criterion = True

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
        unlabelled = [c for c, _ in criteria if items and not any(c in it.human for it in items)]
        if unlabelled:
            raise ModeError(
                f"{where}: no item has a human label for criterion {unlabelled[0]!r} of {group} "
                f"(the items' labels: {sorted(set().union(*(it.human for it in items)))})"
            )

    def presentations(self, item: Item, *, group, position_swap: bool = True) -> list[Presentation]:
        criteria, _ = criteria_of(group, item)
        if group.criteria_call == "batch":  # every position, after placeholder answers
            return [
                p
                for k in range(len(criteria))
                for p in self.round_presentations(item, group=group, k=k, earlier=None)
            ]
        shown = [(c, _shown(item, group, c, d)) for c, d in criteria]
        return [Presentation(it, part=c, prefix=_own_prefix(group, it)) for c, it in shown]

    def rounds(self, group, items=()) -> int:
        if group.criteria_call != "batch":
            return 1
        if group.criteria_from_item:
            return max((len(criteria_of(group, it)[0]) for it in items), default=0)
        return len(group.criteria)

    def round_presentations(
        self, item: Item, *, group, k: int, earlier: tuple[str, ...] | None
    ) -> list[Presentation]:
        """Batch: criterion ``k`` after the greedy answers ``earlier`` (None: the scale's first label
        in their place); none once an earlier answer is missing."""
        if group.criteria_call != "batch":
            return super().round_presentations(item, group=group, k=k, earlier=earlier)
        criteria, info = criteria_of(group, item)
        if k >= len(criteria) or (earlier is not None and len(earlier) != k):
            return []
        answers = earlier if earlier is not None else (group.scale.labels[0],) * k
        names = [info.get(c, {}).get("name", c) for c, _ in criteria]
        so_far = "".join(f"{n}: {a}\n" for n, a in zip(names[:k], answers))
        listing = {
            "criteria": "\n".join(f"{n}: {d}" for n, (_, d) in zip(names, criteria)),
            "criteria_context": "\n".join(
                f"{n}: {info[c]['context']}"
                for n, (c, _) in zip(names, criteria)
                if "context" in info.get(c, {})
            ),
            "criterion_position": str(k + 1),
        }
        c, d = criteria[k]
        return [Presentation(_shown(item, group, c, d, listing), part=c, prefix=f"{so_far}{names[k]}:")]

    def key_parts(self, p: Presentation, prefix: str | None) -> dict[str, Any]:
        """The criterion; a batch position also the reply so far (the answer's start)."""
        return (
            {"criterion": p.part} if p.prefix is None else {"criterion": p.part, "assistant_prefix": prefix}
        )

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
        position = item.inputs.get("criterion_position")
        return {
            "criterion": criterion,
            "human": item.human_score(criterion),
            "human_raters": json.dumps(own) if isinstance(own, (list, tuple)) else None,
            **({"criterion_position": int(position)} if position is not None else {}),
        }


def _own_prefix(group, shown: Item) -> str | None:
    """A separate criterion's answer prefix: the group's ``assistant_prefix`` rendered with the
    criterion's variables (``"{{ criterion_name }}:"`` reads each answer after its own name)."""
    if not group.assistant_prefix:
        return None
    return render(group.assistant_prefix, shown.inputs, where=f"prompt group {group.id} assistant_prefix")


def _shown(item: Item, group, criterion: str, description: str, extra: dict | None = None) -> Item:
    """``item`` as shown for ``criterion``: its inputs and the criterion's template variables (its
    name and context where the group's entries give them)."""
    own = {"criterion": criterion, "criterion_description": description}
    _, every = criteria_of(group, item)
    if every or group.criteria_from_item:
        info = every.get(criterion, {})
        own.update(
            criterion_name=info.get("name", criterion),
            criterion_context=info.get("context", ""),
            criterion_examples=info.get("examples", ""),
        )
    return dataclasses.replace(item, inputs={**item.inputs, **own, **(extra or {})})


MODES.register(Analytic.name, Analytic())

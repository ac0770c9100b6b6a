"""The rubric study's conditions as prompt groups of the judge grid.

A holistic condition becomes a pointwise group (its answer prefix ``"Score:"`` the group's
``assistant_prefix``), an analytic one an analytic group: separate and edited a call per criterion
(each criterion's rubric text, solved examples and edited context in its ``criteria:`` entry),
batch ``criteria_call: batch``. The group's template is the study's own (``rubrics/texts/
prompts.yaml``) rendered once with everything that is the same for every item, the task block and
the response left as ``{{ task }}`` and ``{{ response }}`` (the inputs of :func:`grid_item`), so
the judge grid renders the study's chat messages and answer prefixes text for text
(``tests/test_rubric_grid_groups.py``). Literal text is kept from the second rendering by
``{% raw %}``.

Not expressible here (a :class:`RubricGroupError`): a task whose criteria differ per item
(InFoBench's decomposed questions: a group names one list of criteria), and a condition whose
criteria do not all have examples (or context) where one has.
"""

from __future__ import annotations

import dataclasses
import re

import pandas as pd

from promptlottery.data.schema import Item
from promptlottery.errors import UserError
from promptlottery.prompts.groups import PromptGroup, Variant, render
from promptlottery.rubrics.prompts import PromptBuilder, RubricCondition

#: the placeholders the grid fills per item (:func:`grid_item`) and per criterion (the analytic mode)
ITEM = {"task": "{{ task }}", "response": "{{ response }}"}
CRITERION = {
    "rubric": "{{ criterion_description }}",
    "examples": "{{ criterion_examples }}",
    "context": "{{ criterion_context }}",
    "name": "{{ criterion_name }}",
}


class RubricGroupError(UserError, ValueError):
    """A rubric condition that a prompt group of the grid cannot express (one line)."""


def _literal(text: str) -> str:
    """``text`` shown as is by the grid's rendering ("" stays "", so ``{% if %}`` sections keep
    their meaning)."""
    return "{% raw %}" + text + "{% endraw %}" if text else ""


def _examples(text: str) -> str:
    """A solved-examples block as the study's prompt shows it: every template follows the block
    with a blank line, where the study's collapse of 3+ newlines absorbs the block's final newline
    (done here, since the block is filled in after the template's own collapse)."""
    return re.sub(r"\n{3,}", "\n\n", text).rstrip("\n")


def _template(builder: PromptBuilder, which: str, **variables: str) -> str:
    """The study's template ``which`` rendered as ``PromptBuilder._render`` renders it, with the
    item's texts left as placeholders."""
    text = render(builder.templates[which], {**ITEM, **variables}, where=f"rubric prompt {which} as a group")
    return re.sub(r"\n{3,}", "\n\n", text)


def grid_item(builder: PromptBuilder, item: Item) -> Item:
    """``item`` as the grid judges it: the task's texts as shown (task block, clipped response)."""
    t = builder.task
    return dataclasses.replace(item, inputs={"task": t.task_block(item), "response": t.response(item)})


def condition_group(builder: PromptBuilder, cond: RubricCondition, item: Item) -> tuple[PromptGroup, str]:
    """``(group, judge mode)`` of condition ``cond`` (``item``: any item of the sample; the criteria
    of a fixed-criteria task are every item's)."""
    t = builder.task
    if cond.kind == "holistic":
        return _holistic(builder, cond), "pointwise"
    if not t.fixed_criteria:
        raise RubricGroupError(
            f"rubric condition {cond.name}: the {type(t).__name__} task's criteria differ per item, which one "
            "prompt group's criteria cannot express"
        )
    crits = t.criteria(item)
    if len({c.scale.name for c in crits}) != 1:
        raise RubricGroupError(f"rubric condition {cond.name}: the criteria have different scales")
    return (_batch if cond.mode == "batch" else _separate)(builder, cond, crits), "analytic"


def _group(builder: PromptBuilder, cond: RubricCondition, scale, user: str, **fields) -> PromptGroup:
    system = _literal(builder.templates["system"])
    return PromptGroup(
        f"rubric_{cond.name}",
        judge_family="rubric",
        scale=scale,
        version=builder.version,
        variants={"P1": Variant("P1", user, system=system)},
        description=cond.display,
        completion_answer=None,  # a completion prompt ends with the answer prefix, as the study's
        **fields,
    )


def _holistic(builder: PromptBuilder, cond: RubricCondition) -> PromptGroup:
    t, scale = builder.task, builder.task.holistic_scale
    user = _template(
        builder,
        "holistic",
        instructions=_literal(t.instructions(cond.role)),
        rubric=_literal(t.holistic_rubric()),
        examples=_literal(_examples(t.render_examples(builder.examples(cond, None), t.holistic_name))),
        context="",
        name=_literal(t.holistic_name),
        lo=scale.labels[0],
        hi=scale.labels[-1],
    )
    return _group(builder, cond, scale, user, assistant_prefix=f"{t.holistic_name}:")


def _batch(builder: PromptBuilder, cond: RubricCondition, crits: list) -> PromptGroup:
    t = builder.task
    ctx = "\n".join(f"{c.name}: {t.edited_context(c)}" for c in crits) if cond.context else ""
    user = _template(
        builder,
        "batch",
        instructions=_literal(t.instructions(cond.role)),
        rubric=_literal(t.batch_listing(crits)),
        examples="",
        context=_literal(ctx),
        name="",
        lo="",
        hi="",
    )
    return _group(
        builder,
        cond,
        crits[0].scale,
        user,
        criteria=tuple((c.id, c.rubric) for c in crits),
        criteria_info={c.id: {"name": c.name} for c in crits},
        criteria_call="batch",
    )


def _separate(builder: PromptBuilder, cond: RubricCondition, crits: list) -> PromptGroup:
    """Separate and edited: each criterion's rubric, examples and context in its entry."""
    t, scale = builder.task, crits[0].scale
    info = {
        c.id: {
            "name": c.name,
            "examples": _examples(t.render_examples(builder.examples(cond, c), c.name)),
            "context": t.edited_context(c) if cond.context else "",
        }
        for c in crits
    }
    shown = {}
    for part in ("examples", "context"):
        have = {bool(v[part]) for v in info.values()}
        if len(have) > 1:
            raise RubricGroupError(
                f"rubric condition {cond.name}: some criteria have {part} and some do not, which one template "
                "cannot express"
            )
        shown[part] = CRITERION[part] if have == {True} else ""
    user = _template(
        builder,
        "separate",
        instructions=_literal(t.instructions(cond.role)),
        rubric=CRITERION["rubric"],
        name=CRITERION["name"],
        lo=scale.labels[0],
        hi=scale.labels[-1],
        **shown,
    )
    return _group(
        builder,
        cond,
        scale,
        user,
        # a trait is introduced by its name (PromptBuilder.separate); each answer read after it
        criteria=tuple((c.id, f"{c.name}: {c.rubric}") for c in crits),
        criteria_info={c: {k: v for k, v in entry.items() if v} for c, entry in info.items()},
        assistant_prefix="{{ criterion_name }}:",
    )


def scores_from_judgments(
    judgments: pd.DataFrame, cond: RubricCondition, group: PromptGroup, backbone: str
) -> pd.DataFrame:
    """The rows the study's tables read (``StudyData``: backbone, condition, item_id, position,
    score, argmax_score) from the grid's judgments of ``cond`` with its ``group``: position 0 for
    a holistic score, else the criterion's place in the group's criteria (from 1)."""
    place = {c: k for k, (c, _) in enumerate(group.criteria, start=1)}
    position = [0] * len(judgments) if cond.kind == "holistic" else [place[c] for c in judgments["criterion"]]
    return pd.DataFrame(
        {
            "backbone": backbone,
            "condition": cond.name,
            "item_id": judgments["item_id"].to_numpy(),
            "position": position,
            "score": judgments["score"].to_numpy(),
            "argmax_score": judgments["argmax_score"].to_numpy(),
        }
    )

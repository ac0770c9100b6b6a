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

A task whose criteria differ per item (InFoBench's decomposed questions) gets a group with
``criteria: from_item``: :func:`grid_items` puts each item's criteria (their entries as a group's)
in ``Item.meta["criteria"]`` and its batch listing in ``{{ rubric_listing }}``. Each group has one
variant, named after the condition (what a judge with known behaviour reads, as the study's
requests carried it). Not expressible here (a :class:`RubricGroupError`): a condition whose
criteria do not all have examples (or context) where one has.
"""

from __future__ import annotations

import dataclasses
import re

import pandas as pd

from promptlottery.data.schema import Item
from promptlottery.errors import UserError
from promptlottery.modes import mode_of_scale
from promptlottery.prompts.groups import (
    ITEM_CRITERIA,
    PromptGroup,
    Variant,
    criteria_of,
    parse_criteria,
    render,
)
from promptlottery.rubrics.prompts import ANALYTIC, PromptBuilder, RubricCondition

#: the placeholders the grid fills per item (:func:`grid_items`) and per criterion (the analytic mode)
ITEM = {"task": "{{ task }}", "response": "{{ response }}"}
#: a batch prompt's listing of an item's own criteria and their edited context (``criteria: from_item``)
LISTING = {"rubric": "{{ rubric_listing }}", "context": "{{ rubric_context }}"}
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


def _examples(text: str, blank_after: bool = True) -> str:
    """A solved-examples block as the study's prompt shows it: where the template follows the block
    with a blank line, the study's collapse of 3+ newlines absorbs the block's final newline (done
    here, since the block is filled in after the template's own collapse)."""
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.rstrip("\n") if blank_after else text


def _blank_after_examples(builder: PromptBuilder) -> bool:
    """Whether the separate template follows a criterion's examples with a blank line (ASAP's) or
    with a line of its own (InFoBench's "Now, please evaluate ...")."""
    mark = CRITERION["examples"]
    text = _template(
        builder, "separate", instructions="", rubric="", name="", lo="", hi="", examples=mark, context=""
    )
    return mark + "\n\n" in text


def _template(builder: PromptBuilder, which: str, **variables: str) -> str:
    """The study's template ``which`` rendered as ``PromptBuilder._render`` renders it, with the
    item's texts left as placeholders."""
    text = render(builder.templates[which], {**ITEM, **variables}, where=f"rubric prompt {which} as a group")
    return re.sub(r"\n{3,}", "\n\n", text)


def grid_items(builder: PromptBuilder, cond: RubricCondition, items: list[Item]) -> list[Item]:
    """``items`` as the grid judges them under ``cond``: the task's texts as shown (task block,
    clipped response), the task's human values on the scales it judges with (holistic and per
    criterion: what a known-answer judge reads), and, where the task's criteria differ per item and
    ``cond`` is analytic, the item's criteria (``meta["criteria"]``) and batch listing."""
    t = builder.task
    out = []
    for item in items:
        crits = t.criteria(item)
        human = {"holistic": t.human_holistic(item), **{c.id: t.human_criterion(item, c.id) for c in crits}}
        inputs = {"task": t.task_block(item), "response": t.response(item)}
        meta = dict(item.meta)
        if cond.kind == ANALYTIC and not t.fixed_criteria:
            meta[ITEM_CRITERIA] = _entries(builder, cond, crits)
            inputs["rubric_listing"] = t.batch_listing(crits)
            inputs["rubric_context"] = _context_lines(builder, cond, crits)
        human = {k: v for k, v in human.items() if v is not None}
        out.append(dataclasses.replace(item, inputs=inputs, human=human, meta=meta))
    return out


def _entries(builder: PromptBuilder, cond: RubricCondition, crits: list) -> dict[str, dict[str, str]]:
    """The ``criteria:`` entries of ``crits`` under ``cond``: separate and edited each criterion's
    rubric, examples and context (a trait introduced by its name, a question shown as it is, as
    ``PromptBuilder.separate``); batch their names and rubrics."""
    t = builder.task
    out = {}
    for c in crits:
        if cond.mode == "batch":
            out[c.id] = {"description": c.rubric, "name": c.name}
            continue
        entry = {
            "description": f"{c.name}: {c.rubric}" if t.fixed_criteria else c.rubric,
            "name": c.name,
            "examples": _examples(
                t.render_examples(builder.examples(cond, c), c.name), _blank_after_examples(builder)
            ),
            "context": t.edited_context(c) if cond.context else "",
        }
        out[c.id] = {k: v for k, v in entry.items() if v or k == "description"}
    return out


def _context_lines(builder: PromptBuilder, cond: RubricCondition, crits: list) -> str:
    return "\n".join(f"{c.name}: {builder.task.edited_context(c)}" for c in crits) if cond.context else ""


def condition_group(
    builder: PromptBuilder, cond: RubricCondition, items: list[Item]
) -> tuple[PromptGroup, str]:
    """``(group, judge mode)`` of condition ``cond`` on the sample ``items``: the judge mode asked
    of the group's scale, one judging an item whole (holistic) or criterion by criterion."""
    if cond.kind == "holistic":
        group = _holistic(builder, cond)
        return group, mode_of_scale(group.scale, by_criterion=False).name
    per_item = [builder.task.criteria(it) for it in items]
    if len({c.scale.name for crits in per_item for c in crits}) != 1:
        raise RubricGroupError(f"rubric condition {cond.name}: the criteria have different scales")
    group = _batch(builder, cond, per_item) if cond.mode == "batch" else _separate(builder, cond, per_item)
    return group, mode_of_scale(group.scale, by_criterion=True).name


def _group(builder: PromptBuilder, cond: RubricCondition, scale, user: str, **fields) -> PromptGroup:
    system = _literal(builder.templates["system"])
    return PromptGroup(
        f"rubric_{cond.name}",
        judge_family="rubric",
        scale=scale,
        version=builder.version,
        variants={cond.name: Variant(cond.name, user, system=system)},
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


def _batch(builder: PromptBuilder, cond: RubricCondition, per_item: list[list]) -> PromptGroup:
    t, crits = builder.task, per_item[0]
    fixed = t.fixed_criteria
    user = _template(
        builder,
        "batch",
        instructions=_literal(t.instructions(cond.role)),
        rubric=_literal(t.batch_listing(crits)) if fixed else LISTING["rubric"],
        examples="",
        context=(_literal(_context_lines(builder, cond, crits)) if fixed else LISTING["context"])
        if cond.context
        else "",
        name="",
        lo="",
        hi="",
    )
    own = parse_criteria(_entries(builder, cond, crits)) if fixed else ((), {})
    return _group(
        builder,
        cond,
        crits[0].scale,
        user,
        criteria=own[0],
        criteria_info=own[1],
        criteria_call="batch",
        criteria_from_item=not fixed,
    )


def _separate(builder: PromptBuilder, cond: RubricCondition, per_item: list[list]) -> PromptGroup:
    """Separate and edited: each criterion's rubric, examples and context in its entry (the
    group's, or each item's own)."""
    t, scale = builder.task, per_item[0][0].scale
    entries = [
        _entries(builder, cond, crits) for crits in (per_item if not t.fixed_criteria else per_item[:1])
    ]
    shown = {}
    for part in ("examples", "context"):
        have = {part in v for e in entries for v in e.values()}
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
    criteria, info = parse_criteria(entries[0]) if t.fixed_criteria else ((), {})
    return _group(
        builder,
        cond,
        scale,
        user,
        criteria=criteria,
        criteria_info=info,
        criteria_from_item=not t.fixed_criteria,
        assistant_prefix="{{ criterion_name }}:",  # each answer read after the criterion's name
    )


#: the judgment columns a row of ``scores.parquet`` keeps, as the grid wrote them
KEPT = (
    "item_id", "criterion", "scale", "prompt_format", "raw_output", "score", "weighted_score", "argmax_label",
    "argmax_score", "parsed_label", "label_mass", "scoring_mode", "missing_reason", "label_probs", "human",
    "prompt_tokens", "latency_s", "cache_hit", "cache_key",
)  # fmt: skip


def scores_from_judgments(
    judgments: pd.DataFrame, cond: RubricCondition, group: PromptGroup, backbone: str, task, items: list[Item]
) -> pd.DataFrame:
    """The study's rows (``scores.parquet``; its tables read backbone, condition, item_id, position,
    score and argmax_score) from the grid's judgments of ``cond`` with its ``group`` on the grid
    ``items``: position 0 for a holistic score, else the criterion's place in the item's criteria
    (from 1); the answer prefix is the end of what the judge saw; a batch row's greedy answer the
    one the next position was read after; the reference the task's (GPT-4's answers, InFoBench)."""
    df = judgments.assign(criterion="holistic") if cond.kind == "holistic" else judgments.copy()
    by_id = {it.id: it for it in items}
    places = {i: {c: k for k, (c, _) in enumerate(criteria_of(group, by_id[i])[0], 1)} for i in by_id}
    holistic = cond.kind == "holistic"
    position = [0 if holistic else places[i][c] for i, c in zip(df["item_id"], df["criterion"])]
    info = {i: criteria_of(group, it)[1] if not holistic else {} for i, it in by_id.items()}
    names = [
        task.holistic_name if holistic else info[i].get(c, {}).get("name", c)
        for i, c in zip(df["item_id"], df["criterion"])
    ]
    reference = [
        task.reference_holistic(by_id[i]) if holistic else task.reference_criterion(by_id[i], c)
        for i, c in zip(df["item_id"], df["criterion"])
    ]
    out = pd.DataFrame(
        {
            "schema_version": df["schema_version"].to_numpy(),
            "backbone": backbone,
            "condition": cond.name,
            "kind": cond.kind,
            "mode": cond.mode if not holistic else None,
            "examples": cond.examples,
            "context": cond.context,
            **{k: df[k].to_numpy() for k in KEPT[:2]},
            "criterion_name": names,
            "position": position,
            "answer_prefix": [_answer_prefix(q, f) for q, f in zip(df["query"], df["prompt_format"])],
            **{k: df[k].to_numpy() for k in KEPT[2:]},
            "reference": reference,
        }
    )
    if cond.mode == "batch" and not holistic:
        greedy = out["argmax_label"].where(
            out["argmax_label"].map(lambda v: isinstance(v, str)), out["parsed_label"]
        )
        out["greedy_answer"] = greedy
    return out


def _answer_prefix(query: str, prompt_format: str) -> str:
    """The text the answer follows: a chat query's assistant turn, a completion prompt's last
    paragraph (the prefix holds no blank line)."""
    if prompt_format == "chat":
        return query.rsplit("\n\n[assistant] ", 1)[-1]
    return query.rsplit("\n\n", 1)[-1]

"""Rubric conditions and the study's own renderings of them: holistic, analytic separate, analytic batch.

The judge grid renders the same texts from the conditions' prompt groups
(:mod:`promptlottery.rubrics.grid_groups`); :class:`PromptBuilder` keeps the solved examples and
templates they are built from, and its renderings are the reference the grid's requests are
checked against (``tests/test_rubric_grid_groups.py``).

Every answer is read right after "<name>:" ("Score:", "Content:", "Q2:"), so the three shapes
differ only in what the prompt asks for. For chat models that text is the start of the assistant
turn (``JudgeRequest.assistant_prefix``); for base models the completion prompt ends with it.

**Batch mode, scored position by position.** The paper's batch prompt lists every criterion and
asks for all the answers in one reply. A backend returns label probabilities at one position
only, so criterion k is scored by a request whose answer prefix is the reply so far, teacher-forced
with the model's own greedy answers for the earlier criteria::

    Content: 4\\nOrganization: 3\\nWord Choice:        <- p(label) read here, for criterion 3

The greedy answer of a criterion is the most probable scale label at its position, taken from the
(cached) request of that position, so k rounds of requests reproduce what one greedy reply would
have contained, and every position's distribution is the one the model has while writing it. A
re-run answers every round from the cache. This keeps the one-interface backend unchanged (no
multi-position scoring call): the cost is one prompt encoding per criterion, as in separate mode.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from promptlottery.data.schema import Item
from promptlottery.prompts.groups import render
from promptlottery.rubrics.task_base import Criterion, Example, RubricTask, load_text

#: the rubric kinds: one overall score, or one score per criterion (a rubric's kind, not a judge mode,
#: although the mode that judges an analytic rubric's criteria one by one has the same name)
HOLISTIC, ANALYTIC = "holistic", "analytic"
KINDS = (HOLISTIC, ANALYTIC)
MODES = ("separate", "batch")
EXAMPLES = ("none", "three", "all")


@dataclass(frozen=True)
class RubricCondition:
    """One rubric condition (a ``conf/rubric/*.yaml`` file)."""

    name: str
    kind: str  # "holistic": one overall score; "analytic": one score per criterion
    mode: str = "separate"  # analytic: one call per criterion ("separate") or all in one ("batch")
    examples: str = "none"  # solved examples shown: none, three (high / medium / low) or all levels
    context: bool = False  # the edited rubric: added context for each criterion
    label: str = ""  # the column name in the tables: the paper's (Full, 3ex, 0ex, Sep., Bat., Edited)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"rubric condition {self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.mode not in MODES:
            raise ValueError(f"rubric condition {self.name}: mode must be one of {MODES}, got {self.mode!r}")
        if self.examples not in EXAMPLES:
            raise ValueError(
                f"rubric condition {self.name}: examples must be one of {EXAMPLES}, got {self.examples!r}"
            )
        if self.kind == ANALYTIC and self.examples == "all":
            raise ValueError(
                f"rubric condition {self.name}: analytic conditions take 'none' or 'three' examples"
            )
        if self.mode == "batch" and (self.kind != ANALYTIC or self.examples != "none"):
            raise ValueError(f"rubric condition {self.name}: batch mode is analytic and takes no examples")

    @classmethod
    def from_config(cls, node: dict[str, Any]) -> RubricCondition:
        known = {k: node[k] for k in ("name", "kind", "mode", "examples", "context", "label") if k in node}
        unknown = set(node) - set(known)
        if unknown:
            raise ValueError(f"rubric condition {node.get('name')}: unknown keys {sorted(unknown)}")
        return cls(**known)

    @property
    def display(self) -> str:
        return self.label or self.name

    @property
    def role(self) -> str:
        """The condition's part in the paper's marks (§3.1): "holistic", "separate", "batch" or
        "edited" (analytic with examples or context, separate calls)."""
        if self.kind == "holistic":
            return "holistic"
        if self.mode == "batch":
            return "batch"
        return "edited" if (self.context or self.examples != "none") else "separate"


@dataclass(frozen=True)
class Rendered:
    system: str
    user: str
    prefix: str  # the answer so far, ending right before the label


class PromptBuilder:
    """Renders a task's prompts for one sample; solved examples come from ``pool`` (never the sample)."""

    def __init__(self, task: RubricTask, task_key: str, pool: list[Item], seed: int):
        self.task, self.pool, self.seed = task, pool, seed
        self.templates = load_text("prompts")[task_key]
        self.version = load_text("prompts")["version"]
        self._examples: dict[tuple[str, str], list[Example]] = {}

    def _render(self, which: str, item: Item, **variables) -> str:
        where = f"rubric prompt {which}, item {item.id}"
        text = render(
            self.templates[which],
            {"task": self.task.task_block(item), "response": self.task.response(item), **variables},
            where=where,
        )
        return re.sub(r"\n{3,}", "\n\n", text)  # an empty optional section leaves no gap

    def examples(self, cond: RubricCondition, criterion: Criterion | None) -> list[Example]:
        if cond.examples == "none":
            return []
        key = (cond.examples, criterion.id if criterion is not None else "")
        if key not in self._examples:
            self._examples[key] = (
                self.task.holistic_examples(self.pool, cond.examples, self.seed)
                if criterion is None
                else self.task.criterion_examples(self.pool, criterion, self.seed)
            )
        return self._examples[key]

    def holistic(self, item: Item, cond: RubricCondition) -> Rendered:
        t, scale = self.task, self.task.holistic_scale
        ex = t.render_examples(self.examples(cond, None), t.holistic_name)
        user = self._render(
            "holistic",
            item,
            instructions=t.instructions(cond.role),
            rubric=t.holistic_rubric(),
            examples=ex,
            context="",
            name=t.holistic_name,
            lo=scale.labels[0],
            hi=scale.labels[-1],
        )
        return Rendered(self.templates["system"], user, f"{t.holistic_name}:")

    def separate(self, item: Item, criterion: Criterion, cond: RubricCondition) -> Rendered:
        t = self.task
        ex = t.render_examples(self.examples(cond, criterion), criterion.name)
        ctx = t.edited_context(criterion) if cond.context else ""
        # a trait is introduced by its name; a question is shown as it is
        rubric = f"{criterion.name}: {criterion.rubric}" if t.fixed_criteria else criterion.rubric
        user = self._render(
            "separate",
            item,
            instructions=t.instructions(cond.role),
            rubric=rubric,
            examples=ex,
            context=ctx,
            name=criterion.name,
            lo=criterion.scale.labels[0],
            hi=criterion.scale.labels[-1],
        )
        return Rendered(self.templates["system"], user, f"{criterion.name}:")

    def batch(
        self, item: Item, criteria: list[Criterion], k: int, answers: list[str], cond: RubricCondition
    ) -> Rendered:
        """Criterion ``k`` (0-based) of a batch reply whose earlier answers are ``answers``."""
        if len(answers) != k:
            raise ValueError(f"batch position {k} needs {k} earlier answers, got {len(answers)}")
        t = self.task
        ctx = "\n".join(f"{c.name}: {t.edited_context(c)}" for c in criteria) if cond.context else ""
        user = self._render(
            "batch",
            item,
            instructions=t.instructions(cond.role),
            rubric=t.batch_listing(criteria),
            examples="",
            context=ctx,
            name="",
            lo="",
            hi="",
        )
        so_far = "".join(f"{c.name}: {a}\n" for c, a in zip(criteria[:k], answers))
        return Rendered(self.templates["system"], user, f"{so_far}{criteria[k].name}:")

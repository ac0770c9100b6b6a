"""The dataset-independent side of a rubric task: texts, criteria, examples, the base class.

Each dataset fills in :class:`RubricTask` in its own module (``asap_task``, ``infobench_task``);
``tasks`` holds the registry by dataset name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from promptlottery.data.schema import Item
from promptlottery.prompts.scales import Scale

TEXTS = Path(str(files("promptlottery.rubrics").joinpath("texts")))
STRATA = ("full", "partial", "none")  # raters agree exactly / are adjacent / differ by 2 or more


@cache
def load_text(name: str) -> dict[str, Any]:
    """A rubric text file of ``rubrics/texts/`` (YAML)."""
    return yaml.safe_load((TEXTS / f"{name}.yaml").read_text(encoding="utf-8"))


def clip_words(text: str, max_words: int | None) -> str:
    """The first ``max_words`` words of ``text`` (marked " [...]" when cut); all of it for None."""
    words = text.split()
    if max_words is None or len(words) <= max_words:
        return text.strip()
    return " ".join(words[:max_words]) + " [...]"


def last_paragraphs(text: str, max_words: int | None) -> str:
    """The trailing paragraphs of ``text`` that fit in ``max_words`` words (at least the last one),
    marked "[...]" when some are left out: a writing prompt ends with the instruction itself."""
    paras = [p.strip() for p in text.strip().split("\n\n") if p.strip()]
    if max_words is None or not paras:
        return text.strip()
    kept = [paras[-1]]
    for p in reversed(paras[:-1]):
        if sum(len(x.split()) for x in kept) + len(p.split()) > max_words:
            break
        kept.insert(0, p)
    return "\n\n".join((["[...]"] if len(kept) < len(paras) else []) + kept)


def scale_bands(scale: Scale) -> dict[str, str]:
    """The scale's levels split in three bands: {"top": "5-6", "middle": "3-4", "bottom": "1-2"}."""
    parts = np.array_split(np.array(scale.labels), 3)
    names = ("bottom", "middle", "top")
    return {n: (p[0] if len(p) == 1 else f"{p[0]}-{p[-1]}") for n, p in zip(names, parts)}


@dataclass(frozen=True)
class Criterion:
    """One analytic criterion: an ASAP++ trait or an InFoBench decomposed question."""

    id: str
    name: str  # the label the judge answers after ("Content", "Q2")
    scale: Scale
    rubric: str  # the criterion's text (definition and bands / the question)
    context: str = ""  # what the edited condition adds


@dataclass(frozen=True)
class Example:
    """A solved example: an item, the label it is shown with, and the text shown for it."""

    item_id: str
    label: str
    text: str


class RubricTask:
    """The dataset-specific side of the study; subclasses fill it in for one dataset."""

    name: str
    holistic_name = "Score"
    holistic_scale: Scale
    #: how analytic scores become one ranking: "pareto" (dominance) or "ratio" (share of yes)
    aggregate: str
    #: why human labels are missing (None when the dataset has them)
    human_note: str | None = None
    #: a non-human reference label (e.g. GPT-4's answers) and what to call it; None if none
    reference_name: str | None = None
    #: criteria are the same for every item (ASAP traits) or differ per item (InFoBench questions)
    fixed_criteria = True
    response_noun = "essay"
    #: the rubric paper's name of this dataset in its tables ("1", "4", "6", "IF"); None: not in it
    paper_dataset: str | None = None
    #: the paper's table of Delta rater / Delta rubric for this domain ("table1" AES, "table2" IF)
    paper_table = "table1"
    #: the definitions of the human holistic label a task offers (``rubric.human_holistic``)
    HUMAN_HOLISTIC: tuple[str, ...] = ()

    def __init__(
        self,
        data_dir: str | Path,
        options: dict[str, Any],
        settings: dict[str, Any],
        human_holistic: str | None = None,
    ):
        self.data_dir = Path(data_dir)
        self.options = dict(options)
        self.settings = dict(settings)
        self.example_max_words = settings.get("example_max_words")
        self.human_holistic_source = human_holistic
        if human_holistic is not None and not self.HUMAN_HOLISTIC:
            raise ValueError(
                f"rubric.human_holistic={human_holistic!r}: the {type(self).__name__} task has no human "
                "holistic labels to choose from; leave it null"
            )
        if human_holistic is not None and human_holistic not in self.HUMAN_HOLISTIC:
            raise ValueError(
                f"rubric.human_holistic must be one of {self.HUMAN_HOLISTIC} or null, got {human_holistic!r}"
            )

    # -- what the judge sees -------------------------------------------------------------------
    def eligible(self, items: list[Item]) -> list[Item]:
        return items

    def task_block(self, item: Item) -> str:
        raise NotImplementedError

    def response(self, item: Item) -> str:
        return clip_words(item.inputs["response"], self.settings.get("response_max_words"))

    def holistic_rubric(self) -> str:
        raise NotImplementedError

    def criteria(self, item: Item) -> list[Criterion]:
        raise NotImplementedError

    def batch_listing(self, criteria: list[Criterion]) -> str:
        return "\n".join(
            f"{k}. {c.name} ({c.scale.labels[0]}-{c.scale.labels[-1]}): {c.rubric}"
            for k, c in enumerate(criteria, start=1)
        )

    def edited_context(self, criterion: Criterion) -> str:
        return criterion.context

    def instructions(self, role: str) -> str:
        """The instructions block opening a prompt of this role (``RubricCondition.role``; "" = none)."""
        return ""

    # -- labels --------------------------------------------------------------------------------
    def human_holistic(self, item: Item) -> float | None:
        return None

    def human_criterion(self, item: Item, criterion_id: str) -> float | None:
        return None

    def agreement(self, item: Item) -> str | None:
        """The raters' agreement level on the holistic score (one of STRATA), None if unknown."""
        return None

    def reference_holistic(self, item: Item) -> float | None:
        return None

    def reference_criterion(self, item: Item, criterion_id: str) -> float | None:
        return None

    # -- solved examples -----------------------------------------------------------------------
    #: where the examples come from, in words for the tables' header
    examples_source = "ours (seeded)"

    def reserved_ids(self) -> tuple[str, ...]:
        """Item ids never drawn into the sample (the paper's example items)."""
        return ()

    def holistic_examples(self, pool: list[Item], which: str, seed: int) -> list[Example]:
        raise NotImplementedError

    def criterion_examples(self, pool: list[Item], criterion: Criterion, seed: int) -> list[Example]:
        raise NotImplementedError

    def render_examples(self, examples: list[Example], name: str) -> str:
        if not examples:
            return ""
        body = "\n\n".join(
            f"Example {k} ({name}: {ex.label}):\n{ex.text}" for k, ex in enumerate(examples, 1)
        )
        return f"Scored examples:\n{body}\n"


def _pick_levels(levels_present: dict[str, list[Item]], scale: Scale, which: str) -> list[str]:
    """The scale levels to show: all present ("all") or the low / middle / high ones ("three"),
    each moved to the nearest level that has an example; high first."""
    if which == "all":
        return [lab for lab in reversed(scale.labels) if levels_present.get(lab)]
    if which != "three":
        raise ValueError(f"examples must be 'none', 'three' or 'all', got {which!r}")
    present = [lab for lab in scale.labels if levels_present.get(lab)]
    if not present:
        return []
    lo, hi = scale.scores[0], scale.scores[-1]
    wanted = (hi, (lo + hi) / 2, lo)
    out: list[str] = []
    for target in wanted:
        cands = sorted(
            (lab for lab in present if lab not in out),
            key=lambda lab: (abs(scale.score_of(lab) - target), scale.score_of(lab)),
        )
        if cands:
            out.append(cands[0])
    return out


def _rank(seed: int, salt: str, key: str) -> str:
    return hashlib.sha256(f"{seed}:{salt}:{key}".encode()).hexdigest()


def _choose(items: list[Item], seed: int, salt: str) -> Item:
    """A seeded pick that stays the same when other candidates leave the pool (min-hash), so a
    larger sample keeps the smaller one's examples (and its cached calls) unless it took the pick."""
    return min(items, key=lambda it: _rank(seed, salt, it.id))

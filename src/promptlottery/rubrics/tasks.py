"""Rubric-study tasks: per dataset, the rubric texts, criteria, human labels and solved examples.

A task answers every dataset-specific question of the study, so the runner and the tables never
branch on a dataset name: which items are eligible, the task block and the response shown to the
judge, the holistic rubric and scale, the analytic criteria (ASAP++ traits / InFoBench decomposed
questions) with their scales, the human holistic and analytic labels, the raters' agreement level,
the non-human reference labels where the dataset has only those, and representative examples.

Official texts are read from the data dir at run time (ASAP prompts, holistic rubrics, source
texts: copyrighted, never copied into the repository); the wording the datasets do not ship is
package data in ``rubrics/texts/`` (our own words).
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

from promptlottery.data.loaders.asap import ASAP_PP, HOLISTIC, RESOLVED
from promptlottery.data.schema import Item
from promptlottery.prompts.scales import Scale, get_scale

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


# ============================================================================================ ASAP
class AsapTask(RubricTask):
    """ASAP essays with ASAP++ traits (sets 1-6).

    **Human holistic label** (``rubric.human_holistic``). Issue 12 reads the rubric paper as: on
    sets 4 and 6 "the human holistic score is a single rater's (or the third, expert rater's)
    score as the paper states, not the mean of two raters". ASAP ships that score as
    ``domain1_score``, the resolved score, on the rater scale for sets 3-6; its adjudication rules
    (``asap/rubrics/set{4,6}_info_and_adjudication.txt``): set 4, "If Reader-1 Score and Reader-2
    Score are not adjacent or exact, then adjudication by a third reader is required" (in the data
    the adjacent cases take the higher score); set 6, "if there was a difference between scorer 1
    and scorer 2, the FINAL SCORE was always the higher of the two". So:

    - ``"resolved"`` (the paper's; default for sets 3-6): ``domain1_score``, one rater's score
      (the higher one when the two differ by one) or the third, expert reader's;
    - ``"rater_mean"`` (ours, the old definition; default for sets 1-2): the mean of the two
      raters' scores. On set 1 the resolved score is the two raters' sum (2-12), so the mean ranks
      the essays exactly as the resolved score does and every Kendall tau is the same.

    Agreement strata and solved examples still read the two raters' scores.
    """

    aggregate = "pareto"
    HUMAN_HOLISTIC = ("resolved", "rater_mean")

    def __init__(self, data_dir, options, settings, human_holistic=None):
        super().__init__(data_dir, options, settings, human_holistic)
        self.essay_set = int(options.get("essay_set", 1))
        if self.essay_set not in ASAP_PP:
            raise ValueError(f"rubric study: ASAP set {self.essay_set} has no ASAP++ traits; use sets 1-6")
        on_rater_scale = RESOLVED[self.essay_set] == HOLISTIC[self.essay_set]
        self.human_holistic_source = human_holistic or ("resolved" if on_rater_scale else "rater_mean")
        if self.human_holistic_source == "resolved" and not on_rater_scale:
            raise ValueError(
                f"rubric.human_holistic=resolved: ASAP set {self.essay_set}'s resolved score is on "
                f"{RESOLVED[self.essay_set]}, not the rater scale {HOLISTIC[self.essay_set]}; use rater_mean"
            )
        lo, hi = HOLISTIC[self.essay_set]
        self.holistic_scale = get_scale(f"likert_{lo}_{hi}")
        names, (tlo, thi) = ASAP_PP[self.essay_set]
        self.trait_scale = get_scale(f"likert_{int(tlo)}_{int(thi)}")
        texts = load_text("asap_traits")
        family = next(f for f in texts["families"].values() if self.essay_set in f["essay_sets"])
        self.edited_preamble = texts["edited_preamble"]
        bands = scale_bands(self.trait_scale)
        self._criteria = [
            Criterion(
                id=t["id"],
                name=t["name"],
                scale=self.trait_scale,
                rubric=t["definition"]
                + "\n"
                + "\n".join(f"  {bands[b]}: {t['bands'][b]}" for b in ("top", "middle", "bottom")),
                context=t["context"],
            )
            for t in family["traits"]
        ]
        if [c.name for c in self._criteria] != list(names):
            raise ValueError(f"asap_traits.yaml traits {[c.name for c in self._criteria]} != ASAP++ {names}")
        root = self.data_dir / "asap" / "rubrics"
        readme = root / "readme_full_text" / f"essay_set_{self.essay_set}_readme.txt"
        self._rubric = _read_first(
            root / f"set{self.essay_set}_holistic_rubric.txt",
            readme,
            "Rubric Guidelines",
            ("Adjudication Rules",),
        )
        info = _read_first(root / f"set{self.essay_set}_info_and_adjudication.txt", readme, None, ("Prompt",))
        facts = dict(line.split("|", 1) for line in info.splitlines() if "|" in line)
        facts = {k.strip().rstrip(":"): v.strip() for k, v in facts.items()}
        self.essay_facts = (
            f"The essays were written by grade {facts.get('Grade level', '?')} students; "
            f"essay type: {facts.get('Type of essay', '?')}."
        )

    def eligible(self, items):
        return [
            it for it in items if it.meta.get("asap_pp") == "ok" and len(it.human.get("holistic", [])) == 2
        ]

    def task_block(self, item):
        parts = [
            f"Writing prompt:\n{last_paragraphs(item.inputs['prompt'], self.settings.get('prompt_max_words'))}"
        ]
        source = item.inputs.get("source", "")
        max_source = self.settings.get("source_max_words")
        if source and max_source != 0:
            parts.append(f"Source text (the students read this):\n{clip_words(source, max_source)}")
        return "\n\n".join(parts)

    def holistic_rubric(self):
        return self._rubric

    def criteria(self, item):
        return self._criteria

    def edited_context(self, criterion):
        return f"Context: {self.essay_facts} {criterion.context} {self.edited_preamble}"

    def human_holistic(self, item):
        if self.human_holistic_source == "resolved":
            return item.meta["domain1_score"]
        return item.human_score("holistic")

    def human_criterion(self, item, criterion_id):
        return item.human_score(criterion_id)

    def agreement(self, item):
        r1, r2 = item.human["holistic"]
        d = abs(r1 - r2)
        return STRATA[0] if d == 0 else STRATA[1] if d == 1 else STRATA[2]

    def _example(self, item: Item, label: str) -> Example:
        return Example(item.id, label, clip_words(item.inputs["essay"], self.example_max_words))

    def holistic_examples(self, pool, which, seed):
        # representative: essays on which both raters gave exactly this score
        by_level: dict[str, list[Item]] = {}
        for it in pool:
            r1, r2 = it.human["holistic"]
            if r1 == r2:
                by_level.setdefault(self.holistic_scale.nearest_label(r1), []).append(it)
        return [
            self._example(_choose(by_level[lab], seed, f"holistic:{lab}"), lab)
            for lab in _pick_levels(by_level, self.holistic_scale, which)
        ]

    def criterion_examples(self, pool, criterion, seed):
        # as in the paper, the same three essays (high / medium / low) serve every criterion: the
        # holistic three-example essays, each shown with its score on this criterion
        by_id = {it.id: it for it in pool}
        out = []
        for ex in self.holistic_examples(pool, "three", seed):
            v = by_id[ex.item_id].human_score(criterion.id)
            if v is not None:
                out.append(self._example(by_id[ex.item_id], criterion.scale.nearest_label(v)))
        return out


def _read_first(path: Path, readme: Path, start: str | None, stop: tuple[str, ...]) -> str:
    """``path``'s text, else the section of the set's ReadMeFirst text from ``start`` to ``stop``."""
    if path.is_file():
        return path.read_text(encoding="utf-8").strip()
    if not readme.is_file():
        raise FileNotFoundError(f"rubric study: neither {path} nor {readme} exists")
    lines = readme.read_text(encoding="utf-8").splitlines()
    i = lines.index(start) + 1 if start else 0
    j = next((k for k in range(i, len(lines)) if lines[k].startswith(stop)), len(lines))
    return "\n".join(lines[i:j]).strip()


# ====================================================================================== InFoBench
class InfoBenchTask(RubricTask):
    """InFoBench: holistic = overall instruction following (1-5, our rubric); analytic = the
    decomposed yes/no questions. No human labels: GPT-4's answers are a labelled NOT-human reference."""

    aggregate = "ratio"
    human_note = "InFoBench ships no human (expert) labels here"
    reference_name = "GPT-4 (not human)"
    fixed_criteria = False
    response_noun = "response"
    holistic_name = "Rating"

    def __init__(self, data_dir, options, settings, human_holistic=None):
        super().__init__(data_dir, options, settings, human_holistic)
        if options.get("level", "instruction") != "instruction":
            raise ValueError("rubric study: load InFoBench with level=instruction (one item per instruction)")
        texts = load_text("infobench")
        self.holistic_scale = get_scale(texts["holistic"]["scale"])
        self.question_scale = get_scale(texts["question"]["scale"])
        self._rubric = texts["holistic"]["rubric"]
        self.edited_preamble = texts["edited_preamble"]
        self.categories = texts["categories"]

    def eligible(self, items):
        max_words = self.settings.get("max_words")  # CPU sizing: instructions whose texts are short
        out = [it for it in items if it.inputs.get("response") and it.meta.get("gpt4_answers")]
        if max_words:
            out = [
                it
                for it in out
                if len((it.inputs["question"] + " " + it.inputs["response"]).split()) <= max_words
            ]
        return out

    def task_block(self, item):
        block = f"Instruction:\n{item.inputs['instruction'].strip()}"
        if item.inputs.get("input", "").strip():
            block += f"\n\nInput:\n{item.inputs['input'].strip()}"
        return block

    def holistic_rubric(self):
        return self._rubric

    def criteria(self, item):
        out = []
        for k, (q, cats) in enumerate(
            zip(item.meta["decomposed_questions"], item.meta["question_labels"]), 1
        ):
            ctx = " ".join(f"({c}) {self.categories[c]}" for c in cats if c in self.categories)
            out.append(Criterion(id=f"q{k}", name=f"Q{k}", scale=self.question_scale, rubric=q, context=ctx))
        return out

    def batch_listing(self, criteria):
        return "\n".join(f"{c.name}. {c.rubric}" for c in criteria)

    def edited_context(self, criterion):
        return f"Context: {criterion.context} {self.edited_preamble}"

    def reference_holistic(self, item):
        answers = item.meta.get("gpt4_answers") or []
        return float(np.mean(answers)) if answers else None

    def reference_criterion(self, item, criterion_id):
        answers = item.meta.get("gpt4_answers") or []
        k = int(criterion_id[1:]) - 1
        return float(answers[k]) if k < len(answers) else None

    def _example_text(self, item: Item) -> str:
        words = self.example_max_words
        return (
            f"Instruction: {clip_words(item.inputs['question'], words)}\n"
            f"Response: {clip_words(item.inputs['response'], words)}"
        )

    def holistic_examples(self, pool, which, seed):
        # labels from GPT-4's decomposed answers (yes-ratio mapped onto 1-5): NOT human
        by_level: dict[str, list[Item]] = {}
        lo, hi = self.holistic_scale.scores[0], self.holistic_scale.scores[-1]
        for it in pool:
            r = self.reference_holistic(it)
            if r is not None:
                by_level.setdefault(self.holistic_scale.nearest_label(lo + (hi - lo) * r), []).append(it)
        return [
            Example(it.id, lab, self._example_text(it))
            for lab in _pick_levels(by_level, self.holistic_scale, which)
            for it in [_choose(by_level[lab], seed, f"holistic:{lab}")]
        ]

    def criterion_examples(self, pool, criterion, seed):
        # three solved questions of other instructions (GPT-4's answers): yes, no, yes
        out = []
        for want in (True, False, True):
            cands = [(it, k) for it in pool for k, a in enumerate(it.meta["gpt4_answers"]) if a is want]
            cands = [c for c in cands if c[0].id not in {e.item_id for e in out}]
            if not cands:
                continue
            it, k = min(cands, key=lambda c: _rank(seed, f"q:{len(out)}", f"{c[0].id}:{c[1]}"))
            q = it.meta["decomposed_questions"][k]
            out.append(Example(it.id, "yes" if want else "no", f"{self._example_text(it)}\nRequirement: {q}"))
        return out

    def render_examples(self, examples, name):
        if not examples:
            return ""
        shown = name if name == self.holistic_name else "Answer"  # other instructions' questions
        body = "\n\n".join(
            f"Example {k}:\n{ex.text}\n{shown}: {ex.label}" for k, ex in enumerate(examples, 1)
        )
        return f"Solved examples (from other instructions):\n{body}\n"


#: rubric tasks by dataset name (the loader's registry name)
TASKS: dict[str, type[RubricTask]] = {"asap": AsapTask, "infobench": InfoBenchTask}


def make_task(
    dataset: str,
    data_dir: str | Path,
    options: dict[str, Any],
    settings: dict[str, Any],
    *,
    human_holistic: str | None = None,
) -> RubricTask:
    """The rubric task of ``dataset``; ``human_holistic`` picks the human holistic label's definition
    (``RubricTask.HUMAN_HOLISTIC``; None: the task's default)."""
    if dataset not in TASKS:
        raise ValueError(f"rubric study: no rubric task for dataset {dataset!r}; valid: {sorted(TASKS)}")
    return TASKS[dataset](data_dir, options, settings, human_holistic)

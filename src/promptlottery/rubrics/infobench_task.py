"""The rubric task of InFoBench: overall instruction following and its decomposed questions."""

from __future__ import annotations

import numpy as np

from promptlottery.data.schema import Item
from promptlottery.prompts.scales import get_scale
from promptlottery.rubrics.task_base import (
    Criterion,
    Example,
    RubricTask,
    _choose,
    _pick_levels,
    _rank,
    clip_words,
    load_text,
)


class InfoBenchTask(RubricTask):
    """InFoBench: holistic = overall instruction following (1-5, our rubric); analytic = the
    decomposed yes/no questions. No human labels: GPT-4's answers are a labelled NOT-human reference."""

    aggregate = "ratio"
    human_note = "InFoBench ships no human (expert) labels here"
    reference_name = "GPT-4 (not human)"
    fixed_criteria = False
    response_noun = "response"
    holistic_name = "Rating"
    paper_dataset = "IF"
    paper_table = "table2"

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

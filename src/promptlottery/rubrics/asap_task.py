"""The rubric task of ASAP essays with ASAP++ traits (sets 1-6)."""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders.asap import ASAP_PP, HOLISTIC, RESOLVED
from promptlottery.data.schema import Item
from promptlottery.prompts.scales import get_scale
from promptlottery.rubrics.task_base import (
    STRATA,
    Criterion,
    Example,
    RubricTask,
    _choose,
    _pick_levels,
    clip_words,
    last_paragraphs,
    load_text,
    scale_bands,
)

#: the paper's example essays (Appendix B.1: "The examples chosen from ASAP++ are essay IDs 449, 1264,
#: 1616, 9125, 9430, 9497, 15558, 16520, and 16581"), per set as (high, medium, low): §4.1 "These
#: examples represent high, medium, and low scores across all analytic sub-criteria". The order is
#: read from their ASAP++ traits (every trait equal): set 1 1616 = 6, 1264 = 4, 449 = 1; set 4
#: 9497 = 3, 9430 = 2, 9125 = 0; set 6 16581 = 4, 15558 = 2, 16520 = 0.
PAPER_EXAMPLES = {
    1: ("asap-1616", "asap-1264", "asap-449"),
    4: ("asap-9497", "asap-9430", "asap-9125"),
    6: ("asap-16581", "asap-15558", "asap-16520"),
}


class AsapTask(RubricTask):
    """ASAP essays with ASAP++ traits (sets 1-6).

    **Human holistic label** (``rubric.human_holistic``). Issue 12 reads the rubric paper as: on
    sets 4 and 6 "the human holistic score is a single rater's (or the third, expert rater's)
    score as the paper states, not the mean of two raters". ASAP ships that score as
    ``domain1_score``, the resolved score, on the rater scale for sets 2-6; its adjudication rules
    (``asap/rubrics/set{4,6}_info_and_adjudication.txt``): set 4, "If Reader-1 Score and Reader-2
    Score are not adjacent or exact, then adjudication by a third reader is required" (in the data
    the adjacent cases take the higher score); set 6, "if there was a difference between scorer 1
    and scorer 2, the FINAL SCORE was always the higher of the two". So:

    - ``"resolved"`` (the paper's; the default where it is on the rater scale, sets 2-6):
      ``domain1_score``, one rater's score (the higher one when the two differ by one) or the
      third, expert reader's;
    - ``"rater_mean"`` (ours, the old definition; the default for set 1): the mean of the two
      raters' scores. On set 1 the resolved score is the two raters' sum (2-12), so the mean ranks
      the essays exactly as the resolved score does and every Kendall tau is the same.

    Agreement strata still read the two raters' scores.

    **Examples.** Sets 1, 4, 6: the paper's three essays (``PAPER_EXAMPLES``), kept out of the
    sample ("selected from ASAP++ and excluded from analysis", §4.1) and shown to the 3ex holistic
    and the edited analytic prompts; a missing one is an error naming it. Sets 2, 3, 5 (not in the
    paper): ours, a seeded essay on which both raters agree at the high / middle / low level. The
    Full condition (all levels) is ours on every set (the guides' anchor papers are not in the data).
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
        self.paper_dataset = str(self.essay_set) if self.essay_set in PAPER_EXAMPLES else None
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

    def reserved_ids(self) -> tuple[str, ...]:
        """Items kept out of the sample: the paper's example essays of this set (none elsewhere)."""
        return PAPER_EXAMPLES.get(self.essay_set, ())

    @property
    def examples_source(self) -> str:
        if self.essay_set in PAPER_EXAMPLES:
            return f"the paper's essays {', '.join(PAPER_EXAMPLES[self.essay_set])} (Appendix B.1)"
        return f"ours (set {self.essay_set} is not in the paper: seeded essays the raters agree on)"

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

    def instructions(self, role):
        """The paper's instructions block of this set (Appendix B.1; ``texts/prompts.yaml`` says which
        are the paper's words and which ours); "" for a set the paper does not cover."""
        return (load_text("prompts")["asap"]["instructions"].get(self.essay_set) or {}).get(role, "")

    def edited_context(self, criterion):
        # sets 1, 4, 6: the edited instructions block carries the paper's added context (B.1);
        # other sets: ours, the essay facts with the trait's context
        if self.instructions("edited"):
            return ""
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

    def _paper_examples(self, pool: list[Item]) -> list[Item]:
        by_id = {it.id: it for it in pool}
        missing = [i for i in PAPER_EXAMPLES[self.essay_set] if i not in by_id]
        if missing:
            raise ValueError(
                f"rubric study, ASAP set {self.essay_set}: the paper's example essays {missing} are not among "
                "the eligible items outside the sample (missing from the data, or without both raters and ASAP++ traits)"
            )
        return [by_id[i] for i in PAPER_EXAMPLES[self.essay_set]]

    def _holistic_label(self, item: Item) -> str:
        """A holistic example's score as the human holistic label defines it (set 1: the raters' mean,
        e.g. 4.5 for raters 4 and 5)."""
        v = float(self.human_holistic(item))
        return str(int(v)) if v.is_integer() else f"{v:g}"

    def holistic_examples(self, pool, which, seed):
        if which == "three" and self.essay_set in PAPER_EXAMPLES:
            return [self._example(it, self._holistic_label(it)) for it in self._paper_examples(pool)]
        # ours: representative essays on which both raters gave exactly this score
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
        for ex in self.holistic_examples(pool, "three", seed):  # the paper's essays on sets 1, 4, 6
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

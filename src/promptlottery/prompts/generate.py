"""Generated paraphrases: a chat backbone rewords your judge prompt; only checked candidates are kept.

    python -m run +paraphrase=generate paraphrase.template=PATH paraphrase.scale=likert_1_5 \\
        paraphrase.n=4 paraphrase.out=GROUP.yaml backbone=smollm2 dataset.path=... dataset.fields.*=...

The prompt-lottery paper generated four paraphrases per prompt and checked them for meaning and
syntax (sBERT similarity 0.93 at lexical overlap 0.38). Small chat models asked to reword a whole
template drop its placeholders or its answer format, so the model rewords only the template's
instruction sentences, one block at a time, and the placeholder lines, the answer-format sentence
and the layout are put back verbatim (:mod:`promptlottery.prompts.template_parts`). A rewording
that is empty, repeats its source or an earlier candidate, holds a template tag or names other
scale labels than its source fails the ``rewording`` check. A candidate is kept when it passes
that check and

(a) uses exactly the template variables of the original (Jinja2 sandbox, undeclared variables);
(b) keeps the scale: every scale label the original names is still named, and the labels the
    original's answer-format instruction (its text after the last variable) names are still named
    after the candidate's last variable;
(c) meets the thresholds of ``validate_prompts`` against the original: all-MiniLM-L6-v2 cosine
    similarity >= 0.85 (its per-paraphrase flag) of the whole template, and word-set Jaccard overlap
    <= 0.5 (its target) of the reworded instruction text with the original instruction text (the
    verbatim parts would count as overlap by construction; the whole-text Jaccard is recorded as
    ``overlap_full``);
(d) is not polarity-inverted: on the items with the most extreme human labels (``dataset.path``),
    its scores do not anti-correlate with the original's (Pearson r < 0 rejects; JudgeSense found
    inverted templates lowered apparent agreement by up to 37 points). Constant scores leave r
    undefined: the candidate is kept and the check says so. Without a dataset the check is skipped
    and says so. For a pairwise group (ours, adapted to preferences) the items are the clear-cut
    pairs (gold preference not a tie: half preferring response_b, half response_a), each judged in
    both orders, and the score of a pair is the order-averaged probability that response_a wins
    (tie as half): a rewording whose preferences anti-correlate with the original's on those pairs,
    i.e. that makes the judge prefer the other answer, is rejected. Averaging the two orders keeps a
    judge's position bias (which a single order's score mostly measures) out of the check.

A prompt group YAML (``paraphrase.group_file``) may replace the template: its P1 is reworded,
``paraphrase.part=system`` rewording its system prompt (FastChat's pair-v2 keeps its instructions
there; the user turn is the placeholder block) and keeping the user text verbatim.

The group YAML holds P1 (the original) and the first ``n`` passing candidates, each with its
checks and scores, ``reviewed: false`` and how many candidates were tried; the rejected ones are
listed under ``rejected``. Fewer than ``n`` passing candidates after ``max_candidates`` is an error
(the candidates are written next to ``out`` as ``<out>.rejected.yaml``), not a short group.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from promptlottery.prompts.groups import PromptGroup, Variant
from promptlottery.prompts.paraphrase_checks import (
    Candidate,
    ParaphraseOptions,
    polarity,
    reworded_candidate,
    text_checks,
)
from promptlottery.prompts.template_parts import INSTRUCTION, split_template

__all__ = [
    "candidate_extras",
    "candidate_record",
    "generate_group",
    "paraphrase_group",
    "rejection_reasons",
]

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ the loop


def generate_group(
    original: PromptGroup,
    opts: ParaphraseOptions,
    *,
    ask: Callable[[str, list[int]], list[str]],
    score: Callable[[PromptGroup], dict[str, np.ndarray]] | None,
    encode: Callable,
) -> tuple[list[Candidate], list[Candidate], int]:
    """``(passing, rejected, tried)``: candidates are drawn in rounds of ``opts.batch`` until ``opts.n``
    pass or ``opts.max_candidates`` were tried. ``ask(instruction_text, sample_indices)`` returns one
    raw rewording per index (it is asked once per instruction block of the template);
    ``score(group)`` each variant's scores on the extreme items (None: no dataset)."""
    text = part_text(original, opts.part)
    parts = split_template(
        text, original.scale, where=f"paraphrase.template={opts.template or opts.group_file}"
    )
    slots = [k for k, p in enumerate(parts) if p.kind == INSTRUCTION]
    instruction = "\n".join(parts[k].core for k in slots)
    kept: list[Candidate] = []
    rejected: list[Candidate] = []
    seen: dict[str, int] = {}  # candidate text -> the first candidate that had it
    tried = 0
    while len(kept) < opts.n and tried < opts.max_candidates:
        idx = list(range(tried, min(tried + opts.batch, opts.max_candidates)))
        tried += len(idx)
        replies = {k: ask(parts[k].core, idx) for k in slots}
        cands = [
            reworded_candidate(i, parts, {k: replies[k][j] for k in slots}, original.scale)
            for j, i in enumerate(idx)
        ]
        for c in cands:  # a repeated text is no new wording (small models repeat themselves)
            first = seen.setdefault(c.text, c.index)
            if first != c.index and c.checks["rewording"]["passed"]:
                c.checks["rewording"] = {"passed": False, "reason": f"the same text as candidate {first}"}
        text_checks(text, cands, original.scale, opts, encode, instruction=instruction)
        passing = [c for c in cands if c.passed]
        if passing and score is not None:
            group = PromptGroup(
                original.id, original.judge_family, original.scale, original.version,
                {"P1": original.variants["P1"], **{f"C{c.index}": _variant(original, f"C{c.index}", c.text, opts.part) for c in passing}},
                assistant_prefix=original.assistant_prefix,
            )  # fmt: skip
            scores = score(group)
            for c in passing:
                c.checks["polarity"] = polarity(scores["P1"], scores[f"C{c.index}"])
                c.scores = {
                    "extreme_items": [
                        None if not np.isfinite(v) else round(float(v), 4) for v in scores[f"C{c.index}"]
                    ]
                }
        for c in cands:
            c.checks.setdefault(
                "polarity",
                {"passed": True, "note": "skipped: no dataset.path (no human labels)"}
                if score is None
                else {"passed": False, "reason": "not run: an earlier check failed"},
            )
            (kept if c.passed else rejected).append(c)
        logger.info("paraphrase round tried=%d kept=%d", tried, len(kept))
    return kept, rejected, tried


def part_text(group: PromptGroup, part: str) -> str:
    v = group.variants["P1"]
    return (v.system if part == "system" else v.user) or ""


def _variant(original: PromptGroup, vid: str, text: str, part: str) -> Variant:
    """A candidate's variant: the reworded ``part`` with P1's other text verbatim."""
    p1 = original.variants["P1"]
    if part == "system":
        return Variant(vid, p1.user, system=text)
    return Variant(vid, text, system=p1.system)


def paraphrase_group(
    original: PromptGroup, out: Path, kept: list[Candidate], part: str = "user"
) -> PromptGroup:
    variants = {"P1": original.variants["P1"]}
    variants.update({f"P{k}": _variant(original, f"P{k}", c.text, part) for k, c in enumerate(kept, start=2)})
    return PromptGroup(
        out.stem, original.judge_family, original.scale, 1, variants, original.description,
        family_type=original.family_type, assistant_prefix=original.assistant_prefix,
    )  # fmt: skip


def candidate_record(c: Candidate) -> dict[str, Any]:
    return {"candidate": c.index, "user": c.text, "checks": c.checks, "scores": c.scores}


def candidate_extras(kept: list[Candidate]) -> dict[str, dict]:
    return {
        f"P{k}": {"candidate": c.index, "checks": c.checks, "scores": c.scores} for k, c in enumerate(kept, 2)
    }


def rejection_reasons(rejected: list[Candidate]) -> str:
    counts: dict[str, int] = {}
    for c in rejected:
        for name, chk in c.checks.items():
            if not chk.get("passed", False) and not str(chk.get("reason", "")).startswith("not "):
                counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"

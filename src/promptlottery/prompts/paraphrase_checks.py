"""The candidates of generated paraphrases and their checks: the rewording check and (a)-(d).

Split out of :mod:`promptlottery.prompts.generate` (the generation loop and the stage), which
re-exports every name here; that module's docstring states what each check requires and why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from jinja2 import TemplateSyntaxError

from promptlottery.prompts.group_text import text_variables
from promptlottery.prompts.groups import PromptError, PromptGroup, Variant
from promptlottery.prompts.scales import Scale
from promptlottery.prompts.template_parts import Part, assemble, labels_named, parse_rewording
from promptlottery.prompts.validation import DEFAULT_THRESHOLD, TARGET_MAX_OVERLAP, jaccard, variant_texts

__all__ = [
    "ParaphraseOptions",
    "Candidate",
    "check_same_variables",
    "check_scale",
    "polarity",
    "extreme_items",
    "text_checks",
    "reworded_candidate",
]


@dataclass
class ParaphraseOptions:
    """The ``paraphrase:`` node of ``conf/paraphrase/generate.yaml``."""

    template: str | None = None
    scale: str | None = None
    n: int = 4
    out: str | None = None
    max_candidates: int = 16
    batch: int = 8
    temperature: float = 0.8
    max_new_tokens: int = 120
    min_similarity: float = DEFAULT_THRESHOLD
    max_overlap: float = TARGET_MAX_OVERLAP
    polarity_items: int = 10
    family: str = "custom"
    #: a prompt-group YAML instead of ``template`` (its P1 is reworded; scale and family from the file)
    group_file: str | None = None
    #: which text of P1 is reworded: "user" (the template) or "system" (a system prompt such as
    #: FastChat pair-v2's, whose user turn holds only the placeholders); the other is kept verbatim
    part: str = "user"

    @classmethod
    def from_dict(cls, d: dict | None) -> ParaphraseOptions:
        d = dict(d or {})
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise PromptError(
                f"unknown paraphrase option(s) {unknown}; valid: {sorted(f.name for f in fields(cls))}"
            )
        o = cls(**d)
        for key in ("out",) if o.group_file else ("template", "scale", "out"):
            if not getattr(o, key):
                raise PromptError(f"paraphrase.{key} is required")
        if o.part not in ("user", "system"):
            raise PromptError(f"paraphrase.part={o.part!r}: must be 'user' or 'system'")
        if o.n < 1 or o.max_candidates < o.n:
            raise PromptError(
                f"need 1 <= paraphrase.n <= paraphrase.max_candidates, got n={o.n} max={o.max_candidates}"
            )
        return o


@dataclass
class Candidate:
    index: int
    text: str
    checks: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, Any] = field(default_factory=dict)
    #: the reworded instruction text (the parts the model rewrote, joined), for the overlap of (c)
    reworded: str | None = None

    @property
    def passed(self) -> bool:
        return all(c.get("passed", False) for c in self.checks.values())


# ------------------------------------------------------------------------------ checks (pure)


def _tail(text: str) -> str:
    """The text after the last ``{{ ... }}`` / ``{% ... %}`` tag (the answer-format instruction)."""
    ends = [m.end() for m in re.finditer(r"\}\}|%\}", text)]
    return text[ends[-1] :] if ends else ""


def check_same_variables(original: str, candidate: str) -> dict[str, Any]:
    """(a) the same template variables as the original."""
    try:
        got = text_variables(candidate)
    except TemplateSyntaxError as e:
        return {"passed": False, "reason": f"template syntax error at line {e.lineno}: {e.message}"}
    want = text_variables(original)
    if got != want:
        return {"passed": False, "missing": sorted(want - got), "extra": sorted(got - want)}
    return {"passed": True, "variables": sorted(want)}


def check_scale(original: str, candidate: str, scale: Scale) -> dict[str, Any]:
    """(b) every scale label the original names, and those of its answer-format line, are kept."""
    missing = sorted(labels_named(original, scale) - labels_named(candidate, scale))
    tail_missing = sorted(labels_named(_tail(original), scale) - labels_named(_tail(candidate), scale))
    return {
        "passed": not missing and not tail_missing,
        "missing_labels": missing,
        "missing_in_format": tail_missing,
    }


def polarity(original: np.ndarray, candidate: np.ndarray) -> dict[str, Any]:
    """(d) Pearson r of the candidate's scores with the original's; r < 0 = polarity-inverted.

    >>> polarity(np.array([1.0, 2, 4, 5]), np.array([5.0, 4, 2, 1]))["passed"]
    False
    """
    ok = np.isfinite(original) & np.isfinite(candidate)
    x, y = original[ok], candidate[ok]
    if ok.sum() < 3 or np.std(x) == 0 or np.std(y) == 0:
        return {
            "passed": True,
            "r": None,
            "n": int(ok.sum()),
            "note": "r undefined (constant scores): not checked",
        }
    r = float(np.corrcoef(x, y)[0, 1])
    return {"passed": r >= 0, "r": round(r, 4), "n": int(ok.sum())}


def extreme_items(items: list, k: int, criterion: str = "human") -> list:
    """The ``k`` items with the most extreme human labels: ceil(k/2) lowest, floor(k/2) highest."""
    labelled = sorted(
        (it for it in items if it.human_score(criterion) is not None),
        key=lambda it: it.human_score(criterion),
    )
    lo, hi = labelled[: (k + 1) // 2], labelled[(k + 1) // 2 :][-(k // 2) :] if k // 2 else []
    return lo + [it for it in hi if it not in lo]


# ------------------------------------------------------------------------------ the loop


def text_checks(
    original: str,
    cands: list[Candidate],
    scale: Scale,
    opts: ParaphraseOptions,
    encode: Callable,
    *,
    instruction: str | None = None,
) -> None:
    """Checks (a)-(c) on each candidate, in place; ``instruction``: the original's reworded parts
    (the overlap of (c) compares them with ``Candidate.reworded``; None: the whole texts)."""
    for c in cands:
        c.checks["variables"] = check_same_variables(original, c.text)
        c.checks["scale"] = check_scale(original, c.text, scale)
    ok = [
        c
        for c in cands
        if c.checks["variables"]["passed"] and c.checks.get("rewording", {}).get("passed", True)
    ]
    for c in cands:
        if c not in ok:
            c.checks["similarity"] = {"passed": False, "reason": "not measured: an earlier check failed"}
    if not ok:
        return
    group = PromptGroup(
        "g",
        "g",
        scale,
        0,
        {"P1": Variant("P1", original), **{f"C{c.index}": Variant(f"C{c.index}", c.text) for c in ok}},
    )
    texts = variant_texts(group)
    emb = np.asarray(encode(list(texts.values())), dtype=np.float64)
    emb /= np.clip(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12, None)
    sims = emb @ emb[0]
    for c, sim in zip(ok, sims[1:]):
        full = jaccard(texts[f"C{c.index}"], texts["P1"])
        lex = full if instruction is None or c.reworded is None else jaccard(c.reworded, instruction)
        c.checks["similarity"] = {
            "passed": bool(sim >= opts.min_similarity and lex <= opts.max_overlap),
            "similarity": round(float(sim), 4),
            "overlap": round(float(lex), 4),
            "overlap_full": round(float(full), 4),
            "thresholds": f"similarity >= {opts.min_similarity}, overlap <= {opts.max_overlap}"
            + (" (overlap of the reworded instruction text)" if instruction is not None else ""),
        }


def reworded_candidate(index: int, parts: list[Part], replies: dict[int, str], scale: Scale) -> Candidate:
    """Candidate ``index``: the template with each instruction part ``k`` replaced by the rewording
    parsed from ``replies[k]``, and the ``rewording`` check (every part's problem, if any)."""
    words, problems = {}, []
    for n, (k, reply) in enumerate(replies.items(), start=1):
        words[k], problem = parse_rewording(reply, parts[k].core, scale)
        if problem:
            problems.append(f"instruction {n} ({parts[k].core[:40]!r}...): {problem}")
    check = {"passed": not problems, "parts": len(replies)} | (
        {"reason": "; ".join(problems)} if problems else {}
    )
    cand = Candidate(index, assemble(parts, words), reworded="\n".join(words.values()))
    cand.checks["rewording"] = check
    return cand

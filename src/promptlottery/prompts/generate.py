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
    and says so.

The group YAML holds P1 (the original) and the first ``n`` passing candidates, each with its
checks and scores, ``reviewed: false`` and how many candidates were tried; the rejected ones are
listed under ``rejected``. Fewer than ``n`` passing candidates after ``max_candidates`` is an error
(the candidates are written next to ``out`` as ``<out>.rejected.yaml``), not a short group.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
from jinja2 import TemplateSyntaxError

from promptlottery.prompts.groups import PromptError, PromptGroup, Variant, dump_group, text_variables
from promptlottery.prompts.scales import Scale
from promptlottery.prompts.template_parts import (
    INSTRUCTION,
    Part,
    assemble,
    labels_named,
    parse_rewording,
    rewording_prompt,
    split_template,
)
from promptlottery.prompts.validation import DEFAULT_THRESHOLD, TARGET_MAX_OVERLAP, jaccard, variant_texts

logger = logging.getLogger(__name__)


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

    @classmethod
    def from_dict(cls, d: dict | None) -> ParaphraseOptions:
        d = dict(d or {})
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise PromptError(
                f"unknown paraphrase option(s) {unknown}; valid: {sorted(f.name for f in fields(cls))}"
            )
        o = cls(**d)
        for key in ("template", "scale", "out"):
            if not getattr(o, key):
                raise PromptError(f"paraphrase.{key} is required")
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
    text = original.variants["P1"].user
    parts = split_template(text, original.scale, where=f"paraphrase.template={opts.template}")
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
                {"P1": original.variants["P1"], **{f"C{c.index}": Variant(f"C{c.index}", c.text) for c in passing}},
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


# ------------------------------------------------------------------------------ the stage


def run(cfg, output_dir: str | Path, *, backend=None, encode: Callable | None = None) -> dict[str, Any]:
    """Stage entry point (``stage: paraphrase``): generate, check, write the group YAML."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from promptlottery.backends.base import Decoding
    from promptlottery.judging.cache import CallCache
    from promptlottery.prompts.groups import check_variables, group_from_template
    from promptlottery.stages import StageJob, run_stage

    opts = ParaphraseOptions.from_dict(OmegaConf.to_container(cfg.paraphrase, resolve=True))
    original = group_from_template(opts.template, opts.scale, judge_family=opts.family)
    # a template with nothing to reword fails here, before a model is loaded
    split_template(original.variants["P1"].user, original.scale, where=f"paraphrase.template={opts.template}")
    if cfg.backbone.prompt_format != "chat":
        raise PromptError(f"paraphrase generation needs a chat backbone; {cfg.backbone.name} is a base model")
    items = _extreme_items(cfg, opts, original)
    if items is not None:
        check_variables(original, set().union(*(it.inputs for it in items)), where=opts.template)
    backend = backend if backend is not None else instantiate(cfg.backbone.backend)
    cache = CallCache(Path(cfg.paths.cache_dir) / "calls.sqlite")
    gen = Decoding(
        temperature=opts.temperature, max_new_tokens=opts.max_new_tokens, seed=cfg.seed, stop_at_label=False
    )
    judge_decoding = Decoding(**OmegaConf.to_container(cfg.decoding, resolve=True))
    if encode is None:
        from promptlottery.embeddings import encode
    job = StageJob(
        "paraphrase",
        output_dir,
        config=OmegaConf.to_container(cfg, resolve=True),
        root=cfg.paths.root_dir,
        fields={"stage": "paraphrase"},
    )

    def body(job: StageJob) -> dict[str, Any]:
        passing, rejected, tried = generate_group(
            original,
            opts,
            ask=lambda text, idx: _ask(backend, cache, gen, text, idx),
            score=None if items is None else lambda g: _score(cfg, backend, cache, judge_decoding, g, items),
            encode=encode,
        )
        out = Path(opts.out)
        kept, spare = passing[: opts.n], passing[opts.n :]
        meta = {
            "reviewed": False,
            "generated_by": {"backbone": cfg.backbone.name, **backend.identity()},
            "candidates_tried": tried,
            "checks": "rewording (only the instruction text reworded; placeholder lines, answer format and "
            f"layout verbatim), (a) variables, (b) scale labels, (c) similarity >= {opts.min_similarity} "
            f"and overlap of the reworded text <= {opts.max_overlap} (validate_prompts), (d) polarity on "
            f"{len(items or [])} extreme items",
            "spare": [_record(c) for c in spare],
            "rejected": [_record(c) for c in rejected],
        }
        record = dict(candidates_tried=tried, passed=len(passing), needed=opts.n, out=str(out))
        if len(kept) < opts.n:
            path = dump_group(
                _group(original, out, kept), out.with_suffix(".rejected.yaml"), _extras(kept), **meta
            )
            reasons = _reasons(rejected)
            job.write("failed", **record)
            raise PromptError(
                f"paraphrase.template={opts.template}: only {len(passing)} of {tried} candidates passed the checks, paraphrase.n={opts.n} needed "
                f"(failed: {reasons}); every candidate and its checks are in {path}; raise paraphrase.max_candidates "
                "or lower paraphrase.n"
            )
        out.parent.mkdir(parents=True, exist_ok=True)
        dump_group(_group(original, out, kept), out, _extras(kept), **meta)
        msg = f"paraphrase out={out} kept={len(kept)} tried={tried} passed={len(passing)} rejected={len(rejected)}"
        print(msg)
        job.note(out=out, kept=len(kept), tried=tried, passed=len(passing), rejected=len(rejected))
        return job.write("ok", **record)

    return run_stage(job, body, name="paraphrase")


def _extreme_items(cfg, opts: ParaphraseOptions, original: PromptGroup):
    """The items of check (d), or None when no dataset.path is given."""
    if cfg.dataset.name != "table" or not cfg.dataset.get("path"):
        logger.warning("paraphrase check (d) skipped: no dataset.path with human labels")
        return None
    from omegaconf import OmegaConf

    from promptlottery.data import load_items

    options = OmegaConf.to_container(cfg.dataset.options, resolve=True)
    items = extreme_items(
        load_items(cfg.dataset.name, data_dir=cfg.paths.data_dir, **options), opts.polarity_items
    )
    if len(items) < 3:
        raise PromptError(
            f"paraphrase check (d) needs >= 3 items with a human label (dataset.fields.human) in {cfg.dataset.path}, "
            f"found {len(items)}"
        )
    return items


def _ask(backend, cache, decoding, text: str, indices: list[int]) -> list[str]:
    from promptlottery.backends.base import JudgeRequest
    from promptlottery.judging.cache import cache_key
    from promptlottery.judging.runner import CallStats, run_calls

    messages = [{"role": "user", "content": rewording_prompt(text)}]
    ident, dec = backend.identity(), decoding.as_dict()
    reqs = [
        JudgeRequest(
            key=cache_key(
                {
                    "task": "paraphrase",
                    "backend": ident,
                    "messages": messages,
                    "decoding": dec,
                    "sample_index": i,
                }
            ),
            labels=(),
            messages=messages,
            sample_index=i,
        )
        for i in indices
    ]
    answers = run_calls(reqs, backend, cache, decoding, stats=CallStats(), desc="paraphrase candidates")
    return [answers[r.key].raw_text for r in reqs]


def _score(cfg, backend, cache, decoding, group: PromptGroup, items: list) -> dict[str, np.ndarray]:
    from promptlottery.judging.runner import Condition, judge

    out = {}
    for vid in group.variants:
        cond = Condition(
            dataset=cfg.dataset.name, judge_family=group.judge_family, prompt_group=group.id, variant=vid,
            backbone=cfg.backbone.name, criterion="human", prompt_format="chat",
        )  # fmt: skip
        df, _ = judge(items, cond, group, backend, cache, decoding)
        out[vid] = df.set_index("item_id").loc[[it.id for it in items], "score"].to_numpy(dtype=float)
    return out


def _group(original: PromptGroup, out: Path, kept: list[Candidate]) -> PromptGroup:
    variants = {"P1": original.variants["P1"]}
    variants.update({f"P{k}": Variant(f"P{k}", c.text) for k, c in enumerate(kept, start=2)})
    return PromptGroup(out.stem, original.judge_family, original.scale, 1, variants, original.description)


def _record(c: Candidate) -> dict[str, Any]:
    return {"candidate": c.index, "user": c.text, "checks": c.checks, "scores": c.scores}


def _extras(kept: list[Candidate]) -> dict[str, dict]:
    return {
        f"P{k}": {"candidate": c.index, "checks": c.checks, "scores": c.scores} for k, c in enumerate(kept, 2)
    }


def _reasons(rejected: list[Candidate]) -> str:
    counts: dict[str, int] = {}
    for c in rejected:
        for name, chk in c.checks.items():
            if not chk.get("passed", False) and not str(chk.get("reason", "")).startswith("not "):
                counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"

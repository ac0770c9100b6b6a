"""The ``paraphrase`` stage: a chat backbone rewords a judge prompt and only checked candidates are
kept (:mod:`~promptlottery.prompts.generate`); the candidates are scored on the extreme items by the
judge runner, through the call loop and its cache.

    python -m run +paraphrase=generate paraphrase.template=PATH paraphrase.scale=likert_1_5 \\
        paraphrase.n=4 paraphrase.out=GROUP.yaml backbone=smollm2 dataset.path=... dataset.fields.*=...
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from promptlottery.prompts.generate import (
    ParaphraseOptions,
    candidate_extras,
    candidate_record,
    generate_group,
    paraphrase_group,
    part_text,
    rejection_reasons,
)
from promptlottery.prompts.group_text import dump_group
from promptlottery.prompts.groups import PromptError, PromptGroup
from promptlottery.prompts.paraphrase_checks import extreme_items
from promptlottery.prompts.template_parts import rewording_prompt, split_template
from promptlottery.tracking.job import StageJob

logger = logging.getLogger(__name__)


def paraphrase(cfg, job: StageJob, *, backend=None, encode: Callable | None = None) -> dict[str, Any]:
    """Stage ``paraphrase``: generate, check, write the group YAML."""
    from omegaconf import OmegaConf

    from promptlottery.backends.base import Decoding
    from promptlottery.calls.compose import build_judge_runtime
    from promptlottery.prompts.group_text import check_variables
    from promptlottery.prompts.groups import group_from_template

    job.fields["stage"] = "paraphrase"
    opts = ParaphraseOptions.from_dict(OmegaConf.to_container(cfg.paraphrase, resolve=True))
    source = opts.template or opts.group_file
    if opts.group_file:
        from promptlottery.prompts.groups import load_group_file

        original = load_group_file(opts.group_file)
    else:
        original = group_from_template(opts.template, opts.scale, judge_family=opts.family)
    if opts.part == "system" and not original.variants["P1"].system:
        raise PromptError(f"paraphrase.part=system but P1 of {source} has no system prompt")
    # a template with nothing to reword fails here, before a model is loaded
    split_template(part_text(original, opts.part), original.scale, where=f"paraphrase.template={source}")
    if cfg.backbone.prompt_format != "chat":
        raise PromptError(f"paraphrase generation needs a chat backbone; {cfg.backbone.name} is a base model")
    items = _extreme_items(cfg, opts, original)
    if items is not None:
        check_variables(original, set().union(*(it.inputs for it in items)), where=source)
    backend, cache, judge_decoding = build_judge_runtime(cfg, backend=backend)
    gen = Decoding(
        temperature=opts.temperature, max_new_tokens=opts.max_new_tokens, seed=cfg.seed, stop_at_label=False
    )
    if encode is None:
        from promptlottery.embeddings import encode
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
        "spare": [candidate_record(c) for c in spare],
        "rejected": [candidate_record(c) for c in rejected],
    }
    record = dict(candidates_tried=tried, passed=len(passing), needed=opts.n, out=str(out))
    if len(kept) < opts.n:
        path = dump_group(
            paraphrase_group(original, out, kept, opts.part),
            out.with_suffix(".rejected.yaml"),
            candidate_extras(kept),
            **meta,
        )
        reasons = rejection_reasons(rejected)
        job.fields.update(record)  # the wrapper's failed record carries the counts
        raise PromptError(
            f"paraphrase.template={source}: only {len(passing)} of {tried} candidates passed the checks, paraphrase.n={opts.n} needed "
            f"(failed: {reasons}); every candidate and its checks are in {path}; raise paraphrase.max_candidates "
            "or lower paraphrase.n"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    dump_group(paraphrase_group(original, out, kept, opts.part), out, candidate_extras(kept), **meta)
    msg = (
        f"paraphrase out={out} kept={len(kept)} tried={tried} passed={len(passing)} rejected={len(rejected)}"
    )
    print(msg)
    job.note(out=out, kept=len(kept), tried=tried, passed=len(passing), rejected=len(rejected))
    return job.write("ok", **record)


def _extreme_items(cfg, opts: ParaphraseOptions, original: PromptGroup):
    """The items of check (d): a table's (``dataset.path``) or a named dataset's (``dataset=stsb
    dataset.options.split=test``: items other than the study's); None for a table without a path."""
    if cfg.dataset.name == "table" and not cfg.dataset.get("path"):
        logger.warning("paraphrase check (d) skipped: no dataset.path with human labels")
        return None
    from omegaconf import OmegaConf

    from promptlottery.data import load_items

    options = OmegaConf.to_container(cfg.dataset.options, resolve=True)
    loaded = load_items(cfg.dataset.name, data_dir=cfg.paths.data_dir, **options)
    items = extreme_items(loaded, opts.polarity_items, _criterion(cfg, loaded))
    if len(items) < 3:
        raise PromptError(
            f"paraphrase check (d) needs >= 3 items with a human label (dataset.fields.human) in "
            f"{cfg.dataset.get('path') or 'dataset=' + cfg.dataset.name}, "
            f"found {len(items)}"
        )
    return items


def _criterion(cfg, items: list) -> str:
    """The human label of check (d): a table's ``human``; a named dataset's one criterion, or, with
    several, ``judge.criterion``."""
    if cfg.dataset.name == "table":
        return "human"
    names = sorted(set().union(*(it.human for it in items))) if items else []
    if len(names) == 1:
        return names[0]
    chosen = cfg.get("judge", {}).get("criterion")
    if chosen not in names:
        raise PromptError(
            f"paraphrase check (d) on dataset={cfg.dataset.name}: its items have the human criteria {names}; "
            f"name one with judge.criterion=... (got {chosen!r})"
        )
    return chosen


def _ask(backend, cache, decoding, text: str, indices: list[int]) -> list[str]:
    from promptlottery.calls.cache import make_request
    from promptlottery.calls.loop import CallStats, run_calls

    messages = [{"role": "user", "content": rewording_prompt(text)}]
    ident = backend.identity()
    reqs = [make_request("paraphrase", ident, decoding, messages=messages, sample_index=i) for i in indices]
    answers = run_calls(reqs, backend, cache, decoding, stats=CallStats(), desc="paraphrase candidates")
    return [answers[r.key].raw_text for r in reqs]


def _score(cfg, backend, cache, decoding, group: PromptGroup, items: list) -> dict[str, np.ndarray]:
    """Each variant's score per item; a pairwise group: both orders judged, the score of a pair the
    mean of its two orders' p(response_a wins) (judging.runner scores pairs in the pair's terms)."""
    from promptlottery.judging.runner import Condition, judge
    from promptlottery.modes import mode_of_scale

    out = {}
    mode = mode_of_scale(group.scale).name
    for vid in group.variants:
        cond = Condition(
            dataset=cfg.dataset.name, judge_family=group.judge_family, prompt_group=group.id, variant=vid,
            backbone=cfg.backbone.name, criterion="human", prompt_format="chat", judge_mode=mode,
        )  # fmt: skip
        df, _ = judge(items, cond, group, backend, cache, decoding)
        per_item = df.groupby("item_id")["score"].mean()  # pointwise: one row per item
        out[vid] = per_item.loc[[it.id for it in items]].to_numpy(dtype=float)
    return out

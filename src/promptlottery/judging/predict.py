"""The ``predict`` stage: candidate systems answer a dataset's questions, so judges have real
responses to judge and the systems a real ranking (SQuAD v2 ships references, not responses).

Answers go through the same backends and the same call cache as judgments; the stage writes one
file ``item_id, system, response`` that the dataset loader reads (``options.predictions``).
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import pandas as pd

from promptlottery.atomic import atomic_write
from promptlottery.backends.base import Backend, Decoding, JudgeRequest
from promptlottery.calls.cache import CallCache, make_request
from promptlottery.calls.loop import CallStats, run_calls
from promptlottery.data.schema import Item
from promptlottery.prompts.groups import render

logger = logging.getLogger(__name__)


def answer_requests(
    items: list[Item],
    system: str,
    backend: Backend,
    template: str,
    *,
    prompt_format: str,
    examples: list[Item],
    decoding: Decoding,
) -> list[JudgeRequest]:
    """One generation request per item (no scale labels: only the text is wanted)."""
    reqs = []
    for it in items:
        body = render(template, it.inputs, where=f"predict system {system}, item {it.id}")
        if prompt_format == "chat":
            messages, prompt = [{"role": "user", "content": body}], None
        else:
            shots = [
                f"{render(template, ex.inputs, where=f'example {ex.id}')} {first_answer(ex)}"
                for ex in examples
            ]
            messages, prompt = None, "\n\n".join([*shots, body])
        reqs.append(
            make_request(
                "predict",
                backend.identity(),
                decoding,
                messages=messages,
                prompt=prompt,
                parts={"template": template},
            )
        )
    return reqs


def first_answer(item: Item) -> str:
    answers = item.meta.get("answers") or []
    return answers[0] if answers else "unanswerable"


def clean_answer(text: str) -> str:
    """The first non-empty line, stripped: small models keep talking after the answer."""
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def predict(
    items: list[Item],
    systems: dict[str, dict[str, Any]],
    cache: CallCache,
    decoding: Decoding,
    *,
    seed: int = 0,
    pool: list[Item] = (),
) -> tuple[pd.DataFrame, CallStats]:
    """Answer every item with every system. ``systems[name]`` = {backend, template, prompt_format, n_shot}."""
    stats = CallStats()
    rows = []
    for name, spec in systems.items():
        backend = spec["backend"]
        n_shot = int(spec.get("n_shot", 0))
        taken = {it.id for it in items}
        candidates = [it for it in pool if it.id not in taken and it.meta.get("answers")]
        examples = random.Random(seed + 7).sample(candidates, n_shot) if n_shot else []
        reqs = answer_requests(
            items,
            name,
            backend,
            spec["template"],
            prompt_format=spec.get("prompt_format", "chat"),
            examples=examples,
            decoding=decoding,
        )
        answers = run_calls(reqs, backend, cache, decoding, stats=stats, desc=f"predict/{name}")
        rows += [
            {"item_id": it.id, "system": name, "response": clean_answer(answers[r.key].raw_text)}
            for it, r in zip(items, reqs)
        ]
    return pd.DataFrame(rows), stats


def ensure_predictions(
    predict_cfg, *, dataset: str, data_dir: str, cache: CallCache, decoding: Decoding
) -> Path:
    """Write (or refresh from the cache) the predictions file the dataset loader will read."""
    from omegaconf import OmegaConf

    from promptlottery.calls.compose import build_backend
    from promptlottery.data import load_items

    out = Path(predict_cfg.output)
    base_items = load_items(dataset, data_dir=data_dir)
    items = sampled_questions(base_items, predict_cfg)
    systems = {}
    for name, spec in predict_cfg.systems.items():
        systems[name] = {
            "backend": build_backend(spec.backbone.backend),  # the one place a backend is built
            "template": spec.template_chat
            if spec.backbone.prompt_format == "chat"
            else spec.template_completion,
            "prompt_format": spec.backbone.prompt_format,
            "n_shot": spec.backbone.n_shot,
        }
    gen = Decoding(**{**OmegaConf.to_container(predict_cfg.decoding, resolve=True), "seed": decoding.seed})
    df, stats = predict(
        items,
        systems,
        cache,
        gen,
        seed=predict_cfg.seed,
        pool=base_items,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    df.to_parquet(tmp, index=False)
    tmp.replace(out)
    logger.info(
        "predictions file=%s systems=%d items=%d cache_misses=%d",
        out,
        len(systems),
        len(items),
        stats.cache_misses,
    )
    return out


def sampled_questions(base_items: list, predict_cfg) -> list:
    """The questions the candidate systems answer: sampled as the judge stage samples them
    (``sample_by=group``, a question its own group), so every judged question has its answers."""
    from promptlottery.data.registry import sample_items

    return sample_items(base_items, limit=predict_cfg.limit, seed=predict_cfg.seed, by="group")


def placeholder_predictions(predict_cfg, *, dataset: str, data_dir: str, output_dir) -> Path:
    """For dry runs: the sampled questions x systems with empty answers, so calls can be counted
    without generating anything (a finished predictions file is used when it exists)."""
    from promptlottery.data import load_items

    if Path(predict_cfg.output).exists():
        return Path(predict_cfg.output)
    items = sampled_questions(load_items(dataset, data_dir=data_dir), predict_cfg)
    df = pd.DataFrame(
        [{"item_id": it.id, "system": s, "response": ""} for s in predict_cfg.systems for it in items]
    )
    out = Path(output_dir) / "dry_run_predictions.parquet"
    return atomic_write(out, lambda tmp: df.to_parquet(tmp, index=False))  # whole or not at all

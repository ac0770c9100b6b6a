"""MT-Bench model ranking by pairwise verdicts: every model's answer against one fixed baseline answer.

From the MT-Bench files of :mod:`promptlottery.data.loaders.mt_bench` (first turn of the general
questions): one pair per (question, model), ``response_a`` = the model's answer, ``response_b`` =
the baseline model's answer to the same question, ``meta["system_1"]`` = the model,
``meta["system_2"]`` = the baseline, ``meta["group"]`` = ``meta["cluster"]`` = the question (so
``dataset.sample_by=group`` keeps every model's pair of each sampled question). No human labels.

Why a fixed baseline and not round robin: with k models a baseline needs k - 1 pairs per question
and round robin k(k - 1)/2 (8 models: 7 against 28), each judged in two orders; FastChat's own
``pairwise-baseline`` mode does this with gpt-3.5-turbo as the baseline (Zheng et al., 2023,
Sec. 3.1 "pairwise comparison ... against a baseline"), so that is the default baseline here. The
win rate against the baseline (a tie as half) ranks the models directly, and every model is linked
to the others through the baseline, so Bradley-Terry strengths are still identified.
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders.mt_bench import load_mt_bench
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

DEFAULT_BASELINE = "gpt-3.5-turbo"


@register_loader("mt_bench_pairs")
def load_mt_bench_pairs(
    data_dir: Path,
    categories: list[str] | None = None,
    systems: list[str] | None = None,
    baseline: str = DEFAULT_BASELINE,
) -> list[Item]:
    wanted = None if systems is None else sorted(set(systems) | {baseline})
    answers = load_mt_bench(data_dir, categories=categories, systems=wanted)
    base = {it.meta["question_id"]: it for it in answers if it.system == baseline}
    if not base:
        raise DatasetError(f"mt_bench_pairs: dataset.options.baseline={baseline!r} has no answers")
    items = []
    for it in answers:
        qid = it.meta["question_id"]
        if it.system == baseline or qid not in base:
            continue
        items.append(
            Item(
                id=f"mt_bench_pairs-{qid}-{it.system}-vs-{baseline}",
                dataset="mt_bench_pairs",
                inputs={
                    "question": it.inputs["question"],
                    "response_a": it.inputs["response"],
                    "response_b": base[qid].inputs["response"],
                },
                meta={
                    "group": str(qid),
                    "cluster": f"mt_bench-q{qid}",
                    "question_id": qid,
                    "system_1": it.system,
                    "system_2": baseline,
                },
            )
        )
    return items

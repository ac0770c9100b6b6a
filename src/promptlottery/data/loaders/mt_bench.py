"""MT-Bench (Zheng et al., NeurIPS 2023 Datasets and Benchmarks): 80 two-turn questions in 8
categories and 31 models' pre-generated answers (FastChat's ``llm_judge`` data).

One item per (question, model): the first turn's question and that model's first-turn answer, with
``system`` = the model and ``meta["group"]`` = the question, so that ``dataset.sample_by=group`` keeps
every model's answer to each sampled question (what ranking the models needs). No human labels: the
expert votes (``mt_bench_human_judgments``) are not in ../shared/data, so only rank stability across
prompt variants is measured. ``categories`` defaults to the five that FastChat grades with its general
prompt (the others need a reference answer); ``systems`` picks a subset of the models.
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import field, iter_jsonl, require_file
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

GENERAL_CATEGORIES = ("writing", "roleplay", "extraction", "stem", "humanities")


@register_loader("mt_bench")
def load_mt_bench(
    data_dir: Path, categories: list[str] | None = None, systems: list[str] | None = None
) -> list[Item]:
    root = Path(data_dir) / "mt_bench"
    categories = list(categories or GENERAL_CATEGORIES)
    questions = {}
    for lineno, row in iter_jsonl(root / "question.jsonl", "mt_bench"):
        where = f"{root / 'question.jsonl'}:{lineno}"
        if field(row, "category", where) in categories:
            turns = field(row, "turns", where, list)
            questions[field(row, "question_id", where, int)] = turns[0]
    if not questions:
        raise DatasetError(f"mt_bench: no question in categories {categories}")
    answer_dir = root / "model_answer"
    available = sorted(p.stem for p in answer_dir.glob("*.jsonl"))
    unknown = sorted(set(systems or []) - set(available))
    if unknown:
        raise DatasetError(f"mt_bench: dataset.options.systems {unknown} have no answers in {answer_dir}")
    items = []
    for model in systems or available:
        path = require_file(answer_dir / f"{model}.jsonl", "mt_bench")
        for lineno, row in iter_jsonl(path, "mt_bench"):
            where = f"{path}:{lineno}"
            qid = field(row, "question_id", where, int)
            if qid not in questions:
                continue
            choices = field(row, "choices", where, list)
            answer = field(choices[0], "turns", where, list)[0] if choices else ""
            items.append(
                Item(
                    id=f"mt_bench-{qid}-{model}",
                    dataset="mt_bench",
                    system=model,
                    inputs={"question": questions[qid], "response": answer},
                    meta={"group": str(qid), "question_id": qid, "line": lineno},
                )
            )
    return sorted(items, key=lambda it: (it.meta["question_id"], it.system))

"""InFoBench (Qin et al., 2024): 500 instructions with 2250 decomposed yes/no requirement questions.

``infobench/infobench_instructions_500.jsonl``: id, subset (Easy_set 252 / Hard_set 248),
category, instruction, input, decomposed_questions, question_label. There are NO human labels here
(the expert annotations were not found): ``human={}``, ``human_kind="none"``. The GPT-4 response to
each instruction and GPT-4's yes/no answer to each decomposed question, from
``NOT_HUMAN_gpt4_outputs_with_gpt4_decomposed_eval.jsonl``, are ``response`` (``system="gpt-4"``)
and ``meta["gpt4_answers"]`` (model output, NOT human; joined by id).

``level="instruction"`` (default): one item per instruction; ``level="question"``: one item per
decomposed question (id ``<instruction id>::q<k>``, ``meta["gpt4_answer"]``). Inputs: ``question``
= the instruction with its input appended (blank line between), ``instruction``, ``input``,
``response``, ``decomposed_questions`` (numbered, one per line) and, per question,
``decomposed_question``. ``with_gpt4_outputs=False`` skips the GPT-4 file (``response`` = "").
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import field, iter_jsonl
from promptlottery.data.loaders.pandalm import join_instruction
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

NOT_HUMAN_FILE = "NOT_HUMAN_gpt4_outputs_with_gpt4_decomposed_eval.jsonl"


def _gpt4(path: Path, questions: dict[str, list[str]]) -> dict[str, tuple[str, list[bool]]]:
    out = {}
    for lineno, row in iter_jsonl(path, "infobench"):
        where = f"{path}:{lineno}"
        iid = field(row, "id", where)
        answers = field(row, "eval", where, list)
        if iid in questions and len(answers) != len(questions[iid]):
            raise DatasetError(f"{where}: {len(answers)} eval answers for {len(questions[iid])} questions")
        if not all(isinstance(a, bool) for a in answers):
            raise DatasetError(f"{where}: eval answers must be true/false, got {answers!r}")
        out[iid] = (field(row, "output", where), answers)
    return out


@register_loader("infobench")
def load_infobench(
    data_dir: Path, *, level: str = "instruction", with_gpt4_outputs: bool = True
) -> list[Item]:
    if level not in ("instruction", "question"):
        raise DatasetError(f"infobench: unknown level {level!r}; valid: 'instruction', 'question'")
    folder = Path(data_dir) / "infobench"
    path = folder / "infobench_instructions_500.jsonl"
    rows = []
    for lineno, row in iter_jsonl(path, "infobench"):
        where = f"{path}:{lineno}"
        qs = field(row, "decomposed_questions", where, list)
        labels = field(row, "question_label", where, list)
        if not qs or not all(isinstance(q, str) for q in qs):
            raise DatasetError(f"{where}: decomposed_questions must be a non-empty list of strings")
        if len(labels) != len(qs):
            raise DatasetError(f"{where}: {len(labels)} question_label entries for {len(qs)} questions")
        rows.append((where, row))
    questions = {field(r, "id", w): r["decomposed_questions"] for w, r in rows}
    gpt4 = _gpt4(folder / NOT_HUMAN_FILE, questions) if with_gpt4_outputs else {}
    items = []
    for where, row in rows:
        iid = field(row, "id", where)
        instruction = field(row, "instruction", where)
        inp = field(row, "input", where, (str, type(None))) or ""
        qs = row["decomposed_questions"]
        if with_gpt4_outputs and iid not in gpt4:
            raise DatasetError(f"{where}: instruction {iid!r} has no GPT-4 output in {NOT_HUMAN_FILE}")
        response, answers = gpt4.get(iid, ("", []))
        inputs = {
            "question": join_instruction(instruction, inp),
            "instruction": instruction,
            "input": inp,
            "response": response,
            "decomposed_questions": "\n".join(f"{k}. {q}" for k, q in enumerate(qs, start=1)),
        }
        meta = {
            "subset": field(row, "subset", where),
            "category": field(row, "category", where),
            "question_labels": row["question_label"],
            "decomposed_questions": qs,
            "gpt4_answers": answers,
            "labels_source": "GPT-4 (NOT human)",
        }
        system = "gpt-4" if with_gpt4_outputs else None
        if level == "instruction":
            items.append(Item(id=iid, dataset="infobench", system=system, inputs=inputs, meta=meta))
            continue
        for k, q in enumerate(qs):
            items.append(
                Item(
                    id=f"{iid}::q{k}",
                    dataset="infobench",
                    system=system,
                    inputs={**inputs, "decomposed_question": q},
                    meta={
                        **meta,
                        "question_index": k,
                        "question_label": row["question_label"][k],
                        "gpt4_answer": answers[k] if answers else None,
                    },
                )
            )
    return items

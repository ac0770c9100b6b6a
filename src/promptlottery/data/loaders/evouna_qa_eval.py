"""EVOUNA (Wang et al., NeurIPS 2023 D&B): open-QA answers of 5 systems judged correct/incorrect.

``subset="NQ"`` reads ``evouna_qa_eval/NQ.json`` (3610 questions), ``subset="TQ"`` ``TQ.json``
(2000). One item per (question, system) that has a human judgment: systems fid (DPR+FiD), gpt35,
chatgpt, gpt4, newbing. ``human["correct"]`` = 1 / 0 from ``judge_<system>`` (one label,
``human_kind="single"``). Judgments that are null (NQ) or the string "nan" (TQ: 15 questions) were
not made and yield no item: NQ gives 15,434 items, TQ 9,925.

``reference`` = the "/"-separated golden answers joined with " | "; ``response`` = the system's
answer ("" for the few judged answers that are empty/null); ``meta["improper"]`` = the question was
flagged inappropriate.
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import field, load_json_list
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

SYSTEMS = ("fid", "gpt35", "chatgpt", "gpt4", "newbing")
SUBSETS = ("NQ", "TQ")


@register_loader("evouna_qa_eval")
def load_evouna(data_dir: Path, *, subset: str = "NQ") -> list[Item]:
    if subset not in SUBSETS:
        raise DatasetError(f"evouna_qa_eval: unknown subset {subset!r}; valid: {list(SUBSETS)}")
    path = Path(data_dir) / "evouna_qa_eval" / f"{subset}.json"
    items = []
    for i, row in enumerate(load_json_list(path, "evouna_qa_eval")):
        where = f"{path}[{i}]"
        question = field(row, "question", where)
        gold = field(row, "golden_answer", where, (str, type(None)))
        improper = field(row, "improper", where, bool)
        for system in SYSTEMS:
            judge = field(row, f"judge_{system}", where, None)
            if judge is None or judge == "nan":
                continue
            if not isinstance(judge, bool):
                raise DatasetError(
                    f"{where}: judge_{system} is {judge!r}, expected true, false, null or 'nan'"
                )
            if gold is None:
                raise DatasetError(f"{where}: judged answer but golden_answer is null")
            answer = field(row, f"answer_{system}", where, (str, type(None))) or ""
            items.append(
                Item(
                    id=f"evouna-{subset}-{i}-{system}",
                    dataset="evouna_qa_eval",
                    system=system,
                    inputs={
                        "question": question,
                        "reference": " | ".join(a.strip() for a in gold.split("/") if a.strip()),
                        "response": answer.strip(),
                    },
                    human={"correct": 1.0 if judge else 0.0},
                    human_kind="single",
                    meta={
                        "subset": subset,
                        "index": i,
                        "group": f"{subset}-{i}",  # the question: dataset.sample_by=group keeps its systems
                        "improper": improper,
                        "golden_answer": gold,
                    },
                )
            )
    return items

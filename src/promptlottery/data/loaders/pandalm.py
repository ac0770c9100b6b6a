"""PandaLM human-annotated test set (Wang et al., 2023): 999 pairwise items, 3 annotators each.

File ``pandalm/testset-v1.json``: instruction, input, response1, response2, annotator1..3 in
{0 = tie, 1 = response1 better, 2 = response2 better}; 879 items are unanimous.

Pairwise items: ``question`` = the instruction with the input appended (blank line between) when
there is one, ``response_a`` = response1, ``response_b`` = response2 (no ``response``).
``human["preference"]`` = the per-annotator list coded 1.0 = A better, 0.0 = B better, 0.5 = tie,
so its mean is the share of annotators preferring A (``human_kind="per_rater"``); the raw labels are
``meta["labels"]``. ``meta["cmp_key"]`` names the two compared models ("bloom-7b_llama-7b"); which
of them wrote response1 is not stated in the file, so ``system=None``. Six responses (items 157-164, "Verify the correctness...") are stored as the
JSON literal ``true`` rather than a string; they are read as the text "True". 54 pairs have an
empty response: a pairwise run stops on them unless ``drop_empty_pairs=true`` leaves them out.
Pairs sharing an instruction share ``meta["cluster"]``.
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import field, load_json_list
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

#: raw label -> preference for response_a
PREFERENCE = {0: 0.5, 1: 1.0, 2: 0.0}
ANNOTATORS = ("annotator1", "annotator2", "annotator3")


def join_instruction(instruction: str, inp: str | None) -> str:
    inp = (inp or "").strip()
    return f"{instruction.strip()}\n\n{inp}" if inp else instruction.strip()


def _text(row: dict, key: str, where: str) -> str:
    """A response; 6 responses in the file are the JSON literal ``true`` (the answer "True")."""
    value = field(row, key, where, (str, bool))
    return str(value) if isinstance(value, bool) else value


@register_loader("pandalm")
def load_pandalm(data_dir: Path, *, drop_empty_pairs: bool = False) -> list[Item]:
    path = Path(data_dir) / "pandalm" / "testset-v1.json"
    items, clusters = [], {}
    for i, row in enumerate(load_json_list(path, "pandalm")):
        where = f"{path}[{i}]"
        a, b = _text(row, "response1", where), _text(row, "response2", where)
        if drop_empty_pairs and not (a.strip() and b.strip()):
            continue
        question = join_instruction(field(row, "instruction", where), field(row, "input", where))
        labels = []
        for a in ANNOTATORS:
            v = field(row, a, where, None)
            if isinstance(v, bool) or v not in PREFERENCE:
                raise DatasetError(f"{where}: {a} is {v!r}, expected 0 (tie), 1 or 2")
            labels.append(int(v))
        items.append(
            Item(
                id=f"pandalm-{field(row, 'idx', where, int)}",
                dataset="pandalm",
                system=None,
                inputs={"question": question, "response_a": a, "response_b": b},
                human={"preference": [PREFERENCE[v] for v in labels]},
                human_kind="per_rater",
                meta={
                    "labels": labels,
                    "unanimous": len(set(labels)) == 1,
                    "cmp_key": field(row, "cmp_key", where),
                    "motivation_app": row.get("motivation_app"),
                    "index": i,
                    "cluster": clusters.setdefault(question, f"pandalm-q{i}"),
                },
            )
        )
    return items

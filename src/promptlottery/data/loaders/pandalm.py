"""PandaLM human-annotated test set (Wang et al., 2023): 999 pairwise items, 3 annotators each.

File ``pandalm/testset-v1.json``: instruction, input, response1, response2, annotator1..3 in
{0 = tie, 1 = response1 better, 2 = response2 better}; 879 items are unanimous.

Pairwise items: ``question`` = the instruction with the input appended (blank line between) when
there is one, ``response_a`` = response1, ``response_b`` = response2 (no ``response``).
``human["preference"]`` = the per-annotator list coded 1.0 = A better, 0.0 = B better, 0.5 = tie,
so its mean is the share of annotators preferring A (``human_kind="per_rater"``); the raw labels are
``meta["labels"]``. ``meta["cmp_key"]`` names the two compared models; the PandaLM README's test-data
example says ``"cmp_key": "opt-7b_pythia-6.9b", ## It means response 1 is from opt-7B and response 2
is from pythia-6.9B``, so ``meta["system_1"]`` / ``meta["system_2"]`` (the pair fields the pairwise
analysis reads) are its two halves; ``system=None`` (a pair has two). Six responses (items 157-164,
"Verify the correctness...") are stored as the JSON literal ``true`` rather than a string; they are
read as the text "True". 54 pairs have an empty response (29 an empty response1, 25 an empty
response2): a pairwise run stops on them unless ``drop_empty_pairs=true`` leaves them out (945 pairs
remain). Pairs sharing an instruction share ``meta["cluster"]``.
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
        for annotator in ANNOTATORS:
            v = field(row, annotator, where, None)
            if isinstance(v, bool) or v not in PREFERENCE:
                raise DatasetError(f"{where}: {annotator} is {v!r}, expected 0 (tie), 1 or 2")
            labels.append(int(v))
        cmp_key = field(row, "cmp_key", where)
        systems = cmp_key.split("_")
        if len(systems) != 2 or not all(systems):
            raise DatasetError(
                f"{where}: cmp_key {cmp_key!r} is not '<model of response1>_<model of response2>'"
            )
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
                    "cmp_key": cmp_key,
                    "system_1": systems[0],
                    "system_2": systems[1],
                    "motivation_app": row.get("motivation_app"),
                    "index": i,
                    "cluster": clusters.setdefault(question, f"pandalm-q{i}"),
                },
            )
        )
    return items

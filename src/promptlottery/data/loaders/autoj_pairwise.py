"""Auto-J pairwise test set (Li et al., ICLR 2024, "Generative Judge for Evaluating Alignment"):
1,392 pairs over 58 scenarios with a human preference, ties included.

File ``autoj_pairwise/testdata_pairwise.jsonl``: scenario, label (0 = response 1 is better, 1 =
response 2, 2 = a tie; 520 / 499 / 373), prompt, ``response 1``, ``response 2``.

Pairwise items: ``question`` = the prompt, ``response_a`` = response 1, ``response_b`` = response 2;
``human["preference"]`` = 1.0 (response_a better), 0.0 (response_b) or 0.5 (tie), as the other
pairwise loaders code it (``human_kind="single"``). Pairs sharing a prompt share
``meta["cluster"]`` (1,182 distinct prompts). One pair has an empty response: a pairwise run stops
on it unless ``drop_empty_pairs=true`` leaves such pairs out.
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import field, iter_jsonl
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

#: Auto-J's label -> preference for response_a
PREFERENCE = {0: 1.0, 1: 0.0, 2: 0.5}


@register_loader("autoj_pairwise")
def load_autoj_pairwise(
    data_dir: Path, *, scenarios: list[str] | None = None, drop_empty_pairs: bool = False
) -> list[Item]:
    path = Path(data_dir) / "autoj_pairwise" / "testdata_pairwise.jsonl"
    items, clusters = [], {}
    for lineno, row in iter_jsonl(path, "autoj_pairwise"):
        where = f"{path}:{lineno}"
        label = field(row, "label", where, None)
        if isinstance(label, bool) or label not in PREFERENCE:
            raise DatasetError(f"{where}: label is {label!r}, expected 0, 1 or 2 (tie)")
        scenario = field(row, "scenario", where)
        if scenarios and scenario not in scenarios:
            continue
        prompt = field(row, "prompt", where).strip()
        a, b = field(row, "response 1", where), field(row, "response 2", where)
        if drop_empty_pairs and not (a.strip() and b.strip()):
            continue
        i = len(items)
        items.append(
            Item(
                id=f"autoj-{lineno - 1}",
                dataset="autoj_pairwise",
                inputs={"question": prompt, "response_a": a, "response_b": b},
                human={"preference": PREFERENCE[int(label)]},
                human_kind="single",
                meta={
                    "scenario": scenario,
                    "label": int(label),
                    "line": lineno,
                    "cluster": clusters.setdefault(prompt, f"autoj-q{i}"),
                },
            )
        )
    if scenarios and not items:
        raise DatasetError(f"autoj_pairwise: no pair in dataset.options.scenarios={scenarios}")
    return items

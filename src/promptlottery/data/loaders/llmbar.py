"""LLMBar (Zeng et al., ICLR 2024): pairwise instruction following with one expert-verified gold label.

Files ``llmbar/<subset path>/dataset.json``, lists of {input, output_1, output_2, label (1 or 2 =
the better output)}. ``subset`` is one of

- ``natural`` (100); adversarial ``neighbor`` (134), ``gptinst`` (92), ``gptout`` (47),
  ``manual`` (46); groups ``adversarial`` (the 4, 319) and ``llmbar`` (natural + adversarial, 419);
- processed: ``faireval`` (66), ``llmeval2`` (200), ``mtbench`` (200: MT-Bench expert votes,
  majority, ties removed), group ``processed``;
- case study: ``casestudy_constraint`` (89), ``casestudy_negation`` (59), ``casestudy_normal``
  (59), ``casestudy_base_9`` (54), ``casestudy_base_10`` (54), group ``casestudy``;
- ``all`` (every file, 1200).

Pairwise items: ``question`` = the instruction (LLMBar's ``input`` already contains any input
text), ``response_a`` = output_1, ``response_b`` = output_2. ``human["preference"]`` = 1.0 if
output_1 is better, 0.0 if output_2 (``human_kind="single"``); the raw label is ``meta["label"]``.
Pairs of one subset sharing an instruction share ``meta["cluster"]`` (Processed/MT-Bench: 200 pairs
of 75 questions); one pair (``llmeval2`` 169) has an empty response: a pairwise run stops on it
unless ``drop_empty_pairs=true`` leaves such pairs out.
``hub=True`` reads ``princeton-nlp/LLMBar`` (LLMBar and CaseStudy subsets only) with ``datasets``.
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import field, load_json_list
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

HUB_ID = "princeton-nlp/LLMBar"
#: subset -> (path under llmbar/, hub config, hub split)
SUBSETS = {
    "natural": ("LLMBar/Natural", "LLMBar", "Natural"),
    "neighbor": ("LLMBar/Adversarial/Neighbor", "LLMBar", "Adversarial_Neighbor"),
    "gptinst": ("LLMBar/Adversarial/GPTInst", "LLMBar", "Adversarial_GPTInst"),
    "gptout": ("LLMBar/Adversarial/GPTOut", "LLMBar", "Adversarial_GPTOut"),
    "manual": ("LLMBar/Adversarial/Manual", "LLMBar", "Adversarial_Manual"),
    "faireval": ("Processed/FairEval", None, None),
    "llmeval2": ("Processed/LLMEval^2", None, None),
    "mtbench": ("Processed/MT-Bench", None, None),
    "casestudy_constraint": ("CaseStudy/Constraint", "CaseStudy", "Constraint"),
    "casestudy_negation": ("CaseStudy/Negation", "CaseStudy", "Negation"),
    "casestudy_normal": ("CaseStudy/Normal", "CaseStudy", "Normal"),
    "casestudy_base_9": ("CaseStudy/Base_9", "CaseStudy", "Base_9"),
    "casestudy_base_10": ("CaseStudy/Base_10", "CaseStudy", "Base_10"),
}
GROUPS = {
    "adversarial": ["neighbor", "gptinst", "gptout", "manual"],
    "llmbar": ["natural", "neighbor", "gptinst", "gptout", "manual"],
    "processed": ["faireval", "llmeval2", "mtbench"],
    "casestudy": [s for s in SUBSETS if s.startswith("casestudy_")],
    "all": list(SUBSETS),
}
LABELS = {1: 1.0, 2: 0.0}


def _item(sub: str, i: int, row: dict, where: str, clusters: dict[str, str]) -> Item:
    label = field(row, "label", where, None)
    if isinstance(label, bool) or label not in LABELS:
        raise DatasetError(f"{where}: label is {label!r}, expected 1 or 2")
    question = field(row, "input", where).strip()
    return Item(
        id=f"llmbar-{sub}-{i}",
        dataset="llmbar",
        system=None,
        inputs={
            "question": question,
            "response_a": field(row, "output_1", where),
            "response_b": field(row, "output_2", where),
        },
        human={"preference": LABELS[int(label)]},
        human_kind="single",
        meta={
            "subset": sub,
            "index": i,
            "label": int(label),
            "cluster": clusters.setdefault(f"{sub}\0{question}", f"llmbar-{sub}-q{i}"),
        },
    )


@register_loader("llmbar")
def load_llmbar(
    data_dir: Path, *, subset: str = "llmbar", hub: bool = False, drop_empty_pairs: bool = False
) -> list[Item]:
    if subset in GROUPS:
        subsets = GROUPS[subset]
    elif subset in SUBSETS:
        subsets = [subset]
    else:
        raise DatasetError(f"llmbar: unknown subset {subset!r}; valid: {sorted(SUBSETS) + sorted(GROUPS)}")
    items: list[Item] = []
    clusters: dict[str, str] = {}
    for sub in subsets:
        rel, hub_config, hub_split = SUBSETS[sub]
        if hub:
            if hub_config is None:
                raise DatasetError(f"llmbar: subset {sub!r} is not on the Hub ({HUB_ID}); read it from files")
            from datasets import load_dataset  # lazy: only users with a network

            ds = load_dataset(HUB_ID, hub_config, split=hub_split)
            items += [
                _item(sub, i, dict(r), f"{HUB_ID}/{hub_config}/{hub_split}[{i}]", clusters)
                for i, r in enumerate(ds)
            ]
            continue
        path = Path(data_dir) / "llmbar" / rel / "dataset.json"
        items += [
            _item(sub, i, row, f"{path}[{i}]", clusters)
            for i, row in enumerate(load_json_list(path, "llmbar"))
        ]
    if drop_empty_pairs:
        items = [it for it in items if it.inputs["response_a"].strip() and it.inputs["response_b"].strip()]
    return items

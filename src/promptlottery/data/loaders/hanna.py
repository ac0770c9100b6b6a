"""HANNA (Chhun et al., COLING 2022): 1056 stories, 96 WritingPrompts prompts x 11 sources.

File ``hanna/hanna_ppairs.jsonl`` (PPairS packaging): per story the MEAN of 3 MTurk raters on
relevance, coherence, empathy, surprise, engagement, complexity (1-5). ``source`` is the writing
prompt, ``response`` the story; ``system`` is the PPairS story id (S0..S10, one per source: 10
generation systems + the human story; names are not in the file). No reference story is given.
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import field, iter_jsonl, number
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import Item

CRITERIA = ("relevance", "coherence", "empathy", "surprise", "engagement", "complexity")


@register_loader("hanna")
def load_hanna(data_dir: Path) -> list[Item]:
    path = Path(data_dir) / "hanna" / "hanna_ppairs.jsonl"
    items = []
    for lineno, row in iter_jsonl(path, "hanna"):
        where = f"{path}:{lineno}"
        prompt_id = field(row, "prompt_id", where)
        story_id = field(row, "story_id", where)
        items.append(
            Item(
                id=f"hanna-{prompt_id}-{story_id}",
                dataset="hanna",
                system=story_id,
                inputs={"source": field(row, "prompt", where), "response": field(row, "story", where)},
                human={c: number(field(row, c, where, None), where, c, 1.0, 5.0) for c in CRITERIA},
                human_kind="mean",
                meta={"prompt_id": prompt_id, "line": lineno},
            )
        )
    return items

"""HANNA (Chhun et al., COLING 2022): 1056 stories, 96 WritingPrompts prompts x 11 sources.

File ``hanna/hanna_ppairs.jsonl`` (PPairS packaging): per story the MEAN of 3 MTurk raters on
relevance, coherence, empathy, surprise, engagement, complexity (1-5). ``source`` is the writing
prompt, ``response`` the story; ``system`` is the PPairS story id (S0..S10, one per source: 10
generation systems + the human story; names are not in the file). No reference story is given.
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import load_ppairs_means
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import Item

CRITERIA = ("relevance", "coherence", "empathy", "surprise", "engagement", "complexity")


@register_loader("hanna")
def load_hanna(data_dir: Path) -> list[Item]:
    path = Path(data_dir) / "hanna" / "hanna_ppairs.jsonl"
    return load_ppairs_means(
        path, "hanna", CRITERIA, group="prompt_id", unit="story_id", source="prompt", response="story"
    )

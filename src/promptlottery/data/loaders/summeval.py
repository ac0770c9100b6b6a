"""SummEval (Fabbri et al., TACL 2021): 1600 CNN/DM summaries (100 articles x 16 systems).

File ``summeval/summeval_ppairs.jsonl`` (PPairS packaging): one line per summary with the MEAN of
the 3 expert annotators on coherence, consistency, fluency, relevance (1-5). Per-annotator scores and
the reference summaries are not in this file, so items carry means and no ``reference``.
``system`` is the PPairS summary id (S0..S15, one per summarisation system; the original model
names are not in the file).
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import load_ppairs_means
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import Item

CRITERIA = ("coherence", "consistency", "fluency", "relevance")


@register_loader("summeval")
def load_summeval(data_dir: Path) -> list[Item]:
    path = Path(data_dir) / "summeval" / "summeval_ppairs.jsonl"
    return load_ppairs_means(
        path,
        "summeval",
        CRITERIA,
        group="article_id",
        unit="summary_id",
        source="article",
        response="summary",
    )

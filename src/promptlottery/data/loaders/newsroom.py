"""Newsroom human evaluation (Grusky et al., NAACL 2018): 420 summaries (60 articles x 7 systems).

Criteria coherence, fluency, informativeness, relevance on 1-5, each rated by 3 crowd workers.

``source="ppairs"`` (default) reads ``newsroom/newsroom_ppairs.jsonl``: the MEAN of the 3 raters,
``system`` = the PPairS summary id (S0..S6; model names are not in the file), ``human_kind="mean"``.

``source="judge_bench"`` reads ``judge_bench_dmg_illc/newsroom/newsroom.json`` (JUDGE-BENCH): the
same 420 summaries with the 3 per-rater scores (``human_kind="per_rater"``); the instance text is
split into summary and article; there is no system id there (``system=None``). The two files carry
no shared key, so they are not joined.
"""

from __future__ import annotations

import re
from pathlib import Path

from promptlottery.data.loaders._io import field, load_json, load_ppairs_means, numbers
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

CRITERIA = ("coherence", "fluency", "informativeness", "relevance")
_INSTANCE = re.compile(r"### Generated Summary\n\n(.*?)\n\n### Source Article\n\n(.*)\Z", re.S)


@register_loader("newsroom")
def load_newsroom(data_dir: Path, *, source: str = "ppairs") -> list[Item]:
    if source == "ppairs":
        return _ppairs(Path(data_dir))
    if source == "judge_bench":
        return _judge_bench(Path(data_dir))
    raise DatasetError(f"newsroom: unknown source {source!r}; valid: 'ppairs', 'judge_bench'")


def _ppairs(data_dir: Path) -> list[Item]:
    path = data_dir / "newsroom" / "newsroom_ppairs.jsonl"
    return load_ppairs_means(
        path,
        "newsroom",
        CRITERIA,
        group="article_id",
        unit="summary_id",
        source="article",
        response="summary",
    )


def _judge_bench(data_dir: Path) -> list[Item]:
    path = data_dir / "judge_bench_dmg_illc" / "newsroom" / "newsroom.json"
    data = load_json(path, "newsroom")
    instances = field(data, "instances", str(path), list)
    items = []
    for i, inst in enumerate(instances):
        where = f"{path}[instances][{i}]"
        m = _INSTANCE.match(field(inst, "instance", where))
        if not m:
            raise DatasetError(
                f"{where}: instance text is not '### Generated Summary ... ### Source Article ...'"
            )
        ann = field(inst, "annotations", where, dict)
        human = {}
        for c in CRITERIA:
            scores = field(field(ann, c.capitalize(), where, dict), "individual_human_scores", where, list)
            human[c] = numbers(scores, where, c, 1.0, 5.0)
        items.append(
            Item(
                id=f"newsroom-jb-{field(inst, 'id', where, int)}",
                dataset="newsroom",
                system=None,
                inputs={"source": m.group(2), "response": m.group(1).strip()},
                human=human,
                human_kind="per_rater",
                meta={"index": i},
            )
        )
    return items

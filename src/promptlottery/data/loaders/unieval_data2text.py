"""SFHOT / SFRES data-to-text (Wen et al. 2015 outputs, human ratings from Novikova et al. 2017).

``subset="sfhot"`` reads ``unieval_data2text/sfhot.json`` (875 items), ``"sfres"`` ``sfres.json``
(1181). Criteria informativeness, naturalness, overall on 1-6 (averaged ratings, half points occur;
``human_kind="mean"``). Inputs: ``source`` = the dialogue act (e.g. ``inform(name='x';area='y')``),
``response`` = the system output, ``reference`` = the human reference. The files name no system
(``system=None``); ``doc_id`` is unique per item.
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import field, load_json_list, number
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

CRITERIA = ("informativeness", "naturalness", "overall")


@register_loader("unieval_data2text")
def load_data2text(data_dir: Path, *, subset: str = "sfhot") -> list[Item]:
    if subset not in ("sfhot", "sfres"):
        raise DatasetError(f"unieval_data2text: unknown subset {subset!r}; valid: 'sfhot', 'sfres'")
    path = Path(data_dir) / "unieval_data2text" / f"{subset}.json"
    items = []
    for i, row in enumerate(load_json_list(path, "unieval_data2text")):
        where = f"{path}[{i}]"
        scores = field(row, "scores", where, dict)
        items.append(
            Item(
                id=f"{subset}-{field(row, 'doc_id', where, int)}",
                dataset="unieval_data2text",
                system=None,
                inputs={
                    "source": field(row, "source", where),
                    "response": field(row, "system_output", where),
                    "reference": field(row, "reference", where),
                },
                human={c: number(field(scores, c, where, None), where, c, 1.0, 6.0) for c in CRITERIA},
                human_kind="mean",
                meta={"subset": subset, "index": i},
            )
        )
    return items

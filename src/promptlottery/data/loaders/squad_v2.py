"""SQuAD 2.0 dev, the CS224N half (16 articles, 646 paragraphs, 6078 questions; 2910 answerable).

File ``squad_v2/dev-v2.0_cs224n_split.json``. The human data are crowd reference answers and the
unanswerable flag, not judgments of model answers. One item per question:

- ``inputs``: ``question``, ``context`` (the passage), ``reference`` (the distinct gold answers
  joined with " | ", or :data:`UNANSWERABLE` when the question has none);
- ``human``: ``answerable`` (1 answerable, 0 not; ``human_kind="single"``);
- ``meta``: ``question_id``, ``title``, ``answers`` (all crowd answers, duplicates kept),
  ``plausible_answers`` (for unanswerable questions).

``predictions=<file>`` (parquet or JSONL with columns ``item_id, system, response``, written by the
``predict`` stage) instead yields one item per (question, system): id ``f"{base_id}::{system}"``,
``system`` and ``inputs["response"]`` filled, ``human`` still ``answerable``. ``item_id`` may be the
base item id (``squad_v2-<question id>``) or the bare SQuAD question id.

``hub=True`` reads ``rajpurkar/squad_v2`` (validation split) with ``datasets`` instead: that is the
FULL official dev set (11,873 questions, original ids), not this half.
"""

from __future__ import annotations

from pathlib import Path

from promptlottery.data.loaders._io import field, iter_jsonl, load_json
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

HUB_ID = "rajpurkar/squad_v2"
UNANSWERABLE = "unanswerable"
PREDICTION_COLUMNS = ("item_id", "system", "response")


def _reference(answers: list[str]) -> str:
    unique = list(dict.fromkeys(a.strip() for a in answers if a.strip()))
    return " | ".join(unique) if unique else UNANSWERABLE


def _item(qid: str, question: str, context: str, answers: list[str], meta: dict) -> Item:
    return Item(
        id=f"squad_v2-{qid}",
        dataset="squad_v2",
        inputs={"question": question, "context": context, "reference": _reference(answers)},
        human={"answerable": 1.0 if answers else 0.0},
        human_kind="single",
        meta={"question_id": qid, "answers": answers, "group": f"squad_v2-{qid}", **meta},
    )


@register_loader("squad_v2")
def load_squad_v2(data_dir: Path, *, predictions: str | None = None, hub: bool = False) -> list[Item]:
    items = _from_hub() if hub else _from_file(Path(data_dir) / "squad_v2" / "dev-v2.0_cs224n_split.json")
    if predictions:
        items = _with_predictions(items, Path(predictions))
    return items


def _from_file(path: Path) -> list[Item]:
    data = load_json(path, "squad_v2")
    items = []
    for a, article in enumerate(field(data, "data", str(path), list)):
        awhere = f"{path}[data][{a}]"
        title = field(article, "title", awhere)
        for p, para in enumerate(field(article, "paragraphs", awhere, list)):
            pwhere = f"{awhere}[paragraphs][{p}]"
            context = field(para, "context", pwhere)
            for q, qa in enumerate(field(para, "qas", pwhere, list)):
                where = f"{pwhere}[qas][{q}]"
                answers = [field(x, "text", f"{where}[answers]") for x in field(qa, "answers", where, list)]
                impossible = field(qa, "is_impossible", where, bool)
                if impossible == bool(answers):
                    raise DatasetError(
                        f"{where}: is_impossible={impossible} but the question has {len(answers)} answers"
                    )
                plausible = [
                    field(x, "text", f"{where}[plausible_answers]") for x in qa.get("plausible_answers", [])
                ]
                items.append(
                    _item(
                        field(qa, "id", where),
                        field(qa, "question", where),
                        context,
                        answers,
                        {"title": title, "plausible_answers": plausible},
                    )
                )
    return items


def _from_hub() -> list[Item]:
    from datasets import load_dataset  # lazy: only users with a network

    ds = load_dataset(HUB_ID, split="validation")
    return [
        _item(r["id"], r["question"], r["context"], list(r["answers"]["text"]), {"title": r["title"]})
        for r in ds
    ]


def _read_predictions(path: Path) -> list[tuple[str, dict]]:
    """``(location, row)`` per prediction; locations name the file and the JSONL line / parquet row."""
    if not path.is_file():
        raise DatasetError(f"squad_v2: predictions file not found: {path}")
    if path.suffix == ".parquet":
        import pandas as pd

        try:
            df = pd.read_parquet(path)
        except Exception as e:  # noqa: BLE001 - any reader failure is a malformed file
            raise DatasetError(f"{path}: cannot read parquet: {e}") from None
        missing = [c for c in PREDICTION_COLUMNS if c not in df.columns]
        if missing:
            raise DatasetError(f"{path}: missing columns {missing}; expected {list(PREDICTION_COLUMNS)}")
        df = df.astype(object).where(df.notna(), None)  # missing responses: None, not NaN
        return [(f"{path} row {i}", row) for i, row in enumerate(df.to_dict("records"), start=1)]
    if path.suffix in (".jsonl", ".json"):
        return [(f"{path}:{lineno}", row) for lineno, row in iter_jsonl(path, "squad_v2")]
    raise DatasetError(f"{path}: predictions must be a .parquet or .jsonl file")


def _with_predictions(base: list[Item], path: Path) -> list[Item]:
    by_id = {it.id: it for it in base}
    by_id.update({it.meta["question_id"]: it for it in base})
    items, seen = [], set()
    for where, row in _read_predictions(path):
        item_id = field(row, "item_id", where)
        system = field(row, "system", where)
        response = field(row, "response", where, (str, type(None)))
        if item_id not in by_id:
            raise DatasetError(f"{where}: item_id {item_id!r} is not a squad_v2 question")
        it = by_id[item_id]
        new_id = f"{it.id}::{system}"
        if new_id in seen:
            raise DatasetError(f"{where}: second prediction for item {it.id!r} and system {system!r}")
        seen.add(new_id)
        items.append(
            Item(
                id=new_id,
                dataset="squad_v2",
                system=system,
                inputs={**it.inputs, "response": response or ""},
                human=dict(it.human),
                human_kind=it.human_kind,
                meta={**it.meta, "base_id": it.id, "group": it.id},
            )
        )
    return items

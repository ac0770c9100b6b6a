"""Any labelled table as a dataset: ``dataset=table dataset.path=FILE dataset.fields.<role>=COLUMN``.

The file is JSONL (``.jsonl``/``.ndjson``), CSV (``.csv``, ``.tsv``) or Parquet (``.parquet``); a
path ``hf:<name>[:<split>]`` loads a Hugging Face ``datasets`` table (the ``datasets`` package; a
Hub name needs the network, a local folder of data files or of ``save_to_disk`` does not). The
field map names the columns of the roles:

* ``response`` (required), ``context``, ``reference``: the texts a template may use, under these
  names (``{{ response }}``, ``{{ context }}``, ``{{ reference }}``);
* ``id`` (default: the line / row number), ``system`` (the evaluated system, for rank flips),
  ``group`` (e.g. the prompt the responses answer, kept in ``meta``);
* ``human``: the human label, a number inside ``human_range``; stored under the criterion
  ``human`` (empty cells = no label for that item).

A table of pairs (``judge.mode=pairwise``) names ``response_a`` and ``response_b`` instead of
``response`` (both required and non-empty), and the instruction as ``question`` (or ``context``,
then given to templates under both names). Its ``human`` column is a preference: ``1`` / ``A``
(response_a is better), ``2`` / ``B`` (response_b), ``tie`` / ``C``, stored as 1.0 / 0.0 / 0.5 as the
pairwise loaders do; any other value is a DatasetError naming the file, line and column.

Every bad input is a one-line DatasetError naming the file, the line (or row) and the column.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from promptlottery.data.loaders._io import iter_csv_rows, iter_jsonl, number
from promptlottery.data.registry import register_loader
from promptlottery.data.schema import DatasetError, Item

ROLES = (
    "id",
    "response",
    "response_a",
    "response_b",
    "question",
    "context",
    "reference",
    "system",
    "group",
    "human",
)
TEXT_ROLES = ("response", "response_a", "response_b", "question", "context", "reference")
#: a table of pairs: its human preference values (lower-cased) -> 1.0 / 0.0 / 0.5, the codes every pair loader gives
PREFERENCES = {"1": 1.0, "a": 1.0, "2": 0.0, "b": 0.0, "tie": 0.5, "c": 0.5}
#: the criterion name the human label is stored under (``judge.criterion=human``)
CRITERION = "human"


@register_loader("table")
def load_table(
    data_dir: Path,
    path: str | None = None,
    fields: Mapping[str, str] | None = None,
    human_range: tuple[float, float] | None = None,
    split: str = "train",
) -> list[Item]:
    """Items of one table; ``data_dir`` is unused (the path is the user's)."""
    if not path:
        raise DatasetError("dataset=table needs dataset.path=FILE (JSONL, CSV or Parquet)")
    fields = {k: v for k, v in dict(fields or {}).items() if v not in (None, "")}
    unknown = sorted(set(fields) - set(ROLES))
    if unknown:
        raise DatasetError(f"dataset.fields: unknown role(s) {unknown}; valid: {list(ROLES)}")
    pairs = "response_a" in fields or "response_b" in fields
    if pairs and not {"response_a", "response_b"} <= set(fields):
        raise DatasetError(
            "a table of pairs needs both dataset.fields.response_a and dataset.fields.response_b"
        )
    if not pairs and "response" not in fields:
        raise DatasetError(
            "dataset.fields.response is required: the column holding the judged text (a table of pairs: "
            "dataset.fields.response_a and dataset.fields.response_b)"
        )
    lo, hi = (float(x) for x in human_range) if human_range is not None else (None, None)
    rows, columns = _read(path, split)
    if pairs and fields.get("response") not in columns:  # conf/dataset/table.yaml's default role
        fields.pop("response", None)
    missing = [f"{role}={col!r}" for role, col in fields.items() if col not in columns]
    if missing:
        raise DatasetError(
            f"{path}: column(s) {', '.join(missing)} not in the table; columns: {sorted(columns)}"
        )
    items: list[Item] = []
    seen: dict[str, str] = {}
    for n, (where, row) in enumerate(rows, start=1):
        item_id = _text(row, fields["id"], where) if "id" in fields else str(n)
        if item_id in seen:
            raise DatasetError(
                f"{where}: duplicate id {item_id!r} in column {fields['id']!r} (first at {seen[item_id]})"
            )
        seen[item_id] = where
        inputs = {role: _text(row, fields[role], where) for role in TEXT_ROLES if role in fields}
        if pairs and "question" not in inputs and "context" in inputs:
            inputs["question"] = inputs["context"]
        human: dict[str, Any] = {}
        if "human" in fields:
            raw = row.get(fields["human"])
            if not _blank(raw) and pairs:
                human[CRITERION] = _preference(raw, where, fields["human"])
            elif not _blank(raw):
                human[CRITERION] = number(raw, where, f"column {fields['human']!r}: label", lo, hi)
        items.append(
            Item(
                id=item_id,
                dataset="table",
                inputs=inputs,
                system=_text(row, fields["system"], where) if "system" in fields else None,
                human=human,
                human_kind="single" if human else "none",
                meta={"group": _text(row, fields["group"], where)} if "group" in fields else {},
            )
        )
    if not items:
        raise DatasetError(f"{path}: empty file, no rows")
    return items


def _read(path: str, split: str) -> tuple[Iterator[tuple[str, dict]], set[str]]:
    """``(rows as (location, dict), column names)``; locations name the file and line / row."""
    if path.startswith("hf:"):
        return _read_hub(path[3:], split)
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"dataset.path: file not found: {p}")
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        rows = [(f"{p}:{lineno}", obj) for lineno, obj in iter_jsonl(p, "table")]
        if not rows:
            raise DatasetError(f"{p}: empty file, no rows")
        return iter(rows), set().union(*(r.keys() for _, r in rows))
    if suffix in (".csv", ".tsv"):
        rows = list(iter_csv_rows(p, "table", delimiter="\t" if suffix == ".tsv" else ","))
        if not rows:
            raise DatasetError(f"{p}: empty file, no rows")
        return iter(rows), set(rows[0][1])
    if suffix == ".parquet":
        import pandas as pd

        df = pd.read_parquet(p)
        if df.empty:
            raise DatasetError(f"{p}: empty file, no rows")
        recs = df.to_dict(orient="records")
        return iter((f"{p} row {i}", r) for i, r in enumerate(recs, start=1)), set(df.columns)
    raise DatasetError(f"dataset.path={p}: unknown file type {suffix!r}; valid: .jsonl .csv .tsv .parquet")


def _read_hub(spec: str, split: str) -> tuple[Iterator[tuple[str, dict]], set[str]]:
    """A Hugging Face ``datasets`` table, ``hf:NAME[:SPLIT]``: NAME is a Hub dataset (needs the
    network), a local folder of data files, or a folder written by ``save_to_disk``."""
    name, _, sp = spec.partition(":")
    split = sp or split
    try:
        import datasets
    except ImportError:
        raise DatasetError(
            f"dataset.path=hf:{spec} needs the `datasets` package (pip install datasets)"
        ) from None
    saved = Path(name)
    try:
        if (saved / "state.json").is_file() or (saved / "dataset_dict.json").is_file():
            ds = datasets.load_from_disk(name)
            if isinstance(ds, datasets.DatasetDict):
                if split not in ds:
                    raise DatasetError(f"dataset.path=hf:{spec}: no split {split!r}; splits: {sorted(ds)}")
                ds = ds[split]
        else:
            ds = datasets.load_dataset(name, split=split)
    except DatasetError:
        raise
    except Exception as e:  # noqa: BLE001 - `datasets` raises many kinds: one line naming the path
        why = (str(e).splitlines() or [""])[0]
        raise DatasetError(
            f"dataset.path=hf:{spec}: cannot load split {split!r}: {type(e).__name__}: {why}"
        ) from e
    return iter((f"hf:{name} row {i}", r) for i, r in enumerate(ds, start=1)), set(ds.column_names)


def _preference(v: Any, where: str, column: str) -> float:
    key = (
        str(int(v))
        if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer()
        else str(v)
    )
    try:
        return PREFERENCES[key.strip().lower()]
    except KeyError:
        raise DatasetError(
            f"{where}: column {column!r}: preference {v!r} is outside the pairwise scale; use 1 or A "
            "(response_a is better), 2 or B (response_b), tie or C"
        ) from None


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v) or (isinstance(v, str) and not v.strip())


def _text(row: dict, column: str, where: str) -> str:
    v = row.get(column)
    if _blank(v):
        raise DatasetError(f"{where}: column {column!r} is missing or empty")
    return v if isinstance(v, str) else str(v)

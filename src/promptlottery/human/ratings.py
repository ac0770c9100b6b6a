"""Human ratings in: a Label Studio JSON export or a plain table -> ``human_ratings.parquet``.

One row per rating: ``item_id``, ``wording``, ``annotator``, ``label`` (a label of the campaign's
scale, as a string), ``position`` (the task's place in the annotator's queue, where known),
``source`` (``label_studio`` or ``table``), ``task_id`` / ``annotation_id`` / ``completed_by`` (the
Label Studio user) / ``created_at`` (Label Studio's, where known) and ``file``. Every bad rating is a one-line :class:`RatingsError` naming the file and the
task or row: an unknown item, wording or annotator, a label outside the scale, a task rated twice
by one annotator.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from promptlottery.data.schema import DatasetError
from promptlottery.human.labelstudio import FROM_NAME

RATING_COLUMNS = (
    "item_id",
    "wording",
    "annotator",
    "label",
    "position",
    "source",
    "task_id",
    "annotation_id",
    "completed_by",
    "created_at",
    "file",
)
#: accepted names of the plain table's four columns
TABLE_ALIASES = {
    "item_id": ("item_id", "item"),
    "wording": ("wording", "variant"),
    "annotator": ("annotator", "rater"),
    "label": ("label", "rating"),
}


logger = logging.getLogger(__name__)


class RatingsError(DatasetError):
    """A rating cannot be imported; the message names the file and the task or row."""


@dataclass(frozen=True)
class Known:
    """What a rating may name: the campaign's items, wordings, annotators and scale labels
    (None: not checked, e.g. a plain table imported without a campaign)."""

    labels: tuple[str, ...]
    items: frozenset[str] | None = None
    wordings: frozenset[str] | None = None
    annotators: frozenset[str] | None = None


def read_label_studio(paths: Sequence[str | Path], *, from_name: str = FROM_NAME) -> pd.DataFrame:
    """The annotations of Label Studio JSON exports (``[{"id", "data", "meta", "annotations": [...]}, ...]``).

    Each task carries the campaign's ``item_id``, ``wording``, ``annotator`` and ``position`` in
    its ``meta`` (campaigns before the blind tasks: in its ``data``); each annotation gives one
    row with Label Studio's ``completed_by`` (user id) and ``created_at``; a non-cancelled one is a
    rating, the choice of the ``from_name`` control; a cancelled (skipped) one has ``cancelled``
    true and no label. A task with two ratings was rated twice (one project per annotator; see
    :mod:`promptlottery.human.labelstudio`).
    """
    rows = []
    for path in map(Path, paths):
        try:
            tasks = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise RatingsError(
                f"{path}: not valid utf-8 text (byte {exc.start}): not a Label Studio JSON export"
            ) from None
        except (OSError, json.JSONDecodeError) as exc:
            raise RatingsError(
                f"{path}: not a Label Studio JSON export ({type(exc).__name__}: {exc})"
            ) from None
        if not isinstance(tasks, list):
            raise RatingsError(
                f"{path}: a Label Studio JSON export is a list of tasks, got {type(tasks).__name__}"
            )
        for n, task in enumerate(tasks):
            where = f"{path} task {task.get('id', f'#{n}') if isinstance(task, dict) else f'#{n}'}"
            if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
                raise RatingsError(f"{where}: no 'data' object")
            meta = task.get("meta") if isinstance(task.get("meta"), dict) else {}
            keys = meta if "item_id" in meta else task["data"]
            for key in ("item_id", "wording", "annotator"):
                if key not in keys:
                    raise RatingsError(
                        f"{where}: neither meta nor data has {key!r} (was it created by the campaign?)"
                    )
            annotations = task.get("annotations") or []
            if not isinstance(annotations, list) or not all(isinstance(a, dict) for a in annotations):
                raise RatingsError(f"{where}: 'annotations' is not a list of annotation objects")
            for ann in annotations:
                cancelled = bool(ann.get("was_cancelled"))
                rows.append(
                    {
                        "item_id": str(keys["item_id"]),
                        "wording": str(keys["wording"]),
                        "annotator": str(keys["annotator"]),
                        "label": None
                        if cancelled
                        else _choice(ann, from_name, f"{where} annotation {ann.get('id')}"),
                        "position": keys.get("position"),
                        "source": "label_studio",
                        "task_id": task.get("id"),
                        "annotation_id": ann.get("id"),
                        "completed_by": ann.get("completed_by"),
                        "created_at": ann.get("created_at"),
                        "file": str(path),
                        "where": where,
                        "cancelled": cancelled,
                    }
                )
    return pd.DataFrame(rows, columns=[*RATING_COLUMNS, "where", "cancelled"])


def _choice(annotation: dict, from_name: str, where: str) -> str:
    results = annotation.get("result") or []
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise RatingsError(f"{where}: 'result' is not a list of result objects")
    for r in results:
        if r.get("from_name") == from_name and r.get("type") == "choices":
            choices = (r.get("value") or {}).get("choices") or []
            if len(choices) != 1:
                raise RatingsError(f"{where}: {len(choices)} choices in {from_name!r}, expected one label")
            return str(choices[0])
    raise RatingsError(f"{where}: no {from_name!r} choice in the annotation's result")


def read_table(path: str | Path) -> pd.DataFrame:
    """The ratings of a plain table (CSV, JSONL or Parquet) with columns item, wording, annotator,
    label (or the aliases in :data:`TABLE_ALIASES`)."""
    path = Path(path)
    try:
        if path.suffix == ".parquet":
            df = pd.read_parquet(path)
        elif path.suffix in (".jsonl", ".json"):
            df = pd.read_json(path, lines=path.suffix == ".jsonl", dtype=False)
        else:
            df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise RatingsError(f"{path}: cannot read the table ({type(exc).__name__}: {exc})") from None
    cols = {}
    for name, aliases in TABLE_ALIASES.items():
        found = [a for a in aliases if a in df.columns]
        if not found:
            raise RatingsError(
                f"{path}: no column {' or '.join(repr(a) for a in aliases)}; columns: {list(df.columns)}"
            )
        cols[name] = found[0]
    out = pd.DataFrame({name: df[c].map(_text) for name, c in cols.items()})
    out["position"] = df["position"] if "position" in df.columns else None
    out["source"], out["task_id"], out["annotation_id"], out["file"] = "table", None, None, str(path)
    out["completed_by"], out["created_at"] = None, None
    out["where"] = [f"{path} row {i + 2 if path.suffix == '.csv' else i + 1}" for i in range(len(out))]
    return out[[*RATING_COLUMNS, "where"]]


def _text(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))  # a label 3 read from JSON / Parquet as 3.0 is the scale's "3"
    return "" if v is None else str(v)


def check_ratings(df: pd.DataFrame, known: Known) -> pd.DataFrame:
    """``df`` without its ``where`` column, after checking every rating (first problem raised).

    Labels are matched to the scale case-insensitively (``Yes`` is the scale's ``yes``) and
    stored as the scale spells them.
    """
    spelled = {lab.lower(): lab for lab in known.labels}
    labels = []
    for row in df.itertuples(index=False):
        for col, allowed in (
            ("item_id", known.items),
            ("wording", known.wordings),
            ("annotator", known.annotators),
        ):
            value = getattr(row, col)
            if allowed is not None and value not in allowed:
                what = {"item_id": "item", "wording": "wording", "annotator": "annotator"}[col]
                raise RatingsError(
                    f"{row.where}: unknown {what} {value!r} (the campaign has {len(allowed)}: {_some(allowed)})"
                )
        lab = spelled.get(str(row.label).strip().lower())
        if lab is None:
            raise RatingsError(
                f"{row.where}: label {row.label!r} is outside the scale ({', '.join(known.labels)})"
            )
        labels.append(lab)
    out = df.assign(label=labels)
    key = ["item_id", "wording", "annotator"]
    dup = out[out.duplicated(key, keep=False)]
    if len(dup):
        first = dup.iloc[0]
        same = dup[(dup[key] == first[key]).all(axis=1)]["where"].tolist()
        raise RatingsError(
            f"{same[1]}: annotator {first['annotator']} rated item {first['item_id']} under wording "
            f"{first['wording']} twice (also {same[0]})"
        )
    out = out.drop(columns="where").sort_values(key, kind="mergesort").reset_index(drop=True)
    out["position"] = pd.to_numeric(out["position"], errors="coerce").astype("Int64")
    for c in ("task_id", "annotation_id", "completed_by"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype("Int64")
    out["created_at"] = pd.to_datetime(out["created_at"], utc=True, errors="coerce", format="ISO8601")
    return out


def _some(values: Iterable[str], n: int = 5) -> str:
    vals = sorted(values)
    return ", ".join(vals[:n]) + (", ..." if len(vals) > n else "")


def load_ratings(path: str | Path) -> pd.DataFrame:
    """A ``human_ratings.parquet`` written by the import stage (or a directory holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "human_ratings.parquet"
    if not path.exists():
        raise RatingsError(f"{path}: no human ratings file (run `python -m run +human=import ...` first)")
    df = pd.read_parquet(path)
    missing = [c for c in ("item_id", "wording", "annotator", "label") if c not in df.columns]
    if missing:
        raise RatingsError(f"{path}: lacks the columns {missing}")
    return df

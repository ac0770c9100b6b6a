"""Shared file readers for the loaders: every error names the file and the line / row / index.

Locations are written as ``path:LINE`` for line-based files (JSONL, plain TSV), ``path[INDEX]``
for an element of a JSON list, and ``path row N (line L)`` for CSV/TSV files read with the csv
module (quoted fields may span lines; N counts data rows from 1, L is the physical line where the
row ends).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from promptlottery.data.schema import DatasetError, Item

#: csv's default field limit (128 KiB) is too small for a few long documents
csv.field_size_limit(2**31 - 1)


def load_ppairs_means(
    path: Path,
    dataset: str,
    criteria: Sequence[str],
    *,
    group: str,
    unit: str,
    source: str,
    response: str,
) -> list[Item]:
    """Items of a PPairS-packaged JSONL file: one line per judged text with the MEAN rating (1-5).

    Each line carries the ``group`` id (the prompt / article), the ``unit`` id (the system's text,
    also used as ``system``), the ``source`` and ``response`` texts and one number per criterion.
    Ids are ``"{dataset}-{group}-{unit}"``; every error names ``path:LINE``.
    """
    items = []
    for lineno, row in iter_jsonl(path, dataset):
        where = f"{path}:{lineno}"
        group_id = field(row, group, where)
        unit_id = field(row, unit, where)
        items.append(
            Item(
                id=f"{dataset}-{group_id}-{unit_id}",
                dataset=dataset,
                system=unit_id,
                inputs={"source": field(row, source, where), "response": field(row, response, where)},
                human={c: number(field(row, c, where, None), where, c, 1.0, 5.0) for c in criteria},
                human_kind="mean",
                meta={group: group_id, "group": group_id, "line": lineno},
            )
        )
    return items


def require_file(path: Path, dataset: str) -> Path:
    """``path`` if it is a file, else a DatasetError naming it."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{dataset}: file not found: {path}")
    return path


def read_text(path: Path, dataset: str, encoding: str = "utf-8") -> str:
    path = require_file(path, dataset)
    data = path.read_bytes()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DatasetError(f"{path}:{line}: not valid {encoding} text (byte {e.start})") from None


def load_json(path: Path, dataset: str) -> Any:
    """Parse a JSON file; a syntax error names the file, line and column."""
    text = read_text(path, dataset)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{path}:{e.lineno}: bad JSON (column {e.colno}): {e.msg}") from None


def load_json_list(path: Path, dataset: str) -> list[Any]:
    data = load_json(path, dataset)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON list at the top level, got {type(data).__name__}")
    return data


def iter_jsonl(path: Path, dataset: str) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line of a JSONL file."""
    text = read_text(path, dataset)
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{path}:{lineno}: bad JSON (column {e.colno}): {e.msg}") from None
        if not isinstance(obj, dict):
            raise DatasetError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        yield lineno, obj


def iter_tsv_lines(
    path: Path, dataset: str, columns: Sequence[str], *, header: bool = True
) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line_number, {column: value})`` for a TSV without quoting (one record per line).

    With ``header`` the first line must name ``columns`` (in that order, extra columns allowed).
    """
    text = read_text(path, dataset)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    start = 1
    if header:
        if not lines:
            raise DatasetError(f"{path}:1: empty file, expected a header row")
        head = lines[0].rstrip("\r").split("\t")
        if head[: len(columns)] != list(columns):
            raise DatasetError(f"{path}:1: expected header columns {list(columns)}, got {head}")
        start = 2
    for lineno, line in enumerate(lines[start - 1 :], start=start):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        row = line.split("\t")
        if len(row) < len(columns):
            raise DatasetError(
                f"{path}:{lineno}: expected {len(columns)} tab-separated columns, got {len(row)}"
            )
        yield lineno, dict(zip(columns, row, strict=False))


def iter_csv_rows(path: Path, dataset: str, *, delimiter: str = ",") -> Iterator[tuple[str, dict[str, str]]]:
    """Yield ``(location, row)`` for a CSV/TSV with a header row, read with the csv module.

    ``location`` is ``"path row N (line L)"``; a row with too few or too many fields is an error.
    """
    text = read_text(path, dataset, encoding="utf-8-sig")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader)
    except StopIteration:
        raise DatasetError(f"{path}:1: empty file, expected a header row") from None
    except csv.Error as e:
        raise DatasetError(f"{path}:1: bad CSV header: {e}") from None
    n = 0
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise DatasetError(f"{path} row {n + 1} (line {reader.line_num}): bad CSV: {e}") from None
        if not row or not any(c.strip() for c in row):
            continue
        n += 1
        where = f"{path} row {n} (line {reader.line_num})"
        if len(row) != len(header):
            raise DatasetError(f"{where}: expected {len(header)} fields, got {len(row)}")
        yield where, dict(zip(header, row, strict=True))


def field(obj: Any, key: str, where: str, types: type | tuple[type, ...] | None = str) -> Any:
    """``obj[key]``, checked for presence (and type); errors name ``where``."""
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected an object, got {type(obj).__name__}")
    if key not in obj:
        raise DatasetError(f"{where}: missing field {key!r}")
    value = obj[key]
    if types is not None and not isinstance(value, types):
        raise DatasetError(
            f"{where}: field {key!r} has type {type(value).__name__}, expected {_tname(types)}"
        )
    return value


def _tname(types: type | tuple[type, ...]) -> str:
    if isinstance(types, tuple):
        return " or ".join(t.__name__ for t in types)
    return types.__name__


def number(value: Any, where: str, name: str, lo: float | None = None, hi: float | None = None) -> float:
    """``value`` as a float inside ``[lo, hi]``; anything else is a DatasetError naming ``where``."""
    if isinstance(value, bool):
        raise DatasetError(f"{where}: {name} {value!r} is not a number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise DatasetError(f"{where}: {name} {value!r} is not a number") from None
    if x != x:  # NaN
        raise DatasetError(f"{where}: {name} is NaN")
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        raise DatasetError(f"{where}: {name} {x:g} outside {lo:g}-{hi:g}")
    return x


def numbers(
    values: Any, where: str, name: str, lo: float | None = None, hi: float | None = None, n: int | None = None
) -> list[float]:
    """A list of per-rater numbers, each checked like :func:`number`."""
    if not isinstance(values, list):
        raise DatasetError(
            f"{where}: {name} should be a list of per-rater scores, got {type(values).__name__}"
        )
    if n is not None and len(values) != n:
        raise DatasetError(f"{where}: {name} has {len(values)} scores, expected {n}")
    return [number(v, where, name, lo, hi) for v in values]


def snake(name: str) -> str:
    """Criterion name in lowercase snake_case: ``"Maintains Context"`` -> ``"maintains_context"``."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def render_turns(turns: Sequence[str], speakers: Sequence[str] = ("Speaker A", "Speaker B")) -> str:
    """One turn per line, ``"Name: text"``; names alternate so that the LAST turn is ``speakers[0]``.

    Loaders use this for dialogue histories whose turns carry no speaker names: the response being
    judged then always belongs to ``speakers[1]``.
    """
    n = len(turns)
    return "\n".join(f"{speakers[(n - 1 - i) % 2]}: {t}" for i, t in enumerate(turns))


#: the speaker to whom :func:`render_turns` attributes the judged response
RESPONSE_SPEAKER = "Speaker B"

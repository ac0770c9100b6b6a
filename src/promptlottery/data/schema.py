"""The one item schema every dataset loader produces."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from promptlottery.errors import UserError

HumanKind = Literal["per_rater", "mean", "single", "none"]


@dataclass
class Item:
    """One thing a judge is asked about.

    ``inputs`` holds the texts a prompt template may reference (``context``, ``conversation``,
    ``question``, ``reference``, ``evidence``, ``response``, ...). ``human`` maps a criterion
    name to its human label: a float (mean or single rating) or a list of per-rater values;
    ``human_kind`` says which of the two it is.
    """

    id: str
    dataset: str
    inputs: dict[str, str]
    system: str | None = None
    human: dict[str, Any] = field(default_factory=dict)
    human_kind: HumanKind = "none"
    meta: dict[str, Any] = field(default_factory=dict)

    def human_score(self, criterion: str) -> float | None:
        """The mean human label for ``criterion`` (per-rater lists averaged), or None."""
        value = self.human.get(criterion)
        if value is None:
            return None
        if isinstance(value, (list, tuple)):
            vals = [float(v) for v in value if v is not None]
            return sum(vals) / len(vals) if vals else None
        return float(value)


class DatasetError(UserError, ValueError):
    """A dataset file is missing or malformed; the message names the file and line/row."""


def check_text(items: list[Item], *, where: str) -> None:
    """Every text of ``items`` (id, inputs, system) is encodable text; a lone surrogate (a JSON
    ``\\ud800`` escape without its pair, a file decoded with ``surrogateescape``) would pass here and
    fail every job at its cache key: one-line :class:`DatasetError` naming the item and field."""
    for it in items:
        for field_name, value in (("id", it.id), ("system", it.system), *it.inputs.items()):
            if not isinstance(value, str):
                continue
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                raise DatasetError(
                    f"{where}: item {it.id.encode('utf-8', 'backslashreplace').decode()!r} field {field_name}: "
                    f"a lone surrogate {value[e.start : e.end]!r} at character {e.start} is not text (a JSON "
                    "\\ud800-\\udfff escape must come in a pair); fix the file"
                ) from None

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

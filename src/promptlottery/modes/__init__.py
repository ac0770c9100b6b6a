"""The judge modes (``judge.mode``), one :class:`~promptlottery.modes.base.JudgeMode` each.

A mode registers its instance in :data:`MODES` (``modes/registry.py``) where it is defined; this
package imports the modules of the built-in modes, in the order the error message lists them. :func:`get_mode` is the one lookup with the
one-line error of a typo'd mode; :func:`mode_of_scale` the mode whose prompt groups use a scale.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promptlottery.modes.base import JudgeMode, ModeError, Presentation
from promptlottery.modes.registry import MODES, default_mode, get_mode, mode_names, mode_of_scale


def default_group(judge: Any) -> str | None:
    """The built-in group of ``judge``'s mode for your own judge without a file (None where the
    mode has none or ``judge.mode`` is unknown: the config check names that)."""
    name = judge.get("mode") or default_mode()
    return MODES.get(name).default_group if name in MODES else None


def check_mode(
    mode: str,
    scale,
    *,
    group: str,
    items: list,
    where: str,
    options: Mapping[str, Any] | None = None,
    criteria: tuple = (),
) -> None:
    """``judge.mode`` agrees with the prompt group's scale and criteria and the items' kind (one
    line otherwise)."""
    get_mode(mode).check(scale, group=group, items=items, where=where, options=options, criteria=criteria)


def neutral_options() -> dict[str, dict[str, Any]]:
    """Every registered mode's own options at their defaults (:attr:`JudgeMode.options`), by config
    node: out of a job's config hash at those values (``tracking.jobdir.neutral_nested``)."""
    return {"judge": {name: default for _, mode in MODES.items() for name, default in mode.options.items()}}


# the built-in modes register themselves on import (after MODES exists), in this order
from promptlottery.modes import pointwise, pairwise, analytic  # noqa: E402, F401, I001
from promptlottery.modes import listwise  # noqa: E402, F401, I001

#: ``judge.mode`` when the config names none (:func:`default_mode`: the mode declaring itself the default)
DEFAULT_MODE = default_mode()

__all__ = [
    "check_mode",
    "DEFAULT_MODE",
    "MODES",
    "JudgeMode",
    "ModeError",
    "Presentation",
    "default_group",
    "default_mode",
    "get_mode",
    "mode_names",
    "mode_of_scale",
    "neutral_options",
]

"""The judge modes (``judge.mode``), one :class:`~promptlottery.modes.base.JudgeMode` each.

A mode registers its instance in :data:`MODES` where it is defined (``MODES.register(name, obj)``); this
package imports the modules of the built-in modes, in the order the error message lists them. :func:`get_mode` is the one lookup with the
one-line error of a typo'd mode; :func:`mode_of_scale` the mode whose prompt groups use a scale.
"""

from __future__ import annotations

from typing import Any

from promptlottery.errors import ConfigError
from promptlottery.modes.base import JudgeMode, ModeError, Presentation
from promptlottery.registry import Registry

#: the registered modes, in registration order (the order the error message lists them in)
MODES: Registry[JudgeMode] = Registry(
    "judge.mode",
    modules=tuple(f"promptlottery.modes.{m}" for m in ("pointwise", "pairwise", "analytic")),
    error=ConfigError,
)
#: ``judge.mode`` when the config names none (the ``judge_mode`` of a table without the column)
DEFAULT_MODE = "pointwise"


def mode_names() -> list[str]:
    """The registered modes' names, in registration order."""
    return [name for name, _ in MODES.items()]


def get_mode(name: str | None) -> JudgeMode:
    """The mode ``name`` (None: :data:`DEFAULT_MODE`); unknown: one line listing the known ones."""
    name = DEFAULT_MODE if name is None else name
    if name not in MODES:
        raise ConfigError(f"unknown judge.mode {name!r} (known: {', '.join(mode_names())})")
    return MODES.get(name)


def mode_of_scale(scale) -> JudgeMode:
    """The mode whose prompt groups use ``scale``'s kind (the first registered one)."""
    for _, mode in MODES.items():
        if mode.scale_kind == scale.kind:
            return mode
    raise ModeError(f"scale {scale.name} is of kind {scale.kind!r}, which no judge mode judges with")


def default_group(judge: Any) -> str | None:
    """The built-in group of ``judge``'s mode for your own judge without a file (None where the
    mode has none or ``judge.mode`` is unknown: the config check names that)."""
    name = judge.get("mode") or DEFAULT_MODE
    return MODES.get(name).default_group if name in MODES else None


def check_mode(
    mode: str,
    scale,
    *,
    group: str,
    items: list,
    where: str,
    identical_pairs: str = "warn",
    criteria: tuple = (),
) -> None:
    """``judge.mode`` agrees with the prompt group's scale and criteria and the items' kind (one
    line otherwise)."""
    get_mode(mode).check(
        scale, group=group, items=items, where=where, identical_pairs=identical_pairs, criteria=criteria
    )


# the built-in modes register themselves on import (after MODES exists), in this order
from promptlottery.modes import pointwise, pairwise, analytic  # noqa: E402, F401, I001

__all__ = [
    "check_mode",
    "DEFAULT_MODE",
    "MODES",
    "JudgeMode",
    "ModeError",
    "Presentation",
    "default_group",
    "get_mode",
    "mode_names",
    "mode_of_scale",
]

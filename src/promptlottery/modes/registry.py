"""The registry of judge modes: :data:`MODES`, the lookup with the one-line error of a typo'd mode, and
the mode of a scale. A mode's module imports this one to register itself (never the package, which
imports the modules: no import circle); so does :mod:`.base`, whose shared checks name the modes
(this module reads :class:`~promptlottery.modes.base.JudgeMode` for its types only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptlottery.errors import ConfigError
from promptlottery.registry import Registry

if TYPE_CHECKING:
    from promptlottery.modes.base import JudgeMode


class ModeError(ConfigError):
    """``judge.mode`` and the prompt group or the items disagree (one line naming the option/row)."""


#: the registered modes, in registration order (the order the error message lists them in)
MODES: Registry[JudgeMode] = Registry(
    "judge.mode",
    modules=("promptlottery.modes",),  # the package imports every built-in mode, in order
    error=ConfigError,
)


def default_mode() -> str:
    """``judge.mode`` when the config names none (the ``judge_mode`` of a table without the column):
    the mode that declares itself the default (:attr:`JudgeMode.default`)."""
    return next(name for name, mode in MODES.items() if mode.default)


def mode_names() -> list[str]:
    """The registered modes' names, in registration order."""
    return [name for name, _ in MODES.items()]


def get_mode(name: str | None) -> JudgeMode:
    """The mode ``name`` (None: :func:`default_mode`); unknown: one line listing the known ones."""
    name = default_mode() if name is None else name
    if name not in MODES:
        raise ConfigError(f"unknown judge.mode {name!r} (known: {', '.join(mode_names())})")
    return MODES.get(name)


def mode_of_scale(scale, *, by_criterion: bool | None = None) -> JudgeMode:
    """The mode whose prompt groups use ``scale``'s kind (the first registered one); ``by_criterion``
    True / False: the first that judges a group's criteria one by one / an item whole."""
    for _, mode in MODES.items():
        if mode.scale_kind == scale.kind and by_criterion in (None, mode.by_criterion):
            return mode
    how = {None: "", True: " criterion by criterion", False: " whole"}[by_criterion]
    raise ModeError(f"scale {scale.name} is of kind {scale.kind!r}, which no judge mode judges with{how}")

"""A SciPy submodule imported on first use, so that a command refused before any call (a typo in an
option, a broken template) does not pay ``scipy.stats``'s import (about half a second, most of the
start-up of ``python -m run``): the judging path imports the metrics modules, which compute nothing
until a job has judgments."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """``lazy("scipy.stats").norm`` imports ``scipy.stats`` at that first attribute and is then it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}{'' if self._module is None else ', imported'}>"


def lazy(name: str) -> Any:
    """The module ``name`` (``scipy.stats``), imported when one of its attributes is first read."""
    return LazyModule(name)

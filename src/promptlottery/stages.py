"""The jobs `python -m run` can run, by name (``stage=...``); imported lazily."""

from __future__ import annotations

import importlib
from collections.abc import Callable

STAGES: dict[str, str] = {
    "judge": "promptlottery.pipeline:run",
}


def get_stage(name: str) -> Callable:
    if name not in STAGES:
        raise ValueError(f"unknown stage {name!r}; valid: {sorted(STAGES)}")
    module, _, attr = STAGES[name].partition(":")
    return getattr(importlib.import_module(module), attr)

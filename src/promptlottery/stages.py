"""The jobs `python -m run` can run, by name (``stage=...``); imported lazily."""

from __future__ import annotations

import importlib
from collections.abc import Callable

STAGES: dict[str, str] = {
    "compare": "promptlottery.analysis.compare:run",
    "gate": "promptlottery.gating.stage:run",
    "judge": "promptlottery.pipeline:run",
    "lottery": "promptlottery.analysis.stage:run",
    "paraphrase": "promptlottery.prompts.generate:run",
    "rubric": "promptlottery.rubrics.study:run",
    "validate_prompts": "promptlottery.prompts.validation:run_validation",
}


def get_stage(name: str) -> Callable:
    if name not in STAGES:
        raise ValueError(f"unknown stage {name!r}; valid: {sorted(STAGES)}")
    module, _, attr = STAGES[name].partition(":")
    return getattr(importlib.import_module(module), attr)

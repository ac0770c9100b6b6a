"""What a judge mode names by path: the analysis sits above the modes, so a mode names the code that
reads its rows (``JudgeMode.sections``, ``budget_full`` / ``budget_sparse``) as ``"module:attribute"``."""

from __future__ import annotations

import importlib
from typing import Any


def plugin(ref: str) -> Any:
    """The object a judge mode names as ``"module:attribute"``."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)

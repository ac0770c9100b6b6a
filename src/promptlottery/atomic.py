"""Atomic file writes: a reader sees the old file or the new one, never half of one.

The new bytes go to a temporary file in the same directory (so the move never crosses a file
system), which one ``os.replace`` puts at the path; a link planted at the path is replaced, never
written through. This module imports nothing of the package, so every layer can use it: the call
cache's manifest (``calls/``) as well as the job records (``tracking/``).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["atomic_write", "atomic_write_text"]


def atomic_write(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """Call ``write(tmp_path)`` and move the result onto ``path`` in one ``os.replace``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(2)}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))

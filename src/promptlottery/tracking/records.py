"""Local run records: results.json with schema version, resolved config and git commit."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

from promptlottery import SCHEMA_VERSION
from promptlottery.atomic import atomic_write_text
from promptlottery.tracking.secrets import redact

__all__ = ["git_commit", "redact", "write_results"]


def git_commit(root: str | Path = ".") -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        sha = out.stdout.strip()
        if out.returncode != 0 or not sha:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _clean(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        return _clean(x.item())
    return x


def write_results(path: str | Path, *, config: dict, status: str, root: str | Path = ".", **fields) -> dict:
    """Write results.json atomically, every field redacted (secrets by key name, URL userinfo)."""
    record = {
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "git_commit": git_commit(root),
        "config": config,
        **fields,
    }
    record = redact(_clean(record))
    atomic_write_text(path, json.dumps(record, indent=2, sort_keys=False) + "\n")
    return record

"""Local run records: results.json with schema version, resolved config and git commit."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

from promptlottery import SCHEMA_VERSION

_SECRET = re.compile(r"(api_?key|secret|password|authorization|(^|_)token$)", re.IGNORECASE)


def redact(obj: Any) -> Any:
    """Replace the value of every secret-looking key with '***' (recursively)."""
    if isinstance(obj, dict):
        return {
            k: ("***" if _SECRET.search(str(k)) and v not in (None, "") else redact(v))
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj


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
    record = {
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "git_commit": git_commit(root),
        "config": redact(config),
        **fields,
    }
    record = _clean(record)
    path = Path(path)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
    tmp.replace(path)
    return record

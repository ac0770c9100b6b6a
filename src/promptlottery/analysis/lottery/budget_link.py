"""The budget simulation of the same runs, for the lottery report to link to (``analysis.budget_runs``).

A ``+analysis=budget`` run records the judgment files it read (``judgment_files`` in its results.json);
the lottery report links the newest finished one that read exactly the files the report reads, so the
figure beside the report is of the same grid (a budget run of another or a changed grid is not linked).
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

__all__ = ["find_budget"]


def find_budget(budget_runs, files: list[str]) -> Path | None:
    """The newest budget run directory among ``budget_runs`` (a glob or a list of them) whose results.json
    says ok and lists exactly ``files``; None when there is none (or ``budget_runs`` is empty)."""
    if not budget_runs or not files:
        return None
    patterns = [budget_runs] if isinstance(budget_runs, str) else list(budget_runs)
    wanted = sorted(str(Path(f).resolve()) for f in files)
    found: list[tuple[float, str, Path]] = []
    for pattern in patterns:
        for d in glob.glob(str(pattern)):
            path = Path(d) / "results.json"
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if (
                not isinstance(record, dict)
                or record.get("status") != "ok"
                or record.get("stage") != "budget"
            ):
                continue
            if sorted(record.get("judgment_files") or []) == wanted and (Path(d) / "budget.md").is_file():
                found.append((os.path.getmtime(path), str(d), Path(d)))
    return max(found)[2] if found else None

"""notebooks/rubric_study.ipynb executes (nbclient) on a small fake-judge run and shows its numbers."""

from __future__ import annotations

import pandas as pd

from tests.conftest import REPO
from tests.test_rubric_study import asap_run


def test_rubric_notebook_executes_on_a_small_run(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    _, _, job = asap_run(tmp_path, limit=8)
    monkeypatch.setenv("RUBRIC_RUN_DIR", str(job))
    nb = nbformat.read(REPO / "notebooks" / "rubric_study.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(REPO / "notebooks")}}
    ).execute()
    out = "\n".join(
        o.get("text", "") or str(o.get("data", {}).get("text/plain", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    )
    cells = pd.read_csv(job / "cells.csv", keep_default_na=False)
    numbers = int((cells.estimate != "").sum())
    # 2 backbones x 8 essays x (2 holistic conditions + 3 analytic x 5 traits) = 272
    assert f"run={job} judgments=272 backbones=['gemma3_270m', 'smollm2'] items=8" in out
    assert f"cells={len(cells)} numbers={numbers} n/a={len(cells) - numbers}" in out
    assert any("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)

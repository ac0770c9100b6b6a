"""``+analysis=budget`` on an adaptive grid (``judge.design=adaptive``): the plurality labels and the calls saved.

An adaptive sweep judges each item under its wordings in its own seeded order until its stop rule
settles the plurality (:mod:`promptlottery.metrics.adaptive`), so every item stops at another wording:
its grid is missing by the labels themselves (an item stops early because its first verdicts agree),
and the lottery's full-grid measures (kappa across wordings, flipped verdicts, rank changes) would be
biased on it: they are not computed. What the grid gives is each item's plurality label at its stop
and the calls it saved against every wording. The walk is replayed from the rows (the design columns
and the argmax labels) and every cell checked: a cell the walk needs and no job judged, a verdict the
walk never asked for, or a stop that differs from the row's record is refused in one line.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.budget.design_rows import design_items, one_design
from promptlottery.judging.adaptive_job import design_orders, walk_cells
from promptlottery.judging.table import AnalysisError
from promptlottery.metrics.adaptive import walk
from promptlottery.modes import get_mode
from promptlottery.tracking.staging import staged_outputs
from promptlottery.tracking.tables import markdown_table, write_table

__all__ = ["replay_adaptive", "replay_mode_adaptive", "run_adaptive"]

PARAMS = ["design_rule", "design_confidence", "design_seed", "design_items", "design_wordings"]


def replay_adaptive(config) -> tuple[dict, dict]:
    """The walk of an adaptive configuration, replayed from its rows and checked cell by cell."""
    rows = config.paraphrases
    cells = {
        (str(i), str(v)): lab
        for i, v, lab in zip(rows["item_id"], rows["variant"], rows["label"], strict=True)
    }
    return _replay(config.config_id, rows, cells, orders=())


def replay_mode_adaptive(cid: str, rows: pd.DataFrame, mode) -> tuple[dict, dict]:
    """The walk of an adaptive configuration of a judge mode without a label matrix over each item's
    (wording, order) cells, replayed from its rows (the vote: :meth:`JudgeMode.vote`) and checked
    cell by cell."""
    votes = mode.vote(rows)
    cells = {
        (str(i), f"{v}:{o}"): lab
        for i, v, o, lab in zip(rows["item_id"], rows["variant"], rows["order"], votes, strict=True)
    }
    return _replay(cid, rows, cells, orders=design_orders(mode))


def _replay(cid: str, rows: pd.DataFrame, cells: dict, *, orders: tuple[str, ...]) -> tuple[dict, dict]:
    p = one_design(cid, rows, PARAMS, "adaptive designs")
    variants = walk_cells(str(p["design_wordings"]).split(","), orders)
    items = design_items(
        cid, rows, p, "items have no verdict (a job failed, was killed or its parse failed): re-run the sweep"
    )
    missing: list[tuple[str, str]] = []

    def labels_of(variant: str, ids: list[str]) -> dict[str, object]:
        missing.extend((i, variant) for i in ids if (i, variant) not in cells)
        return {i: None if pd.isna(cells.get((i, variant))) else str(cells[(i, variant)]) for i in ids}

    walks = walk(
        items, variants, labels_of, rule=str(p["design_rule"]), confidence=float(p["design_confidence"]),
        seed=int(p["design_seed"]),
    )  # fmt: skip
    if missing:
        raise AnalysisError(
            f"{cid}: {len(missing)} cell(s) the walk needs have no verdict (first: item "
            f"{missing[0][0]} under {missing[0][1]}): re-run the sweep to complete it"
        )
    asked = {(i, v) for i, w in walks.items() for v in w.judged}
    if set(cells) - asked:
        raise AnalysisError(f"{cid}: verdicts the adaptive walk never asked for (mixed runs?)")
    recorded = {
        (str(i), int(c), str(s))
        for i, c, s in zip(rows["item_id"], rows["adaptive_calls"], rows["adaptive_stop"], strict=True)
    }
    if recorded != {(i, w.calls, w.stop) for i, w in walks.items()}:
        raise AnalysisError(
            f"{cid}: the rows' recorded stops differ from the walk their verdicts give (jobs run in "
            "parallel on a backend whose answers vary?): re-run the sweep serially"
        )
    return walks, dict(p)


def run_adaptive(opts, grid, job) -> dict[str, Any]:
    if opts.verdict != "argmax":
        raise AnalysisError(
            f"analysis.verdict={opts.verdict}: an adaptive grid stopped on argmax labels; analyse it with "
            "analysis.verdict=argmax"
        )
    labels, summary = [], []
    configs = [(c.config_id, *replay_adaptive(c), ()) for c in grid]
    configs += [
        (cid, *replay_mode_adaptive(cid, rows, mode), design_orders(mode))
        for mode in (get_mode(name) for name in grid.by_mode)
        for cid, rows in sorted(grid.rows(mode.name).items())
    ]
    for cid, walks, p, orders in configs:
        wordings = str(p["design_wordings"]).split(",")
        k = len(walk_cells(wordings, orders))
        stops = pd.Series([w.stop for w in walks.values()]).value_counts()
        calls = sum(w.calls for w in walks.values())
        labels += [
            {"config_id": cid, "item_id": i, "plurality": w.plurality, "calls": w.calls,
             "stop": w.stop, "order": ",".join(w.judged)}
            for i, w in walks.items()
        ]  # fmt: skip
        summary.append(
            {"config_id": cid, "rule": p["design_rule"], "confidence": float(p["design_confidence"]),
             "n_items": len(walks), "n_wordings": len(wordings), "n_cells": k, "calls": calls, "full_calls": len(walks) * k,
             "saved": len(walks) * k - calls, "saved_share": 1 - calls / (len(walks) * k),
             **{f"stopped_{s}": int(stops.get(s, 0)) for s in ("confident", "decided", "exhausted")}}
        )  # fmt: skip
    labels_df, summary_df = pd.DataFrame(labels), pd.DataFrame(summary)
    with staged_outputs(job.output_dir) as out:  # the one writer: staged, then published together
        write_table(labels_df, out / "tables", "adaptive_labels", float_format="%.6g")
        write_table(summary_df, out / "tables", "adaptive_summary", float_format="%.6g")
        text = [
            "# An adaptive grid: plurality labels and calls saved",
            "",
            f"Runs: `{opts.runs}`; verdict: argmax label (the label each item's walk voted with). Each item was "
            "judged under its wordings in its own seeded order until the stop rule settled its plurality; the walk "
            "is replayed from the rows and every cell checked. The lottery's full-grid measures are not computed "
            "here: the items stop where their verdicts agree, so the missing cells depend on the labels. "
            "Per item: `tables/adaptive_labels.csv`.",
            "",
            markdown_table(summary_df, {c: c for c in summary_df.columns}),
        ]
        (out / "budget.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    metrics = {
        f"adaptive/{r.config_id}/{key}": float(getattr(r, key))
        for r in summary_df.itertuples(index=False)
        for key in ("calls", "full_calls", "saved_share")
        if np.isfinite(getattr(r, key))
    }
    return job.ok(analysis=asdict(opts), metrics=metrics, report=str(Path(job.output_dir) / "budget.md"))

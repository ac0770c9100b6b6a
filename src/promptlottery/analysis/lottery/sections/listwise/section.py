"""The "Listwise judges" section of the lottery report, on the grid's listwise judgments."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.lottery.sections.base import ReportContext, Section
from promptlottery.analysis.lottery.sections.listwise.measures import (
    LOTTERY,
    SYSTEMS,
    TABLES,
    WORDINGS,
    listwise_tables,
)
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.modes.listwise import Listwise

_WORDING_MEASURES = ("top1_agreement", "kendall_tau", "first_shown_win_rate", "order_consistency")
_LOTTERY_MEASURES = ("kappa_top1", "systems_rank_changed", "max_rank_shift")


class ListwiseSection(Section):
    """Agreement with the human ranking, position bias in the list, order consistency, the lottery."""

    name = "listwise"
    mode = Listwise.name
    tables = TABLES

    def active(self, grid: JudgmentGrid, opts: LotteryOptions) -> bool:
        return bool(grid.rows(self.mode))

    def compute(
        self, grid: JudgmentGrid, opts: LotteryOptions, *, checked=None, encode=None
    ) -> dict[str, Any]:
        return {"tables": listwise_tables(grid.rows(self.mode))}

    def metrics(self, tables: dict[str, pd.DataFrame]) -> dict[str, float]:
        """``listwise/<config>/<wording>/<measure>`` and ``listwise/<config>/<measure>`` (finite only)."""
        out: dict[str, float] = {}
        for r in tables.get(WORDINGS, pd.DataFrame()).to_dict("records"):
            for m in _WORDING_MEASURES:
                out[f"listwise/{r['config_id']}/{r['variant']}/{m}"] = float(r[m])
        for r in tables.get(LOTTERY, pd.DataFrame()).to_dict("records"):
            for m in _LOTTERY_MEASURES:
                out[f"listwise/{r['config_id']}/{m}"] = float(r[m])
        return {k: v for k, v in out.items() if math.isfinite(v)}

    def render(self, R, ctx: ReportContext) -> None:
        tables = ctx.tables
        if tables.get(WORDINGS) is None or tables[WORDINGS].empty:
            return
        R.h("Listwise judges")
        R.p(
            "The judge picks the best of k responses to one question; every list is judged under its k "
            "rotations (order 123 shows response 1 first, 231 response 2). Argmax pick unless named: "
            "top-1 agreement = share of judgments picking a human best response; Kendall tau (logprob-"
            "weighted) = per list, tau-b of the pick probabilities (averaged over orders) against the human "
            "scores, mean over lists; first shown wins = share picking the response shown first (chance = "
            "1/k); order consistency = share of lists with the same pick under every order."
        )
        R.table(tables[WORDINGS], _columns(tables[WORDINGS]))
        R.p(
            "Per configuration: kappa of the top-1 pick = Fleiss' kappa of the picked response across the "
            "wordings, the (list, order) judgments its subjects; systems whose rank changes = systems ranked "
            "by how often their response is picked, counted where a wording ranks them otherwise."
        )
        R.table(tables[LOTTERY], _columns(tables[LOTTERY]))
        R.table(tables[SYSTEMS], _columns(tables[SYSTEMS]))


def _columns(table: pd.DataFrame) -> dict[str, str]:
    """Every column of ``table``, headed by its name with spaces (``config_id``: configuration)."""
    names = {"config_id": "configuration", "variant": "wording"}
    return {c: names.get(c, c.replace("_", " ")) for c in table.columns}

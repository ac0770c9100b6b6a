"""The lottery report's "Pairwise judges" section: position bias, the wording lottery of an
A-versus-B prompt, its agreement with the humans, and the system rankings it gives.

Input: the pairwise rows (``judge_mode == "pairwise"``, the grid's ``pairwise`` verdict kind) of a
judgments table, with the columns of the pairwise contract (``docs/pairwise.md``,
:mod:`.contract`). :func:`pair_table` (:mod:`.pairs`) puts one row per configuration x wording x
pair; :func:`pairwise_tables` (:mod:`.tables`, which lists the tables) computes the estimates
(:mod:`.estimates`, :mod:`.ranks`) and the verdict sentence (:mod:`.sentence`);
:func:`pairwise_metrics` flattens the named measures for ``results.json`` and
:func:`render_pairwise` writes the section (:mod:`.report`).
"""

from __future__ import annotations

from promptlottery.analysis.common.pairwise.contract import (
    CONTRACT_COLUMNS,
    ORDERS,
    check_pairwise_table,
    is_pairwise,
)
from promptlottery.analysis.common.pairwise.estimates import KINDS
from promptlottery.analysis.common.pairwise.pairs import pair_table
from promptlottery.analysis.common.pairwise.ranks import fixed_baseline
from promptlottery.analysis.lottery.sections.pairwise.names import TABLES, VERDICT
from promptlottery.analysis.lottery.sections.pairwise.report import pairwise_metrics, render_pairwise
from promptlottery.analysis.lottery.sections.pairwise.sentence import (
    PAPER_AGREEMENT,
    pairwise_sentence,
    paper_rows,
)
from promptlottery.analysis.lottery.sections.pairwise.tables import pairwise_tables

__all__ = [
    "CONTRACT_COLUMNS",
    "KINDS",
    "ORDERS",
    "PAPER_AGREEMENT",
    "TABLES",
    "VERDICT",
    "check_pairwise_table",
    "fixed_baseline",
    "is_pairwise",
    "pair_table",
    "pairwise_metrics",
    "pairwise_sentence",
    "pairwise_tables",
    "paper_rows",
    "render_pairwise",
]

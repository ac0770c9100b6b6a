"""The sections of the lottery report, in report order: each computes its tables, gives its
headline numbers and writes its part of report.md (:class:`~promptlottery.analysis.sections.base.Section`)."""

from __future__ import annotations

from promptlottery.analysis.sections.base import Section
from promptlottery.analysis.sections.human import HumanSection
from promptlottery.analysis.sections.listwise.section import ListwiseSection
from promptlottery.analysis.sections.lottery import LotterySection
from promptlottery.analysis.sections.pairwise.section import PairwiseSection

SECTIONS: tuple[Section, ...] = (LotterySection(), PairwiseSection(), ListwiseSection(), HumanSection())

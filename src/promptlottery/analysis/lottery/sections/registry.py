"""The sections of the lottery report, in report order: each computes its tables, gives its
headline numbers and writes its part of report.md (:class:`~promptlottery.analysis.lottery.sections.base.Section`)."""

from __future__ import annotations

from promptlottery.analysis.common.plugin import plugin
from promptlottery.analysis.lottery.sections.base import Section
from promptlottery.analysis.lottery.sections.human import HumanSection
from promptlottery.analysis.lottery.sections.lottery import LotterySection
from promptlottery.modes import MODES

#: the lottery's (the label-matrix modes'), then each judge mode's own sections in registration order,
#: then the human baseline
SECTIONS: tuple[Section, ...] = (
    LotterySection(),
    *(plugin(ref)() for _, mode in MODES.items() for ref in mode.sections),
    HumanSection(),
)

"""What fills a judge card, by the judge mode of its rows: the label matrix's card (:class:`MatrixCard`)
or the one a mode names (``JudgeMode.card``, ``"module:attribute"``: the analysis sits above the
modes); the card names no mode."""

from __future__ import annotations

from promptlottery.analysis.card import alt as ca
from promptlottery.analysis.card import controls as cc
from promptlottery.analysis.card import corrected as cr
from promptlottery.analysis.card import sections as cs
from promptlottery.analysis.common.plugin import plugin
from promptlottery.judging.table import AnalysisError
from promptlottery.modes import get_mode


class MatrixCard:
    """The card of a label-matrix mode's rows (``JudgeMode.label_matrix``): one verdict an item and
    wording, on the group's scale."""

    key = ("variant", "item_id")
    verdict_note = ""

    def fill(
        self, card, para, ctrl, *, wordings, controls, texts, texts_note, scale, human_range, opts
    ) -> None:
        """The card's sections on the paraphrase rows ``para`` and the control rows ``ctrl``."""
        lo, hi = min(scale.scores), max(scale.scores)
        card["lottery"] = cs.lottery_pointwise(para, wordings, (lo, hi), opts)
        card["position"] = {"missing": "pointwise: one response per prompt, no position to favour"}
        card["length"] = cs.length_pointwise(para, wordings, texts, texts_note, opts)
        card["controls"] = cc.controls_section(para, ctrl, wordings, controls, (lo, hi), opts)
        # the raters' observed range where they exist (a dataset config's human_range can be another
        # criterion's: USR's is 1-5 for 'overall' while 'engaging' is 1-3), else the configured one
        observed = cs.observed_range(para)
        card["human_scale"] = list(observed or human_range)
        to_human = cs.scale_mapper((lo, hi), observed or human_range)
        card["alt_test"] = ca.alt_test_pointwise(para, wordings, card["key"]["dataset"], to_human, opts)
        card["corrected"] = cr.corrected_section(para, wordings, to_human, opts)


def card_kind(judge_mode: str):
    """What fills the card of ``judge_mode``'s rows: the label matrix's card, or the one the mode
    names (``JudgeMode.card``); a mode with neither is one line."""
    mode = get_mode(judge_mode or None)
    if mode.card is not None:
        return plugin(mode.card)()
    if mode.label_matrix:
        return MatrixCard()
    raise AnalysisError(f"judge.mode={mode.name} has no judge card (JudgeMode.card names none)")

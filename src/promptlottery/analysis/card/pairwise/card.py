"""The pairwise judge card: what :func:`promptlottery.analysis.card.build.build_card` fills for a pairwise
judge's rows (named by the mode, ``Pairwise.card``)."""

from __future__ import annotations

from promptlottery.analysis.card.pairwise import bt as card_bt
from promptlottery.analysis.card.pairwise import corrected as cr
from promptlottery.analysis.card.pairwise import sections as ps


class PairwiseCard:
    """A pair judged in its orders: the paraphrase rows keyed by order too; every number on the
    argmax preference."""

    #: the key of one verdict among the paraphrase rows (``judging.table.paraphrase_rows``)
    key = ("variant", "item_id", "order")
    #: what the card's verdict line adds about the verdict its numbers use
    verdict_note = "; pairwise, every number uses the argmax preference"

    def fill(self, card: dict, para, ctrl, *, wordings, controls, texts, texts_note, opts, **_) -> None:
        """The card's sections on the pairs' paraphrase rows ``para`` and control rows ``ctrl`` (the
        scale and the human range are the label matrix's: not read)."""
        card["lottery"] = ps.lottery_pairwise(para, wordings, opts)
        card["position"] = ps.position_bias(para, wordings, opts)
        card["length"] = ps.length_pairwise(para, wordings, texts, texts_note, opts)
        card["controls"] = ps.controls_pairwise(para, ctrl, wordings, controls, opts)
        card["alt_test"] = ps.alt_test_pairwise(para, wordings, card["key"]["dataset"], opts)
        card["corrected"] = cr.corrected_pairwise(para, wordings, opts)
        if "per_wording" in card["corrected"]:
            card["corrected"]["bradley_terry"] = card_bt.bradley_terry_section(para, wordings, opts)

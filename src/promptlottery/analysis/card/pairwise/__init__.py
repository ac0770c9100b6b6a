"""The pairwise judge mode's judge card (``Pairwise.card``: :class:`.card.PairwiseCard`), chosen through
the mode by :func:`promptlottery.analysis.card.build.build_card`: its sections (:mod:`.sections`), the
human-corrected estimate (:mod:`.corrected`) and the corrected Bradley-Terry fit (:mod:`.bt`)."""

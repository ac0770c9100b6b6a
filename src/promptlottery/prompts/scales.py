"""Rating scales: the labels a judge may answer with and the score each stands for.

This module registers the rating scales (:data:`RATING`: a score for one response). A judge mode
whose groups answer on scales of its own kind registers them from its own module
(:meth:`promptlottery.modes.base.JudgeMode` ``scale_kind``; e.g. the preference labels ``A`` /
``B`` / a tie of a mode judging two answers, with ``preference=True``): :data:`SCALES` imports the
modes on its first lookup, so every scale is known wherever one is looked up.
"""

from __future__ import annotations

from dataclasses import dataclass

from promptlottery.registry import Registry

#: the :attr:`Scale.kind` of the rating scales registered here
RATING = "rating"


@dataclass(frozen=True)
class Scale:
    name: str
    labels: tuple[str, ...]
    scores: tuple[float, ...]
    #: :data:`RATING` (a rating of one response), or the kind a judge mode registers its own
    #: scales under (its ``scale_kind``): the mode whose prompt groups use the scale
    kind: str = RATING
    #: the tie label of a preference scale (None: no tie allowed)
    tie_label: str | None = None
    #: its labels name which shown answer is better (``A`` / ``B`` / a tie), not a rating: the
    #: verdict reader looks for a preference's markers (``[[B]]``, "Assistant B is better") and never
    #: takes a bare last label (:mod:`promptlottery.prompts.verdicts`)
    preference: bool = False

    @property
    def binary(self) -> bool:
        return len(self.labels) == 2

    def score_of(self, label: str) -> float:
        return self.scores[self.labels.index(label)]

    def nearest_label(self, score: float) -> str:
        """The label whose score is closest to ``score`` (ties go to the lower label)."""
        best = min(range(len(self.scores)), key=lambda i: (abs(self.scores[i] - score), i))
        return self.labels[best]

    def parse(self, text: str, *, prompt: str | None = None, cued: bool = False) -> str | None:
        """The label at the verdict of ``text`` (:func:`promptlottery.prompts.verdicts.read_verdict`:
        the label at the answer cue, else the last verdict marker, else the last label; a restated
        scale, an echoed prompt or a hedge is no verdict); None: a parse failure (:meth:`read` says why)."""
        return self.read(text, prompt=prompt, cued=cued).label

    def read(self, text: str, *, prompt: str | None = None, cued: bool = False):
        """The :class:`~promptlottery.prompts.verdicts.Reading` of ``text``: label, or the reason for none."""
        from promptlottery.prompts.verdicts import read_verdict

        return read_verdict(text, self, prompt=prompt, cued=cued)


#: the scales by name (``judge.scale``, a prompt group's ``scale:``): the rating scales of this
#: module and those the judge modes register (the modes, above this layer, are named, not imported)
SCALES: Registry[Scale] = Registry("scale", modules=("promptlottery.modes",), error=ValueError)


def register_scale(name: str, labels, scores, **kw) -> Scale:
    """Register the scale ``name`` (its ``labels``, each label's score; ``kw``: the other
    :class:`Scale` fields) and return it; a judge mode registers its own scales with this."""
    return SCALES.register(name, Scale(name, tuple(labels), tuple(float(x) for x in scores), **kw))


register_scale("likert_1_5", "12345", range(1, 6))
register_scale("likert_1_3", "123", range(1, 4))
register_scale("likert_1_10", [str(i) for i in range(1, 11)], range(1, 11))
register_scale("binary_yes_no", ("yes", "no"), (1.0, 0.0))
# the ASAP rater scales (holistic and ASAP++ traits): set 1-2 1-6, sets 3-4 0-3, sets 5-6 0-4
register_scale("likert_1_6", "123456", range(1, 7))
register_scale("likert_0_3", "0123", range(4))
register_scale("likert_0_4", "01234", range(5))


def get_scale(name: str) -> Scale:
    """The scale ``name``; an unknown name is one line listing the known ones (a ValueError)."""
    return SCALES.get(name)

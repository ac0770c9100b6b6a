"""Rating scales: the labels a judge may answer with and the score each stands for.

A *pairwise* scale (``kind="pairwise"``) holds preference labels: ``A`` (the answer shown first is
better), ``B`` (the one shown second), optionally a tie label (``C``, as in FastChat's ``pair-v2``
output format ``[[A]]`` / ``[[B]]`` / ``[[C]]``). Its scores are those of the shown order (A = 1,
B = 0, tie = 0.5: the probability-weighted score is then p(first shown wins), a tie counted as half);
the pairwise judge mode maps them into the pair's own terms per order (``modes/pairwise.py:for_order``).
"""

from __future__ import annotations

from dataclasses import dataclass

from promptlottery.registry import Registry


@dataclass(frozen=True)
class Scale:
    name: str
    labels: tuple[str, ...]
    scores: tuple[float, ...]
    #: "pointwise" (a rating of one response) or "pairwise" (a preference between two)
    kind: str = "pointwise"
    #: the pairwise tie label (None: no tie allowed)
    tie_label: str | None = None

    @property
    def binary(self) -> bool:
        return len(self.labels) == 2

    @property
    def pairwise(self) -> bool:
        return self.kind == "pairwise"

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


def parse_preference(text: str, labels: tuple[str, ...], *, cued: bool = False) -> str | None:
    r"""The preference label in a pairwise judge's raw text (:meth:`Scale.parse` on a pairwise scale
    of ``labels``, the last one the tie where there are three): the letter right after the ``[[``
    prefix (``"A]]\n\nExplanation: unlike [[B]]"`` is A: the verdict the judge gave where it was asked
    for it), else the last verdict marker (``[[B]]``, ``Verdict: B``, ``Assistant B is better``; not
    one after "not" / "unlike" / "than"), else a bare letter alone on the first line. ``[[D]]`` on an
    A/B/C scale, or a leading letter outside the scale, is no label (a parse failure, missing with
    its reason).

    >>> [parse_preference(t, ("A", "B", "C")) for t in ("[[A]]", "so [[c]]", "B", "A]]", " [B", "a tie", "[[D]]")]
    ['A', 'C', 'B', 'A', 'B', None, None]
    >>> parse_preference("A]]\n\nExplanation: unlike [[B]]", ("A", "B", "C"))
    'A'
    """
    scores = (1.0, 0.0, 0.5)[: len(labels)]
    tie = labels[2] if len(labels) == 3 else None
    return Scale("preference", tuple(labels), scores, "pairwise", tie).parse(text or "", cued=cued)


#: the rating scales by name (``judge.scale``, a prompt group's ``scale:``)
SCALES: Registry[Scale] = Registry("scale", error=ValueError)


def _scale(name: str, labels, scores, **kw) -> None:
    SCALES.register(name, Scale(name, tuple(labels), tuple(float(x) for x in scores), **kw))


_scale("likert_1_5", "12345", range(1, 6))
_scale("likert_1_3", "123", range(1, 4))
_scale("likert_1_10", [str(i) for i in range(1, 11)], range(1, 11))
_scale("binary_yes_no", ("yes", "no"), (1.0, 0.0))
# the ASAP rater scales (holistic and ASAP++ traits): set 1-2 1-6, sets 3-4 0-3, sets 5-6 0-4
_scale("likert_1_6", "123456", range(1, 7))
_scale("likert_0_3", "0123", range(4))
_scale("likert_0_4", "01234", range(5))
# preference labels: A = the answer shown first is better, B = the second, C = a tie
_scale("pairwise_ab", "AB", (1.0, 0.0), kind="pairwise")
_scale("pairwise_abc", "ABC", (1.0, 0.0, 0.5), kind="pairwise", tie_label="C")
# the same, the positions numbered ("Response 1" / "Output (2)"), a tie as 0
_scale("pairwise_12", "12", (1.0, 0.0), kind="pairwise")
_scale("pairwise_120", "120", (1.0, 0.0, 0.5), kind="pairwise", tie_label="0")
# listwise: the shown position of the best of three responses (modes/listwise.py)
_scale("listwise_1_3", "123", (1.0, 2.0, 3.0), kind="listwise")


def get_scale(name: str) -> Scale:
    """The scale ``name``; an unknown name is one line listing the known ones (a ValueError)."""
    return SCALES.get(name)

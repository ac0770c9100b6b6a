"""Rating scales: the labels a judge may answer with and the score each stands for.

A *pairwise* scale (``kind="pairwise"``) holds preference labels: ``A`` (the answer shown first is
better), ``B`` (the one shown second), optionally a tie label (``C``, as in FastChat's ``pair-v2``
output format ``[[A]]`` / ``[[B]]`` / ``[[C]]``). Its scores are those of the shown order (A = 1,
B = 0, tie = 0.5: the probability-weighted score is then p(first shown wins), a tie counted as half);
the judging runner maps them into the pair's own terms per order (:meth:`Scale.for_order`).
"""

from __future__ import annotations

import re
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

    def for_order(self, order: str) -> Scale:
        """A pairwise scale whose scores are in the pair's own terms for presentation ``order``:
        ``"12"`` keeps A = response_a (score 1), ``"21"`` shows response_b as A, so A scores 0 and B 1
        (the tie stays 0.5). The labels are unchanged (they are what the judge was shown)."""
        if not self.pairwise or order == "12":
            return self
        if order != "21":
            raise ValueError(f"order must be '12' or '21', got {order!r}")
        swap = {1.0: 0.0, 0.0: 1.0}
        return Scale(
            self.name, self.labels, tuple(swap.get(s, s) for s in self.scores), self.kind, self.tie_label
        )

    def score_of(self, label: str) -> float:
        return self.scores[self.labels.index(label)]

    def nearest_label(self, score: float) -> str:
        """The label whose score is closest to ``score`` (ties go to the lower label)."""
        best = min(range(len(self.scores)), key=lambda i: (abs(self.scores[i] - score), i))
        return self.labels[best]

    def parse(self, text: str) -> str | None:
        """First scale label that appears as a whole word in ``text`` (case-insensitive); on a
        pairwise scale :func:`parse_preference`."""
        if self.pairwise:
            return parse_preference(text, self.labels)
        alternatives = "|".join(re.escape(lab) for lab in sorted(self.labels, key=len, reverse=True))
        m = re.search(rf"(?<![\w.])({alternatives})(?![\w]|\.\d)", text, flags=re.IGNORECASE)
        if not m:
            return None
        found = m.group(1).lower()
        return next(lab for lab in self.labels if lab.lower() == found)


#: the letter right after the ``[[`` the judge was prompted with (assistant prefix), closed by ``]]``
#: (the raw text starts ``A]]``), or a whole ``[[A]]`` at the very start
_AFTER_PREFIX = re.compile(r"^\s*(?:\[\[)?\s*([A-Za-z])\s*\]\]")
_BRACKETED = re.compile(r"\[\[\s*([A-Za-z])\s*\]\]")
#: a bare capital letter at the start (an answer given as just ``B``, or an unclosed ``[[B``)
_LEADING = re.compile(r"^[\s\[\"'*(]*([A-Z])(?![A-Za-z0-9])")


def parse_preference(text: str, labels: tuple[str, ...]) -> str | None:
    r"""The preference label in a pairwise judge's raw text, the first rule that matches:

    1. the letter right after the ``[[`` prefix, closed by ``]]`` (``"A]]\n\nExplanation: unlike
       [[B]]"`` is A): the verdict the judge gave where it was asked for it. FastChat reads the whole
       judgment (prefix included, ``fastchat/llm_judge/common.py``, ``run_judge_pair``): ``if "[[A]]"
       in judgment: winner = "A" elif "[[B]]" in judgment: winner = "B" elif "[[C]]" in judgment:
       winner = "tie"``, which gives A on that text too;
    2. else the first ``[[X]]`` anywhere (case-insensitive). Ours where FastChat differs: on
       ``"[[B]] ... [[A]]"`` (no verdict at the start) FastChat's fixed A-before-B-before-C order
       gives A, the first occurrence gives B;
    3. else a bare capital letter at the start (an answer given as just ``B``).

    ``[[D]]`` on an A/B/C scale, or a leading letter outside the scale, is no label (a parse
    failure, missing with its reason).

    >>> [parse_preference(t, ("A", "B", "C")) for t in ("[[A]]", "so [[c]]", "B", "A]]", " [B", "a tie", "[[D]]")]
    ['A', 'C', 'B', 'A', 'B', None, None]
    >>> parse_preference("A]]\n\nExplanation: unlike [[B]]", ("A", "B", "C"))
    'A'
    """
    text = text or ""
    m = _AFTER_PREFIX.search(text) or _BRACKETED.search(text) or _LEADING.search(text)
    if not m:
        return None
    found = m.group(1).upper()
    return next((lab for lab in labels if lab.upper() == found), None)


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


def get_scale(name: str) -> Scale:
    """The scale ``name``; an unknown name is one line listing the known ones (a ValueError)."""
    return SCALES.get(name)

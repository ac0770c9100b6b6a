"""Rating scales: the labels a judge may answer with and the score each stands for."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    name: str
    labels: tuple[str, ...]
    scores: tuple[float, ...]

    @property
    def binary(self) -> bool:
        return len(self.labels) == 2

    def score_of(self, label: str) -> float:
        return self.scores[self.labels.index(label)]

    def nearest_label(self, score: float) -> str:
        """The label whose score is closest to ``score`` (ties go to the lower label)."""
        best = min(range(len(self.scores)), key=lambda i: (abs(self.scores[i] - score), i))
        return self.labels[best]

    def parse(self, text: str) -> str | None:
        """First scale label that appears as a whole word in ``text`` (case-insensitive)."""
        alternatives = "|".join(re.escape(lab) for lab in sorted(self.labels, key=len, reverse=True))
        m = re.search(rf"(?<![\w.])({alternatives})(?![\w]|\.\d)", text, flags=re.IGNORECASE)
        if not m:
            return None
        found = m.group(1).lower()
        return next(lab for lab in self.labels if lab.lower() == found)


SCALES: dict[str, Scale] = {
    "likert_1_5": Scale("likert_1_5", ("1", "2", "3", "4", "5"), (1.0, 2.0, 3.0, 4.0, 5.0)),
    "likert_1_3": Scale("likert_1_3", ("1", "2", "3"), (1.0, 2.0, 3.0)),
    "likert_1_10": Scale(
        "likert_1_10", tuple(str(i) for i in range(1, 11)), tuple(float(i) for i in range(1, 11))
    ),
    "binary_yes_no": Scale("binary_yes_no", ("yes", "no"), (1.0, 0.0)),
    # the ASAP rater scales (holistic and ASAP++ traits): set 1-2 1-6, sets 3-4 0-3, sets 5-6 0-4
    "likert_1_6": Scale("likert_1_6", tuple("123456"), (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)),
    "likert_0_3": Scale("likert_0_3", tuple("0123"), (0.0, 1.0, 2.0, 3.0)),
    "likert_0_4": Scale("likert_0_4", tuple("01234"), (0.0, 1.0, 2.0, 3.0, 4.0)),
}


def get_scale(name: str) -> Scale:
    if name not in SCALES:
        raise ValueError(f"unknown scale {name!r}; valid: {sorted(SCALES)}")
    return SCALES[name]

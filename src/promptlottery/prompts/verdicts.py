"""Reading a judge's verdict from the text it wrote, the way it wrote it.

A judge that reasons before it answers names labels that are not its verdict: it restates the scale
("On a scale from 1 to 5, I would rate this answer a 4."), echoes the prompt, numbers its points, or
hedges ("a 3 or a 4"). :func:`read_verdict` takes, in this order:

1. **the label at the answer cue**: where the request ended with an answer prefix (an assistant
   prefix such as ``[[`` or ``Score:``, or a completion prompt's ``Answer:``), the label the text
   starts with (``A]]``, `` 4``); else a first line that is nothing but a label (``4``, ``**B**``);
2. **the last explicit verdict marker**: ``Rating: 4``, ``Score: 4/5``, ``[[4]]``, ``I would rate
   this a 4``, ``Answer: yes``; on a preference scale (:attr:`Scale.preference`) ``[[B]]``,
   ``Verdict: Assistant B``, ``Response 2 is better``, ``it is a tie`` (a marker after "not",
   "unlike", "than" is no verdict);
3. **the last label** of the text (a rating scale only: a preference's bare letters are words too);
   a word label (``yes``/``no``) only where it stands as an answer (``No, ...``, ``... so yes.``).

Before that, what is never a verdict is masked: lines echoed from the prompt, the restated scale
(``from 1 to 5``, ``1 (poor) to 5 (excellent)``, ``out of 5`` / ``/5``, ``yes or no``, ``A or B``,
``1, 2, 3, 4 or 5``, a listing ``1 - poor`` / ``2 - fair``, ``"[[A]]" if assistant A is better``) and
the numbers of a numbered list. A verdict that names two labels (``3 or 4``, ``3-4``, ``between 3
and 4``) is ambiguous: a parse failure with its reason, like a text without any label.

>>> from promptlottery.prompts.scales import Scale, get_scale
>>> five = get_scale("likert_1_5")
>>> abc = Scale("abc", ("A", "B", "C"), (1.0, 0.0, 0.5), tie_label="C", preference=True)
>>> read_verdict("On a scale from 1 to 5, I would rate this answer a 4.", five).label
'4'
>>> read_verdict("1. Accurate.\\n2. Fluent.\\nRating: 4/5", five).label
'4'
>>> read_verdict("Somewhere between a 3 and a 4.", five).reason
"ambiguous likert_1_5 verdict: names 3 and 4 ('between a 3 and a 4') in raw output 'Somewhere between a 3 and a 4.'"
>>> read_verdict('Verdict format: "[[A]]" if A is better, "[[B]]" if B is. Assistant B is better. [[B]]', abc).label
'B'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the scale calls this module (Scale.read): no import back at run time
    from promptlottery.prompts.scales import Scale

#: how a verdict was found (:attr:`Reading.how`)
AT_CUE, FIRST_LINE, MARKER, LAST_LABEL = "answer cue", "first line", "marker", "last label"
#: an echoed prompt line counts from this many words (shorter lines, "Rating: 4", may be the judge's own)
ECHO_MIN_WORDS = 4


@dataclass(frozen=True)
class Reading:
    """A verdict read from text: the label (None: a parse failure), the reason when there is none,
    and which rule found it (``how``)."""

    label: str | None
    reason: str | None = None
    how: str | None = None


def read_verdict(text: str | None, scale: Scale, *, prompt: str | None = None, cued: bool = False) -> Reading:
    """The verdict of ``text`` on ``scale`` (see the module docstring). ``prompt``: the rendered
    request, whose echoed lines are no verdict; ``cued``: the request ended with an answer cue, so
    the text starts at the verdict."""
    text = text or ""
    shown = f"in raw output {text[:60]!r}"
    if not text.strip():
        return Reading(None, f"no {scale.name} label {shown} (empty)")
    r = _Reader(scale, text)
    r.mask_echo(prompt)
    r.mask_restated()
    found = r.at_start(cued) or r.last_marker() or (None if scale.preference else r.last_label())
    if found is None:
        if r.any_label(r.original):
            return Reading(None, f"no {scale.name} label at a verdict {shown}: only the restated scale, "
                                 "an echoed prompt or list numbers name labels")  # fmt: skip
        return Reading(None, f"no {scale.name} label {shown}")
    how, start, end, label = found
    hedge = r.hedge_at(start, end)
    if hedge is not None:
        both, where = hedge
        return Reading(
            None, f"ambiguous {scale.name} verdict: names {' and '.join(both)} ({where!r}) {shown}"
        )
    return Reading(label, None, how)


_OPEN = r"[\s*_`\"'“‘(\[]*"  # markdown, quotes and brackets before a label
_CLOSE = r"[\s*_`\"'”’)\].!,;:]*"
_QCLOSE = r"[\s*_`\"'”’)\]]*"  # quotes and brackets only (a label's sentence goes on after them)
#: words just before a marker that make it no verdict ("unlike [[B]]", "better than a 3")
_NEG = re.compile(r"(?:\bnot|\bunlike|\brather\s+than|\binstead\s+of|\bthan|\bnor|\bvs\.?|\bversus)\W*(?:\w+\W+)?$",
                  re.IGNORECASE)  # fmt: skip
_PW_NOUN = r"(?:assistant|response|answer|output|option|model|candidate|system)"
#: a rating scale's markers: the text right before the label
_PT_MARKERS = (
    r"\b(?:final\s+|overall\s+)?(?:rating|score|grade|verdict|answer|judg(?:e)?ment|evaluation|label|result|decision)"
    r"(?:\s+(?:is|would\s+be|will\s+be|should\s+be|of))?\s*[:=\-–]?\s*(?:an?\s+)?",
    r"\b(?:rate|rating|give|giving|assign|award|score)\b[^.\n]{0,40}?\b(?:an?|as)\s+",
    r"\b(?:rate|give|assign|award)\s+(?:it|this|this\s+\w+|the\s+\w+)\s+",
    r"\[\[\s*",
)
#: a preference scale's markers (the ``better`` form is checked for a negation after it)
_PW_MARKERS = (
    rf"\b(?:final\s+)?(?:verdict|winner|choice|decision|preference|answer|better\s+(?:one|{_PW_NOUN}))\s*"
    rf"(?:is|:|=|-)?\s*[*_`\"'(\[]*\s*(?:{_PW_NOUN}\s*)?\(?",
    rf"\b(?:prefer|choose|pick|select)\s+(?:{_PW_NOUN}\s*)?\(?",
    r"\[\[\s*",
)
_BETTER = re.compile(
    r"\)?(?:'s\s+\w+)?\s+(?:is|was|wins|does|provides|gives|answers|offers)\b([^.\n;]{0,40}?)"
    r"\b(?:better|preferred|superior|stronger|more\s+helpful|more\s+accurate|the\s+winner)\b",
    re.IGNORECASE,
)
_TIE = re.compile(
    r"\b(?:it|this|verdict|result|outcome)\s*(?:is|'s|:)\s*(?:a\s+)?(?:tie|draw)\b|\b(?:equally\s+good|neither\s+is\s+better)\b",
    re.IGNORECASE,
)


class _Reader:
    """The text, a copy of it with what is no verdict masked (blanked, offsets kept), and the hedges."""

    def __init__(self, scale: Scale, text: str):
        self.scale = scale
        self.original = text
        self.masked = text
        self.hedges: list[tuple[int, int, tuple[str, str], str]] = []
        alts = "|".join(re.escape(lab) for lab in sorted(scale.labels, key=len, reverse=True))
        self.alts = alts
        # a label as a whole token (a decimal 3.5 holds none); one letter of a preference scale is
        # case-sensitive outside brackets ("a" is an article)
        self.token = rf"(?<![\w.])(?:{alts})(?![\w]|\.\d)"
        self.ci = not (scale.preference and all(len(lab) == 1 and lab.isalpha() for lab in scale.labels))
        order = sorted(scale.labels, key=scale.score_of) if not scale.preference else list(scale.labels)
        self.ends = {order[0].lower(), order[-1].lower()} if not scale.preference else set()
        if scale.preference:  # the two positions (not the tie) are the scale's "ends"
            self.ends = {lab.lower() for lab in scale.labels if lab != scale.tie_label}

    # -- helpers -----------------------------------------------------------------------------------
    def label_of(self, found: str) -> str | None:
        return next((lab for lab in self.scale.labels if lab.lower() == found.strip().lower()), None)

    def blank(self, start: int, end: int) -> None:
        m = self.masked
        self.masked = m[:start] + "".join(c if c == "\n" else " " for c in m[start:end]) + m[end:]

    def tokens(self, text: str, ci: bool | None = None):
        flags = re.IGNORECASE if (self.ci if ci is None else ci) else 0
        return list(re.finditer(self.token, text, flags))

    def any_label(self, text: str) -> bool:
        return bool(self.tokens(text, ci=True))

    # -- masking -----------------------------------------------------------------------------------
    def mask_echo(self, prompt: str | None) -> None:
        """Blank every line of the text that is a line of the prompt (of at least ECHO_MIN_WORDS words)."""
        if not prompt:
            return
        seen = {" ".join(ln.split()) for ln in prompt.splitlines() if len(ln.split()) >= ECHO_MIN_WORDS}
        # a sentence of the prompt echoed inside a line counts too (a system prompt is one long line)
        sentences = {
            s for ln in seen for s in re.split(r"(?<=[.!?:])\s+", ln) if len(s.split()) >= ECHO_MIN_WORDS
        }
        pos = 0
        for line in self.original.splitlines(keepends=True):
            norm = " ".join(line.split())
            if norm and (norm in seen or len(norm.split()) >= ECHO_MIN_WORDS and norm in prompt):
                self.blank(pos, pos + len(line))
            else:
                for s in sentences:
                    k = line.find(s)
                    if k >= 0:
                        self.blank(pos + k, pos + k + len(s))
            pos += len(line)

    def mask_restated(self) -> None:
        L = self.token
        flags = re.IGNORECASE
        paren = r"(?:\s*\([^()\n]{0,60}\))?"
        art = r"(?:an?\s+)?"
        joined = rf"({L}){paren}{_QCLOSE}\s*(to|-|–|—|through|\.\.|or|and|/|\||,)\s*{art}{_OPEN}({L}){paren}"
        # a definition: a label then "if/when ...", "= ...", "means ...", "for a tie": blanked with its clause
        definition = (
            rf"{_OPEN}{L}{_QCLOSE}\s*(?:\([^()\n]{{0,60}}\)\s*)?"
            r"(?:(?:if|when|means|indicates|represents|stands\s+for|corresponds\s+to)\b[^,.;\n\"“”]*"
            r"|for\s+(?:a\s+)?tie\b|=\s*[^,;\n]*)"
        )
        for m in re.finditer(definition, self.masked, flags):
            self.blank(m.start(), m.end())
        # enumerations of three or more labels ("1, 2, 3, 4 or 5")
        enum = rf"{L}(?:{_CLOSE}\s*(?:,|or|and|/|\|)\s*{_OPEN}{L}){{2,}}"
        for m in re.finditer(enum, self.masked, flags):
            labs = {x.group().lower() for x in re.finditer(L, m.group(), flags)}
            if len(labs) >= 3:
                self.blank(m.start(), m.end())
        # "out of 5", "/5": the scale's top as a denominator
        if not self.scale.preference:
            top = max(self.scale.labels, key=self.scale.score_of)
            for m in re.finditer(rf"(?:\bout\s+of|/)\s*{re.escape(top)}(?![\w]|\.\d)", self.masked, flags):
                self.blank(m.start(), m.end())
        # ranges and pairs of two labels: the scale's two ends restated, two others a hedge
        for m in list(re.finditer(rf"(\b(?:from|between)\s+{art})?{joined}", self.masked, flags)):
            x, sep, y = m.group(2).lower(), m.group(3).lower(), m.group(4).lower()
            if x == y:
                continue
            if {x, y} == self.ends:
                self.blank(m.start(), m.end())
                continue
            hedging = (
                ("or", "/", "|")
                if self.scale.preference
                else ("or", "/", "|", "to", "-", "–", "—", "through", "..")
            )
            if sep in hedging or (sep == "and" and m.group(1)):
                pair = (self.label_of(m.group(2)), self.label_of(m.group(4)))
                self.hedges.append((m.start(), m.end(), pair, m.group()))
        # listings of two or more lines that each define a label ("1 - poor", "5: excellent") and
        # numbered lists ("1. Accurate", "2) Fluent"): no verdict in their leading numbers
        for pattern in (
            rf"^[ \t]*[-*•]?[ \t]*{_OPEN}({L}){_CLOSE}[ \t]*[-–:=][ \t]*\S",
            rf"^[ \t]*({L})[.)][ \t]+\S",
        ):
            lines = list(re.finditer(pattern, self.masked, flags | re.MULTILINE))
            if len({m.group(1).lower() for m in lines}) >= 2:
                for m in lines:
                    self.blank(m.start(1), m.end(1))

    # -- finding ----------------------------------------------------------------------------------
    def at_start(self, cued: bool):
        """The label the text starts with after an answer cue, or a first line that is only a label."""
        first = re.match(rf"\s*{_OPEN}({self.token}){_CLOSE}", self.masked, re.IGNORECASE)
        if first is None:
            return None
        label, after = first.group(1), self.masked[first.end(1) :]
        if not self.ci and label != label.upper() and not re.match(r"\s*\]\]", after):
            return None  # "a tie": an article, not the letter A
        line_done = re.match(r"[ \t*_`\"'”’)\].!,;:]*(?:\n|$)", after) is not None
        # after a cue a label followed by prose counts ("4 - the answer is right", "A]] because"),
        # unless the prose goes on in the same sentence ("A better answer would ...")
        cued = cued or re.match(r"\s*\]\]", after) is not None  # "B]] ...": the continued "[[" prefix
        if cued and (line_done or not re.match(r"[ \t]+[a-z]", after)):
            return AT_CUE, first.start(1), first.end(1), self.label_of(label)
        if line_done:
            return FIRST_LINE, first.start(1), first.end(1), self.label_of(label)
        return None

    def last_marker(self):
        found = []
        for pattern in _PW_MARKERS if self.scale.preference else _PT_MARKERS:
            for m in re.finditer(rf"(?:{pattern}){_OPEN}({self.token})", self.masked, re.IGNORECASE):
                self._keep(found, m, bracket="[[" in m.group(), noun=re.search(_PW_NOUN, m.group(), re.I))
        if self.scale.preference:  # "Assistant B is better", "Response 2 gives a more accurate answer"
            for m in re.finditer(rf"\b{_PW_NOUN}\s*\(?({self.token})", self.masked, re.IGNORECASE):
                better = _BETTER.match(self.masked, m.end())
                if better and not re.search(r"\b(?:not|never|less|n't)\b|n't\b", better.group(1), re.I):
                    self._keep(found, m, bracket=False, noun=True)
            if self.scale.tie_label is not None:
                found += [
                    (MARKER, m.start(), m.end(), self.scale.tie_label) for m in _TIE.finditer(self.masked)
                ]
        return max(found, key=lambda f: f[1]) if found else None

    def _keep(self, found: list, m, *, bracket: bool, noun) -> None:
        label = m.group(1)
        # a preference letter outside brackets and after no noun must be upper case (not the article "a")
        if not self.ci and label != label.upper() and not bracket and not noun:
            return
        if _NEG.search(self.masked[max(0, m.start() - 30) : m.start()]):
            return
        found.append((MARKER, m.start(1), m.end(1), self.label_of(label)))

    def last_label(self):
        toks = self.tokens(self.masked)
        for m in reversed(toks):
            label = self.label_of(m.group())
            if label.isalpha() and not self._stands_as_answer(m):
                continue
            return LAST_LABEL, m.start(), m.end(), label
        return None

    def _stands_as_answer(self, m) -> bool:
        """A word label ("no") counts only at the start of a sentence or line, alone, or last."""
        before = self.masked[: m.start()]
        after = self.masked[m.end() :]
        starts = re.search(r"(?:^|[.!?:\n])[\s*_\"'“(\[]*$", before) is not None
        ends = re.match(r"[\s*_\"'”)\].!]*$", after) is not None
        quoted = re.search(r"[\"'“*]\s*$", before) is not None and re.match(r"\s*[\"'”*]", after) is not None
        return (starts and re.match(r"\s*[,.!:;\n]|\s*$", after) is not None) or ends or quoted

    def hedge_at(self, start: int, end: int):
        for s, e, pair, where in self.hedges:
            if s <= start and end <= e:
                return pair, where
        return None

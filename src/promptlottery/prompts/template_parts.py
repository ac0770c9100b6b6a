"""A judge template split into the text a paraphrase rewords and the parts it keeps verbatim.

Small chat models asked to reword a whole template drop its placeholders or its answer-format
line (SmolLM2-135M: 0 of 16 candidates passed the checks, Qwen2.5-Coder-1.5B: 0 of 8). So only the
*instruction* text goes to the model, one block at a time, and every other part is put back
verbatim where it was:

* ``placeholder``: a line holding a Jinja2 tag (``{{ response }}``, ``Question: {{ context }}``);
* ``format``: the answer-format instruction, the last prose sentence that names a scale label
  (``Write 'Yes' if it is grammatical, and 'No' if it is not:``), wherever it stands;
* ``layout``: blank lines, short headings (fewer than 3 words: ``Answer:``) and scale-definition
  lines that start with a label (``1 - wrong``, ``Yes: ...``).

Everything else is ``instruction``. Joining the parts' texts gives the template back unchanged.

>>> parts = split_template("Judge the sentence below.\\n\\n{{ response }}\\n\\nAnswer Yes or No.\\n",
...                        get_scale("binary_yes_no"), where="t.j2")
>>> [p.kind for p in parts]
['instruction', 'layout', 'placeholder', 'layout', 'format', 'layout']
>>> assemble(parts, {0: "Decide about this sentence."})
'Decide about this sentence.\\n\\n{{ response }}\\n\\nAnswer Yes or No.\\n'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from promptlottery.prompts.groups import PromptError
from promptlottery.prompts.scales import Scale, get_scale  # noqa: F401 - get_scale: the doctest
from promptlottery.prompts.validation import word_tokens

INSTRUCTION, FORMAT, PLACEHOLDER, LAYOUT = "instruction", "format", "placeholder", "layout"
_TAG = re.compile(r"\{\{|\{%|\{#|\}\}|%\}")
# a sentence ends at . ! ? before whitespace, or at the end of its line (a trailing ':' stays in it)
_SENTENCE = re.compile(r"\S[^\n]*?(?:[.!?](?=\s|$)|(?=\n)|$)")
_QUOTES = "\"'`“”‘’«»"

# The model sees one instruction block, never the placeholders or the answer format; the two
# examples show a small model what a rewording is (and that numbers of a scale stay).
REWORD_PROMPT = (
    "Reword the instruction below. Keep its meaning and every number or quoted word it mentions, but "
    "use different words and a different sentence structure. Do not carry out the instruction and do "
    "not add anything to it. Reply with the reworded instruction only.\n\n"
    "Instruction: Read the review and decide whether the customer was satisfied with the product.\n"
    "Reworded: Determine, after reading the review, if the product left the customer content.\n\n"
    "Instruction: Score the fluency of the summary from 1 (not fluent) to 5 (very fluent).\n"
    "Reworded: On a scale where 1 means not fluent and 5 means very fluent, how fluent is the summary?\n\n"
    "Instruction: {text}\n"
    "Reworded:"
)


@dataclass(frozen=True)
class Part:
    kind: str
    text: str

    @property
    def core(self) -> str:
        """The text without its surrounding whitespace (what the model rewords)."""
        return self.text.strip()


#: verbs after which a word label stands as an answer ("Answer yes if ...", "reply with No")
_ANSWER_VERBS = r"(?:answer|reply|respond|say|output|write|return|print)"


def labels_named(text: str, scale: Scale) -> set[str]:
    """Scale labels that ``text`` names as labels.

    A label that is not a word (``1``, ``10``) is named wherever it stands as a whole token (the
    matching of :meth:`Scale.parse`). A word label (``yes``, ``no``) is an ordinary word too ("no
    answer is wrong"), so it counts only where it stands as a label: quoted (``"no"``, ``'No'``),
    paired with another label of the scale (``yes or no``, ``Yes/No``, ``yes, no``), right after an
    answer verb (``Answer yes if ...``, ``reply with No``), or capitalised after a lower-case word or a
    comma (``..., otherwise No``).

    >>> yn = get_scale("binary_yes_no")
    >>> sorted(labels_named("A hedge or no answer is wrong. No prior knowledge is needed.", yn))
    []
    >>> sorted(labels_named("Answer Yes if it is correct, otherwise No.", yn))
    ['no', 'yes']
    >>> sorted(labels_named("Write a short explanation, then output A if assistant A is better.", get_scale("pairwise_abc")))
    ['A']
    """
    out = set()
    for lab in scale.labels:
        pat = re.escape(lab)
        if not re.fullmatch(r"[^\W\d_]+", lab):  # numbers and symbols: a whole token
            if re.search(rf"(?<![\w.]){pat}(?![\w]|\.\d)", text, flags=re.IGNORECASE):
                out.add(lab)
            continue
        others = "|".join(re.escape(o) for o in scale.labels if o != lab)
        sep = r"\s*(?:/|,|\||\bor\b|\band\b)\s*"
        word = rf"\b{pat}\b"
        as_label = [
            rf"[{_QUOTES}]\s*{pat}\s*[{_QUOTES}]",
            *([rf"{word}{sep}(?:{others})\b", rf"\b(?:{others}){sep}{word}"] if others else []),
            rf"\b{_ANSWER_VERBS}\s+(?:with\s+)?(?:only\s+)?(?:the\s+word\s+)?{word}",
        ]
        # a one-letter label (a pairwise scale's A / B / C) is never the article "a": case counts
        flags = 0 if len(lab) == 1 else re.IGNORECASE
        if any(re.search(p_, text, flags=flags) for p_ in as_label) or re.search(
            rf"(?:[a-z],?|,)\s+(?:{pat.capitalize()}|{pat.upper()})\b", text
        ):
            out.add(lab)
    return out


def _fixed_line(line: str, scale: Scale) -> str | None:
    s = line.strip()
    if _TAG.search(s):
        return PLACEHOLDER
    if len(word_tokens(s)) < 3:
        return LAYOUT
    labels = "|".join(re.escape(lab) for lab in sorted(scale.labels, key=len, reverse=True))
    if re.match(rf"(?:[-*•]\s*)?[{_QUOTES}]?(?:{labels})[{_QUOTES}]?\s*[-:=).(]", s, flags=re.IGNORECASE):
        return LAYOUT
    return None


def _prose(text: str) -> Part:
    return Part(INSTRUCTION if len(word_tokens(text)) >= 3 else LAYOUT, text)


def split_template(text: str, scale: Scale, *, where: str) -> list[Part]:
    """The template's parts in order (see the module docstring); ``where`` names the template in errors."""
    parts: list[Part] = []
    block = ""
    for line in text.splitlines(keepends=True):
        kind = _fixed_line(line, scale)
        if kind is None:
            block += line
            continue
        if block:
            parts.append(Part(INSTRUCTION, block))
            block = ""
        parts.append(Part(kind, line))
    if block:
        parts.append(Part(INSTRUCTION, block))
    hits = [
        (k, m.start(), m.end())
        for k, p in enumerate(parts)
        if p.kind == INSTRUCTION
        for m in _SENTENCE.finditer(p.text)
        if labels_named(m.group(), scale)
    ]
    if hits:  # the last label-naming sentence is the answer format: cut it out of its block
        k, s, e = hits[-1]
        t = parts[k].text
        pieces = [_prose(t[:s]), Part(FORMAT, t[s:e]), _prose(t[e:])]
        parts[k : k + 1] = [p for p in pieces if p.text]
    if not any(p.kind == INSTRUCTION for p in parts):
        raise PromptError(
            f"{where}: nothing to reword: every line is a placeholder line, the answer-format sentence "
            "or layout; write the instruction as its own sentence(s), on lines without {{ }} tags"
        )
    return parts


def assemble(parts: list[Part], rewordings: Mapping[int, str]) -> str:
    """The template with ``parts[k]``'s text replaced by ``rewordings[k]`` (its whitespace kept)."""
    out = []
    for k, p in enumerate(parts):
        if k in rewordings:
            lead = p.text[: len(p.text) - len(p.text.lstrip())]
            trail = p.text[len(p.text.rstrip()) :]
            out.append(lead + rewordings[k].strip() + trail)
        else:
            out.append(p.text)
    return "".join(out)


def rewording_prompt(source: str) -> str:
    return REWORD_PROMPT.format(text=source)


def clean(text: str) -> str:
    """A model's answer without code fences, ``---`` rulers and echoed marker lines."""
    lines = [
        ln
        for ln in text.strip().splitlines()
        if not re.fullmatch(r"\s*(```\w*|---+|<<<PROMPT|PROMPT>>>)\s*", ln)
    ]
    return "\n".join(lines).strip()


def parse_rewording(reply: str, source: str, scale: Scale) -> tuple[str, str | None]:
    """``(rewording, problem)`` from a model's reply to :func:`rewording_prompt`; ``problem`` is None
    when the rewording may replace ``source``.

    >>> parse_rewording('Reworded: "Say whether the text is fluent."', "Decide if the text is fluent.",
    ...                 get_scale("binary_yes_no"))
    ('Say whether the text is fluent.', None)
    """
    t = clean(reply)
    for _ in range(2):  # "Here is the reworded instruction:" then "Reworded:"
        t = re.sub(r"^(?:here(?: is|'s)[^:\n]*|reworded[^:\n]{0,30}|rewording|instruction):\s*", "", t,
                   flags=re.IGNORECASE)  # fmt: skip
    t = re.split(r"\n\s*\n|\n(?:Instruction|Reworded):", t)[0].strip()
    if "\n" not in source.strip():
        t = t.split("\n")[0].strip()
    while len(t) >= 2 and t[0] in _QUOTES and t[-1] in _QUOTES:
        t = t[1:-1].strip()
    if not word_tokens(t):
        return t, "empty rewording"
    if _TAG.search(t):
        return t, "the rewording contains a template tag ({{ }} / {% %})"
    if word_tokens(t) == word_tokens(source):
        return t, "the rewording is the source text"
    want, got = labels_named(source, scale), labels_named(t, scale)
    if got != want:
        return t, f"the rewording names the scale labels {sorted(got)}, the source {sorted(want)}"
    return t, None

"""Label tokens, prompt encoding and label probabilities shared by the backends that see tokens.

A label's probability sums every vocabulary spelling that reads as the label (``"4"``, ``" 4"``,
``"Yes"``, case and surrounding spaces ignored) at the first generated position, plus the route
through a bare space token: p(label) = p0(label) + p0(space) * p1(label | space). The transformers
backend sums dense distributions; vLLM and OpenAI-compatible servers sum the top-k alternatives
they list (a spelling outside the top-k counts as 0).

Multi-token labels. A label no single token spells (``"10"`` on a
1-10 scale under a digit-splitting tokenizer such as Qwen2.5's or SmolLM2's) is scored by teacher
forcing along its own encoding ``t1 t2 ... tm``: its path mass is
pm(label) = p0(t1) * p(t2 | t1) * ... * p(tm | t1..tm-1), where p0(t1) sums every spelling of
``t1``'s text (and the space route) as for a single-token label, and the conditionals follow the
canonical tokens ``t1..tm-1`` (one extra batched forward pass per distinct prefix ``t1..tm-1``).
A label that is itself a proper prefix of longer labels keeps only the mass that does not continue
into them: p(label) = pm(label) - sum of pm(M) over the labels M whose nearest proper-prefix label
it is. For a 1-10 scale: p("10") = p0("1") * p("0" | "1") and p("1") = p0("1") * (1 - p("0" | "1")).
Approximations, documented choices: the conditionals after ``t1`` are read after its bare spelling
(not after ``" 1"`` or the space route), and "the label ends" is everything after the prefix that
is not a continuation into another label. vLLM and OpenAI-compatible servers cannot force a path:
they read the same split from the generated answer's next position when it starts with the prefix
(:func:`split_prefix_labels`) and report no label probabilities otherwise; they refuse to stop at a
label token on such a scale (:func:`single_token_stop_ids`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from promptlottery.backends.base import BackendError, JudgeRequest

_LABEL_IDS: dict[tuple, list[set[int]]] = {}


def label_token_ids(tokenizer, labels: tuple[str, ...]) -> list[set[int]]:
    """For each label, every vocabulary token that decodes to it (case and spaces ignored)."""
    key = (id(tokenizer), getattr(tokenizer, "name_or_path", ""), len(tokenizer), tuple(labels))
    if key not in _LABEL_IDS:
        wanted = {lab.lower(): i for i, lab in enumerate(labels)}
        ids: list[set[int]] = [set() for _ in labels]
        for tid in tokenizer.get_vocab().values():
            i = wanted.get(tokenizer.decode([tid]).strip().lower())
            if i is not None:
                ids[i].add(tid)
        _LABEL_IDS[key] = ids
    return _LABEL_IDS[key]


@dataclass(frozen=True)
class MultiTokenLabel:
    """A label spelled by several tokens: ``first`` is the text of its first token (all of whose
    spellings count at the answer position), ``pieces`` its canonical token ids, ``parent`` the
    index of its nearest label that is a proper prefix of it (None when there is none)."""

    index: int
    first: str
    pieces: tuple[int, ...]
    parent: int | None

    @property
    def prefix(self) -> tuple[int, ...]:
        """The teacher-forced tokens (all but the last): one extra forward pass per distinct one."""
        return self.pieces[:-1]


def multi_token_labels(tokenizer, labels: tuple[str, ...], *, name: str) -> list[MultiTokenLabel]:
    """The labels :func:`label_token_ids` finds no single token for, split along their encoding.

    >>> class Digits:  # a digit-splitting tokenizer: one token per character
    ...     def get_vocab(self): return {c: ord(c) for c in "0123456789"}
    ...     def __len__(self): return 10
    ...     def encode(self, text, add_special_tokens=False): return [ord(c) for c in text]
    ...     def decode(self, ids): return "".join(map(chr, ids))
    >>> [(m.index, m.first, m.parent) for m in multi_token_labels(Digits(), ("1", "2", "10"), name="t")]
    [(2, '1', 0)]
    """
    ids = label_token_ids(tokenizer, labels)
    index = {lab.strip().lower(): i for i, lab in enumerate(labels)}
    out = []
    for i, lab in enumerate(labels):
        if ids[i]:
            continue
        pieces = tuple(tokenizer.encode(lab.strip(), add_special_tokens=False))
        if len(pieces) < 2:
            raise BackendError(
                f"{name}: label {lab!r} encodes to {len(pieces)} token(s) and no single token spells it"
            )
        parent = None
        for k in range(1, len(pieces)):  # the longest proper prefix that is itself a label
            parent = index.get(tokenizer.decode(list(pieces[:k])).strip().lower(), parent)
        out.append(MultiTokenLabel(i, tokenizer.decode([pieces[0]]).strip(), pieces, parent))
    return out


def combine_paths(path_mass: list[float], multi: list[MultiTokenLabel]) -> list[float]:
    """Label probabilities from path masses: a prefix label loses what continues into its children.

    >>> m = [MultiTokenLabel(2, "1", (1, 0), 0)]
    >>> [round(p, 6) for p in combine_paths([0.5, 0.3, 0.2], m)]
    [0.3, 0.3, 0.2]
    """
    probs = list(path_mass)
    for m in multi:
        if m.parent is not None:
            probs[m.parent] -= path_mass[m.index]
    # rounding can leave -1e-9 where a prefix label's whole mass continues
    return [max(p, 0.0) for p in probs]


def space_id(tokenizer) -> int | None:
    """The id of a bare space token, or None when a space is not one token."""
    ids = tokenizer.encode(" ", add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def encode(
    tokenizer, request: JudgeRequest, *, name: str, messages: list[dict[str, str]] | None = None
) -> list[int]:
    """The prompt's token ids: the chat template with a generation prompt (plus the request's
    ``assistant_prefix``), or the completion prompt with the tokenizer's special tokens.

    ``messages`` replaces ``request.messages`` (a backend that folds the system turn passes its own).
    """
    if request.messages is None:
        return list(tokenizer.encode(request.prompt, add_special_tokens=True))
    if not tokenizer.chat_template:
        raise BackendError(f"{name} has no chat template; use a completion-style prompt format")
    ids = tokenizer.apply_chat_template(
        request.messages if messages is None else messages, add_generation_prompt=True, tokenize=True
    )
    if hasattr(ids, "keys"):  # a BatchEncoding in recent transformers
        ids = ids["input_ids"]
    ids = list(ids)
    if request.assistant_prefix:  # the assistant turn has begun: the label follows the prefix
        ids += tokenizer.encode(request.assistant_prefix, add_special_tokens=False)
    return ids


def spelling_probs(
    alternatives: Iterable[tuple[Hashable, float | None]],
    label_of: Callable[[Any], str | None],
    labels: tuple[str, ...],
) -> dict[str, float]:
    """Sum exp(logprob) of the listed alternatives (token id or text) over each label's spellings.

    >>> alts = [("4", math.log(0.6)), (" 4", math.log(0.1)), ("5", math.log(0.2)), ("x", -1.0)]
    >>> wanted = {"1": "1", "4": "4", "5": "5"}
    >>> p = spelling_probs(alts, lambda t: wanted.get(t.strip()), ("1", "4", "5"))
    >>> {k: round(v, 3) for k, v in p.items()}
    {'1': 0.0, '4': 0.7, '5': 0.2}
    """
    out = dict.fromkeys(labels, 0.0)
    for key, logprob in alternatives:
        lab = label_of(key)
        if lab is not None and logprob is not None:
            out[lab] += math.exp(float(logprob))
    return out


def add_space_route(
    probs: dict[str, float], p_space: float, after_space: Mapping[str, float]
) -> dict[str, float]:
    """p(label) += p0(space) * p1(label | space), in place; returns ``probs``.

    >>> add_space_route({"yes": 0.5, "no": 0.25}, 0.5, {"yes": 0.5, "no": 0.5})
    {'yes': 0.75, 'no': 0.5}
    """
    for lab, p in after_space.items():
        probs[lab] += p_space * p
    return probs


@functools.lru_cache(maxsize=256)
def _prefix_pairs(labels: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``(shorter, longer)`` for every label that starts with another (``("1", "10")``): per scale, once."""
    low = {lab: lab.lower() for lab in labels}
    return tuple((m, lab) for m in labels for lab in labels if lab != m and low[lab].startswith(low[m]))


def split_prefix_labels(
    probs: dict[str, float],
    token: str,
    following: Iterable[tuple[str, float | None]] | None,
    labels: tuple[str, ...],
) -> dict[str, float] | None:
    """Labels that extend another label (``10`` after ``1`` on a 1-10 scale) when no listed token
    spells them whole (a tokenizer that splits digits): read from two positions of the answer.

    ``probs`` comes from the label position's top tokens, ``token`` is the text of the token generated
    there and ``following`` the next position's alternatives as ``(text, logprob)`` (None when there is
    none). Where a listed token spells the longer label, ``probs`` stands. Otherwise a ``1`` token
    carries the mass of ``1`` and of ``10`` together; when the answer starts with ``1`` the mass is
    split: p(10) = p(1) * p1(0 | 1), and p(1) keeps the rest (the split read after the generated ``1``
    is applied to the whole mass of ``1``). When the answer starts otherwise the split is unknown:
    None, never p(10) = 0. Labels longer than one extra token are not split (their share stays with
    the prefix).

    >>> tens = tuple(str(k) for k in range(1, 11))
    >>> p = dict.fromkeys(tens, 0.0) | {"1": 0.6, "8": 0.3}
    >>> out = split_prefix_labels(p, "1", [("0", math.log(0.5)), (".", math.log(0.2))], tens)
    >>> round(out["1"], 2), round(out["10"], 2), round(out["8"], 2)
    (0.3, 0.3, 0.3)
    >>> split_prefix_labels(p, "8", [("0", math.log(0.5))], tens) is None
    True
    """
    pairs = [(m, lab) for m, lab in _prefix_pairs(tuple(labels)) if probs[m] > 0 and probs[lab] == 0]
    if not pairs:
        return probs
    low = {lab: lab.lower() for lab in labels}
    following = list(following) if following is not None else []
    out = dict(probs)
    for m in sorted({m for m, _ in pairs}):
        if token.strip().lower() != low[m] or not following:
            return None
        longer = {low[lab][len(low[m]) :]: lab for mm, lab in pairs if mm == m}
        q = dict.fromkeys(longer.values(), 0.0)
        for text, logprob in following:
            lab = longer.get(str(text).strip().lower())
            if lab is not None and logprob is not None:
                q[lab] += math.exp(float(logprob))
        total = min(1.0, sum(q.values()))
        for lab, share in q.items():
            out[lab] += probs[m] * share
        out[m] = probs[m] * (1.0 - total)
    return out


#: the reason recorded when :func:`split_prefix_labels` cannot split (``JudgeResponse.extra``)
SPLIT_UNKNOWN = "a label spans two tokens and the answer does not start with its prefix"


def single_token_stop_ids(ids: list[set[int]], labels: tuple[str, ...], *, name: str) -> list[int]:
    """The stop token ids of ``decoding.stop_at_label``: every label's single tokens; refused when a
    label has none (stopping at its first token would cut ``10`` to ``1``)."""
    split = [lab for lab, t in zip(labels, ids, strict=False) if not t]
    if split:
        raise BackendError(
            f"{name}: labels {split} have no single-token spelling, so stopping at a label token "
            "(decoding.stop_at_label=true) would cut them; set decoding.stop_at_label=false (their "
            "probability is then read from two positions)"
        )
    return sorted(set().union(*ids))


def shared_prefix_len(encoded: list[list[int]], min_shared: int) -> int:
    """The token prefix a batch runs once: the rows' common prefix, leaving every row at least one
    token of its own, and 0 when shorter than ``min_shared`` (or for one row)."""
    shared = common_prefix_len(encoded) if len(encoded) > 1 else 0
    shared = min(shared, min(map(len, encoded)) - 1)
    return shared if shared >= min_shared else 0


def common_prefix_len(rows: list[list[int]]) -> int:
    first, k = rows[0], min(map(len, rows))
    for r in rows[1:]:
        i = 0
        while i < k and r[i] == first[i]:
            i += 1
        k = i
    return k

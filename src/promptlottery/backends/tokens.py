"""Label tokens, prompt encoding and label probabilities shared by the backends that see tokens.

A label's probability sums every vocabulary spelling that reads as the label (``"4"``, ``" 4"``,
``"Yes"``, case and surrounding spaces ignored) at the first generated position, plus the route
through a bare space token: p(label) = p0(label) + p0(space) * p1(label | space). The transformers
backend sums dense distributions; vLLM and OpenAI-compatible servers sum the top-k alternatives
they list (a spelling outside the top-k counts as 0).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping
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


def require_label_token_ids(tokenizer, labels: tuple[str, ...], *, name: str) -> list[set[int]]:
    """:func:`label_token_ids`, refusing a label that no single token spells (it could never score)."""
    ids = label_token_ids(tokenizer, labels)
    missing = [lab for lab, t in zip(labels, ids, strict=False) if not t]
    if missing:
        raise BackendError(f"{name}: labels {missing} have no single-token spelling")
    return ids


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

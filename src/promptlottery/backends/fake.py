"""A deterministic fake backend for tests: no model; label probabilities from a hash, or from a
behaviour chosen by the test (a judge whose every answer is known in advance)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from collections.abc import Callable

import numpy as np

from promptlottery.backends.base import (
    Backend,
    BackendError,
    Decoding,
    JudgeRequest,
    JudgeResponse,
    KnownAnswer,
)
from promptlottery.checks import check_choice
from promptlottery.registry import Registry

#: the mass a known-behaviour judge puts on its label; the rest is off the scale, like a real judge's
KNOWN_MASS = 0.8
#: the fault suite's hooks (tests/test_faults.py), read at call time because the suite's subprocesses
#: are configured by environment, not by config (the config stays the one a clean run has):
#: a file to which every answered request's cache key is appended, a line each (the calls a run made)
CALL_LOG_ENV = "PROMPTLOTTERY_FAKE_CALL_LOG"
#: SIGKILL this process instead of answering the request that would exceed this many in the process
KILL_AFTER_ENV = "PROMPTLOTTERY_FAKE_KILL_AFTER"
_answered = 0  # requests answered in this process, over every FakeBackend instance (a sweep's jobs)


class FakeBackend(Backend):
    """Label probabilities derived from a hash of the rendered request, or a known behaviour.

    ``behaviour`` (default ``hash``) picks the judge; every mode but ``hash`` puts all its scale mass
    (:data:`KNOWN_MASS`) on one label, so the argmax label and the logprob-weighted score are both that
    label's (its text is the label too):

    * ``oracle``: the human label (:attr:`~promptlottery.backends.base.KnownAnswer.label`: the scale
      label nearest the human value; pairwise the shown position of the gold preference, in both orders;
      the rubric study: the label nearest the criterion's human value); a request without one is refused
      (BackendError), so data without human labels cannot carry it;
    * ``always_first``: pairwise "A" (the answer shown first), pointwise the lowest-scored label;
    * ``constant``: ``label`` on every request (one of the scale's labels, else refused);
    * ``random``: a label uniform over the scale, seeded by the request key;
    * ``inverted``: the oracle, but under variant ``inverted_variant`` (the rubric study: a condition's
      name) the label mirrored on the scale (score s -> lowest + highest - s; pairwise A and B swapped,
      the tie kept).
    * ``meaning_following``: the oracle under every paraphrase, and under a control variant
      (:attr:`~promptlottery.backends.base.KnownAnswer.control`) the verdict its rewrite asks for:
      ``stricter`` the lowest-scored label, ``more_lenient`` and ``criterion_dropped`` the
      highest-scored, ``reversed`` the oracle's label mirrored on the scale (pairwise: A and B
      swapped); pairwise (where the highest-scored label is A, the answer shown first) on a scale
      with a tie label, ``stricter`` answers the tie and ``more_lenient`` the oracle with a tie
      answered A. The constant judge is deaf to controls and ``inverted`` (oracle on controls, one
      paraphrase mirrored) wording-sensitive: the judge card's three known answers.

    ``sharpness`` concentrates the distribution (large = near one-hot); ``fail_on`` lists
    substrings that make ``generate`` raise, to test error paths; ``calls`` counts requests
    answered, so tests can assert cache behaviour. A request without scale labels (free text, e.g.
    a paraphrase to generate) is answered with ``replies[sample_index % len(replies)]``; the
    replies are given inline or as ``replies_file`` (a YAML list of strings).
    """

    def __init__(
        self,
        model: str = "fake-judge",
        sharpness: float = 2.0,
        max_concurrency: int = 16,
        fail_on: tuple[str, ...] = (),
        text_template: str = "{label}",
        delay_s: float = 0.0,
        base_url: str | None = None,
        extra_body: dict | None = None,
        replies: tuple[str, ...] = (),
        replies_file: str | None = None,
        behaviour: str = "hash",
        label: str | None = None,
        inverted_variant: str = "P3",
        max_length: int | None = None,
        honour_prefix: bool = False,
        prose: bool = False,
    ):
        check_choice("backbone.backend.behaviour", behaviour, BEHAVIOURS)
        if behaviour == "constant" and label is None:
            raise ValueError(
                "backbone.backend.behaviour=constant needs backbone.backend.label (a scale label)"
            )
        self.behaviour = behaviour
        self.label = None if label is None else str(label)
        self.inverted_variant = inverted_variant
        self.model = model
        self.sharpness = sharpness
        self.max_concurrency = max_concurrency
        self.fail_on = tuple(fail_on)
        self.text_template = text_template
        self.delay_s = delay_s  # per generate() call: lets tests kill a run mid-way
        self.calls = 0
        # the OpenAI-compatible backends' connection fields, so tests can plant secrets in them
        self.base_url = base_url
        self.extra_body = dict(extra_body or {})
        if replies_file:
            import yaml

            replies = tuple(yaml.safe_load(open(replies_file, encoding="utf-8")))
        self.replies = tuple(str(r) for r in replies)
        #: a context length in tokens (words): a longer request fails its batch, as a real model's
        self.max_length = max_length
        #: continue a chat request's assistant turn after ``assistant_prefix``: the prefix enters the
        #: hashed text (off by default, so the hash judge's answers to other requests stay as they were)
        self.honour_prefix = bool(honour_prefix)
        #: answer like a judge that reasons in prose and has no logprobs: restate the scale (and the
        #: prompt's last line), name other labels while reasoning, then give the chosen label
        #: (:func:`prose_answer`); no label probabilities, so the verdict is read from the text
        self.prose = bool(prose)

    @property
    def supports_assistant_prefix(self) -> bool:  # type: ignore[override]
        """A known behaviour answers the label that follows the prefix, whatever the prefix; the hash
        judge hashes the rendered messages only, so it honours one only with ``honour_prefix``."""
        return self.behaviour != "hash" or self.honour_prefix

    @property
    def context_length(self) -> int | None:
        return self.max_length

    def identity(self) -> dict:
        ident = {"backend": "fake", "model": self.model, "revision": "0", "sharpness": self.sharpness}
        if self.behaviour != "hash":  # a known behaviour answers otherwise: its own keys
            ident["behaviour"] = self.behaviour
            if self.behaviour == "constant":
                ident["label"] = self.label
            if self.behaviour == "inverted":
                ident["inverted_variant"] = self.inverted_variant
        if self.honour_prefix:  # the prefix changes the hash judge's answers
            ident["honour_prefix"] = True
        if self.prose:  # the text changes and the label probabilities go
            ident["prose"] = True
        if self.replies:  # canned free-text answers change the output: they enter the cache key
            ident["replies"] = hashlib.sha256("\0".join(self.replies).encode()).hexdigest()[:16]
        return {**ident, **({"extra_body": self.extra_body} if self.extra_body else {})}

    def _text(self, r: JudgeRequest) -> str:
        text = _request_text(r)
        return text + r.assistant_prefix if self.honour_prefix and r.assistant_prefix else text

    def known_label(self, r: JudgeRequest) -> str:
        """The one label a known behaviour answers ``r`` with (see the class docstring)."""
        return KNOWN_JUDGES.get(self.behaviour)(self, r)

    def generate(self, requests: list[JudgeRequest], decoding: Decoding) -> list[JudgeResponse]:
        import time

        time.sleep(self.delay_s)
        _fault_hooks(requests, self.max_length)
        out = []
        for r in requests:
            text = self._text(r)
            for bad in self.fail_on:
                if bad in text:
                    raise BackendError(f"fake backend: refused request containing {bad!r}")
            if not r.labels:
                reply = self.replies[r.sample_index % len(self.replies)] if self.replies else "fake reply"
                self.calls += 1
                out.append(JudgeResponse(reply, None, len(text.split()), len(reply.split()), 0.0))
                continue
            if self.behaviour != "hash":
                top = self.known_label(r)
                probs = {lab: KNOWN_MASS if lab == top else 0.0 for lab in r.labels}
            else:
                h = hashlib.sha256(f"{text}\0{r.sample_index}\0{decoding.seed}".encode()).digest()
                logits = np.frombuffer(h[: 4 * len(r.labels)], dtype=np.uint32).astype(float) / 2**32
                p = np.exp(self.sharpness * 5 * logits)
                p = 0.8 * p / p.sum()  # 20% of the mass off-scale, like a real judge
                probs = {lab: float(v) for lab, v in zip(r.labels, p)}
                top = max(probs, key=probs.get)
            self.calls += 1
            if self.prose:
                reply = prose_answer(r, top)
                out.append(JudgeResponse(reply, None, len(text.split()), len(reply.split()), 0.0))
            else:
                out.append(
                    JudgeResponse(self.text_template.format(label=top), probs, len(text.split()), 1, 0.0)
                )
        return out

    def count_tokens(self, request: JudgeRequest) -> int:
        return len(self._text(request).split())


#: the judges with known behaviour (``behaviour=``), each the function giving the one label it
#: answers a request with (see :class:`FakeBackend`); ``hash``, the default, is the pseudo-random judge
KNOWN_JUDGES: Registry[Callable[[FakeBackend, JudgeRequest], str]] = Registry(
    "backbone.backend.behaviour", error=ValueError
)


def _scored(backend: FakeBackend, r: JudgeRequest) -> tuple[KnownAnswer, dict[str, float]]:
    """What the grid knows about ``r`` and its labels' scores (a request from outside it is refused)."""
    known = r.known
    if known is None:
        raise BackendError(
            f"fake backend: behaviour={backend.behaviour} needs a judge request of the grid or the rubric study"
        )
    return known, dict(zip(r.labels, known.scores, strict=True))


def _human(backend: FakeBackend, known: KnownAnswer) -> str:
    if known.label is None:
        raise BackendError(
            f"fake backend: behaviour={backend.behaviour} cannot answer a request without a human label "
            f"(variant {known.variant}): the data carries no oracle"
        )
    return known.label


@KNOWN_JUDGES.register("oracle")
def _oracle(backend: FakeBackend, r: JudgeRequest) -> str:
    known, _ = _scored(backend, r)
    return _human(backend, known)


@KNOWN_JUDGES.register("always_first")
def _always_first(backend: FakeBackend, r: JudgeRequest) -> str:
    _, scores = _scored(backend, r)
    return r.labels[0] if r.order is not None else min(r.labels, key=scores.get)


@KNOWN_JUDGES.register("constant")
def _constant(backend: FakeBackend, r: JudgeRequest) -> str:
    if backend.label not in r.labels:
        raise BackendError(
            f"fake backend: constant label {backend.label!r} is not on the scale {list(r.labels)}"
        )
    return backend.label


@KNOWN_JUDGES.register("random")
def _random(backend: FakeBackend, r: JudgeRequest) -> str:
    return r.labels[int(hashlib.sha256(r.key.encode()).hexdigest(), 16) % len(r.labels)]


@KNOWN_JUDGES.register("inverted")
def _inverted(backend: FakeBackend, r: JudgeRequest) -> str:
    known, scores = _scored(backend, r)
    label = _human(backend, known)
    if known.variant != backend.inverted_variant:
        return label
    return _mirrored(label, r.labels, scores)


def _mirrored(label: str, labels: tuple[str, ...], scores: dict[str, float]) -> str:
    mirrored = min(scores.values()) + max(scores.values()) - scores[label]
    return min(labels, key=lambda lab: abs(scores[lab] - mirrored))


@KNOWN_JUDGES.register("meaning_following")
def _meaning_following(backend: FakeBackend, r: JudgeRequest) -> str:
    known, scores = _scored(backend, r)
    label = _human(backend, known)
    if known.control is None:
        return label
    if known.control == "reversed":
        return _mirrored(label, r.labels, scores)
    tie = _tie(r.labels, scores) if r.order is not None else None
    if tie is not None and known.control in ("stricter", "more_lenient"):
        # pairwise, a threshold for preferring one side: stricter -> the tie, more lenient -> the
        # oracle with its tie broken for the answer shown first
        return tie if known.control == "stricter" else (r.labels[0] if label == tie else label)
    pick = min if known.control == "stricter" else max  # more_lenient, criterion_dropped: the top
    return pick(r.labels, key=scores.get)


def _tie(labels: tuple[str, ...], scores: dict[str, float]) -> str | None:
    """A pairwise scale's tie: the label scored midway between the two sides (None if there is none)."""
    mid = (min(scores.values()) + max(scores.values())) / 2
    return next((lab for lab in labels if scores[lab] == mid), None)


#: every ``behaviour=``, the default first
BEHAVIOURS = ("hash", *KNOWN_JUDGES)


def prose_answer(r: JudgeRequest, label: str) -> str:
    """A reasoning judge's answer that chooses ``label``: it echoes the prompt's last line, restates
    the scale, names other labels while it reasons, then gives its verdict in one of five forms
    (picked by the request key, so a grid sees all of them). Its chosen label is ``label``."""
    labels = r.labels
    k = int(hashlib.sha256(r.key.encode()).hexdigest(), 16)
    texts = [r.prompt] if r.prompt is not None else [str(m.get("content", "")) for m in r.messages or []]
    lines = [ln for t in texts for ln in str(t).splitlines() if len(ln.split()) >= 4]
    echo = f"{lines[-1].strip()}\n\n" if lines else ""  # the task's last line, repeated
    if r.order is not None:  # pairwise: the positions and the tie
        first, second = labels[0], labels[1]
        tie = labels[2] if len(labels) > 2 else None
        noun = "Assistant" if first.isalpha() else "Response"
        fmt = f'"[[{first}]]" if {noun.lower()} {first} is better, "[[{second}]]" if {noun.lower()} {second} is better'
        fmt += f', and "[[{tie}]]" for a tie' if tie else ""
        reasons = (
            f"I have to output {fmt}. {noun} {first} and {noun} {second} both address the question; "
            f"{noun} {first} is longer, {noun} {second} is more direct."
        )
        if label == tie:
            verdicts = ("Weighing both, it is a tie.", f"Final verdict: [[{tie}]]", f"[[{tie}]]")
        else:
            other = second if label == first else first
            verdicts = (
                f"{noun} {label} is better than {noun} {other}.\n\n[[{label}]]",
                f"Final verdict: {noun} {label}",
                f"{noun} {other} is not better. {noun} {label} gives the more helpful answer, "
                f"so the better {noun.lower()} is {noun} {label}.",
                f"[[{label}]]",
            )
        return f"{echo}{reasons}\n\n{verdicts[k % len(verdicts)]}"
    lo, hi = labels[0], labels[-1]
    if len(labels) == 2:  # yes / no
        reasons = (
            f"I must answer {lo} or {hi}. The answer is short and has no spelling errors, which does "
            "not decide the question by itself."
        )
        verdicts = (f"Answer: {label}", f"{label.capitalize()}.", f"My verdict is {label}.")
    else:
        mid = labels[len(labels) // 2]
        reasons = (
            f"On a scale from {lo} to {hi}, where {lo} is the worst and {hi} the best, I need to rate this "
            f"answer. A {lo} would mean it is useless and a {hi} flawless; I considered {mid} first.\n"
            f"1. Relevance: it addresses the question.\n2. Accuracy: compared with the reference."
        )
        verdicts = (
            f"Rating: {label}",
            f"On a scale from {lo} to {hi}, I would rate this answer a {label}.",
            f"[[{label}]]",
            f"Score: {label}/{hi}",
            f"All things considered, {label} out of {hi}.",
        )
    return f"{echo}{reasons}\n\n{verdicts[k % len(verdicts)]}"


def _request_text(r: JudgeRequest) -> str:
    return r.prompt if r.prompt is not None else json.dumps(r.messages, sort_keys=True)


def _fault_hooks(requests: list[JudgeRequest], max_length: int | None) -> None:
    """The kill switch and the call log of the fault suite, then a too long request's refusal."""
    global _answered
    kill_after = os.environ.get(KILL_AFTER_ENV)
    if kill_after and _answered + len(requests) > int(kill_after):
        os.kill(os.getpid(), signal.SIGKILL)
    if max_length is not None:
        for r in requests:  # words stand for tokens, as in count_tokens
            if len(_request_text(r).split()) > max_length:
                raise BackendError(
                    f"fake backend: prompt exceeds max_length={max_length} (request {r.key[:12]})"
                )
    _answered += len(requests)
    log = os.environ.get(CALL_LOG_ENV)
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write("".join(f"{r.key}\n" for r in requests))
            f.flush()
            os.fsync(f.fileno())

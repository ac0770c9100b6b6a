"""From a backend's answer to a judgment: parsed label, logprob-weighted score, missing reasons."""

from __future__ import annotations

from dataclasses import dataclass

from promptlottery.backends.base import JudgeResponse
from promptlottery.prompts.scales import Scale

LOGPROB_WEIGHTED = "logprob_weighted"
PARSED_LABEL = "parsed_label"


@dataclass
class Scored:
    parsed_label: str | None
    parsed_score: float | None
    argmax_label: str | None
    argmax_score: float | None
    weighted_score: float | None
    label_mass: float | None
    scoring_mode: str | None
    score: float | None
    parse_failure_reason: str | None
    missing_reason: str | None


def unscored(reason: str) -> Scored:
    """No answer to score (the request was never sent): every score missing, with ``reason``."""
    return Scored(*(None,) * 9, missing_reason=reason)


def score_response(
    resp: JudgeResponse, scale: Scale, *, prompt: str | None = None, cued: bool = False
) -> Scored:
    """Score one answer.

    The weighted score is r = sum_i p_i s_i / sum_j p_j over the scale's labels; the argmax label
    is the most probable scale label. When the backend gave no label probabilities the score
    falls back to the label read from the raw text at its verdict (``scoring_mode='parsed_label'``,
    :func:`promptlottery.prompts.verdicts.read_verdict`; ``prompt``: the rendered request, whose
    echoed lines are no verdict; ``cued``: it ended with an answer prefix). A raw text with no
    label at a verdict, or an ambiguous one, is a parse failure: missing data with a reason, never a
    low score.
    """
    reading = scale.read(resp.raw_text or "", prompt=prompt, cued=cued)
    parsed, parse_reason = reading.label, reading.reason
    weighted = argmax = mass = None
    if resp.label_probs:
        probs = {lab: float(resp.label_probs.get(lab, 0.0)) for lab in scale.labels}
        mass = sum(probs.values())
        if mass > 0:
            weighted = sum(p * scale.score_of(lab) for lab, p in probs.items()) / mass
            argmax = max(scale.labels, key=lambda lab: (probs[lab], -scale.labels.index(lab)))
    if weighted is not None:
        mode, score, missing = LOGPROB_WEIGHTED, weighted, None
    elif parsed is not None:
        mode, score, missing = PARSED_LABEL, scale.score_of(parsed), None
    else:
        mode, score = None, None
        missing = "no label probability mass and " + parse_reason if resp.label_probs else parse_reason
    return Scored(
        parsed_label=parsed,
        parsed_score=scale.score_of(parsed) if parsed is not None else None,
        argmax_label=argmax,
        argmax_score=scale.score_of(argmax) if argmax is not None else None,
        weighted_score=weighted,
        label_mass=mass,
        scoring_mode=mode,
        score=score,
        parse_failure_reason=parse_reason,
        missing_reason=missing,
    )


def verdict_context(req) -> dict:
    """What :func:`score_response` reads a request's answer with: the rendered text (its echo is
    no verdict) and whether it ended with an answer cue (an assistant prefix, or a completion prompt
    ending in ``Answer:`` / ``[[``: the answer starts at the verdict)."""
    texts = [req.prompt] if req.prompt is not None else [m.get("content", "") for m in req.messages or []]
    prompt = "\n".join(str(t) for t in texts)
    cued = bool(req.assistant_prefix) or (
        req.prompt is not None and str(req.prompt).rstrip().endswith((":", "[["))
    )
    return {"prompt": prompt, "cued": cued}

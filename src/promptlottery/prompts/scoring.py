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


def score_response(resp: JudgeResponse, scale: Scale) -> Scored:
    """Score one answer.

    The weighted score is r = sum_i p_i s_i / sum_j p_j over the scale's labels; the argmax label
    is the most probable scale label. When the backend gave no label probabilities the score
    falls back to the label parsed from the raw text (``scoring_mode='parsed_label'``). A raw text
    with no scale label is a parse failure: missing data with a reason, never a low score.
    """
    parsed = scale.parse(resp.raw_text or "")
    parse_reason = (
        None if parsed is not None else f"no {scale.name} label in raw output {resp.raw_text[:40]!r}"
    )
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

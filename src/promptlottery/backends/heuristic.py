"""A model-free candidate QA system: the passage sentence that shares most words with the question.

A cheap, deterministic system for the ``predict`` stage, so a ranking of systems has a floor.
"""

from __future__ import annotations

import re

from promptlottery.backends.base import Backend, Decoding, JudgeRequest, JudgeResponse

_WORD = re.compile(r"\w+")


class SentenceOverlapQA(Backend):
    max_concurrency = 64

    def identity(self) -> dict:
        return {"backend": "heuristic", "model": "sentence-overlap-qa", "revision": "1"}

    def generate(self, requests: list[JudgeRequest], decoding: Decoding) -> list[JudgeResponse]:
        out = []
        for r in requests:
            text = r.prompt if r.prompt is not None else r.messages[-1]["content"]
            passage, _, question = text.partition("Question:")
            qwords = {w.lower() for w in _WORD.findall(question) if len(w) > 3}
            sentences = [
                s.strip() for s in re.split(r"(?<=[.!?])\s+", passage.replace("Passage:", "")) if s.strip()
            ]
            best = max(
                sentences, key=lambda s: len(qwords & {w.lower() for w in _WORD.findall(s)}), default=""
            )
            out.append(JudgeResponse(best, None, len(text.split()), len(best.split()), 0.0))
        return out

    def count_tokens(self, request: JudgeRequest) -> int:
        return len((request.prompt or request.messages[-1]["content"]).split())

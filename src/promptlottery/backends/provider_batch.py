"""Provider batch APIs (OpenAI's Batch API, Anthropic's Message Batches): half the price, their own
rate-limit pool, answers within 24 h.

A :class:`BatchAPIBackend` says how to write one request as a line of a batch, how to submit lines,
read a batch's status and read its results; the call loop's driver
(:mod:`promptlottery.calls.provider_batch`) splits a sweep's uncached calls at the provider's limits,
records every batch id before it waits, polls, and stores the answers in the call cache like any
other call. The result of one request is a :class:`JudgeResponse`, a :class:`BackendError` (failed
for good) or :data:`RESUBMIT` (expired, cancelled or a transient error: sent again in a new batch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from promptlottery.backends.base import Decoding, JudgeRequest
from promptlottery.backends.openai_compat import OpenAICompatBackend

#: a request the batch did not answer but may answer in a new batch (expired, cancelled, 429 / 5xx)
RESUBMIT = "resubmit"


@dataclass
class BatchStatus:
    #: the provider's word for the batch's state
    state: str
    #: requests the batch has finished (answered or failed), of ``total``
    done: int
    total: int
    #: nothing will change any more: the results can be read
    ended: bool


class BatchAPIBackend(OpenAICompatBackend):
    """A backend whose calls go out through a provider's batch API (``batch_api``)."""

    batch_api = True
    streams = False
    #: the provider's limits on one batch: requests and bytes of its input
    max_batch_requests: int = 50_000
    max_batch_bytes: int = 200_000_000
    #: seconds between two polls of a batch in flight
    poll_s: float = 30.0

    def __init__(self, model: str, *, poll_s: float | None = None, **kw: Any):
        super().__init__(model, **kw)
        if poll_s is not None:
            self.poll_s = poll_s

    def batch_line(self, request: JudgeRequest, decoding: Decoding) -> dict[str, Any]:
        raise NotImplementedError

    async def submit_batch(self, lines: list[dict[str, Any]], tag: str) -> str:
        """Submit ``lines``; the batch id. ``tag`` is written into the batch's metadata where the
        provider keeps it, so a batch whose id was never recorded can be found again."""
        raise NotImplementedError

    async def find_batch(self, tag: str) -> str | None:
        """The id of the batch submitted with ``tag``, where the provider can say (else None)."""
        return None

    async def batch_candidates(self, n_requests: int, submitted: float | None) -> list[str]:
        """For a provider that keeps no tag: the ids of its batches of ``n_requests`` requests created
        around ``submitted`` (unix time, the journal's clock), newest first; the call loop adopts the
        one whose results answer the journal entry's keys (:meth:`result_ids`)."""
        return []

    async def result_ids(self, batch_id: str) -> set[str]:
        """The ``custom_id`` of every result of an ended batch."""
        return set()

    async def batch_status(self, batch_id: str) -> BatchStatus:
        raise NotImplementedError

    async def batch_results(
        self, batch_id: str, requests: dict[str, JudgeRequest], decoding: Decoding
    ) -> dict[str, Any]:
        """``{custom_id: JudgeResponse | BackendError | RESUBMIT}`` for every request of the batch
        (a request the results leave out is :data:`RESUBMIT`)."""
        raise NotImplementedError

    def generate(self, requests, decoding):
        raise NotImplementedError(f"{type(self).__name__} answers through the call loop's batch driver only")

"""Anthropic's Message Batches: ``POST /v1/messages/batches`` with ``{"requests": [{"custom_id",
"params"}]}`` (at most 100,000 requests and 256 MB a batch), polled (``GET
/v1/messages/batches/{id}``, ``processing_status`` in_progress, canceling, ended), its results read
from ``results_url`` (JSONL: ``result.type`` succeeded, errored, canceled or expired). Claude gives
no logprobs: every answer is scored from its text (``scoring: parsed_label``). A batch keeps no
metadata: one whose id a stopped run never recorded is found again by listing the workspace's batches
(``GET /v1/messages/batches``: the same number of requests, created around the journal's time) and
reading the results of each candidate (:mod:`promptlottery.calls.provider_batch`).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from promptlottery.backends.base import BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.backends.openai_wire import TransientBackendError
from promptlottery.backends.provider_batch import RESUBMIT, BatchAPIBackend, BatchStatus

API_VERSION = "2023-06-01"
#: seconds around the journal's time within which a batch of the same size may be the unrecorded one
CANDIDATE_WINDOW_S = 600.0


def _unix(stamp: str | None) -> float | None:
    """An RFC 3339 time (``2024-08-20T18:37:24.100435Z``) as unix seconds."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class AnthropicBatchBackend(BatchAPIBackend):
    backend_name = "anthropic"
    default_base_url = "https://api.anthropic.com/v1"
    default_api_key_env = "ANTHROPIC_API_KEY"
    max_batch_requests = 100_000
    max_batch_bytes = 256_000_000

    def __init__(self, model: str, **kw: Any):
        kw.setdefault("logprobs", False)
        super().__init__(model, **kw)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "anthropic-version": API_VERSION}
        if self.api_key_env:
            key = super()._headers()["Authorization"].removeprefix("Bearer ")
            headers["x-api-key"] = key
        return headers

    def batch_line(self, request: JudgeRequest, decoding: Decoding) -> dict[str, Any]:
        if request.messages is None:
            raise BackendError(
                f"{self.name}: the Messages API takes chat requests only (prompt_format: chat)"
            )
        system = "\n\n".join(m["content"] for m in request.messages if m["role"] == "system")
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max(1, decoding.max_new_tokens),
            "temperature": 0.0 if decoding.greedy else min(1.0, decoding.temperature),
            "messages": [m for m in request.messages if m["role"] != "system"],
            **({"system": system} if system else {}),
            **self.extra_body,
        }
        return {"custom_id": request.key, "params": params}

    async def _http(self, method: str, url: str, **kw) -> bytes:
        import aiohttp

        session = await self._client.session()
        try:
            async with session.request(method, url, headers=self._headers(), **kw) as resp:
                status, raw = resp.status, await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransientBackendError(f"{self.name} at {url}: {type(exc).__name__}: {exc}") from None
        if status != 200:
            raise self._classify(status, raw.decode("utf-8", "replace"), JudgeRequest(key=url, labels=()))
        return raw

    async def submit_batch(self, lines: list[dict[str, Any]], tag: str) -> str:
        # the Message Batches API keeps no metadata: a batch whose id was not recorded is found again
        # among the batches of its size created around the journal's time (batch_candidates)
        return json.loads(
            await self._http("POST", self.base_url + "/messages/batches", json={"requests": lines})
        )["id"]

    async def batch_candidates(self, n_requests: int, submitted: float | None) -> list[str]:
        """The workspace's batches (``GET /v1/messages/batches``, newest first, pages of 1,000) of
        ``n_requests`` requests created within :data:`CANDIDATE_WINDOW_S` of ``submitted`` (the clocks of
        this machine and the provider may differ; the submit itself takes up to ``timeout_s``)."""
        if submitted is None:
            return []
        lo, hi = submitted - CANDIDATE_WINDOW_S, submitted + (self.timeout_s or 0) + CANDIDATE_WINDOW_S
        out: list[str] = []
        after = None
        while True:
            page = json.loads(
                await self._http("GET", f"{self.base_url}/messages/batches?limit=1000"
                                 + (f"&after_id={after}" if after else ""))
            )  # fmt: skip
            older = False
            for b in page.get("data") or []:
                created = _unix(b.get("created_at"))
                if created is None or created > hi:
                    continue
                if created < lo:
                    older = True
                    break
                c = b.get("request_counts") or {}
                total = sum(
                    int(c.get(k) or 0) for k in ("processing", "succeeded", "errored", "canceled", "expired")
                )
                if total == n_requests:
                    out.append(b["id"])
            if older or not page.get("has_more") or not page.get("last_id"):
                return out
            after = page["last_id"]

    async def result_ids(self, batch_id: str) -> set[str]:
        b = json.loads(await self._http("GET", f"{self.base_url}/messages/batches/{batch_id}"))
        if not b.get("results_url"):
            return set()
        lines = (await self._http("GET", b["results_url"])).decode().splitlines()
        return {json.loads(ln).get("custom_id") for ln in lines if ln.strip()} - {None}

    async def batch_status(self, batch_id: str) -> BatchStatus:
        b = json.loads(await self._http("GET", f"{self.base_url}/messages/batches/{batch_id}"))
        c = b.get("request_counts") or {}
        done = sum(int(c.get(k) or 0) for k in ("succeeded", "errored", "canceled", "expired"))
        total = done + int(c.get("processing") or 0)
        return BatchStatus(b["processing_status"], done, total, b["processing_status"] == "ended")

    async def batch_results(
        self, batch_id: str, requests: dict[str, JudgeRequest], decoding: Decoding
    ) -> dict[str, Any]:
        b = json.loads(await self._http("GET", f"{self.base_url}/messages/batches/{batch_id}"))
        out: dict[str, Any] = {}
        if b.get("results_url"):
            for line in (await self._http("GET", b["results_url"])).decode().splitlines():
                if line.strip():
                    row = json.loads(line)
                    if row.get("custom_id") in requests:
                        out[row["custom_id"]] = self._result(
                            row.get("result") or {}, requests[row["custom_id"]]
                        )
        return {k: out.get(k, RESUBMIT) for k in requests}

    def _result(self, result: dict[str, Any], request: JudgeRequest) -> Any:
        kind = result.get("type")
        if kind in ("canceled", "expired"):
            return RESUBMIT
        if kind == "errored":
            err = (result.get("error") or {}).get("error") or result.get("error") or {}
            if err.get("type") in ("rate_limit_error", "overloaded_error", "api_error"):
                return RESUBMIT
            return BackendError(
                f"{self.name} batch: request {request.key[:12]} failed: {json.dumps(err)[:300]}"
            )
        msg = result.get("message") or {}
        text = "".join(c.get("text", "") for c in msg.get("content") or [] if c.get("type") == "text")
        usage = msg.get("usage") or {}
        return JudgeResponse(
            raw_text=text,
            label_probs=None,
            prompt_tokens=int(usage.get("input_tokens") or 0),
            completion_tokens=int(usage.get("output_tokens") or 0),
            latency_s=0.0,
            extra={
                "scoring": "parsed_label",
                "finish_reason": msg.get("stop_reason"),
                "served_model": msg.get("model"),
            },
        )

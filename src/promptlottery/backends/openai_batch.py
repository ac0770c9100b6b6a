"""OpenAI's Batch API: the requests as a JSONL file (``purpose=batch``, ``POST /v1/files``), a batch
(``POST /v1/batches``, ``completion_window=24h``, our tag in ``metadata``), polled
(``GET /v1/batches/{id}``: validating, in_progress, finalizing, then completed, expired, failed or
cancelled), its output and error files read (``GET /v1/files/{id}/content``). At most 50,000 requests
and 200 MB a batch. Each answer is a chat completion read as the synchronous API's
(:func:`~promptlottery.backends.openai_wire.parse_response`: label probabilities from top logprobs).
The cache key is the synchronous backend's (``backend=openai``): an answer from either is the same call.
"""

from __future__ import annotations

import json
from typing import Any

from promptlottery.backends.base import BackendError, Decoding, JudgeRequest
from promptlottery.backends.openai_wire import RETRY_STATUS, TransientBackendError
from promptlottery.backends.provider_batch import RESUBMIT, BatchAPIBackend, BatchStatus

ENDED = {"completed", "expired", "failed", "cancelled"}


class OpenAIBatchBackend(BatchAPIBackend):
    backend_name = "openai"
    default_base_url = "https://api.openai.com/v1"
    default_api_key_env = "OPENAI_API_KEY"
    max_batch_requests = 50_000
    max_batch_bytes = 200_000_000

    def batch_line(self, request: JudgeRequest, decoding: Decoding) -> dict[str, Any]:
        path, body = self._payload(request, decoding)
        return {"custom_id": request.key, "method": "POST", "url": "/v1" + path, "body": body}

    async def _http(self, method: str, path: str, **kw) -> Any:
        import aiohttp

        headers = {k: v for k, v in self._headers().items() if k != "Content-Type" or "json" in kw}
        session = await self._client.session()
        try:
            async with session.request(method, self.base_url + path, headers=headers, **kw) as resp:
                status, raw = resp.status, await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransientBackendError(
                f"{self.name} at {self.base_url}{path}: {type(exc).__name__}: {exc}"
            ) from None
        if status != 200:
            raise self._classify(status, raw.decode("utf-8", "replace"), JudgeRequest(key=path, labels=()))
        return raw

    async def submit_batch(self, lines: list[dict[str, Any]], tag: str) -> str:
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        blob = "".join(json.dumps(line) + "\n" for line in lines).encode()
        form.add_field("file", blob, filename=f"{tag}.jsonl", content_type="application/jsonl")
        file_id = json.loads(await self._http("POST", "/files", data=form))["id"]
        body = {
            "input_file_id": file_id,
            "endpoint": lines[0]["url"],
            "completion_window": "24h",
            "metadata": {"promptlottery_tag": tag},
        }
        return json.loads(await self._http("POST", "/batches", json=body))["id"]

    async def find_batch(self, tag: str) -> str | None:
        data = json.loads(await self._http("GET", "/batches?limit=100"))
        for b in data.get("data") or []:
            if (b.get("metadata") or {}).get("promptlottery_tag") == tag:
                return b["id"]
        return None

    async def batch_status(self, batch_id: str) -> BatchStatus:
        b = json.loads(await self._http("GET", f"/batches/{batch_id}"))
        counts = b.get("request_counts") or {}
        done = int(counts.get("completed") or 0) + int(counts.get("failed") or 0)
        return BatchStatus(b["status"], done, int(counts.get("total") or 0), b["status"] in ENDED)

    async def batch_results(
        self, batch_id: str, requests: dict[str, JudgeRequest], decoding: Decoding
    ) -> dict[str, Any]:
        b = json.loads(await self._http("GET", f"/batches/{batch_id}"))
        out: dict[str, Any] = {}
        for file_id in (b.get("output_file_id"), b.get("error_file_id")):
            if not file_id:
                continue
            for line in (await self._http("GET", f"/files/{file_id}/content")).decode().splitlines():
                if line.strip():
                    row = json.loads(line)
                    key = row.get("custom_id")
                    if key in requests:
                        out[key] = self._result(row, requests[key], decoding)
        return {k: out.get(k, RESUBMIT) for k in requests}  # left out (expired, cancelled): sent again

    def _result(self, row: dict[str, Any], request: JudgeRequest, decoding: Decoding) -> Any:
        error, response = row.get("error"), row.get("response") or {}
        status = int(response.get("status_code") or 0)
        if error and (error.get("code") in ("batch_expired", "batch_cancelled")):
            return RESUBMIT
        if status == 200 and not error:
            return self._parse(response.get("body") or {}, request, decoding, 0.0)
        if status in RETRY_STATUS:
            return RESUBMIT
        text = json.dumps(error or response.get("body"))
        return (
            self._classify(status, text, request)
            if status
            else BackendError(f"{self.name} batch: request {request.key[:12]} failed: {text[:300]}")
        )

"""A loopback stub of the providers' documented batch endpoints (OpenAI: /v1/files, /v1/batches,
/v1/files/{id}/content; Anthropic: /v1/messages/batches (create and list), .../{id}, .../{id}/results), for
tests/test_provider_batches.py. A batch ends when ``release`` is set (at once by default); requests
whose text holds "bad" fail with HTTP 400; ``expire_first`` ends the first batch expired with only its
first half answered."""

from __future__ import annotations

import json
import math
import threading
import time
from datetime import datetime, timezone
from email.parser import BytesParser
from email.policy import default
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class BatchStub:
    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.creates = 0
        self.release = threading.Event()
        self.release.set()
        self.expire_first = False
        self.lock = threading.Lock()

    # -- answers --------------------------------------------------------------------------------
    @staticmethod
    def chat(body: dict) -> dict:
        top = [{"token": "4", "logprob": math.log(0.7)}, {"token": "2", "logprob": math.log(0.2)}]
        return {
            "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "4"}, "finish_reason": "stop",
                         "logprobs": {"content": [{"token": "4", "logprob": math.log(0.7), "top_logprobs": top}]}}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 1, "total_tokens": 31},
        }  # fmt: skip

    def _end(self, b: dict) -> None:
        """Answer a batch: every request, or (expire_first, the first batch) its first half."""
        reqs = b["requests"]
        expire = self.expire_first and b["n"] == 1
        b["answered"] = reqs[: len(reqs) // 2] if expire else reqs
        b["state"] = "expired" if expire else "ended"

    def _batch(self, kind: str, reqs: list[dict], metadata: dict | None) -> dict:
        with self.lock:
            self.creates += 1
            bid = f"{'batch' if kind == 'openai' else 'msgbatch'}_{self.creates}"
            self.batches[bid] = {"id": bid, "kind": kind, "requests": reqs, "state": "in_progress",
                                 "metadata": metadata or {}, "n": self.creates, "created": time.time()}  # fmt: skip
            return self.batches[bid]

    def _poll(self, bid: str) -> dict:
        b = self.batches[bid]
        if b["state"] == "in_progress" and self.release.is_set():
            self._end(b)
        return b

    # -- OpenAI ---------------------------------------------------------------------------------
    def openai_view(self, b: dict) -> dict:
        ended = b["state"] != "in_progress"
        n_ok = sum(1 for r in b.get("answered", []) if "bad" not in json.dumps(r["body"]))
        n_bad = len(b.get("answered", [])) - n_ok
        status = {"in_progress": "in_progress", "ended": "completed", "expired": "expired"}[b["state"]]
        return {
            "id": b["id"], "object": "batch", "status": status, "metadata": b["metadata"],
            "request_counts": {"total": len(b["requests"]), "completed": n_ok if ended else 0,
                               "failed": n_bad if ended else 0},
            "output_file_id": f"out-{b['id']}" if ended else None,
            "error_file_id": f"err-{b['id']}" if ended else None,
        }  # fmt: skip

    def openai_file(self, fid: str) -> bytes:
        b = self.batches[fid.split("-", 1)[1]]
        lines = []
        for r in b["answered"]:
            bad = "bad" in json.dumps(r["body"])
            if fid.startswith("out-") and not bad:
                resp = {"status_code": 200, "body": self.chat(r["body"])}
                lines.append({"custom_id": r["custom_id"], "response": resp, "error": None})
            if fid.startswith("err-") and bad:
                resp = {"status_code": 400, "body": {"error": {"message": "bad request"}}}
                lines.append({"custom_id": r["custom_id"], "response": resp, "error": None})
        if fid.startswith("err-") and b["state"] == "expired":
            for r in b["requests"][len(b["answered"]) :]:
                err = {
                    "code": "batch_expired",
                    "message": "This request could not be executed before expiry.",
                }
                lines.append({"custom_id": r["custom_id"], "response": None, "error": err})
        return "".join(json.dumps(x) + "\n" for x in lines).encode()

    # -- Anthropic ------------------------------------------------------------------------------
    def anthropic_view(self, b: dict, base: str) -> dict:
        ended = b["state"] != "in_progress"
        answered = b.get("answered", []) if ended else []
        bad = sum(1 for r in answered if "bad" in json.dumps(r["params"]))
        created = datetime.fromtimestamp(b["created"], timezone.utc).isoformat().replace("+00:00", "Z")
        return {
            "id": b["id"], "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
            "created_at": created,
            "request_counts": {"processing": 0 if ended else len(b["requests"]), "succeeded": len(answered) - bad,
                               "errored": bad, "canceled": 0,
                               "expired": len(b["requests"]) - len(answered) if ended else 0},
            "results_url": f"{base}/v1/messages/batches/{b['id']}/results" if ended else None,
        }  # fmt: skip

    def anthropic_results(self, b: dict) -> bytes:
        lines = []
        for r in b["answered"]:
            if "bad" in json.dumps(r["params"]):
                err = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
                lines.append({"custom_id": r["custom_id"], "result": {"type": "errored", "error": err}})
            else:
                msg = {"type": "message", "role": "assistant", "model": r["params"]["model"],
                       "content": [{"type": "text", "text": "4"}], "stop_reason": "end_turn",
                       "usage": {"input_tokens": 30, "output_tokens": 1}}  # fmt: skip
                lines.append({"custom_id": r["custom_id"], "result": {"type": "succeeded", "message": msg}})
        for r in b["requests"][len(b["answered"]) :]:
            lines.append({"custom_id": r["custom_id"], "result": {"type": "expired"}})
        return "".join(json.dumps(x) + "\n" for x in lines).encode()

    # -- HTTP -----------------------------------------------------------------------------------
    def handler(self):
        stub = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def reply(self, payload, status: int = 200) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/v1/files":
                    head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
                    msg = BytesParser(policy=default).parsebytes(head + raw)
                    part = next(p for p in msg.iter_parts() if p.get_filename())
                    fid = f"file-{len(stub.files) + 1}"
                    stub.files[fid] = part.get_payload(decode=True)
                    return self.reply({"id": fid, "object": "file", "purpose": "batch"})
                body = json.loads(raw)
                if self.path == "/v1/batches":
                    lines = [
                        json.loads(x) for x in stub.files[body["input_file_id"]].decode().splitlines() if x
                    ]
                    return self.reply(stub.openai_view(stub._batch("openai", lines, body.get("metadata"))))
                if self.path == "/v1/messages/batches":
                    b = stub._batch("anthropic", body["requests"], None)
                    return self.reply(stub.anthropic_view(b, stub.base))
                self.reply({"error": {"message": "not found"}}, 404)

            def do_GET(self):
                p = self.path
                if p.startswith("/v1/batches?"):
                    return self.reply({"data": [stub.openai_view(b) for b in stub.batches.values()]})
                if p.startswith("/v1/batches/"):
                    return self.reply(stub.openai_view(stub._poll(p.rsplit("/", 1)[1])))
                if p.startswith("/v1/files/") and p.endswith("/content"):
                    return self.reply(stub.openai_file(p.split("/")[3]))
                if p.startswith("/v1/messages/batches?"):  # newest first, one page
                    mine = [b for b in stub.batches.values() if b["kind"] == "anthropic"][::-1]
                    data = [stub.anthropic_view(b, stub.base) for b in mine]
                    return self.reply({"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
                                       "last_id": data[-1]["id"] if data else None})  # fmt: skip
                if p.startswith("/v1/messages/batches/") and p.endswith("/results"):
                    return self.reply(stub.anthropic_results(stub.batches[p.split("/")[4]]))
                if p.startswith("/v1/messages/batches/"):
                    return self.reply(stub.anthropic_view(stub._poll(p.rsplit("/", 1)[1]), stub.base))
                self.reply({"error": {"message": "not found"}}, 404)

        return H


def serve(stub: BatchStub):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), stub.handler())
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    stub.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    return httpd

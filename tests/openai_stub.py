"""The one loopback OpenAI-compatible server of the tests and the call engine's benchmark.

Every POST to ``/v1/chat/completions`` (or ``/v1/completions``) is answered after ``delay_s`` with one
completion: first token "4" with top logprobs (``4`` 0.5, `` 4`` 0.1, ``5`` 0.2, ``3`` 0.05, ``The``
0.05), 42 prompt and 1 completion tokens. A bare asyncio protocol (HTTP/1.1 keep-alive, Content-Length
bodies), so one process answers thousands of calls a second for a few microseconds each.

In a test (``OpenAIStub().start()``: its own event loop on a daemon thread; ``stop()``), the stub can
also answer ``script``'s ``(status, body or raw text or None, headers)`` first, hold the requests whose
first message is in ``slow`` for their own delay, answer 429 (``Retry-After: 0``) above ``limit`` calls
in flight and leave the logprobs out (``logprobs = False``); it keeps every request it answered
(``seen``: path, headers, body) and counts the calls in flight (``max_in_flight``) and the 429s
(``throttled``). Used by tests/test_backends_openai.py, tests/test_call_window.py and
tests/test_hostile_round2.py.

As a process, for the benchmark (benchmarks/bench_calls.py), the same answer's bytes for every request,
nothing parsed or kept::

    python tests/openai_stub.py --delay-ms 100 [--port 0]     # prints "port=N", serves until killed
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import threading
from typing import Any

#: the answer's top logprobs at its first token: "4" spelled two ways, so label probabilities sum them
DEFAULT_TOP = [("4", 0.5), (" 4", 0.1), ("5", 0.2), ("3", 0.05), ("The", 0.05)]
USAGE = {"prompt_tokens": 42, "completion_tokens": 1, "total_tokens": 43}


def top_logprobs(pairs) -> list[dict[str, Any]]:
    return [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in pairs]


def answer(body: dict, *, logprobs: bool = True) -> dict[str, Any]:
    """The default chat completion for a request ``body`` (its logprobs only where it asked for them)."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": "4"},
        "finish_reason": "stop",
    }
    if logprobs and body.get("logprobs"):
        choice["logprobs"] = {
            "content": [{"token": "4", "logprob": math.log(0.5), "top_logprobs": top_logprobs(DEFAULT_TOP)}]
        }
    return {"id": "stub", "object": "chat.completion", "model": body.get("model"), "choices": [choice],
            "usage": dict(USAGE)}  # fmt: skip


def http_response(status: int, data: bytes, headers: dict[str, str] | None = None) -> bytes:
    head = [f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}", "Content-Type: application/json",
            f"Content-Length: {len(data)}", *(f"{k}: {v}" for k, v in (headers or {}).items())]  # fmt: skip
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


#: the benchmark's answer: the same bytes for every request
FAST_RESPONSE = http_response(200, json.dumps(answer({"model": "stub-judge", "logprobs": True})).encode())


class OpenAIStub:
    def __init__(self, delay_s: float = 0.0, *, fast: bool = False):
        self.delay_s = delay_s
        #: the benchmark's mode: every request answered with FAST_RESPONSE, nothing parsed or kept
        self.fast = fast
        self.limit: int | None = None
        self.script: list[tuple[int, dict | str | None, dict[str, str]]] = []
        self.slow: dict[str, float] = {}
        self.logprobs = True
        self.seen: list[dict[str, Any]] = []
        self.in_flight = self.max_in_flight = self.throttled = self.seen_during_slow = 0
        self.lock = threading.Lock()
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None

    @property
    def contents(self) -> list[str]:
        """The first message's text of every request answered (throttled ones left out)."""
        return [s["body"]["messages"][0]["content"] for s in self.seen]

    # -- one request ------------------------------------------------------------------------------
    def handle(self, path: str, headers: dict[str, str], raw: bytes, send) -> None:
        """Answer one request: ``send(bytes)`` now or after its delay."""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            send(http_response(400, b'{"error": {"message": "body is not JSON"}}'))
            return
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            over = self.limit is not None and self.in_flight > self.limit
            scripted = self.script.pop(0) if self.script and not over else None
            if over:
                self.throttled += 1
            else:
                self.seen.append({"path": path, "headers": headers, "body": body})
            n0 = len(self.seen)
        if over:
            self._done(
                send, http_response(429, b'{"error": {"message": "rate limited"}}', {"Retry-After": "0"})
            )
            return
        status, payload, extra = scripted or (200, None, {})
        payload = answer(body, logprobs=self.logprobs) if payload is None else payload
        data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        messages = body.get("messages") or [{}]
        slow = self.slow.get(messages[0].get("content")) if isinstance(messages[0], dict) else None
        delay = self.delay_s if slow is None else slow

        def reply() -> None:
            if slow is not None:
                self.seen_during_slow = len(self.seen) - n0
            self._done(send, http_response(status, data, extra))

        if delay > 0:
            asyncio.get_running_loop().call_later(delay, reply)
        else:
            reply()

    def _done(self, send, response: bytes) -> None:
        # counted out before the reply is sent: once the client has read it, it may send the next
        # request before this returns
        with self.lock:
            self.in_flight -= 1
        send(response)

    # -- serving ----------------------------------------------------------------------------------
    async def serve(self, port: int = 0) -> asyncio.AbstractServer:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Protocol(self), "127.0.0.1", port, backlog=4096)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"
        return self._server

    def start(self) -> OpenAIStub:
        """Serve on a free port from a daemon thread of its own; ``self.url`` is its ``.../v1``."""
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self.serve())
            ready.set()
            self._loop.run_forever()
            self._loop.close()

        threading.Thread(target=run, name="openai-stub", daemon=True).start()
        if not ready.wait(30):
            raise RuntimeError("the OpenAI stub did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        async def close() -> None:
            self._server.close()
            for proto in list(_Protocol.open.get(self, ())):
                proto.transport.close()

        asyncio.run_coroutine_threadsafe(close(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)


class _Protocol(asyncio.Protocol):
    """One connection: requests parsed as they arrive (pipelined or not), each handed to the stub."""

    #: the connections open per stub (closed by ``stop``)
    open: dict[OpenAIStub, set[_Protocol]] = {}

    def __init__(self, stub: OpenAIStub):
        self.stub, self.buf = stub, b""

    def connection_made(self, transport) -> None:
        self.transport = transport
        _Protocol.open.setdefault(self.stub, set()).add(self)

    def connection_lost(self, exc) -> None:
        _Protocol.open.get(self.stub, set()).discard(self)

    def send(self, data: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:  # every complete request in the buffer
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end]
            at = head.lower().find(b"\r\ncontent-length:")
            stop = head.find(b"\r\n", at + 2)
            length = int(head[at + 17 : stop if stop > 0 else None]) if at >= 0 else 0
            end = head_end + 4 + length
            if len(self.buf) < end:
                return
            raw, self.buf = self.buf[head_end + 4 : end], self.buf[end:]
            if self.stub.fast:  # the benchmark: a few microseconds a call
                if self.stub.delay_s > 0:
                    asyncio.get_running_loop().call_later(self.stub.delay_s, self.send, FAST_RESPONSE)
                else:
                    self.send(FAST_RESPONSE)
                continue
            lines = head.decode("latin-1").split("\r\n")
            headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
            parts = lines[0].split(" ")
            self.stub.handle(parts[1] if len(parts) > 1 else "/", headers, raw, self.send)


def main() -> None:
    ap = argparse.ArgumentParser(description="a loopback OpenAI-compatible stub (the benchmark's mode)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--delay-ms", type=float, default=0.0)
    args = ap.parse_args()

    async def run() -> None:
        server = await OpenAIStub(args.delay_ms / 1000, fast=True).serve(args.port)
        print(f"port={server.sockets[0].getsockname()[1]}", flush=True)
        async with server:
            await server.serve_forever()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

"""The OpenAI-compatible backends' two HTTP transports (``http_transport``: lean, aiohttp) against loopback
servers on 127.0.0.1: the same answers through both; the lean one's bodies (chunked, read to the close),
``Connection: close``, a kept-alive connection the server closed, the deadline, 429 / 500, a refused
connection; and which transport ``auto`` picks.

Two servers: the OpenAI stub (tests/openai_stub.py) and :class:`RawServer` below, whose answers are
bytes written as the test says (in pieces, then a close or not), to reach the lean client's parser.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import pytest

from promptlottery.backends.base import Decoding, JudgeRequest
from promptlottery.backends.openai_compat import OpenAIBackend, VLLMServerBackend
from promptlottery.backends.openai_wire import TransientBackendError
from promptlottery.calls.cache import CallCache
from promptlottery.calls.loop import CallStats, run_calls
from tests.openai_stub import answer

LABELS = ("1", "2", "3", "4", "5")
TRANSPORTS = ("lean", "aiohttp")


def _backend(url, transport, **kw):
    return VLLMServerBackend("judge-model", base_url=url, api_key_env="", http_transport=transport, **kw)


def _reqs(n=1):
    return [
        JudgeRequest(key=f"key{i:04d}", labels=LABELS, messages=[{"role": "user", "content": f"rate {i}"}])
        for i in range(n)
    ]


class RawServer:
    """A loopback server answering each request with ``plan(body, n_on_connection)``: a list of byte
    strings written 20 ms apart, where ``None`` closes the connection. It counts its connections."""

    def __init__(self, plan):
        self.plan, self.connections, self.requests = plan, 0, []
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def serve():
            self.server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
            self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"
            ready.set()

        threading.Thread(target=lambda: (self.loop.run_until_complete(serve()), self.loop.run_forever()),
                         daemon=True).start()  # fmt: skip
        assert ready.wait(10)

    async def _conn(self, reader, writer):
        self.connections += 1
        n = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(
                    next(ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:"))[15:]
                )
                body = json.loads(await reader.readexactly(length))
                self.requests.append((head, body))
                for i, piece in enumerate(self.plan(body, n)):
                    if i:
                        await asyncio.sleep(0.02)
                    if piece is None:
                        writer.close()
                        return
                    writer.write(piece)
                    await writer.drain()
                n += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def stop(self):
        self.loop.call_soon_threadsafe(self.server.close)


def _ok(body, *, extra=b"", length=True):
    data = json.dumps(answer(body)).encode()
    size = b"Content-Length: %d\r\n" % len(data) if length else b""
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + size + extra + b"\r\n" + data, data


def _answers(url, transport, tmp_path, n=6, **kw):
    backend = _backend(url, transport, max_concurrency=3, **kw)
    got = run_calls(_reqs(n), backend, CallCache(tmp_path / f"{transport}.sqlite"), Decoding(), stats=CallStats(),
                    max_retries=2, backoff_s=0.01)  # fmt: skip
    backend.close()
    return {k: {**r.to_json(), "latency_s": None} for k, r in got.items()}


def test_lean_and_aiohttp_give_the_same_answers(openai_stub, tmp_path):
    lean, aio = (_answers(openai_stub.url, t, tmp_path) for t in TRANSPORTS)
    assert len(lean) == 6 and lean == aio
    bodies = [json.dumps(s["body"], sort_keys=True) for s in openai_stub.seen]
    assert len(bodies) == 12 and sorted(bodies[:6]) == sorted(bodies[6:])  # the same requests sent
    headers = openai_stub.seen[0]["headers"]  # the lean transport's (it ran first)
    assert headers["Accept-Encoding"] == "identity" and headers["Content-Type"] == "application/json"


def test_a_chunked_answer_in_pieces_reads_as_the_same_answer(tmp_path):
    def plan(body, n):
        _, data = _ok(body)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        a, b = data[:10], data[10:]
        chunks = b"%x;ext=1\r\n%s\r\n%x\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n" % (len(a), a, len(b), b)
        return [head + chunks[:3], chunks[3:20], chunks[20:]]  # split in the size line and in the data

    server = RawServer(plan)
    try:
        assert _answers(server.url, "lean", tmp_path, n=3) == _answers(server.url, "aiohttp", tmp_path, n=3)
    finally:
        server.stop()


def test_connection_close_opens_a_new_connection_and_a_body_may_run_to_the_close(tmp_path):
    def plan(body, n):  # the first request of each connection answered with Connection: close
        head, data = _ok(body, extra=b"Connection: close\r\n", length=False)
        return [head, None]  # no Content-Length: the body ends at the close

    server = RawServer(plan)
    try:
        backend = _backend(server.url, "lean", max_concurrency=1)
        out = backend.generate(_reqs(3), Decoding())
        assert [o.raw_text for o in out] == ["4"] * 3 and server.connections == 3
    finally:
        server.stop()


def test_a_kept_alive_connection_the_server_closed_is_retried_once_on_a_fresh_one():
    def plan(body, n):
        if n == 1:  # the second request on a connection: closed unanswered (as a server's idle timeout)
            return [None]
        return [_ok(body)[0]]

    server = RawServer(plan)
    try:
        backend = _backend(server.url, "lean", max_concurrency=1)
        out = backend.generate(_reqs(2), Decoding())
        # request 2 went on the kept-alive connection, was dropped, and went again on a new one
        assert (
            [o.raw_text for o in out] == ["4", "4"] and server.connections == 2 and len(server.requests) == 3
        )
    finally:
        server.stop()


def test_a_fresh_connection_closed_unanswered_is_not_sent_again():
    server = RawServer(lambda body, n: [None])
    try:
        with pytest.raises(TransientBackendError, match="ServerDisconnectedError: Server disconnected"):
            _backend(server.url, "lean").generate(_reqs(1), Decoding())
        assert len(server.requests) == 1
    finally:
        server.stop()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_deadline_bounds_the_whole_request(openai_stub, transport):
    openai_stub.delay_s = 2.0
    backend = _backend(openai_stub.url, transport, timeout_s=0.3, max_concurrency=1)
    with pytest.raises(
        TransientBackendError, match=r"no complete answer within 0\.3 s \(backbone\.backend\.timeout_s"
    ):
        backend.generate(_reqs(1), Decoding())
    openai_stub.delay_s = 0.0  # the one connection's room came back: the next requests are answered
    assert [o.raw_text for o in backend.generate(_reqs(2), Decoding())] == ["4", "4"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_429_retry_after_and_rate_headers_reach_the_backend(openai_stub, transport):
    limits = {"x-ratelimit-remaining-requests": "3", "x-ratelimit-limit-requests": "100", "Retry-After": "7"}
    openai_stub.script = [(429, {"error": {"message": "slow down"}}, limits)]
    backend = _backend(openai_stub.url, transport)
    with pytest.raises(TransientBackendError, match="slow down") as ei:
        backend.generate(_reqs(1), Decoding())
    assert ei.value.retry_after == 7.0 and ei.value.status == 429 and backend.rate_headroom == 0.03


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_500_is_retried(openai_stub, tmp_path, transport):
    openai_stub.script = [(500, "internal error", {})]
    assert len(_answers(openai_stub.url, transport, tmp_path, n=1)) == 1 and len(openai_stub.seen) == 2


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_refused_connection_names_the_host(transport):
    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = _backend(f"http://127.0.0.1:{port}/v1", transport)
    with pytest.raises(
        TransientBackendError, match=f"ClientConnectorError: Cannot connect to host 127.0.0.1:{port}"
    ):
        backend.generate(_reqs(1), Decoding())


def test_auto_picks_lean_for_plain_http_and_aiohttp_for_https_or_a_proxy(monkeypatch):
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    assert _backend("http://127.0.0.1:8000/v1", "auto").transport == "lean"
    assert OpenAIBackend("gpt-x").transport == "aiohttp"  # https://api.openai.com
    assert _backend("https://127.0.0.1:8000/v1", "lean").transport == "lean"  # asked for by name
    assert _backend("http://user:pw@127.0.0.1:8000/v1", "auto").transport == "aiohttp"  # its basic auth
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    assert _backend("http://127.0.0.1:8000/v1", "auto").transport == "aiohttp"
    with pytest.raises(
        ValueError, match=r"^VLLMServerBackend: http_transport='h2' must be one of auto, aiohttp, lean$"
    ):
        _backend("http://127.0.0.1:8000/v1", "h2")


@pytest.mark.parametrize(
    "answer_bytes, why",
    [
        (b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 70_000, "status line and headers longer than 65536 bytes"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n{", "a body longer than 67108864 bytes"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nabc\r\n", "a negative chunk size -5"),
    ],
    ids=["endless headers", "huge content-length", "negative chunk"],
)
def test_a_broken_or_hostile_answer_is_refused_in_one_line_before_it_fills_memory(answer_bytes, why):
    """Headers past 64 KB, a body announced or sent past 64 MB, a negative chunk size: the lean client
    closes the connection and the call fails with one line naming what was wrong (retried, then
    reported), not a read that grows until the deadline."""
    server = RawServer(lambda body, n: [answer_bytes])
    try:
        with pytest.raises(TransientBackendError, match=f"malformed answer: {why}"):
            _backend(server.url, "lean").generate(_reqs(1), Decoding())
    finally:
        server.stop()

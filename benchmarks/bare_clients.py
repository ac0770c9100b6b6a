"""The call engine's ceilings (benchmarks/bench_calls.py): two clients with nothing but the HTTP round
trips, against the same loopback stub (tests/openai_stub.py), each in a process of its own.

    python benchmarks/bare_clients.py aiohttp URL C N    # a bare aiohttp client: N requests, a semaphore of C
    python benchmarks/bare_clients.py raw URL C N        # C keep-alive connections on bare asyncio protocols

``aiohttp``: one ``ClientSession`` (connector ``limit`` = C), ``asyncio.gather`` of N coroutines each
posting the same JSON body under a semaphore of C and reading the answer's JSON: what any aiohttp
client pays per call, without a cache, parsing or retries. ``raw``: C connections, each writing its
next request as soon as its answer is complete (HTTP/1.1, Content-Length, the answer's JSON read):
what the stub and the loopback allow, with as little client CPU as Python can spend. Each prints one
JSON line: calls/s (from the first request to the last answer; imports and the process's start left
out) and the client's CPU milliseconds per call.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from urllib.parse import urlsplit

BODY = {
    "model": "stub-judge",
    "messages": [{"role": "user", "content": "Evaluate how similar the two sentences are. " * 4}],
    "temperature": 0.0,
    "max_tokens": 8,
    "logprobs": True,
    "top_logprobs": 20,
}


async def bare_aiohttp(url: str, c: int, n: int) -> int:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c, limit_per_host=0)) as session:
        sem = asyncio.Semaphore(c)

        async def one() -> None:
            async with sem, session.post(url + "/chat/completions", json=BODY) as resp:
                json.loads(await resp.read())

        await asyncio.gather(*(one() for _ in range(n)))
    return n


async def raw(url: str, c: int, n: int) -> int:
    loop = asyncio.get_running_loop()
    parts = urlsplit(url)
    payload = json.dumps(BODY).encode()
    request = (
        f"POST {parts.path}/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode() + payload
    left, answered = [n], [0]

    class Client(asyncio.Protocol):
        def __init__(self, done: asyncio.Future):
            self.buf, self.done = b"", done

        def connection_made(self, transport) -> None:
            self.transport = transport
            self.next()

        def next(self) -> None:
            if left[0] > 0:
                left[0] -= 1
                self.transport.write(request)
            else:
                self.transport.close()
                if not self.done.done():
                    self.done.set_result(None)

        def data_received(self, data: bytes) -> None:
            self.buf += data
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 :].split(b"\r\n", 1)[0])
            end = head_end + 4 + length
            if len(self.buf) < end:
                return
            json.loads(self.buf[head_end + 4 : end])
            self.buf = self.buf[end:]
            answered[0] += 1
            self.next()

    done = []
    for _ in range(c):
        fut = loop.create_future()
        done.append(fut)
        await loop.create_connection(lambda fut=fut: Client(fut), parts.hostname, parts.port)
    await asyncio.gather(*done)
    return answered[0]


def main(argv: list[str]) -> None:
    kind, url, c, n = argv[0], argv[1], int(argv[2]), int(argv[3])
    client = {"aiohttp": bare_aiohttp, "raw": raw}[kind]
    if kind == "aiohttp":
        import aiohttp  # noqa: F401 - imported before the clock starts
    t0, c0 = time.perf_counter(), time.process_time()
    got = asyncio.run(client(url, c, n))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"calls_s": got / wall, "cpu_per_call_ms": 1000 * cpu / got, "n": got}))


if __name__ == "__main__":
    main(sys.argv[1:])

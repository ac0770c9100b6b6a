"""A loopback OpenAI-compatible stub for the engine benchmark: every POST to ``/v1/chat/completions``
is answered after a fixed delay ``D`` with one chat completion (first token "4" with top logprobs),
as a vLLM server that is never the bottleneck would answer.

    python benchmarks/openai_stub.py --port 0 --delay-ms 100     # prints "port=N", serves until killed

A bare asyncio protocol (HTTP/1.1 keep-alive, Content-Length bodies only): a few microseconds of the
stub's CPU per call, so on a 2-core machine the client, not the stub, sets the pace.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math

ANSWER = json.dumps(
    {
        "id": "stub",
        "object": "chat.completion",
        "model": "stub-judge",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "4"},
                "finish_reason": "stop",
                "logprobs": {
                    "content": [
                        {
                            "token": "4",
                            "logprob": math.log(0.5),
                            "top_logprobs": [
                                {"token": t, "logprob": math.log(p)}
                                for t, p in [("4", 0.5), (" 4", 0.1), ("5", 0.2), ("3", 0.05), ("The", 0.05)]
                            ],
                        }
                    ]
                },
            }
        ],
        "usage": {"prompt_tokens": 42, "completion_tokens": 1, "total_tokens": 43},
    }
).encode()
RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
    + str(len(ANSWER)).encode()
    + b"\r\n\r\n"
    + ANSWER
)


class StubProtocol(asyncio.Protocol):
    def __init__(self, delay_s: float, counter: list[int]):
        self.delay_s, self.counter, self.buf = delay_s, counter, b""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:  # every complete request in the buffer (pipelined or not)
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end].lower()
            at = head.find(b"content-length:")
            length = (
                int(head[at + 15 : head.find(b"\r\n", at) if b"\r\n" in head[at:] else None])
                if at >= 0
                else 0
            )
            end = head_end + 4 + length
            if len(self.buf) < end:
                return
            self.buf = self.buf[end:]
            self.counter[0] += 1
            if self.delay_s > 0:
                asyncio.get_running_loop().call_later(self.delay_s, self._send)
            else:
                self._send()

    def _send(self) -> None:
        if not self.transport.is_closing():
            self.transport.write(RESPONSE)


async def serve(port: int, delay_s: float) -> None:
    counter = [0]
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: StubProtocol(delay_s, counter), "127.0.0.1", port, backlog=4096)
    print(f"port={server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--delay-ms", type=float, default=0.0)
    args = ap.parse_args()
    try:
        asyncio.run(serve(args.port, args.delay_ms / 1000))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

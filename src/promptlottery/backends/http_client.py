"""One event loop and one HTTP client per backend, for the life of the run.

The OpenAI-compatible backends send every request of a run through one ``aiohttp.ClientSession``
on one event loop, which runs on a daemon thread of its own: calls from a plain script, from a
notebook's running loop and from the call loop's sliding window (:mod:`promptlottery.calls.loop`)
all reach the same loop, so connections are kept alive across batches and nothing is built per
batch (the httpx client of before built an SSL context and a connection pool per batch, and
httpcore's pool does work that grows with the square of the connections, encode/httpx#3215).
aiohttp's connector hands a connection out in constant time at ``limit`` = 256 and logs nothing per
request. The session's total timeout (``timeout_s``) is each request's one deadline: connect, send and
every read of the answer together.

``http_transport`` picks what carries the calls' bytes (:meth:`LoopClient.post`): that aiohttp session,
or the lean HTTP/1.1 pool of :mod:`~promptlottery.backends.lean_http` (half the client CPU a call at
C = 256; docs/benchmarks.md); ``auto`` takes the lean one for a plain ``http://`` server (a local vLLM,
where hundreds of calls are in flight) and aiohttp for ``https://`` (paid APIs: rate limits, proxies,
TLS oddities) or wherever a proxy variable is set. The answers are the same either way. The batch
backends' uploads (:meth:`LoopClient.session`) always go through aiohttp.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


#: the values of ``event_loop``: asyncio's own loop (the default), uvloop's where installed (``auto``),
#: uvloop's or an error (``uvloop``)
EVENT_LOOPS = ("asyncio", "auto", "uvloop")


#: the values of ``http_transport``: ``auto`` (lean for http://, aiohttp for https:// or behind a proxy),
#: ``aiohttp``, ``lean`` (:mod:`~promptlottery.backends.lean_http`)
HTTP_TRANSPORTS = ("auto", "aiohttp", "lean")
#: the environment variables that name a proxy: ``auto`` leaves those requests to aiohttp
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


class TransportError(Exception):
    """A request that failed at the connection (refused, reset, timed out connecting): retryable."""


class DeadlineError(Exception):
    """A request that ran past its one deadline (``timeout_s``): retryable."""


def resolve_transport(http_transport: str, base_url: str, *, where: str) -> str:
    """``lean`` or ``aiohttp`` for ``http_transport`` at ``base_url`` (``ValueError``, one line naming
    ``where``, for a value not in :data:`HTTP_TRANSPORTS`): at the backend's construction. ``auto`` is lean
    only for a plain ``http://`` URL without credentials in it, and no proxy variable set."""
    if http_transport not in HTTP_TRANSPORTS:
        raise ValueError(
            f"{where}: http_transport={http_transport!r} must be one of {', '.join(HTTP_TRANSPORTS)}"
        )
    if http_transport != "auto":
        return http_transport
    proxied = any(os.environ.get(v) for v in PROXY_VARIABLES)
    # user:password@host in the URL: aiohttp sends it as basic auth, the lean pool does not
    userinfo = "@" in base_url.split("://", 1)[-1].split("/", 1)[0]
    return "lean" if base_url.startswith("http://") and not proxied and not userinfo else "aiohttp"


def _uvloop():
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop


def check_event_loop(event_loop: str, *, where: str) -> None:
    """Refuse (``ValueError``, one line naming ``where``) an ``event_loop`` that is not one of
    :data:`EVENT_LOOPS`, or ``uvloop`` where uvloop is not installed: at the backend's construction,
    before any call."""
    if event_loop not in EVENT_LOOPS:
        raise ValueError(f"{where}: event_loop={event_loop!r} must be one of {', '.join(EVENT_LOOPS)}")
    if event_loop == "uvloop" and _uvloop() is None:
        raise ValueError(
            f"{where}: event_loop='uvloop' but uvloop is not installed: pip install 'promptlottery[openai]' "
            "(none on Windows), or event_loop=auto (uvloop where installed, else asyncio's loop)"
        )


def new_loop(event_loop: str = "asyncio") -> asyncio.AbstractEventLoop:
    """A new event loop of the kind ``event_loop`` names (:func:`check_event_loop` checked it): uvloop's
    for ``uvloop``, and for ``auto`` where uvloop is installed (else asyncio's: the same answers, the loop
    only moves their bytes); asyncio's own for ``asyncio``, the default. uvloop takes an answer and
    sends the next request for less CPU at D = 0 (12% less a call), but gave nothing at C = 256 calls in
    flight to a server answering in 100 ms (docs/benchmarks.md): an option, not the default."""
    uvloop = _uvloop() if event_loop in ("auto", "uvloop") else None
    return uvloop.new_event_loop() if uvloop is not None else asyncio.new_event_loop()


class LoopClient:
    """A daemon thread running one event loop (:func:`new_loop`), and the HTTP session that lives on it."""

    def __init__(
        self, *, max_connections: int, timeout_s: float, connect_timeout_s: float, event_loop: str = "asyncio",
        base_url: str = "", transport: str = "aiohttp",
    ):  # fmt: skip
        self.max_connections = max(1, int(max_connections))
        self.base_url, self.transport = base_url, transport
        self._lean = None
        self.timeout_s, self.connect_timeout_s = timeout_s, connect_timeout_s
        self.loop = new_loop(event_loop)
        self._session = None
        self._thread = threading.Thread(target=self.loop.run_forever, name="promptlottery-http", daemon=True)
        self._thread.start()
        # closed with its owner (or at exit): no "unclosed client session" warnings, no thread left
        self._holder: list = [None, None]  # the session and the lean pool, once built
        self._finalizer = weakref.finalize(self, _shutdown, self.loop, self._thread, self._holder)

    async def session(self):
        """The one session (built on first use, on the loop's thread)."""
        if self._session is None:
            try:
                import aiohttp
            except ImportError:
                from promptlottery.backends.base import BackendError

                raise BackendError(
                    "the OpenAI-compatible backends need aiohttp: pip install 'promptlottery[openai]'"
                ) from None

            connector = aiohttp.TCPConnector(limit=self.max_connections, limit_per_host=0, ttl_dns_cache=None)
            timeout = aiohttp.ClientTimeout(total=self.timeout_s, sock_connect=self.connect_timeout_s)
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False)
            self._holder[0] = self._session
        return self._session

    async def post(self, path: str, body: dict, headers: dict[str, str]) -> tuple[int, bytes, Any]:
        """POST ``body`` as JSON to ``base_url + path`` through the transport: (status, the answer's
        bytes, its headers, read with lower-case names). A failed connection is a :class:`TransportError`,
        the deadline a :class:`DeadlineError` (their message names the kind, as aiohttp's did)."""
        if self.transport == "lean":
            from promptlottery.backends import lean_http

            if self._lean is None:
                self._lean = self._holder[1] = lean_http.LeanPool(
                    self.base_url, max_connections=self.max_connections, timeout_s=self.timeout_s,
                    connect_timeout_s=self.connect_timeout_s,
                )  # fmt: skip
            try:
                return await self._lean.post(path, json.dumps(body).encode(), headers)
            except lean_http.TransportError as exc:
                raise TransportError(str(exc)) from None
            except TimeoutError:
                raise DeadlineError() from None
        import aiohttp

        session = await self.session()
        try:
            async with session.post(self.base_url + path, json=body, headers=headers) as resp:
                return resp.status, await resp.read(), resp.headers
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            if isinstance(exc, asyncio.TimeoutError) and not isinstance(exc, aiohttp.ServerTimeoutError):
                raise DeadlineError() from None
            raise TransportError(f"{type(exc).__name__}: {exc}") from None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for it; an interrupt (Ctrl-C) cancels it there."""
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result()
        except BaseException:
            fut.cancel()
            raise

    def close(self) -> None:
        self._finalizer()


def _shutdown(loop: asyncio.AbstractEventLoop, thread: threading.Thread, holder: list) -> None:
    if loop.is_closed():
        return
    if any(x is not None for x in holder) and thread.is_alive():
        try:
            asyncio.run_coroutine_threadsafe(_close(*holder), loop).result(timeout=5)
        except Exception:  # noqa: BLE001 - closing on the way out: nothing left to tell
            pass
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)
    if not thread.is_alive():
        loop.close()


async def _close(session, lean) -> None:
    """Close the lean pool's connections (their sockets close on the loop's next turn) and the session."""
    if lean is not None:
        lean.close()
        await asyncio.sleep(0)
    if session is not None:
        await session.close()

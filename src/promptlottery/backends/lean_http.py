"""A lean HTTP/1.1 client on asyncio protocols: JSON POSTs to one host over a keep-alive pool.

The OpenAI-compatible backends' ``http_transport=lean`` (:mod:`~promptlottery.backends.http_client`).
At C = 256 calls in flight to a local server, aiohttp's own request path was the engine's ceiling
(about 0.17 ms of client CPU a call, half of the event loop's thread: docs/benchmarks.md); this client
does only what those calls need: at most ``max_connections`` kept-alive connections to the one host of
``base_url``, each request a ``POST`` with a JSON body, ``Content-Length`` and ``Accept-Encoding:
identity``; the answer read by its status line and headers, its body by ``Content-Length``,
``Transfer-Encoding: chunked`` or (neither) up to the server's close. ``Connection: close`` drops the
connection after the answer; a kept-alive connection the server closed while idle is tried once more on
a fresh connection when nothing of its answer arrived. One deadline per request (``timeout_s``: waiting
for a connection, connecting, sending and reading together: one timer, no task) and a connect timeout;
TLS through one ``ssl.create_default_context()`` per pool for ``https``. No proxies, redirects, cookies
or compression: ``auto`` picks aiohttp wherever those may matter.

A connection-level failure is a :class:`TransportError` whose message names its kind the way aiohttp's
errors do (``ClientConnectorError: Cannot connect to host ...``); the deadline is ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from urllib.parse import urlsplit

#: the connection was closed before any byte of the answer arrived (a kept-alive one may be retried)
NOTHING_READ = "Server disconnected"
#: a server's status line and headers past this many bytes, or a body past :data:`MAX_BODY`, is refused:
#: a judge's answer is a few KB (aiohttp's own header limit is 8,190 bytes a line), and a broken or
#: hostile server must not fill the memory within the deadline
MAX_HEAD, MAX_BODY = 64 * 1024, 64 * 1024 * 1024


class TransportError(OSError):
    """A request that failed at the connection (refused, reset, closed early, a malformed answer)."""


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: one request at a time, its answer parsed as the bytes arrive."""

    def __init__(self, pool: LeanPool):
        self.pool, self.transport, self.closed, self.gone = pool, None, False, False
        self.buf, self.head, self.length, self.chunked, self.body = b"", None, None, False, []
        self.status, self.headers = 0, {}
        self.waiter: asyncio.Future | None = None
        self.reused = False  # it answered a request before: a close before the answer may be a stale one

    # -- asyncio's callbacks ------------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.pool._lost(self)
        w = self.waiter
        if w is not None and not w.done():
            if self.head is not None and self.length is None and not self.chunked:  # read to the close
                self._finish(self.buf)
                return
            why = NOTHING_READ if not self.buf and self.head is None else "Server disconnected mid-answer"
            w.set_exception(TransportError(f"ServerDisconnectedError: {why}" + (f": {exc}" if exc else "")))

    def eof_received(self) -> bool:
        return False  # close: connection_lost ends a body read to the close

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():  # nothing asked: a stray byte spoils the connection
            self.transport.close()
            return
        self.buf = self.buf + data if self.buf else data
        try:
            if self.head is None and len(self.buf) > MAX_HEAD and self.buf.find(b"\r\n\r\n", 0, MAX_HEAD) < 0:
                raise ValueError(f"status line and headers longer than {MAX_HEAD} bytes")
            if self.head is None and not self._read_head():
                return
            if len(self.buf) + sum(map(len, self.body)) > MAX_BODY or (self.length or 0) > MAX_BODY:
                raise ValueError(f"a body longer than {MAX_BODY} bytes")
            if self.chunked:
                self._read_chunks()
            elif self.length is not None and len(self.buf) >= self.length:
                self._finish(self.buf[: self.length])
        except (ValueError, IndexError) as exc:
            self.transport.close()
            if not self.waiter.done():
                self.waiter.set_exception(TransportError(f"ClientResponseError: malformed answer: {exc}"))

    # -- one request ----------------------------------------------------------------------------------
    def send(self, data: bytes, waiter: asyncio.Future) -> None:
        self.waiter, self.buf, self.head = waiter, b"", None
        self.status, self.headers, self.length, self.chunked, self.body = 0, {}, None, False, []
        self.transport.write(data)

    def _read_head(self) -> bool:
        """Parse the status line and headers once they are complete (False: not yet)."""
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return False
        lines = self.buf[:end].decode("latin-1").split("\r\n")
        self.buf = self.buf[end + 4 :]
        status = int(lines[0].split(" ", 2)[1])
        if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            return self._read_head() if self.buf else False
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self.status, self.headers, self.head = status, headers, lines[0]
        if status in (204, 304):
            self.length = 0
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self.chunked = True
        elif "content-length" in headers:
            self.length = int(headers["content-length"])
        return True

    def _read_chunks(self) -> None:
        """Take every complete chunk from the buffer; the last (size 0) and its trailers end the body."""
        buf = self.buf
        while True:
            eol = buf.find(b"\r\n")
            if eol < 0:
                break
            size = int(buf[:eol].split(b";", 1)[0], 16)
            if size < 0:
                raise ValueError(f"a negative chunk size {size}")
            if size == 0:
                end = buf.find(b"\r\n\r\n", eol)  # the trailers (none, usually) end with an empty line
                if end < 0:
                    break
                self.buf = b""
                self._finish(b"".join(self.body))
                return
            if len(buf) < eol + 2 + size + 2:
                break
            self.body.append(buf[eol + 2 : eol + 2 + size])
            buf = buf[eol + 2 + size + 2 :]
        self.buf = buf

    def _finish(self, body: bytes) -> None:
        w, self.waiter = self.waiter, None
        keep = self.length is not None or self.chunked
        if (
            not keep
            or self.headers.get("connection", "").lower() == "close"
            or self.head.startswith("HTTP/1.0")
        ):
            self.closed = True
            self.transport.close()
        if not w.done():
            w.set_result((self.status, body, self.headers))


class LeanPool:
    """At most ``max_connections`` keep-alive connections to the host of ``base_url``; :meth:`post`."""

    def __init__(self, base_url: str, *, max_connections: int, timeout_s: float, connect_timeout_s: float):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"http_transport=lean: base_url {base_url!r} is not an http:// or https:// URL")
        self.tls = ssl.create_default_context() if parts.scheme == "https" else None
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        self.host_header = parts.netloc.rsplit("@", 1)[-1]
        self.max_connections = max(1, int(max_connections))
        self.timeout_s, self.connect_timeout_s = timeout_s, connect_timeout_s
        self.idle: list[_Connection] = []
        self.waiters: collections.deque[asyncio.Future] = collections.deque()
        self.open = 0  # connections open or opening
        self.busy: set[_Connection] = set()

    def request_bytes(self, path: str, body: bytes, headers: dict[str, str]) -> bytes:
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        return (
            f"POST {self.prefix}{path} HTTP/1.1\r\nHost: {self.host_header}\r\nAccept-Encoding: identity\r\n"
            f"{head}Content-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1") + body

    async def post(
        self, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes, dict[str, str]]:
        """POST ``body`` (JSON bytes) to ``base_url + path``: (status, body, headers with lower-case names).
        ``TimeoutError`` past ``timeout_s``; :class:`TransportError` for a failed connection."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s if self.timeout_s else None
        data = self.request_bytes(path, body, headers)
        for fresh in (False, True):  # a second try only on a fresh connection, after a stale kept-alive one
            conn = await self._acquire(loop, deadline, fresh)
            waiter = loop.create_future()
            timer = loop.call_at(deadline, _expire, waiter) if deadline is not None else None
            self.busy.add(conn)
            try:
                conn.send(data, waiter)
                got = await waiter
            except TransportError as exc:
                if conn.reused and str(exc).startswith(f"ServerDisconnectedError: {NOTHING_READ}"):
                    continue
                raise
            except BaseException:  # the deadline, or a cancel: the answer's state is unknown, drop it
                conn.closed = True
                conn.transport.close()
                raise
            finally:
                self.busy.discard(conn)
                if timer is not None:
                    timer.cancel()
            self._release(conn)
            return got
        raise TransportError(
            f"ServerDisconnectedError: {NOTHING_READ}"
        )  # pragma: no cover - the loop returns

    # -- the pool -------------------------------------------------------------------------------------
    async def _acquire(self, loop, deadline: float | None, fresh: bool = False) -> _Connection:
        """A connection: an idle one (the most recent), a new one while there is room, else the first
        one given back; ``fresh``: a new one (the retry after a stale kept-alive connection), closing a
        kept-alive one for room where the pool is full."""
        while True:
            while self.idle:
                conn = self.idle.pop()  # the most recent first: the oldest are the likeliest to be stale
                if conn.closed or conn.transport.is_closing():
                    continue
                if not fresh:
                    conn.reused = True
                    return conn
                self._drop(conn)
            if self.open < self.max_connections:
                return await self._connect(loop, deadline)
            conn = await self._wait(loop, deadline)
            if conn is None:
                continue
            if not fresh:
                conn.reused = True
                return conn
            self._drop(conn)

    async def _wait(self, loop, deadline: float | None) -> _Connection | None:
        """Every connection busy: the first one given back, or None when one closed (room for a new one)."""
        waiter = loop.create_future()
        self.waiters.append(waiter)
        timer = loop.call_at(deadline, _expire, waiter) if deadline is not None else None
        try:
            return await waiter
        except BaseException:  # the deadline or a cancel: a connection handed over meanwhile goes back
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None and waiter.result():
                self._release(waiter.result())
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def _drop(self, conn: _Connection) -> None:
        conn.closed = True
        conn.transport.close()
        self._lost(conn)

    async def _connect(self, loop, deadline: float | None) -> _Connection:
        self.open += 1
        wait = self.connect_timeout_s
        if deadline is not None:
            wait = min(wait, deadline - loop.time()) if wait else deadline - loop.time()
        try:
            connecting = loop.create_connection(
                lambda: _Connection(self), self.host, self.port, ssl=self.tls,
                server_hostname=self.host if self.tls else None,
            )  # fmt: skip
            _, conn = await asyncio.wait_for(connecting, wait or None)
        except asyncio.TimeoutError:
            self.open -= 1
            self._wake(None)
            if deadline is not None and loop.time() >= deadline - 1e-3:
                raise
            raise TransportError(
                f"ConnectionTimeoutError: Connection timeout to host {self.host}:{self.port}"
            ) from None
        except (OSError, ssl.SSLError) as exc:
            self.open -= 1
            self._wake(None)
            raise TransportError(
                f"ClientConnectorError: Cannot connect to host {self.host}:{self.port}: {exc}"
            ) from None
        except BaseException:
            self.open -= 1
            self._wake(None)
            raise
        return conn

    def _release(self, conn: _Connection) -> None:
        if conn.closed:
            return
        while self.waiters:  # handed straight to a request waiting for a connection
            w = self.waiters.popleft()
            if not w.done():
                w.set_result(conn)
                return
        self.idle.append(conn)

    def _lost(self, conn: _Connection) -> None:
        """A connection closed (by either side): its room goes to a waiting request (once per connection)."""
        if conn.gone:
            return
        conn.gone = True
        self.open -= 1
        if conn in self.idle:
            self.idle.remove(conn)
        self._wake(None)

    def _wake(self, conn) -> None:
        while self.waiters:
            w = self.waiters.popleft()
            if not w.done():
                w.set_result(conn)
                return

    def close(self) -> None:
        for conn in [*self.idle, *self.busy]:
            if conn.transport is not None:
                conn.transport.close()
        self.idle.clear()


def _expire(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())

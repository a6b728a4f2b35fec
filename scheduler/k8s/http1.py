"""A small HTTP/1.1 client for the scheduler's writes: persistent connections to one
API server, at most ``limit`` of them, each carrying one request at a time.

The writes made per pod (bind, event) are small JSON requests with small answers, two
per scheduled pod. aiohttp's general client (URL objects, multidicts, cookie jar,
tracing, a stream reader per response) cost about as much CPU per write as FGD's
decision at 100 nodes; this client writes the request's bytes and parses the status
line, the headers and a body framed by ``Content-Length``, chunks or the end of the
connection, and nothing else. No proxies, no redirects, no compression (the API server
sends identity unless asked): ``transport.supports`` keeps the official client for a
Configuration that needs more.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

# An answer's status line and headers may not be longer (the API server's are < 1 KiB).
MAX_HEAD_BYTES = 64 * 1024
# A connection idle this long is closed rather than reused: the server may be closing it.
IDLE_S = 15.0


class HttpProtocolError(ConnectionError):
    """The server's answer is not HTTP/1.x as this client reads it."""


@dataclass(frozen=True)
class Response:
    status: int
    reason: str
    body: bytes
    keep_alive: bool = True  # the server keeps the connection open after it


class _Framing:
    LENGTH, CHUNKED, UNTIL_CLOSE = range(3)


class ResponseReader:
    """Reads one answer at a time from the bytes a connection receives."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.reset()

    def reset(self) -> None:
        self.status = 0
        self.reason = ""
        self.keep_alive = True
        self._framing = -1  # no head yet
        self._length = 0
        self._body = bytearray()
        self._chunk_left = -1  # -1: a chunk-size line comes next

    def feed(self, data: bytes) -> Response | None:
        """Add received bytes; the answer once it is complete."""
        self.buffer += data
        if self._framing < 0 and not self._read_head():
            return None
        if self._framing == _Framing.LENGTH:
            if len(self.buffer) < self._length:
                return None
            body = bytes(self.buffer[: self._length])
            del self.buffer[: self._length]
            return self._done(body)
        if self._framing == _Framing.CHUNKED:
            return self._read_chunks()
        return None  # until the connection closes: ``end``

    def end(self) -> Response | None:
        """The connection closed: the answer, when it was framed by the close."""
        if self._framing == _Framing.UNTIL_CLOSE:
            body = bytes(self.buffer)
            self.buffer.clear()
            return self._done(body)
        return None

    @property
    def started(self) -> bool:
        return bool(self.buffer) or self._framing >= 0

    def _done(self, body: bytes) -> Response:
        response = Response(self.status, self.reason, body, self.keep_alive)
        self.reset()
        return response

    def _read_head(self) -> bool:
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD_BYTES:
                    raise HttpProtocolError(f"an answer's head is longer than {MAX_HEAD_BYTES} bytes")
                return False
            lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
            del self.buffer[: end + 4]
            version, _, rest = lines[0].partition(" ")
            code, _, reason = rest.partition(" ")
            if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
                raise HttpProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
            status = int(code)
            if 100 <= status < 200:
                continue  # an interim answer (100 Continue): the real one follows
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, colon, value = line.partition(":")
                if not colon:
                    raise HttpProtocolError(f"not a header line: {line[:80]!r}")
                headers[name.strip().lower()] = value.strip()
            self.status, self.reason = status, reason
            self.keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
            self._frame(status, headers)
            return True

    def _frame(self, status: int, headers: Mapping[str, str]) -> None:
        if status in (204, 304):
            self._framing, self._length = _Framing.LENGTH, 0
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._framing = _Framing.CHUNKED
        elif "content-length" in headers:
            text = headers["content-length"]
            if not text.isdigit():
                raise HttpProtocolError(f"Content-Length is not a number: {text[:40]!r}")
            self._framing, self._length = _Framing.LENGTH, int(text)
        else:
            self._framing = _Framing.UNTIL_CLOSE
            self.keep_alive = False

    def _read_chunks(self) -> Response | None:
        while True:
            if self._chunk_left < 0:
                line_end = self.buffer.find(b"\r\n")
                if line_end < 0:
                    return None
                size_text = bytes(self.buffer[:line_end]).split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise HttpProtocolError(f"not a chunk size: {size_text[:40]!r}") from None
                if size == 0:
                    # The last chunk: trailer lines (if any) end with an empty line.
                    if self.buffer.startswith(b"\r\n", line_end + 2):
                        del self.buffer[: line_end + 4]
                    else:
                        trailers_end = self.buffer.find(b"\r\n\r\n", line_end + 2)
                        if trailers_end < 0:
                            return None
                        del self.buffer[: trailers_end + 4]
                    return self._done(bytes(self._body))
                del self.buffer[: line_end + 2]
                self._chunk_left = size
            if len(self.buffer) < self._chunk_left + 2:
                return None
            if self.buffer[self._chunk_left : self._chunk_left + 2] != b"\r\n":
                raise HttpProtocolError("a chunk does not end with CRLF")
            self._body += self.buffer[: self._chunk_left]
            del self.buffer[: self._chunk_left + 2]
            self._chunk_left = -1


class Connection(asyncio.Protocol):
    """One connection to the server; one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.reader = ResponseReader()
        self.waiter: asyncio.Future[Response] | None = None
        self.closed = False
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():
            self.close()  # an answer to nothing asked: the connection is out of step
            return
        try:
            response = self.reader.feed(data)
        except HttpProtocolError as error:
            self.waiter.set_exception(error)
            self.close()
            return
        if response is not None:
            if self.reader.buffer or not response.keep_alive:  # bytes past the answer: out of step
                self.close()
            self.waiter.set_result(response)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is None or self.waiter.done():
            return
        response = self.reader.end()
        if response is not None:
            self.waiter.set_result(response)
            return
        why = f": {exc}" if exc else ""
        started = "in the middle of its answer" if self.reader.started else "before answering"
        self.waiter.set_exception(ConnectionError(f"the API server closed the connection {started}{why}"))

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    @property
    def reusable(self) -> bool:
        return not self.closed

    async def exchange(self, request: bytes, timeout_s: float) -> Response:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self.waiter = loop.create_future()
        self.reader.reset()
        timer = loop.call_later(timeout_s, self._time_out, self.waiter, timeout_s)
        try:
            self.transport.write(request)
            return await self.waiter
        finally:
            timer.cancel()

    def _time_out(self, waiter: asyncio.Future[Response], timeout_s: float) -> None:
        if not waiter.done():
            waiter.set_exception(TimeoutError(f"no complete answer from the API server in {timeout_s:g} s"))
            self.close()


class ConnectionPool:
    """Requests to the server at ``url`` over at most ``limit`` connections, reused
    while they stay open (newest first). A request waits for a connection when
    ``limit`` are busy. A connection that fails, times out or is cancelled mid-request
    is closed, never reused."""

    def __init__(
        self,
        url: str,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
        limit: int,
        connect_timeout_s: float,
        request_timeout_s: float,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) server address: {url!r}")
        secure = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if secure else 80)
        self.prefix = parts.path.rstrip("/")
        name = f"[{self.host}]" if ":" in self.host else self.host
        self.authority = name if parts.port is None else f"{name}:{self.port}"
        self.ssl = ssl_context if secure else None
        self.server_hostname = server_hostname if secure else None
        self.limit = limit
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self.open = 0  # connections open or being opened
        self._idle: list[Connection] = []
        self._waiters: deque[asyncio.Future[Connection | None]] = deque()
        self._closed = False

    async def request(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Response:
        """Send one request (``target``: the path and query, below the URL's path)."""
        request = self._encode(method, target, headers, body)
        connection = await self._acquire()
        try:
            response = await connection.exchange(request, self.request_timeout_s)
        except BaseException:
            connection.close()
            self._release(connection)
            raise
        self._release(connection)
        return response

    async def close(self) -> None:
        self._closed = True
        for connection in self._idle:
            connection.close()
        self._idle.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(ConnectionError("the connection pool is closed"))

    def _encode(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> bytes:
        lines = [f"{method} {self.prefix}{target} HTTP/1.1", f"Host: {self.authority}"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                raise ValueError(f"header {name} has a line break in its value")
            lines.append(f"{name}: {value}")
        lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def _acquire(self) -> Connection:
        if self._closed:
            raise ConnectionError("the connection pool is closed")
        now = asyncio.get_running_loop().time()
        while self._idle:
            connection = self._idle.pop()
            if connection.reusable and now - connection.idle_since < IDLE_S:
                return connection
            connection.close()
            self.open -= 1
        if self.open < self.limit:
            self.open += 1
        else:
            waiter: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                handed = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                    self._hand_back(waiter.result())
                raise
            if handed is not None:
                return handed
            # Handed a slot: a connection closed and its count is now ours.
        try:
            return await self._connect()
        except BaseException:
            self._free_slot()
            raise

    async def _connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        connecting = loop.create_connection(
            Connection,
            self.host,
            self.port,
            ssl=self.ssl,
            server_hostname=self.server_hostname,
            ssl_handshake_timeout=self.connect_timeout_s if self.ssl is not None else None,
        )
        try:
            _, connection = await asyncio.wait_for(connecting, self.connect_timeout_s)
        except TimeoutError:
            raise TimeoutError(
                f"could not connect to {self.authority} in {self.connect_timeout_s:g} s"
            ) from None
        return connection

    def _hand_back(self, connection: Connection | None) -> None:
        """A waiter that was handed ``connection`` (or a slot, None) is gone."""
        if connection is None:
            self._free_slot()
        else:
            self._release(connection)

    def _release(self, connection: Connection) -> None:
        if self._closed or not connection.reusable:
            connection.close()
            self._free_slot()
            return
        connection.idle_since = asyncio.get_running_loop().time()
        if not self._wake(connection):
            self._idle.append(connection)

    def _free_slot(self) -> None:
        """A connection closed (or never opened): the oldest waiter gets its slot and
        opens one of its own; with none waiting, the slot is free."""
        if not self._wake(None):
            self.open -= 1

    def _wake(self, handed: Connection | None) -> bool:
        """Hand ``handed`` (None: a slot) to the oldest waiter; False if none waits."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(handed)
                return True
        return False

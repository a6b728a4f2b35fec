"""The scheduler's writes per pod (binds, events, status patches), on the event loop,
over persistent HTTP/1.1 connections to one API server, at most ``limit`` of them,
each carrying one request at a time (``ConnectionPool``; the bytes on the wire are
``scheduler.k8s.client.http1``'s), with resumed TLS sessions.

Through the official client each write ran in a worker thread and through the
generated layers (argument validation, model serialization, urllib3), twice per
scheduled pod, with hand-offs between the thread and the loop; aiohttp's general
client (URL objects, multidicts, cookie jar, tracing, a stream reader per response),
after it, cost about as much again as FGD's decision at 100 nodes. The same request
(URL, JSON body, the Configuration's TLS settings and auth headers) written from the
loop costs 0.11 ms of CPU all at once and 0.30 ms one at a time, against about 0.6 and
0.9 ms through the official client (benchmarks/api_write_cost.py against the dev
cluster on 2 shared cores). The transport serves the Configurations it can reproduce
exactly; with a proxy, or a hostname to check that is not the server's, ``KubeApi``
keeps the official client for these writes too.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections import deque
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.http1 import HttpProtocolError, Response, ResponseReader, encode_request
from scheduler.k8s.client.reads import request_headers

# Seconds a write may take: the API server ends a request after 60 s; connecting is quick.
REQUEST_TIMEOUT_S = 70.0
CONNECT_TIMEOUT_S = 10.0
# Connections whose sessions a new one may resume: the newest with a ticket is taken,
# and kept for a second before the next lookup.
RECENT_CONNECTIONS = 8
SESSION_LOOKUP_S = 1.0
# A connection idle this long is closed rather than reused: the server may be closing it.
IDLE_S = 15.0


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
        request = encode_request(method, self.prefix + target, self.authority, headers, body)
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


def supports(configuration: client.Configuration) -> bool:
    """Whether ``ApiTransport`` reproduces how the official client would connect."""
    return not configuration.proxy and not isinstance(configuration.assert_hostname, str)


class ResumingContext(ssl.SSLContext):
    """A client context that offers the server the session of an earlier connection.

    A burst of binds opens up to ``client.connections`` connections at once, and each
    full TLS handshake costs both ends a key exchange and signatures (2-3 ms of this
    process's CPU with a client certificate, and the API server's on the same cores).
    A resumed session skips the certificates and their signatures. asyncio makes each
    connection's ``SSLObject`` with ``wrap_bio``; this context hands it the newest
    session that carries a ticket. The server decides: one that does not take the
    ticket (expired, or tickets off) answers with a full handshake."""

    def __new__(cls) -> ResumingContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self) -> None:
        super().__init__()
        self._recent: deque[ssl.SSLObject] = deque(maxlen=RECENT_CONNECTIONS)
        self._session: ssl.SSLSession | None = None
        self._session_found_at = 0.0

    @property
    def recent_connections(self) -> tuple[ssl.SSLObject, ...]:
        """The newest connections made with this context, oldest first."""
        return tuple(self._recent)

    def resumable_session(self) -> ssl.SSLSession | None:
        """The newest session the server gave a ticket for (TLS 1.3 sends it after the
        handshake, so a connection has one once it has read an answer). Looked up at
        most once a second: a burst opens hundreds of connections."""
        now = time.monotonic()
        if self._session is not None and now - self._session_found_at < SESSION_LOOKUP_S:
            return self._session
        for connection in reversed(self._recent):
            try:
                session = connection.session
            except ValueError:  # OpenSSL cannot serialize it yet: mid-handshake
                continue
            if session is not None and session.has_ticket:
                self._session, self._session_found_at = session, now
                return session
        return None

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        if session is None and not server_side:
            session = self.resumable_session()
        connection = super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)
        self._recent.append(connection)
        return connection


def ssl_context(configuration: client.Configuration) -> ResumingContext:
    """The TLS settings the official client gives urllib3: the CA (file or data), the
    client certificate, and whether to verify the server at all (the defaults of
    ``ssl.create_default_context`` otherwise)."""
    context = ResumingContext()
    if configuration.ssl_ca_cert or configuration.ca_cert_data:
        context.load_verify_locations(cafile=configuration.ssl_ca_cert, cadata=configuration.ca_cert_data)
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif configuration.assert_hostname is False:
        context.check_hostname = False
    return context


class ApiTransport:
    """JSON requests to the API server; a non-2xx answer raises ``ApiException`` with
    its status, reason and body, as the official client does."""

    def __init__(self, api_client: client.ApiClient, max_connections: int) -> None:
        self.api_client = api_client
        configuration = api_client.configuration
        self.host = str(configuration.host).rstrip("/")
        self.server_hostname = configuration.tls_server_name or None
        self.ssl: ResumingContext | None = (
            ssl_context(configuration) if self.host.startswith("https:") else None
        )
        self.max_connections = max_connections
        self.pool = self._new_pool()

    def _new_pool(self) -> ConnectionPool:
        return ConnectionPool(
            self.host,
            self.ssl,
            self.server_hostname,
            self.max_connections,
            CONNECT_TIMEOUT_S,
            REQUEST_TIMEOUT_S,
        )

    async def request(
        self, method: str, path: str, body: Mapping[str, Any], content_type: str = "application/json"
    ) -> None:
        """Send ``body``; the answer's body is read and dropped."""
        headers = request_headers(self.api_client, method, path, content_type)
        answer = await self.pool.request(method, path, headers, json.dumps(body).encode())
        if not 200 <= answer.status <= 299:
            raise ApiException(
                status=answer.status,
                reason=answer.reason,
                body=answer.body.decode("utf-8", errors="replace"),
            )

    async def close(self) -> None:
        """Close the connections; a later request opens new ones (in the loop then
        running: a test's ``asyncio.run``, say)."""
        closing, self.pool = self.pool, self._new_pool()
        await closing.close()

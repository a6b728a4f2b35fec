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
cluster on 2 shared cores). It reaches the server as the official client would: its
TLS settings, ``tls_server_name`` and HTTP proxy (``scheduler.k8s.client.route``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections import deque
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.http1 import HttpProtocolError, Response, ResponseReader, encode_request
from scheduler.k8s.client.messages import request_headers
from scheduler.k8s.client.route import Route, configured_route, route
from scheduler.k8s.client.tls import ResumingContext, remember_session, ssl_context

__all__ = ["ApiTransport", "ConnectionPool", "ResumingContext", "ssl_context"]

# Seconds a write may take: the API server ends a request after 60 s; connecting is quick.
REQUEST_TIMEOUT_S = 70.0
CONNECT_TIMEOUT_S = 10.0
# A connection idle this long is closed rather than reused: the server may be closing it.
IDLE_S = 15.0
# What ``ApiTransport.warm`` asks for: answered to any client (system:public-info-viewer).
WARM_PATH = "/version"


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

    @property
    def ssl_object(self) -> ssl.SSLObject | None:
        """Its TLS state (None over plain HTTP)."""
        if self.transport is None:
            return None
        found = self.transport.get_extra_info("ssl_object")
        return found if isinstance(found, ssl.SSLObject) else None

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
    """Requests to the server at ``url`` (or along ``to``, a ``route.Route``: through a
    proxy, say) over at most ``limit`` connections, reused while they stay open (newest
    first). A request waits for a connection when ``limit`` are busy. A connection that
    fails, times out or is cancelled mid-request is closed, never reused."""

    def __init__(
        self,
        url: str,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
        limit: int,
        connect_timeout_s: float,
        request_timeout_s: float,
        to: Route | None = None,
    ) -> None:
        if to is None:
            to = route(url, ssl_context, server_hostname)
        self.route = to
        self.host = to.server.host
        self.port = to.server.port
        self.prefix = to.prefix
        self.authority = to.server.authority
        self.ssl = to.ssl
        self.server_hostname = to.server_hostname
        self.headers = to.request_headers
        self.limit = limit
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self.open = 0  # connections open or being opened
        self._idle: list[Connection] = []
        self._waiters: deque[asyncio.Future[Connection | None]] = deque()
        self._closed = False

    async def request(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Response:
        """Send one request (``target``: the path and query, below the URL's path)."""
        if self.headers:
            headers = {**headers, **self.headers}
        request = encode_request(method, self.prefix + target, self.authority, headers, body)
        connection = await self._acquire()
        try:
            response = await connection.exchange(request, self.request_timeout_s)
        except BaseException:
            connection.close()
            self._release(connection)
            raise
        remember_session(self.ssl, connection.ssl_object)  # on the loop, the connection's only user
        self._release(connection)
        return response

    @property
    def idle(self) -> tuple[Connection, ...]:
        """The connections open and waiting for a request, newest last."""
        return tuple(self._idle)

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
        try:
            _, connection = await asyncio.wait_for(self._connecting(), self.connect_timeout_s)
        except TimeoutError:
            address = self.route.socket_address.authority
            raise TimeoutError(
                f"connecting to {address} timed out after {self.connect_timeout_s:g} s"
            ) from None
        return connection

    async def _connecting(self) -> tuple[asyncio.BaseTransport, Connection]:
        loop = asyncio.get_running_loop()
        handshake_s = self.connect_timeout_s if self.ssl is not None else None
        if self.route.tunnel:
            sock = await self.route.open_tunnel()
            try:
                return await loop.create_connection(
                    Connection,
                    sock=sock,
                    ssl=self.ssl,
                    server_hostname=self.route.tls_name if self.ssl is not None else None,
                    ssl_handshake_timeout=handshake_s,
                )
            except BaseException:
                sock.close()
                raise
        address = self.route.socket_address
        return await loop.create_connection(
            Connection,
            address.host,
            address.port,
            ssl=self.ssl,
            server_hostname=self.server_hostname,
            ssl_handshake_timeout=handshake_s,
        )

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


class ApiTransport:
    """JSON requests to the API server; a non-2xx answer raises ``ApiException`` with
    its status, reason and body, as the official client does."""

    def __init__(self, api_client: client.ApiClient, max_connections: int) -> None:
        self.api_client = api_client
        configuration = api_client.configuration
        self.host = str(configuration.host).rstrip("/")
        self.ssl: ResumingContext | None = (
            ssl_context(configuration) if self.host.startswith("https:") else None
        )
        self.route = configured_route(configuration, self.ssl)
        self.server_hostname = self.route.server_hostname
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
            self.route,
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

    async def warm(self) -> None:
        """Open a connection before the first write needs one: a GET of the server's
        version, its answer dropped (whatever its status; a failure is the first
        write's to report). The start calls it while its listings are in flight, so
        the first bind does not wait for a TCP and TLS handshake, and the connections a
        burst of binds opens resume this one's TLS session."""
        headers = request_headers(self.api_client, "GET", WARM_PATH)
        with contextlib.suppress(OSError, TimeoutError, HttpProtocolError):
            await self.pool.request("GET", WARM_PATH, headers, b"")

    async def close(self) -> None:
        """Close the connections; a later request opens new ones (in the loop then
        running: a test's ``asyncio.run``, say)."""
        closing, self.pool = self.pool, self._new_pool()
        await closing.close()

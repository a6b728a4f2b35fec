"""``scheduler.k8s.client.http1`` driven from threads: the scheduler's reads, listings
and watches (worker threads, the watches' threads, the first listing's), over the
same route and TLS settings as the event loop's writes
(``scheduler.k8s.client.route``, ``scheduler.k8s.client.tls``), with the credentials the
official loader put in the Configuration (its auth hook runs for every request, so a
rotating service-account token is read again).

Connections persist: up to ``max_connections`` idle ones are kept for the next
request (newest first, none idle longer than ``IDLE_S``); a request that finds none
idle opens another, as urllib3's non-blocking pool does, so a watch that holds its
connection for minutes never makes a read wait. ``timeout`` is (connect, read), as the
official client takes it: connecting (and the proxy's tunnel, and TLS) within the
first, each read of the socket within the second. A GET on a reused connection that
the server had closed is sent again once on a new one.

A body is held whole up to ``http1.MAX_BODY_BYTES`` (``MAX_LISTING_BYTES`` for a GET:
listings are tens of MB); ``stream`` yields a body as it arrives, without a limit of
its own (a watch's reader bounds its lines).
"""

from __future__ import annotations

import contextlib
import json as jsonlib
import select
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from scheduler.k8s.client.http1 import (
    MAX_BODY_BYTES,
    MAX_LISTING_BYTES,
    Response,
    ResponseReader,
    encode_request,
)
from scheduler.k8s.client.messages import JSON, Timeout, parse_json, raise_for_status, request_headers
from scheduler.k8s.client.route import Route, configured_route
from scheduler.k8s.client.tls import remember_session

if TYPE_CHECKING:
    from kubernetes import client

__all__ = ["JSON", "BlockingClient", "Stream", "Timeout", "raise_for_status"]

# Without an ApiClient (the first listing's), the official client's default User-Agent.
USER_AGENT = "OpenAPI-Generator/python rl-scheduler"
# A connection idle this long is closed rather than reused: the server may be closing it.
IDLE_S = 15.0
# What one read of a socket takes at most.
RECEIVE_BYTES = 256 * 1024
_CLOSED_BEFORE = "the API server closed the connection before answering"


class _Connection:
    """One socket to the server and the reader of its answers."""

    def __init__(self, sock: socket.socket, max_body: int | None) -> None:
        self.sock = sock
        self.reader = ResponseReader(max_body)
        self.idle_since = time.monotonic()
        self.reused = False

    def dropped(self) -> bool:
        """Whether the server closed it (or sent something unasked) while it was idle."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def send(self, request: bytes, read_s: float) -> None:
        self.sock.settimeout(read_s)
        self.sock.sendall(request)

    def receive(self) -> bytes:
        try:
            return self.sock.recv(RECEIVE_BYTES)
        except TimeoutError:
            raise TimeoutError(f"no answer from the API server in {self.sock.gettimeout():g} s") from None

    def shutdown(self) -> None:
        """End a read blocked in another thread: it returns at once. (socket.socket's
        own shutdown: SSLSocket's drops its TLS state under the reader.)"""
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class _ClosedBeforeAnswerError(ConnectionError):
    """A connection closed before a byte of the answer came."""


class BlockingClient:
    """Requests to the API server of ``configuration``, from any thread. A non-2xx
    answer is a ``Response`` from ``request``, an ``ApiException`` (status, reason,
    body) from ``json`` and ``stream``."""

    def __init__(
        self,
        configuration: client.Configuration,
        api_client: client.ApiClient | None = None,
        max_connections: int = 4,
    ) -> None:
        self.configuration = configuration
        self.api_client = api_client
        self.max_connections = max_connections
        self.route: Route = configured_route(configuration)
        self._lock = threading.Lock()
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._closed = False

    def headers(self, method: str, path: str, content_type: str | None, accept: str) -> dict[str, str]:
        """A request's headers as the official client sends them: its default headers
        (User-Agent), ``accept``, and the Configuration's token, refreshed by its hook."""
        if self.api_client is not None:
            headers = request_headers(self.api_client, method, path, content_type, accept)
        else:
            headers = {"User-Agent": USER_AGENT, "Accept": accept}
            if content_type is not None:
                headers["Content-Type"] = content_type
            setting = self.configuration.auth_settings().get("BearerToken")
            if setting and setting["value"]:
                headers[setting["key"]] = setting["value"]
        headers.update(self.route.request_headers)
        return headers

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        content_type: str | None = None,
        accept: str = JSON,
        timeout: Timeout = (10.0, 60.0),
    ) -> Response:
        """One request; its answer, whatever its status."""
        headers = self.headers(method, path, content_type, accept)
        request = encode_request(
            method, self.route.prefix + path, self.route.server.authority, headers, body or b""
        )
        max_body = MAX_LISTING_BYTES if method == "GET" else MAX_BODY_BYTES
        for attempt in range(2):
            connection = self._acquire(timeout[0], max_body)
            try:
                response = self._exchange(connection, request, timeout[1])
            except _ClosedBeforeAnswerError:
                self._discard(connection)
                if connection.reused and attempt == 0 and method in ("GET", "HEAD"):
                    continue  # the server had closed it while idle: once more on a new one
                raise
            except BaseException:
                self._discard(connection)
                raise
            remember_session(self.route.ssl, connection.sock)  # this thread's connection, between requests
            self._release(connection, response.keep_alive and not connection.reader.buffer)
            return response
        raise AssertionError("unreachable")

    def json(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        content_type: str = JSON,
        timeout: Timeout = (10.0, 60.0),
    ) -> Any:
        """``request`` with ``body`` as JSON; the answer parsed (``ApiException`` unless 2xx)."""
        payload = None if body is None else jsonlib.dumps(body).encode()
        response = self.request(
            method, path, payload, content_type if body is not None else None, JSON, timeout
        )
        raise_for_status(response)
        return parse_json(response.body) if response.body else None

    def stream(self, path: str, timeout: Timeout) -> Iterator[bytes]:
        """GET ``path``; its body's bytes as they arrive (``ApiException`` unless 2xx).
        Closing the iterator, or ``close()``, ends the read and closes the connection."""
        return iter(self.open_stream(path, timeout))

    def open_stream(self, path: str, timeout: Timeout) -> Stream:
        """``stream`` with a handle another thread can end it by (``Stream.shutdown``)."""
        return Stream(self, path, timeout)

    def _stream(self, stream: Stream) -> Iterator[bytes]:
        headers = self.headers("GET", stream.path, None, JSON)
        request = self._encode("GET", stream.path, headers, b"")
        connection = self._acquire(stream.timeout[0], None, fresh=True)
        reader = connection.reader
        keep = False
        try:
            if not stream.attach(connection):
                raise ConnectionError("the stream was shut down before it was sent")
            connection.send(request, stream.timeout[1])
            data = b""
            while not reader.feed_head(data):
                data = connection.receive()
                if not data:
                    raise ConnectionError(_CLOSED_BEFORE)
            remember_session(self.route.ssl, connection.sock)
            if not 200 <= reader.status <= 299:
                raise_for_status(self._read_rest(connection))
            while True:
                piece = reader.read_body()
                if piece:
                    yield piece
                if reader.body_complete:
                    keep = reader.keep_alive and not reader.buffer
                    return
                data = connection.receive()
                if not data:
                    if reader.end_body():
                        return
                    raise ConnectionError("the API server closed the connection in the middle of its answer")
                reader.buffer += data
        finally:
            stream.attach(None)
            self._release(connection, keep)

    def close(self) -> None:
        """Close every connection; a read in flight in another thread ends at once
        (with an error). Later requests are refused."""
        with self._lock:
            self._closed = True
            idle, busy = list(self._idle), list(self._busy)
            self._idle.clear()
        for connection in busy:
            connection.shutdown()
        for connection in idle:
            connection.close()

    def _encode(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> bytes:
        return encode_request(method, self.route.prefix + path, self.route.server.authority, headers, body)

    @staticmethod
    def _read_rest(connection: _Connection) -> Response:
        """After a head fed by ``feed_head``: the whole answer (an error's body, read
        up to ``MAX_BODY_BYTES``)."""
        reader = connection.reader
        body = bytearray()
        while len(body) <= MAX_BODY_BYTES:
            body += reader.read_body()
            if reader.body_complete:
                break
            data = connection.receive()
            if not data:
                break
            reader.buffer += data
        return Response(reader.status, reader.reason, bytes(body[:MAX_BODY_BYTES]), False, reader.fields)

    def _exchange(self, connection: _Connection, request: bytes, read_s: float) -> Response:
        reader = connection.reader
        reader.reset()
        try:
            connection.send(request, read_s)
        except OSError as error:
            raise _ClosedBeforeAnswerError(
                f"the API server closed the connection before answering: {error}"
            ) from None
        while True:
            try:
                data = connection.receive()
            except (ConnectionResetError, BrokenPipeError) as error:
                if reader.started:
                    raise
                raise _ClosedBeforeAnswerError(
                    f"the API server closed the connection before answering: {error}"
                ) from None
            if not data:
                response = reader.end()
                if response is not None:
                    return response
                if reader.started:
                    raise ConnectionError("the API server closed the connection in the middle of its answer")
                raise _ClosedBeforeAnswerError(_CLOSED_BEFORE)
            response = reader.feed(data)
            if response is not None:
                return response

    def _acquire(self, connect_s: float, max_body: int | None, fresh: bool = False) -> _Connection:
        """An idle connection (unless ``fresh``), else a new one."""
        now = time.monotonic()
        while not fresh:
            with self._lock:
                if self._closed:
                    raise ConnectionError("the client is closed")
                if not self._idle:
                    break
                connection = self._idle.pop()
            if now - connection.idle_since < IDLE_S and not connection.dropped():
                connection.reader.max_body = max_body
                connection.reused = True
                with self._lock:
                    self._busy.add(connection)
                return connection
            connection.close()
        connection = _Connection(self._open(connect_s), max_body)
        with self._lock:
            if self._closed:
                connection.close()
                raise ConnectionError("the client is closed")
            self._busy.add(connection)
        return connection

    def _open(self, connect_s: float) -> socket.socket:
        try:
            return self.route.open_socket(connect_s)
        except TimeoutError:
            address = self.route.socket_address.authority
            raise TimeoutError(f"connecting to {address} timed out after {connect_s:g} s") from None

    def _release(self, connection: _Connection, reusable: bool) -> None:
        with self._lock:
            self._busy.discard(connection)
            if reusable and not self._closed and len(self._idle) < self.max_connections:
                connection.idle_since = time.monotonic()
                connection.reader.reset()
                self._idle.append(connection)
                return
        connection.close()

    def _discard(self, connection: _Connection) -> None:
        self._release(connection, False)


class Stream:
    """A GET whose body is read as it arrives: iterate it (once) for the body's bytes;
    ``shutdown`` from another thread ends the read at once (the iteration then fails)."""

    def __init__(self, client: BlockingClient, path: str, timeout: Timeout) -> None:
        self.client = client
        self.path = path
        self.timeout = timeout
        self._lock = threading.Lock()
        self._connection: _Connection | None = None
        self._shut = False

    def __iter__(self) -> Iterator[bytes]:
        return self.client._stream(self)

    def attach(self, connection: _Connection | None) -> bool:
        """The connection the stream reads (None: done); False once shut down."""
        with self._lock:
            self._connection = connection
            return not self._shut

    def shutdown(self) -> None:
        with self._lock:
            self._shut = True
            connection = self._connection
        if connection is not None:
            connection.shutdown()

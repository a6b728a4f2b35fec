"""The serving port (``/metrics``, ``/healthz``, ``/readyz``) as kube-scheduler serves
its own: HTTPS (``scheduler.k8s.serving.serving_tls``), each request decided by the API
server unless its path is always allowed (``scheduler.k8s.serving.delegated_auth``), and the
answers of ``scheduler.k8s.serving.http``, whose ``Exchange`` (h11) parses each
connection's requests and frames its answers: this module reads, writes and times.

What one client can hold is bounded: ``max_connections`` connections
(``scheduler.k8s.serving.connections``: past it, the one idle longest gives way), the TLS
handshake and a request's head within ``read_timeout_s`` of the connection or of the
request's first byte, a head no longer than ``MAX_HEAD_BYTES`` and a read (431 past it),
a kept connection closed after ``idle_timeout_s`` without a request, an answer the
client does not read closed after ``write_timeout_s``. The process's soft limit of open
files is raised to its hard limit at start, as Go's runtime does for kube-scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import resource
import ssl
import threading
from collections.abc import Awaitable, Callable

from scheduler.errors import SchedulerInputError
from scheduler.k8s.process.settings import ServingSettings
from scheduler.k8s.serving.connections import ConnectionTable
from scheduler.k8s.serving.delegated_auth import ALLOWED, DelegatedAuth
from scheduler.k8s.serving.http import MAX_HEAD_BYTES, Answer, Exchange, Request, Route, route
from scheduler.k8s.serving.serving_tls import ServingCertificate

log = logging.getLogger(__name__)
# The serving certificate: a mounted pair, or the self-signed one (still being made: a Task).
Certificate = ServingCertificate | asyncio.Task[ServingCertificate]
# What ends a connection without an answer: the peer went or was too slow.
DROPPED = (ConnectionError, OSError, TimeoutError)
# Connections the kernel queues before they are accepted (asyncio's default is 100).
BACKLOG = 1024
CLOSE_WAIT_S = 1.0
WRITE_CHUNK = 64 * 1024
# What one read takes: a head may pass MAX_HEAD_BYTES (h11's bound on an unfinished one)
# by at most this much when its end comes in the same read.
READ_BYTES = 4 * 1024


class ServingAddressError(SchedulerInputError):
    """An address to serve /metrics and the probes on that cannot be listened on
    (``--metrics-address``, the settings' ``metrics_address``)."""


def raise_open_files_limit() -> int:
    """The soft RLIMIT_NOFILE raised to the hard one; returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            return hard
    return soft


class Server:
    """Serves ``routes`` to each admitted connection."""

    def __init__(
        self,
        routes: dict[str, Route],
        ssl_context: ssl.SSLContext | Certificate | None,
        auth: DelegatedAuth | None,
        limits: ServingSettings,
    ) -> None:
        # ssl_context None: plain HTTP; auth None: every path open. Both for tests only.
        # A ServingCertificate gives each connection the current certificate; one still
        # being made (a Task) is waited for within the connection's read timeout.
        self.routes = routes
        self.ssl_context = ssl_context
        self.auth = auth
        self.limits = limits
        self.table: ConnectionTable[asyncio.StreamWriter] = ConnectionTable(limits.max_connections)
        self.refused = 0

    async def on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        admitted, evicted = self.table.admit(writer)
        if evicted is not None:
            evicted.transport.abort()
        if not admitted:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            await self.serve_connection(reader, writer)
        except DROPPED:
            pass
        except asyncio.CancelledError:
            pass  # the loop is closing (its end cancels connections' tasks): close quietly
        finally:
            self.table.remove(writer)
            await close(writer)

    async def serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        limits = self.limits
        exchange = Exchange()
        async with asyncio.timeout(limits.read_timeout_s):
            context = await self.tls_context(writer)
            if context is not None:
                await start_tls(writer, context)
            request = await read_request(exchange, reader)
        while request is not None:
            if not self.table.busy(writer):
                return  # evicted meanwhile
            if isinstance(request, Answer):  # refused: the connection closes
                await self.send(writer, exchange.answer(request))
                return
            await self.send(writer, exchange.answer(await self.decide(request)))
            if not exchange.next_cycle():
                return
            request = exchange.next_request()  # sent before the answer was
            if request is None:
                self.table.idle(writer)
                async with asyncio.timeout(limits.idle_timeout_s):
                    first = await reader.read(READ_BYTES)
                if not first:
                    return
                exchange.receive(first)
                async with asyncio.timeout_at(loop.time() + limits.read_timeout_s):
                    request = await read_request(exchange, reader)

    async def tls_context(self, writer: asyncio.StreamWriter) -> ssl.SSLContext | None:
        """The context for a new connection (None: plain HTTP), called before the
        connection's first read."""
        certificate = self.ssl_context
        if isinstance(certificate, asyncio.Task):
            if not certificate.done() and isinstance(writer.transport, asyncio.ReadTransport):
                # The client's hello stays in the socket for the handshake: read into
                # the stream meanwhile, start_tls would never see it.
                writer.transport.pause_reading()
            # shielded: a connection that times out does not cancel the certificate
            certificate = await asyncio.shield(certificate)
        if isinstance(certificate, ServingCertificate):
            return certificate.context()
        return certificate

    async def decide(self, request: Request) -> Answer:
        """The answer, once the request may be served (before routing, as kube's
        filters: 401 for any path)."""
        verdict = ALLOWED
        if self.auth is not None:
            verdict = await self.auth.check(request.path, request.headers.get("authorization"))
        if verdict.allowed:
            return route(request, self.routes)
        return Answer(verdict.status, verdict.reason.encode())

    async def send(self, writer: asyncio.StreamWriter, reply: list[bytes]) -> None:
        # In chunks: asyncio's TLS transport hands all it is given to the socket's buffer
        # at once, and drain() would not wait for a client that does not read.
        async with asyncio.timeout(self.limits.write_timeout_s):
            for piece in reply:
                view = memoryview(piece)
                for start in range(0, len(view), WRITE_CHUNK):
                    writer.write(view[start : start + WRITE_CHUNK])
                    await writer.drain()


async def start_tls(writer: asyncio.StreamWriter, context: ssl.SSLContext) -> None:
    """The server's side of a TLS handshake on an accepted connection (counted and
    timed from its accept, unlike ``start_server(ssl=...)``'s handshakes)."""
    plain = writer.transport
    try:
        await writer.start_tls(context)
    except AttributeError:
        # The connection was lost during the handshake: asyncio (3.11-3.13) then fails
        # on the None transport it got back and leaves None in the writer, which the
        # writer's close() and __del__ do not expect.
        writer._transport = plain  # type: ignore[attr-defined]
        raise ConnectionResetError("the connection was lost during the TLS handshake") from None


async def read_request(exchange: Exchange, reader: asyncio.StreamReader) -> Request | Answer | None:
    """The next request of ``exchange`` (or the answer refusing it), read as it needs;
    None when the client closed the connection first."""
    while (request := exchange.next_request()) is None:
        received = await reader.read(READ_BYTES)
        if not received:
            return None
        exchange.receive(received)
    return request


async def close(writer: asyncio.StreamWriter) -> None:
    """Close, waiting at most ``CLOSE_WAIT_S`` for the peer (a TLS close_notify)."""
    if writer.transport.is_closing():
        return  # aborted (given way, or lost in its handshake): nothing to wait for
    writer.close()
    try:
        async with asyncio.timeout(CLOSE_WAIT_S):
            await writer.wait_closed()
    except (ConnectionError, OSError, TimeoutError):
        writer.transport.abort()


async def serve(
    routes: dict[str, Route],
    address: str,
    *,
    ssl_context: ssl.SSLContext | Certificate | None,
    auth: DelegatedAuth | None,
    limits: ServingSettings | None = None,
) -> asyncio.Server:
    """Listen on ``host:port`` (``0.0.0.0:10259``; an empty host is every address)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")  # [::]:10259
    server = Server(routes, ssl_context, auth, limits or ServingSettings())
    try:
        return await asyncio.start_server(
            server.on_connection, host or None, int(port), limit=MAX_HEAD_BYTES, backlog=BACKLOG
        )
    except OSError as error:  # the port taken, an address this host does not have, ...
        # asyncio words it "error while attempting to bind on address (...): ...".
        why = f"cannot listen on {address}: {os.strerror(error.errno) if error.errno else error}"
        raise ServingAddressError("settings", "metrics_address", why) from None


async def serve_securely(
    routes: dict[str, Route],
    address: str,
    settings: ServingSettings,
    auth: DelegatedAuth,
    self_signed_due: Callable[[], Awaitable[object]] | None = None,
) -> tuple[asyncio.Server, asyncio.Task[ServingCertificate] | None]:
    """``serve`` over HTTPS with ``settings``' certificate and ``auth``, the open-files
    limit raised first; and the task making the self-signed certificate, when there is
    no mounted one and it is made later (``serving_certificate``)."""
    raise_open_files_limit()
    certificate = await serving_certificate(settings, self_signed_due)
    try:
        server = await serve(routes, address, ssl_context=certificate, auth=auth, limits=settings)
    except BaseException:
        if isinstance(certificate, asyncio.Task):
            certificate.cancel()
        raise
    return server, certificate if isinstance(certificate, asyncio.Task) else None


async def serving_certificate(
    settings: ServingSettings, self_signed_due: Callable[[], Awaitable[object]] | None
) -> Certificate:
    """The mounted pair, read now (a bad one stops the start); else the self-signed
    certificate, made in a thread once ``self_signed_due()`` is done (a Task the port's
    connections wait for), or now when it is None. Importing ``cryptography`` to make
    it takes 35-50 ms of CPU: ``rl-scheduler run`` makes it once its first pods are
    placed, not before its first bind."""
    if settings.tls_cert_file is not None or settings.tls_key_file is not None:
        return ServingCertificate(settings.tls_cert_file, settings.tls_key_file)
    if self_signed_due is None:
        return await asyncio.to_thread(ServingCertificate)

    async def self_signed(due: Callable[[], Awaitable[object]]) -> ServingCertificate:
        await due()
        return await asyncio.to_thread(ServingCertificate)

    return asyncio.create_task(self_signed(self_signed_due), name="serving-certificate")


def serve_in_thread(
    routes: dict[str, Route], address: str, settings: ServingSettings, auth: DelegatedAuth
) -> threading.Thread:
    """``serve_securely`` on an event loop of its own, in a daemon thread (the trainer,
    whose rounds block); returns once it listens, or raises why it could not."""
    listening: queue.Queue[BaseException | None] = queue.Queue(1)

    async def main() -> None:
        try:
            server, _ = await serve_securely(routes, address, settings, auth)
        except BaseException as error:
            listening.put(error)
            raise
        listening.put(None)
        await server.serve_forever()

    thread = threading.Thread(target=asyncio.run, args=(main(),), name="serving", daemon=True)
    thread.start()
    error = listening.get()
    if error is not None:
        raise error
    return thread

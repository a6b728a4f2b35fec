"""The TLS settings of every connection to the API server, the event loop's
(``scheduler.k8s.client.transport``) and the threads' (``scheduler.k8s.client.blocking``)
alike: one context per client, made from the official loader's Configuration, that
resumes the sessions of earlier connections."""

from __future__ import annotations

import socket
import ssl
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubernetes import client

# A session is taken from a connection at most once a second: reading it copies it
# (OpenSSL serializes it), and a burst of answers comes in hundreds.
SESSION_LOOKUP_S = 1.0

TlsConnection = ssl.SSLObject | ssl.SSLSocket


class ResumingContext(ssl.SSLContext):
    """A client context that offers the server the session of an earlier connection.

    A burst of binds opens up to ``client.connections`` connections at once, and each
    full TLS handshake costs both ends a key exchange and signatures (2-3 ms of this
    process's CPU with a client certificate, and the API server's on the same cores).
    A resumed session skips the certificates and their signatures. asyncio makes each
    connection's ``SSLObject`` with ``wrap_bio``, a thread its ``SSLSocket`` with
    ``wrap_socket``; this context hands either the newest session that carries a
    ticket. The server decides: one that does not take the ticket (expired, or tickets
    off) answers with a full handshake.

    A session is handed in (``remember``) by the code that owns a connection, after it
    read an answer on it, never looked up from here: reading a connection's session
    while another thread is in its handshake or its read races OpenSSL's copy of the
    session against the handshake that changes it: the scheduler's start aborted with
    ``malloc(): corrupted top size`` (at the 19th of a loop of starts here, and in CI) when a
    first-listing thread read the session of a connection another one was still
    shaking hands on, and new clients whose 8 threads each opened 3 connections at once
    aborted in 8 of 10 runs of 100-200 clients (tests/e2e/test_api_writes.py)."""

    def __new__(cls) -> ResumingContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self) -> None:
        super().__init__()
        self._newest: tuple[ssl.SSLSession, float] | None = None  # and when it was taken

    def resumable_session(self) -> ssl.SSLSession | None:
        """The newest session the server gave a ticket for, as ``remember`` took it."""
        newest = self._newest
        return None if newest is None else newest[0]

    def remember(self, connection: TlsConnection) -> None:
        """Offer ``connection``'s session to the connections opened after it. Call it
        from the one thread that uses ``connection``, between its requests (once it has
        read an answer: TLS 1.3 sends the ticket after the handshake)."""
        newest, now = self._newest, time.monotonic()
        if newest is not None and now - newest[1] < SESSION_LOOKUP_S:
            return
        try:
            session = connection.session
        except (ValueError, OSError):  # OpenSSL cannot serialize it yet, or it closed
            return
        if session is not None and session.has_ticket:
            self._newest = (session, now)  # one assignment: other threads see old or new

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
        return super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)

    def wrap_socket(
        self,
        sock: socket.socket,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        if session is None and not server_side:
            session = self.resumable_session()
        return super().wrap_socket(
            sock, server_side, do_handshake_on_connect, suppress_ragged_eofs, server_hostname, session
        )


def remember_session(context: ssl.SSLContext | None, connection: object) -> None:
    """``ResumingContext.remember`` where ``context`` is one and ``connection`` speaks TLS."""
    if isinstance(context, ResumingContext) and isinstance(connection, ssl.SSLObject | ssl.SSLSocket):
        context.remember(connection)


def ssl_context(configuration: client.Configuration) -> ResumingContext:
    """The TLS settings the official client gives urllib3: the CA (file or data), the
    client certificate, and whether to verify the server at all (the defaults of
    ``ssl.create_default_context`` otherwise). The name checked is the connection's
    ``server_hostname`` (``scheduler.k8s.client.route``)."""
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

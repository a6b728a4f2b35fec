"""The TLS settings of every connection to the API server, the event loop's
(``scheduler.k8s.client.transport``) and the threads' (``scheduler.k8s.client.blocking``)
alike: one context per client, made from the official loader's Configuration, that
resumes the sessions of earlier connections."""

from __future__ import annotations

import socket
import ssl
import time
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubernetes import client

# Connections whose sessions a new one may resume: the newest with a ticket is taken,
# and kept for a second before the next lookup.
RECENT_CONNECTIONS = 8
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
    off) answers with a full handshake."""

    def __new__(cls) -> ResumingContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self) -> None:
        super().__init__()
        self._recent: deque[TlsConnection] = deque(maxlen=RECENT_CONNECTIONS)
        self._session: ssl.SSLSession | None = None
        self._session_found_at = 0.0

    @property
    def recent_connections(self) -> tuple[TlsConnection, ...]:
        """The newest connections made with this context, oldest first."""
        return tuple(self._recent)

    def resumable_session(self) -> ssl.SSLSession | None:
        """The newest session the server gave a ticket for (TLS 1.3 sends it after the
        handshake, so a connection has one once it has read an answer). Looked up at
        most once a second: a burst opens hundreds of connections."""
        now = time.monotonic()
        if self._session is not None and now - self._session_found_at < SESSION_LOOKUP_S:
            return self._session
        for connection in reversed(tuple(self._recent)):  # a copy: threads append meanwhile
            try:
                session = connection.session
            except (ValueError, OSError):  # OpenSSL cannot serialize it yet, or it closed
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
        connection = super().wrap_socket(
            sock, server_side, do_handshake_on_connect, suppress_ragged_eofs, server_hostname, session
        )
        self._recent.append(connection)
        return connection


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

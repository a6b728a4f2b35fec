"""The scheduler's writes per pod (binds, events, status patches), on the event loop,
over persistent HTTP/1.1 connections (``scheduler.k8s.http1``) with resumed TLS
sessions.

Through the official client each write ran in a worker thread and through the
generated layers (argument validation, model serialization, urllib3), twice per
scheduled pod, with hand-offs between the thread and the loop; aiohttp's general
client, after it, cost about as much again as a decision at 100 nodes. The same
request (URL, JSON body, the Configuration's TLS settings and auth headers) written
from the loop costs 0.15 ms of CPU all at once and 0.31 ms one at a time, against
0.83 and 1.05 ms through the official client (benchmarks/api_write_cost.py). The
transport serves the Configurations it can reproduce exactly; with a proxy, or a
hostname to check that is not the server's, ``KubeApi`` keeps the official client
for these writes too.
"""

from __future__ import annotations

import json
import ssl
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.http1 import ConnectionPool
from scheduler.k8s.reads import request_headers

# Seconds a write may take: the API server ends a request after 60 s; connecting is quick.
REQUEST_TIMEOUT_S = 70.0
CONNECT_TIMEOUT_S = 10.0
# Connections whose sessions a new one may resume: the newest with a ticket is taken,
# and kept for a second before the next lookup.
RECENT_CONNECTIONS = 8
SESSION_LOOKUP_S = 1.0


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

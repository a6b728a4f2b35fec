"""The scheduler's writes per pod (binds, events, status patches) over aiohttp, on the
event loop.

Through the official client each write runs in a worker thread and through the
generated layers (argument validation, model serialization, urllib3), twice per
scheduled pod, with hand-offs between the thread and the loop. The same request (URL,
JSON body, the Configuration's TLS settings and auth headers) sent from the loop with
aiohttp costs a quarter to a half of the CPU (benchmarks/api_write_cost.py: 0.4-0.9 ms
against 1.3-2.0 ms a call). The transport serves the Configurations it can
reproduce exactly; with a proxy, or a hostname to check that is not the server's,
``KubeApi`` keeps the official client for these writes too.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from typing import Any

import aiohttp
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.reads import request_headers

# Seconds a write may take: the API server ends a request after 60 s; connecting is quick.
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=70, sock_connect=10)


def supports(configuration: client.Configuration) -> bool:
    """Whether ``ApiTransport`` reproduces how the official client would connect."""
    return not configuration.proxy and not isinstance(configuration.assert_hostname, str)


def ssl_context(configuration: client.Configuration) -> ssl.SSLContext:
    """The TLS settings the official client gives urllib3: the CA (file or data), the
    client certificate, and whether to verify the server at all."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert, cadata=configuration.ca_cert_data)
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
        self.ssl = ssl_context(configuration) if self.host.startswith("https:") else None
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _session_here(self) -> aiohttp.ClientSession:
        """The session, made on first use (it belongs to the running loop)."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.max_connections, ssl=self.ssl or False)
            self._session = aiohttp.ClientSession(connector=connector, timeout=REQUEST_TIMEOUT)
        return self._session

    async def request(
        self, method: str, path: str, body: Mapping[str, Any], content_type: str = "application/json"
    ) -> None:
        """Send ``body``; the answer's body is read and dropped."""
        session = self._session_here()
        async with session.request(
            method,
            self.host + path,
            data=json.dumps(body).encode(),
            headers=request_headers(self.api_client, method, path, content_type),
            server_hostname=self.server_hostname,
        ) as response:
            answer = await response.read()
            if not 200 <= response.status <= 299:
                raise ApiException(
                    status=response.status,
                    reason=response.reason,
                    body=answer.decode("utf-8", errors="replace"),
                )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

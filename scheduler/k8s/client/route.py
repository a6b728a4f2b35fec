"""How a connection reaches the API server, from the official loader's Configuration:
the server's address, its TLS settings and the name its certificate is checked
against (``tls_server_name``), and an HTTP proxy on the way (``proxy``,
``proxy_headers``, bypassed for the hosts of ``no_proxy``, as the official client
decides). Both drivers of ``scheduler.k8s.client.http1`` connect by it: the event
loop's (``transport``) and the threads' (``blocking``).

Through a proxy, an https server is reached by a CONNECT tunnel with TLS inside it
(what urllib3's ``ProxyManager`` does); a plain-http server by requests in absolute
form (``GET http://server/path``) to the proxy, with the proxy's headers. A SOCKS or
https proxy is refused with ``ValueError`` naming the Configuration's ``proxy``.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from scheduler.k8s.client.http1 import encode_connect, read_tunnel_answer
from scheduler.k8s.client.tls import ResumingContext, ssl_context

if TYPE_CHECKING:
    from kubernetes import client

# What a proxy's answer to CONNECT is read in.
_TUNNEL_READ_BYTES = 4096


class ProxyError(ConnectionError):
    """The proxy did not open a tunnel to the API server."""


@dataclass(frozen=True)
class Address:
    host: str
    port: int
    authority: str  # host[:port] as a Host header or a CONNECT target writes it


def parse_address(url: str, what: str) -> tuple[Address, str, str]:
    """``url``'s address, scheme and path; ``ValueError`` naming ``what`` unless it is
    an http(s) URL with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what}: not an http(s) server address: {url!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as error:
        raise ValueError(f"{what}: {error}: {url!r}") from None
    name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    authority = name if parts.port is None else f"{name}:{port}"
    return Address(parts.hostname, port, authority), parts.scheme, parts.path.rstrip("/")


@dataclass(frozen=True)
class Route:
    """Where a connection's socket goes, what it sends first, and how requests on it
    are written."""

    server: Address
    prefix: str  # written before each request's path: the server URL's path, or (plain
    # http through a proxy) its scheme and authority too
    ssl: ssl.SSLContext | None = None  # None: plain http
    server_hostname: str | None = None  # the TLS name sent and checked (None: the host)
    proxy: Address | None = None
    tunnel: bool = False  # CONNECT through ``proxy`` before anything else
    proxy_headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def socket_address(self) -> Address:
        return self.proxy or self.server

    @property
    def tls_name(self) -> str:
        return self.server_hostname or self.server.host

    @property
    def request_headers(self) -> Mapping[str, str]:
        """Headers every request carries (the proxy's, when it reads them)."""
        return self.proxy_headers if self.proxy is not None and not self.tunnel else {}

    def connect_request(self) -> bytes:
        return encode_connect(self.server.authority, self.proxy_headers)

    def tunnel_opened(self, answer: tuple[int, str]) -> None:
        """Raise ``ProxyError`` unless the proxy's ``answer`` (status, reason) opened it."""
        status, reason = answer
        if not 200 <= status <= 299:
            assert self.proxy is not None
            raise ProxyError(
                f"the proxy {self.proxy.authority} did not open a tunnel to {self.server.authority}: "
                f"{status} {reason}"
            )

    def unanswered(self) -> ProxyError:
        assert self.proxy is not None
        return ProxyError(f"the proxy {self.proxy.authority} closed the connection before answering CONNECT")

    def open_socket(self, timeout_s: float) -> socket.socket:
        """A blocking socket to the server (through the tunnel, TLS included), each
        step within ``timeout_s``."""
        address = self.socket_address
        sock = socket.create_connection((address.host, address.port), timeout=timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tunnel:
                sock.sendall(self.connect_request())
                received = b""
                while (answer := read_tunnel_answer(received)) is None:
                    data = sock.recv(_TUNNEL_READ_BYTES)
                    if not data:
                        raise self.unanswered()
                    received += data
                self.tunnel_opened(answer)
            if self.ssl is not None:
                return self.ssl.wrap_socket(sock, server_hostname=self.tls_name)
            return sock
        except BaseException:
            sock.close()
            raise

    async def open_tunnel(self) -> socket.socket:
        """A non-blocking socket to the proxy, through which the proxy has opened a
        tunnel to the server (for ``loop.create_connection(sock=...)``)."""
        assert self.proxy is not None
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self.proxy.host, self.proxy.port, type=socket.SOCK_STREAM)
        failure: OSError | None = None
        for family, kind, protocol, _name, address in infos:
            sock = socket.socket(family, kind, protocol)
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, address)
            except OSError as error:
                sock.close()
                failure = error
                continue
            try:
                await loop.sock_sendall(sock, self.connect_request())
                received = b""
                while (answer := read_tunnel_answer(received)) is None:
                    data = await loop.sock_recv(sock, _TUNNEL_READ_BYTES)
                    if not data:
                        raise self.unanswered()
                    received += data
                self.tunnel_opened(answer)
            except BaseException:
                sock.close()
                raise
            return sock
        raise failure or OSError(f"{self.proxy.authority}: no address")


def route(
    url: str,
    context: ssl.SSLContext | None,
    server_hostname: str | None = None,
    proxy: str | None = None,
    proxy_headers: Mapping[str, str] | None = None,
) -> Route:
    """The route to the server at ``url`` (its TLS ``context`` for https), through
    ``proxy`` when one is given (``ValueError`` for what is not an http(s) address,
    or a proxy other than http)."""
    server, scheme, path = parse_address(url, "the server")
    secure = scheme == "https"
    if not proxy:
        return Route(server, path, context if secure else None, server_hostname if secure else None)
    if urlsplit(proxy).scheme != "http":
        raise ValueError(f"the Configuration's proxy: only an http:// proxy is served, not {proxy!r}")
    proxy_address, _, _ = parse_address(proxy, "the Configuration's proxy")
    headers = dict(proxy_headers or {})
    if secure:
        return Route(server, path, context, server_hostname, proxy_address, True, headers)
    return Route(server, f"http://{server.authority}{path}", None, None, proxy_address, False, headers)


def configured_route(configuration: client.Configuration, context: ResumingContext | None = None) -> Route:
    """The route the official client would take with ``configuration``: its TLS
    settings (``tls.ssl_context``), the name checked (``tls_server_name``, else an
    ``assert_hostname`` string, else the host) and its proxy unless ``no_proxy``
    names the server. ``context``: the TLS settings made already (one per client)."""
    from kubernetes.client.rest import should_bypass_proxies  # noqa: PLC0415 - with the loader

    url = str(configuration.host).rstrip("/")
    if context is None and url.startswith("https:"):
        context = ssl_context(configuration)
    name = configuration.tls_server_name or None
    asserted: object = configuration.assert_hostname  # typed bool, may be a name (urllib3's)
    if name is None and isinstance(asserted, str):
        name = asserted
    proxy = configuration.proxy or None
    if proxy and should_bypass_proxies(url, configuration.no_proxy or ""):
        proxy = None
    return route(url, context, name, proxy, configuration.proxy_headers)

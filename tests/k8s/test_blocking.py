"""The threads' driver of the HTTP/1.1 client (``BlockingClient``) against local
servers: what it sends (credentials from the Configuration, refreshed per request),
what it reads back (whole, as JSON, or streamed as it arrives), how it reuses and
replaces connections, and how it reaches a server through an HTTP proxy's CONNECT
tunnel with TLS inside it (``tls_server_name`` checked), or refuses a proxy's bad
answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.blocking import BlockingClient
from scheduler.k8s.client.http1 import HttpProtocolError
from scheduler.k8s.client.route import ProxyError, configured_route
from scheduler.k8s.client.transport import ApiTransport
from scheduler.k8s.serving.serving_tls import self_signed

Asked = tuple[str, str, str | None, int]  # method, path, Authorization (POST: Content-Type), client port


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the API server
    asked: list[Asked]

    def do_GET(self) -> None:
        self.asked.append(("GET", self.path, self.headers.get("Authorization"), self.client_address[1]))
        if self.path.startswith("/json"):
            self.answer(200, json.dumps({"items": [1, 2], "metadata": {"resourceVersion": "7"}}).encode())
        elif self.path.startswith("/chunked"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (b'{"a":', b" 1}"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path.startswith("/watch"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for number in range(3):
                line = json.dumps({"type": "ADDED", "object": {"n": number}}).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
                time.sleep(0.05)
            if "hang" in self.path:
                time.sleep(30)
            self.wfile.write(b"0\r\n\r\n")
        elif self.path.startswith("/drop"):  # answers as if to keep the connection, then closes it
            self.answer(200, b"{}")
            self.close_connection = True
        elif self.path.startswith("/close"):
            body = b"{}"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
        else:
            self.answer(404, b'{"kind":"Status","reason":"NotFound"}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.asked.append(("POST", self.path, self.headers.get("Content-Type"), self.client_address[1]))
        self.answer(201, body)

    def answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serving(
    tls: ssl.SSLContext | None = None,
) -> Iterator[tuple[int, list[tuple[str, str, str | None, int]]]]:
    asked: list[tuple[str, str, str | None, int]] = []
    handler = type("Recording", (Handler,), {"asked": asked})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_port, asked
    finally:
        server.shutdown()
        server.server_close()


def configuration(url: str, token: str | None = "secret", **fields: Any) -> client.Configuration:
    config = client.Configuration(host=url)
    if token is not None:
        config.api_key = {"authorization": token}
        config.api_key_prefix = {"authorization": "Bearer"}
    for name, value in fields.items():
        setattr(config, name, value)
    return config


def test_requests_share_a_connection_and_carry_the_token() -> None:
    with serving() as (port, asked):
        blocking = BlockingClient(configuration(f"http://127.0.0.1:{port}"))
        assert blocking.json("GET", "/json?limit=1") == {
            "items": [1, 2],
            "metadata": {"resourceVersion": "7"},
        }
        assert blocking.json("GET", "/chunked") == {"a": 1}
        answer = blocking.request("GET", "/json")
        assert (answer.status, answer.headers["content-type"]) == (200, "application/json")
        assert blocking.json("POST", "/things", {"b": 2}) == {"b": 2}
        blocking.close()
    assert [(method, path, credential) for method, path, credential, _ in asked] == [
        ("GET", "/json?limit=1", "Bearer secret"),
        ("GET", "/chunked", "Bearer secret"),
        ("GET", "/json", "Bearer secret"),
        ("POST", "/things", "application/json"),
    ]
    assert len({client_port for *_, client_port in asked}) == 1  # one connection, reused


def test_a_rotated_token_is_read_for_the_next_request() -> None:
    tokens = iter(["first", "second"])
    config = configuration("http://127.0.0.1:1")

    def refresh(configuration: client.Configuration) -> None:
        configuration.api_key["authorization"] = next(tokens)

    config.refresh_api_key_hook = refresh  # type: ignore[assignment]
    with serving() as (port, asked):
        config.host = f"http://127.0.0.1:{port}"
        blocking = BlockingClient(config)
        blocking.json("GET", "/json")
        blocking.json("GET", "/json")
        blocking.close()
    assert [credential for _, _, credential, _ in asked] == ["Bearer first", "Bearer second"]


def test_a_refused_request_raises_api_exception_with_its_status_and_body() -> None:
    with serving() as (port, _):
        blocking = BlockingClient(configuration(f"http://127.0.0.1:{port}"))
        assert blocking.request("GET", "/nothing").status == 404  # request: never raises on a status
        with pytest.raises(ApiException) as raised:
            blocking.json("GET", "/nothing")
        with pytest.raises(ApiException) as streamed:
            list(blocking.stream("/nothing", (5.0, 5.0)))
        blocking.close()
    for error in (raised.value, streamed.value):
        assert (error.status, error.reason) == (404, "Not Found")
        assert "NotFound" in str(error.body)


def test_a_connection_the_server_closes_is_replaced() -> None:
    with serving() as (port, asked):
        blocking = BlockingClient(configuration(f"http://127.0.0.1:{port}"))
        blocking.json("GET", "/close")
        blocking.json("GET", "/json")
        blocking.close()
    assert len({client_port for *_, client_port in asked}) == 2


def test_a_get_on_a_connection_closed_while_idle_is_sent_again() -> None:
    with serving() as (port, asked):
        blocking = BlockingClient(configuration(f"http://127.0.0.1:{port}"))
        blocking.json("GET", "/drop")
        time.sleep(0.2)  # the server has closed it
        idle = blocking._idle[0]
        idle.dropped = lambda: False  # type: ignore[method-assign] # as if the close were on its way
        assert blocking.json("GET", "/json")["metadata"] == {"resourceVersion": "7"}
        blocking.close()
    assert len(asked) == 2


def test_a_stream_yields_its_lines_as_they_arrive() -> None:
    with serving() as (port, _):
        blocking = BlockingClient(configuration(f"http://127.0.0.1:{port}"))
        arrived: list[tuple[float, bytes]] = []
        for piece in blocking.stream("/watch?watch=1", (5.0, 5.0)):
            arrived.append((time.monotonic(), piece))
        blocking.close()
    assert b"".join(piece for _, piece in arrived).count(b"\n") == 3
    assert len(arrived) >= 3  # one piece per chunk as it came, not the body at the end
    assert arrived[-1][0] - arrived[0][0] >= 0.08


def test_close_ends_a_stream_blocked_in_another_thread() -> None:
    with serving() as (port, _):
        blocking = BlockingClient(configuration(f"http://127.0.0.1:{port}"))
        outcome: list[BaseException | None] = []

        def watch() -> None:
            try:
                for _ in blocking.stream("/watch?hang=1", (5.0, 60.0)):
                    pass
                outcome.append(None)
            except Exception as error:  # the read is cut short
                outcome.append(error)

        reader = threading.Thread(target=watch)
        reader.start()
        time.sleep(0.4)  # the three lines are in; the server now waits
        started = time.monotonic()
        blocking.close()
        reader.join(5)
    assert not reader.is_alive()
    assert time.monotonic() - started < 2
    assert outcome
    assert outcome[0] is not None


def test_a_read_timeout_names_its_seconds() -> None:
    with serving() as (port, _):
        blocking = BlockingClient(configuration(f"http://127.0.0.1:{port}"))
        with pytest.raises(TimeoutError, match=r"in 0\.3 s"):
            list(blocking.stream("/watch?hang=1", (5.0, 0.3)))
        blocking.close()


# A CONNECT proxy: opens a tunnel to what is asked, or answers ``refusal`` instead.
class ConnectProxy:
    def __init__(self, refusal: bytes | None = None) -> None:
        self.refusal = refusal
        self.asked: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(downstream,), daemon=True).start()

    def _tunnel(self, downstream: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = downstream.recv(1024)
            if not data:
                return
            head += data
        self.asked.append(head)
        if self.refusal is not None:
            downstream.sendall(self.refusal)
            downstream.close()
            return
        target = head.split(b" ")[1].decode()
        host, _, port = target.rpartition(":")
        upstream = socket.create_connection((host, int(port)))
        downstream.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        for source, sink in ((downstream, upstream), (upstream, downstream)):
            threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ssl.SSLContext]:
    """A server certificate for api.example (and 127.0.0.1), and a server context."""
    folder = tmp_path_factory.mktemp("tls")
    certificate, key = self_signed("api.example")
    (folder / "tls.crt").write_bytes(certificate)
    (folder / "tls.key").write_bytes(key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    return folder / "tls.crt", context


def tunnelled(url: str, proxy: ConnectProxy, authority: Path, **fields: Any) -> client.Configuration:
    return configuration(
        url,
        proxy=f"http://127.0.0.1:{proxy.port}",
        proxy_headers={"Proxy-Authorization": "Basic cHJveHk6cHc="},
        ssl_cert=None,
        ssl_ca_cert=str(authority),
        **fields,
    )


@pytest.mark.parametrize("tls_server_name", [None, "api.example"])
def test_https_through_a_connect_tunnel(
    certificate: tuple[Path, ssl.SSLContext], tls_server_name: str | None
) -> None:
    authority, server_tls = certificate
    proxy = ConnectProxy()
    with serving(server_tls) as (port, asked):
        config = tunnelled(f"https://127.0.0.1:{port}", proxy, authority, tls_server_name=tls_server_name)
        blocking = BlockingClient(config)
        assert blocking.json("GET", "/json")["items"] == [1, 2]
        assert b"".join(blocking.stream("/watch", (5.0, 5.0))).count(b"\n") == 3
        blocking.close()

        async def write() -> None:  # the event loop's driver, through the same tunnel
            transport = ApiTransport(client.ApiClient(config), 2)
            await transport.request("POST", "/things", {"c": 3})
            await transport.close()

        asyncio.run(write())
    proxy.close()
    assert [method for method, *_ in asked] == ["GET", "GET", "POST"]
    assert all(head.startswith(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n".encode()) for head in proxy.asked)
    assert all(b"Proxy-Authorization: Basic cHJveHk6cHc=\r\n" in head for head in proxy.asked)


def test_a_tls_server_name_the_certificate_does_not_name_is_refused(
    certificate: tuple[Path, ssl.SSLContext],
) -> None:
    authority, server_tls = certificate
    with serving(server_tls) as (port, _):
        config = configuration(
            f"https://127.0.0.1:{port}", ssl_ca_cert=str(authority), tls_server_name="other.example"
        )
        blocking = BlockingClient(config)
        with pytest.raises(ssl.SSLCertVerificationError, match=r"other\.example"):
            blocking.json("GET", "/json")
        blocking.close()


REFUSALS = [
    pytest.param(
        b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n",
        ProxyError,
        "did not open a tunnel to 127.0.0.1:1: 407 Proxy Authentication Required",
        id="refused with 407",
    ),
    pytest.param(
        b"HTTP/1.1 200 OK\r\n\r\nextra", HttpProtocolError, "bytes past its answer", id="bytes past the head"
    ),
    pytest.param(b"SSH-2.0-OpenSSH\r\n\r\n", HttpProtocolError, "not an HTTP/1.x status line", id="not HTTP"),
    pytest.param(
        b"HTTP/1.1 100 Continue\r\n\r\n", HttpProtocolError, "answered CONNECT with 100", id="interim"
    ),
    pytest.param(
        b"HTTP/1.1 200 OK\r\n",
        ProxyError,
        "closed the connection before answering CONNECT",
        id="closed mid-head",
    ),
]


@pytest.mark.parametrize(("answer", "error", "message"), REFUSALS)
def test_a_bad_answer_to_connect_is_refused(answer: bytes, error: type[Exception], message: str) -> None:
    proxy = ConnectProxy(refusal=answer)
    config = configuration("https://127.0.0.1:1", proxy=f"http://127.0.0.1:{proxy.port}", verify_ssl=False)
    blocking = BlockingClient(config)
    with pytest.raises(error, match=message):
        blocking.json("GET", "/json", timeout=(2.0, 2.0))

    async def write() -> None:
        transport = ApiTransport(client.ApiClient(config), 1)
        try:
            await transport.request("POST", "/things", {})
        finally:
            await transport.close()

    with pytest.raises(error, match=message):
        asyncio.run(write())
    proxy.close()


ROUTES: list[tuple[str, dict[str, Any], Callable[[Any], object], object]] = [
    ("no proxy", {}, lambda r: (r.socket_address.port, r.tunnel, r.tls_name), (6443, False, "127.0.0.1")),
    (
        "a proxy: CONNECT",
        {"proxy": "http://proxy.example:3128"},
        lambda r: (r.socket_address.authority, r.tunnel),
        ("proxy.example:3128", True),
    ),
    (
        "no_proxy names the server",
        {"proxy": "http://p:3128", "no_proxy": "127.0.0.0/8"},
        lambda r: r.proxy,
        None,
    ),
    (
        "tls_server_name",
        {"tls_server_name": "kubernetes.default"},
        lambda r: r.tls_name,
        "kubernetes.default",
    ),
    ("assert_hostname as a name", {"assert_hostname": "api.example"}, lambda r: r.tls_name, "api.example"),
]


@pytest.mark.parametrize(
    ("fields", "seen", "expected"), [row[1:] for row in ROUTES], ids=[row[0] for row in ROUTES]
)
def test_the_route_follows_the_configuration(
    fields: dict[str, Any], seen: Callable[[Any], object], expected: object
) -> None:
    assert seen(configured_route(configuration("https://127.0.0.1:6443", **fields))) == expected


def test_plain_http_through_a_proxy_asks_in_absolute_form() -> None:
    route = configured_route(configuration("http://api.example:8080/prefix", proxy="http://127.0.0.1:3128"))
    assert (route.prefix, route.tunnel, route.socket_address.port) == (
        "http://api.example:8080/prefix",
        False,
        3128,
    )


@pytest.mark.parametrize("proxy", ["socks5://127.0.0.1:1080", "https://127.0.0.1:3128"])
def test_a_proxy_other_than_http_is_refused_by_name(proxy: str) -> None:
    with pytest.raises(ValueError, match="the Configuration's proxy: only an http:// proxy"):
        configured_route(configuration("https://127.0.0.1:6443", proxy=proxy))

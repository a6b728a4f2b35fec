"""The HTTP/1.1 client of the scheduler's writes: how it reads answers (table of byte
streams, fed whole and a byte at a time), and its connection pool against a local
HTTP server (reuse, the connection limit, servers that close, stall or misbehave).
The writes themselves against an API server: tests/e2e/test_api_writes.py."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from kubernetes import client

from scheduler.k8s.client.http1 import HttpProtocolError, Response, ResponseReader
from scheduler.k8s.client.transport import ApiTransport, ConnectionPool

ANSWERS = [
    (
        "content-length",
        b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello",
        Response(201, "Created", b"hello"),
    ),
    (
        "chunked, with an extension",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        Response(200, "OK", b"hello world"),
    ),
    (
        "chunked, with trailers",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Trailer: 1\r\n\r\n",
        Response(200, "OK", b"ok"),
    ),
    ("no content", b"HTTP/1.1 204 No Content\r\n\r\n", Response(204, "No Content", b"")),
    (
        "an interim answer first",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 409 Conflict\r\ncontent-length: 2\r\n\r\n{}",
        Response(409, "Conflict", b"{}"),
    ),
    (
        "connection close",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        Response(200, "OK", b"", keep_alive=False),
    ),
    (
        "HTTP/1.0",
        b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
        Response(200, "OK", b"x", keep_alive=False),
    ),
]


def feed_all(reader: ResponseReader, stream: bytes, byte_by_byte: bool) -> list[Response]:
    pieces = [stream[i : i + 1] for i in range(len(stream))] if byte_by_byte else [stream]
    return [answer for piece in pieces if (answer := reader.feed(piece)) is not None]


@pytest.mark.parametrize("byte_by_byte", [False, True], ids=["whole", "byte-by-byte"])
@pytest.mark.parametrize(("stream", "expected"), [a[1:] for a in ANSWERS], ids=[a[0] for a in ANSWERS])
def test_an_answer_is_read_whatever_its_framing(
    stream: bytes, expected: Response, byte_by_byte: bool
) -> None:
    reader = ResponseReader()
    assert feed_all(reader, stream, byte_by_byte) == [expected]
    assert not reader.buffer


def test_two_answers_in_turn_on_one_reader() -> None:
    reader = ResponseReader()
    first, second = ANSWERS[0][1], ANSWERS[1][1]
    assert feed_all(reader, first, False) == [ANSWERS[0][2]]
    assert feed_all(reader, second, True) == [ANSWERS[1][2]]


def test_an_answer_without_length_ends_with_the_connection() -> None:
    reader = ResponseReader()
    assert reader.feed(b"HTTP/1.1 500 Internal Server Error\r\n\r\nsomething ") is None
    assert reader.feed(b"broke") is None
    assert reader.end() == Response(500, "Internal Server Error", b"something broke", keep_alive=False)


@pytest.mark.parametrize(
    ("stream", "message"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not an HTTP/1.x status line"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "not an HTTP/1.x status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "not header lines"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "not one Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "not a chunk-size line"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX", "does not end with CRLF"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000, "head is longer than"),
    ],
)
def test_what_is_not_http_is_refused(stream: bytes, message: str) -> None:
    with pytest.raises(HttpProtocolError, match=message):
        ResponseReader().feed(stream)


# ---- the pool, against a local server --------------------------------------------

Handler = Callable[[bytes, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class LocalServer:
    """Reads requests (head and Content-Length body) and lets ``handler`` answer."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.open = 0
        self.most_open = 0
        self.requests: list[bytes] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.startswith(b"Content-Length")
                )
                self.requests.append(head + await reader.readexactly(length))
                await self.handler(head, reader, writer)
                if writer.is_closing():
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self.open -= 1
            writer.close()


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[tuple[LocalServer, str]]:
    local = LocalServer(handler)
    server = await asyncio.start_server(local.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield local, f"http://127.0.0.1:{port}"
    finally:
        server.close()


async def ok(head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(0.01)
    writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}")
    await writer.drain()


async def ok_then_close(head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    await writer.drain()
    writer.close()


async def hang_up(head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()


async def stall(head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(30)


def pool_for(url: str, limit: int = 4, request_timeout_s: float = 5.0) -> ConnectionPool:
    return ConnectionPool(url, None, None, limit, 5.0, request_timeout_s)


def test_requests_in_turn_share_one_connection_and_carry_their_headers() -> None:
    async def scenario() -> tuple[list[Response], LocalServer]:
        async with serving(ok) as (server, url):
            pool = pool_for(url + "/prefix/")
            answers = [
                await pool.request("POST", "/api/v1/x", {"Accept": "application/json"}, b'{"a":1}')
                for _ in range(3)
            ]
            await pool.close()
            return answers, server

    answers, server = asyncio.run(scenario())
    assert [a.status for a in answers] == [201, 201, 201]
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /prefix/api/v1/x HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nAccept: application/json\r\n" in first
    assert first.endswith(b'Content-Length: 7\r\n\r\n{"a":1}')


def test_concurrent_requests_wait_for_one_of_limit_connections() -> None:
    async def scenario() -> tuple[list[Response], LocalServer, int]:
        async with serving(ok) as (server, url):
            pool = pool_for(url, limit=3)
            answers = await asyncio.gather(*(pool.request("POST", "/x", {}, b"") for _ in range(20)))
            opened = pool.open
            await pool.close()
            return list(answers), server, opened

    answers, server, opened = asyncio.run(scenario())
    assert [a.status for a in answers] == [201] * 20
    assert server.connections == 3
    assert server.most_open == 3
    assert opened == 3


@pytest.mark.parametrize(
    ("handler", "error", "message"),
    [
        (hang_up, ConnectionError, "closed the connection before answering"),
        (stall, TimeoutError, "no complete answer from the API server in 0.3 s"),
    ],
    ids=["hang-up", "stall"],
)
def test_a_failed_request_frees_its_connection_for_the_next(
    handler: Handler, error: type[Exception], message: str
) -> None:
    async def scenario() -> tuple[str, Response, int]:
        calls = 0

        async def first_fails(
            head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
        ) -> None:
            nonlocal calls
            calls += 1
            await (handler if calls == 1 else ok)(head, reader, writer)

        async with serving(first_fails) as (_, url):
            pool = pool_for(url, limit=1, request_timeout_s=0.3)
            with pytest.raises(error) as raised:
                await pool.request("POST", "/x", {}, b"")
            answer = await asyncio.wait_for(pool.request("POST", "/x", {}, b""), 5)
            opened = pool.open
            await pool.close()
            return str(raised.value), answer, opened

    text, answer, opened = asyncio.run(scenario())
    assert message in text
    assert answer.status == 201
    assert opened == 1


def test_a_connection_the_server_closes_is_not_reused() -> None:
    async def scenario() -> tuple[list[int], LocalServer]:
        async with serving(ok_then_close) as (server, url):
            pool = pool_for(url)
            statuses = [(await pool.request("POST", "/x", {}, b"")).status for _ in range(3)]
            await pool.close()
            return statuses, server

    statuses, server = asyncio.run(scenario())
    assert statuses == [200, 200, 200]
    assert server.connections == 3


@pytest.mark.parametrize("handed", [False, True], ids=["still-waiting", "handed-a-connection"])
def test_a_request_cancelled_while_waiting_gives_its_turn_back(handed: bool) -> None:
    """Cancelled while it waits for a connection, or after one was handed to it but
    before it ran: either way the next request gets the connection."""

    async def scenario() -> tuple[Response, int, int]:
        async with serving(ok) as (server, url):
            pool = pool_for(url, limit=1)
            connection = await pool._acquire()  # the one connection, busy
            waiting = asyncio.ensure_future(pool.request("POST", "/x", {}, b""))
            await asyncio.sleep(0.05)
            if handed:
                pool._release(connection)  # handed to the waiting request, which has not run yet
                waiting.cancel()
            else:
                waiting.cancel()
                await asyncio.sleep(0)
                pool._release(connection)
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
            answer = await asyncio.wait_for(pool.request("POST", "/x", {}, b""), 5)
            opened = pool.open
            await pool.close()
            return answer, opened, server.connections

    answer, opened, connections = asyncio.run(scenario())
    assert answer.status == 201
    assert (opened, connections) == (1, 1)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://127.0.0.1", "not an http[(]s[)] server address: 'ftp"),
        ("https://", "not an http[(]s[)] server address"),
    ],
)
def test_a_server_address_it_cannot_serve_is_refused(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pool_for(url)


def test_a_header_value_with_a_line_break_is_refused() -> None:
    async def scenario() -> None:
        pool = pool_for("http://127.0.0.1:9")
        await pool.request("POST", "/x", {"Authorization": "Bearer a\r\nX-Injected: 1"}, b"")

    with pytest.raises(ValueError, match="header Authorization has a line break"):
        asyncio.run(scenario())


def test_the_transport_writes_again_after_a_close_in_another_loop() -> None:
    """``KubeApi.close`` closes the transport's connections; a later write, in the loop
    running then, opens new ones (as aiohttp's session was made again)."""

    async def serve_twice() -> tuple[LocalServer, list[bytes]]:
        async with serving(ok) as (server, url):
            transport = ApiTransport(client.ApiClient(client.Configuration(host=url)), 2)

            async def write_then_close() -> None:
                await transport.request("POST", "/api/v1/namespaces/a/events", {"reason": "x"})
                await transport.close()

            await asyncio.to_thread(asyncio.run, write_then_close())
            await asyncio.to_thread(asyncio.run, write_then_close())
            return server, server.requests

    server, requests = asyncio.run(serve_twice())
    assert server.connections == 2
    assert [r.split(b"\r\n", 1)[0] for r in requests] == [b"POST /api/v1/namespaces/a/events HTTP/1.1"] * 2

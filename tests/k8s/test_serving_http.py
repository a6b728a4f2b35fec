"""The serving port's HTTP/1.1 (h11's, ``scheduler.k8s.serving.http.Exchange``): what
is refused and with which status, what RFC 9112 lets h11 accept, and a fuzz of random
bytes and mutated requests, cut at random points, fed to the parser and to the
server's connection handler: each input is answered, or refused and the connection
closed, or left unanswered because the client stopped mid-head; never an exception,
never a hang."""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from typing import cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.k8s.process.settings import ServingSettings
from scheduler.k8s.serving.http import MAX_HEAD_BYTES, Answer, Exchange, Request, route
from scheduler.k8s.serving.serving import READ_BYTES, Server, serve

ROUTES = {"/healthz": lambda: Answer(200, b"ok")}
# What a refusal may be answered: h11's hints (bad request, head too large, a transfer
# coding it does not know) and ours (not HTTP/1.x).
REFUSALS = {400, 431, 501, 505}
GOOD = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
# A head longer than MAX_HEAD_BYTES by more than a read, its end not yet sent.
TOO_LONG = GOOD + b"X-Padding: " + b"a" * (MAX_HEAD_BYTES + READ_BYTES)


def first_request(received: bytes, piece: int = READ_BYTES) -> Request | Answer | None:
    """What ``Exchange`` makes of ``received`` fed ``piece`` bytes at a time, as the
    server reads it."""
    exchange = Exchange()
    for start in range(0, len(received), piece):
        exchange.receive(received[start : start + piece])
        found = exchange.next_request()
        if found is not None:
            return found
    return None


@pytest.mark.parametrize(
    ("received", "status"),
    [
        pytest.param(b"garbage\r\n\r\n", 400, id="not a request line"),
        pytest.param(b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", 400, id="a space in the target"),
        pytest.param(b"GET\t/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, id="a tab for a space"),
        pytest.param(b"G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400, id="a method that is not a token"),
        pytest.param(b"GET /healthz SPDY/3\r\nHost: x\r\n\r\n", 400, id="not HTTP"),
        pytest.param(GOOD + b"Bad Name: y\r\n\r\n", 400, id="a space in a header name"),
        pytest.param(GOOD + b"Bad(: y\r\n\r\n", 400, id="a separator in a header name"),
        pytest.param(GOOD + b"X-A : y\r\n\r\n", 400, id="a space before the colon"),
        pytest.param(GOOD + b"no colon\r\n\r\n", 400, id="a header line without a colon"),
        pytest.param(GOOD + b"X-A: a\x00b\r\n\r\n", 400, id="NUL in a value"),
        pytest.param(b"GET / HTTP/1.1\r\n folded\r\nHost: x\r\n\r\n", 400, id="obs-fold before any header"),
        pytest.param(b"GET / HTTP/1.1\rHost: x\r\n\r\n", 400, id="a bare CR ends the request line"),
        pytest.param(GOOD + b"X-A: a\rX-B: b\r\n\r\n", 400, id="a bare CR in a header line"),
        pytest.param(b"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 400, id="a blank line first"),
        pytest.param(b"GET / HTTP/1.1\r\n\r\n", 400, id="HTTP/1.1 without Host"),
        pytest.param(GOOD + b"Host: y\r\n\r\n", 400, id="two Hosts"),
        pytest.param(
            GOOD + b"Content-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400, id="two Content-Lengths"
        ),
        pytest.param(GOOD + b"Content-Length: -1\r\n\r\n", 400, id="a negative Content-Length"),
        pytest.param(GOOD + b"Content-Length: 3\r\n\r\nabc", 400, id="a body"),
        pytest.param(GOOD + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, id="a chunked body"),
        pytest.param(
            GOOD + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400, id="both framings"
        ),
        pytest.param(GOOD + b"Transfer-Encoding: gzip\r\n\r\n", 501, id="an unknown transfer coding"),
        pytest.param(TOO_LONG, 431, id="a head past MAX_HEAD_BYTES"),
        pytest.param(b"GET /" + b"a" * MAX_HEAD_BYTES, 431, id="a request line past it"),
        pytest.param(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, id="HTTP/2's preface"),
        pytest.param(b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505, id="HTTP/2.0"),
        pytest.param(b"HEAD /healthz HTTP/3.0\r\nHost: x\r\n\r\n", 505, id="HEAD of HTTP/3.0"),
    ],
)
def test_each_refusal_has_its_status_and_closes_the_connection(received: bytes, status: int) -> None:
    exchange = Exchange()
    exchange.receive(received)
    refusal = exchange.next_request()
    assert isinstance(refusal, Answer), refusal
    assert refusal.status == status
    reply = b"".join(exchange.answer(refusal))
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status)
    assert b"\r\nConnection: close" in head
    assert body == (b"" if received.startswith(b"HEAD") else refusal.body)
    assert exchange.next_cycle() is False


@pytest.mark.parametrize(
    ("received", "headers"),
    [
        # RFC 9112 5.2: a server may replace obs-fold with a space instead of refusing
        # it; what matters is that the folded line is no header of its own.
        pytest.param(
            GOOD + b"X-A: a\r\n Authorization: b\r\n\r\n", {"x-a": "a Authorization: b"}, id="obs-fold"
        ),
        # RFC 9112 2.2: a recipient may take a bare LF for a line's end.
        pytest.param(b"GET /healthz HTTP/1.1\nHost: x\n\n", {}, id="bare LF line ends"),
        pytest.param(GOOD + b"Content-Length: 0\r\n\r\n", {"content-length": "0"}, id="an empty body"),
        pytest.param(
            GOOD + b"Content-Length: 0\r\nContent-Length: 0\r\n\r\n",
            {"content-length": "0"},
            id="one length twice",
        ),
        pytest.param(GOOD + b"X-A: caf\xe9\r\n\r\n", {"x-a": "café"}, id="obs-text, as latin-1"),
        pytest.param(
            GOOD + b"Expect: 100-continue\r\n\r\n", {"expect": "100-continue"}, id="Expect, no body"
        ),
        pytest.param(b"GET /healthz HTTP/1.2\r\nHost: x\r\n\r\n", {}, id="HTTP/1.2 read as 1.1"),
    ],
)
def test_what_rfc_9112_lets_h11_accept(received: bytes, headers: dict[str, str]) -> None:
    request = first_request(received)
    assert isinstance(request, Request), request
    assert request.path == "/healthz"
    assert headers.items() <= request.headers.items()


def test_a_head_is_bounded_however_it_is_cut() -> None:
    """h11 bounds an unfinished head; the server reads ``READ_BYTES`` at a time, so a
    head is refused once it passes ``MAX_HEAD_BYTES`` by more than a read."""
    for piece in (1, 100, READ_BYTES):
        refusal = first_request(TOO_LONG + b"\r\n\r\n", piece)
        assert isinstance(refusal, Answer)
        assert refusal.status == 431
    under = GOOD + b"X-Padding: " + b"a" * (MAX_HEAD_BYTES - len(GOOD) - 100) + b"\r\n\r\n"
    assert isinstance(first_request(under), Request)


def test_pipelined_requests_are_answered_in_order_and_an_upgrade_is_declined() -> None:
    exchange = Exchange()
    exchange.receive(
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
        b"HEAD /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    statuses = []
    while True:
        request = exchange.next_request()
        assert isinstance(request, Request)
        reply = b"".join(exchange.answer(route(request, ROUTES)))
        statuses.append(reply.split(b" ")[1])
        if not exchange.next_cycle():
            break
    assert statuses == [b"200", b"404", b"200"]  # the last one, after the close, is not read


# --- fuzz ---------------------------------------------------------------------------

VALID = [
    b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    b"HEAD /healthz?x=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer abc\r\n\r\n",
    b"GET /nowhere HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
]
# Bytes that matter to HTTP's framing, for mutations to insert.
SIGNIFICANT = [b"\r", b"\n", b"\r\n", b" ", b"\t", b":", b"\x00", b"\xff", b"HTTP/1.1", b"\r\n\r\n", b"?"]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid request (or several) with a few bytes changed, inserted or removed."""
    data = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["flip", "insert", "delete", "repeat"]))
        if kind == "flip" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.sampled_from(SIGNIFICANT) | st.binary(max_size=8))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        else:
            data[at:at] = data[at : at + draw(st.integers(1, 40))] * draw(st.integers(1, 3))
    return bytes(data)


# Random bytes, mutated requests, and heads on either side of the bound.
INPUTS = st.one_of(
    st.binary(max_size=300),
    mutated(),
    st.integers(0, 2 * MAX_HEAD_BYTES).map(lambda n: GOOD + b"X-Padding: " + b"a" * n + b"\r\n\r\n"),
)


@st.composite
def cut(draw: st.DrawFn) -> list[bytes]:
    """An input cut into pieces at random points."""
    data = draw(INPUTS)
    points = sorted(draw(st.lists(st.integers(0, len(data)), max_size=6)))
    bounds = [0, *points, len(data)]
    return [data[start:end] for start, end in itertools.pairwise(bounds) if end > start]


def split_replies(sent: bytes) -> list[tuple[int, bytes]]:
    """The status and head of each answer in ``sent``. An answer's body is skipped by
    its Content-Length unless the next answer starts where it would (HEAD's): no body
    served in these tests starts with ``HTTP/1.1``."""
    replies = []
    while sent:
        head, separator, sent = sent.partition(b"\r\n\r\n")
        assert separator, f"an unfinished head: {head!r}"
        assert head.startswith(b"HTTP/1.1 "), head
        lengths = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length: ")]
        assert len(lengths) == 1, head
        if not sent.startswith(b"HTTP/1.1 "):
            sent = sent[int(lengths[0].split(b": ")[1]) :]
        replies.append((int(head.split(b" ")[1]), head))
    return replies


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut())
def test_fuzz_the_parser(pieces: list[bytes]) -> None:
    started = time.monotonic()
    exchange = Exchange()
    closed = False
    for piece in pieces:
        exchange.receive(piece)
        while not closed and (found := exchange.next_request()) is not None:
            if isinstance(found, Answer):
                assert found.status in REFUSALS
                assert b"\r\nConnection: close" in exchange.answer(found)[0]
                closed = True
            else:
                exchange.answer(route(found, ROUTES))
                closed = not exchange.next_cycle()
        if closed:
            break
    assert time.monotonic() - started < 2


class RecordingWriter:
    """What ``Server.serve_connection`` writes to a connection, kept."""

    def __init__(self) -> None:
        self.sent = bytearray()

    def write(self, data: bytes | memoryview) -> None:
        self.sent += data

    async def drain(self) -> None:
        await asyncio.sleep(0)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut())
def test_fuzz_the_connection_handler(pieces: list[bytes]) -> None:
    server = Server(ROUTES, None, None, ServingSettings(read_timeout_s=1, idle_timeout_s=1))
    writer = RecordingWriter()
    connection = cast(asyncio.StreamWriter, writer)

    async def main() -> None:
        reader = asyncio.StreamReader()

        async def client() -> None:
            for piece in pieces:
                reader.feed_data(piece)
                await asyncio.sleep(0)  # the server reads what has come so far
            reader.feed_eof()

        sending = asyncio.create_task(client())
        server.table.admit(connection)
        async with asyncio.timeout(5):  # the handler ends at the client's EOF, not at a timeout
            await server.serve_connection(reader, connection)
        sending.cancel()

    asyncio.run(main())
    replies = split_replies(bytes(writer.sent))
    for number, (status, head) in enumerate(replies):
        closing = b"\r\nConnection: close" in head
        if status in REFUSALS:
            assert closing, head
        if closing:
            assert number == len(replies) - 1, "an answer after the connection's last"


def test_the_server_refuses_a_long_head_and_closes() -> None:
    async def main() -> bytes:
        listening = await serve(ROUTES, "127.0.0.1:0", ssl_context=None, auth=None)
        port = listening.sockets[0].getsockname()[1]

        def ask() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                # One byte past the bound, so that the server has read all it was sent
                # when it closes (unread bytes would make its close a reset).
                sock.sendall(GOOD + b"\r\n" + TOO_LONG[: MAX_HEAD_BYTES + 1])
                received = b""
                while chunk := sock.recv(65536):
                    received += chunk
                return received

        try:
            return await asyncio.to_thread(ask)
        finally:
            listening.close()
            await listening.wait_closed()

    replies = split_replies(asyncio.run(main()))
    assert [status for status, _ in replies] == [200, 431]

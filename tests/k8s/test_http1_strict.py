"""How strictly and within which bounds the HTTP/1.1 client reads answers: a table of
malformed or oversize answers, each refused with ``HttpProtocolError`` within a second
(fed whole and in 1000-byte pieces), read whole or streamed (a watch: its head, then
its body as it arrives, with no limit on the body but every other check); answers
written by RFC 9112's grammar, split anywhere, read back as written either way;
arbitrary bytes, split anywhere, either read as answers or refused, never another
error, never slowly; and a malformed answer through the pool, which closes that
connection and serves the next request on a new one."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.k8s.client.http1 import (
    MAX_BODY_BYTES,
    MAX_CHUNK_LINE_BYTES,
    MAX_HEAD_BYTES,
    MAX_LISTING_BYTES,
    HttpProtocolError,
    Response,
    ResponseReader,
    read_tunnel_answer,
)
from scheduler.k8s.client.transport import ConnectionPool

OK = b"HTTP/1.1 200 OK\r\n"
CHUNKED = OK + b"Transfer-Encoding: chunked\r\n\r\n"
DEADLINE_S = 1.0

MALFORMED = [
    # RFC 9112's grammar: ASCII digits only ("\xb2" is "²" in Latin-1: str.isdigit() holds).
    ("status of Latin-1 digits", b"HTTP/1.1 2\xb20 OK\r\nContent-Length: 0\r\n\r\n"),
    ("status of Arabic-Indic digits", "HTTP/1.1 ٢٠٠ OK\r\nContent-Length: 0\r\n\r\n".encode()),
    ("status of two digits", b"HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n"),
    ("status below 100", b"HTTP/1.1 099 X\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
    ("status above 599", b"HTTP/1.1 600 X\r\nContent-Length: 0\r\n\r\n"),
    ("Content-Length of Latin-1 digits", OK + b"Content-Length: 1\xb2\r\n\r\n"),
    ("Content-Length of full-width digits", OK + "Content-Length: ５\r\n\r\n".encode() + b"hello"),
    ("Content-Length signed", OK + b"Content-Length: +5\r\n\r\nhello"),
    ("Content-Length with underscores", OK + b"Content-Length: 1_0\r\n\r\n0123456789"),
    ("Content-Length of 4301 digits", OK + b"Content-Length: " + b"9" * 4301 + b"\r\n\r\n"),
    ("chunk size +5", CHUNKED + b"+5\r\nhello\r\n0\r\n\r\n"),
    ("chunk size -5", CHUNKED + b"-5\r\nhello\r\n0\r\n\r\n"),
    ("chunk size 0x5", CHUNKED + b"0x5\r\nhello\r\n0\r\n\r\n"),
    ("chunk size with underscores", CHUNKED + b"1_0\r\n0123456789abcdef\r\n0\r\n\r\n"),
    ("chunk size with spaces", CHUNKED + b" 5 \r\nhello\r\n0\r\n\r\n"),
    ("chunk size of Latin-1 digits", CHUNKED + b"\xb2\r\nhi\r\n0\r\n\r\n"),
    ("chunk size of 17 digits", CHUNKED + b"0" * 16 + b"5\r\nhello\r\n0\r\n\r\n"),
    ("chunk extension not a token", CHUNKED + b"5;a b\r\nhello\r\n0\r\n\r\n"),
    ("chunk without its CRLF", CHUNKED + b"2\r\nokXX"),
    ("duplicate differing Content-Length", OK + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
    ("duplicate equal Content-Length", OK + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello"),
    ("Content-Length as a list", OK + b"Content-Length: 5, 5\r\n\r\nhello"),
    ("Transfer-Encoding gzip", OK + b"Transfer-Encoding: gzip\r\n\r\nhello"),
    (
        "Transfer-Encoding chunked, gzip",
        OK + b"Transfer-Encoding: chunked, gzip\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    ),
    (
        "Transfer-Encoding gzip, chunked",
        OK + b"Transfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    ),
    (
        "Transfer-Encoding twice",
        OK + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ),
    ("Transfer-Encoding with Content-Length", CHUNKED[:-2] + b"Content-Length: 3\r\n\r\n0\r\n\r\n"),
    ("Transfer-Encoding in HTTP/1.0", b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    ("space before a colon", OK + b"Content-Length : 5\r\n\r\nhello"),
    ("tab before a colon", OK + b"Content-Length\t: 5\r\n\r\nhello"),
    ("header folded (obs-fold)", OK + b"X-A: 1\r\n  2\r\nContent-Length: 0\r\n\r\n"),
    ("bare LF in a header", OK + b"X-A: 1\nContent-Length: 0\r\n\r\n"),
    ("bare CR in a header", OK + b"X-A: 1\rContent-Length: 0\r\n\r\n"),
    ("NUL in a header value", OK + b"X-A: \x00\r\nContent-Length: 0\r\n\r\n"),
    ("empty header name", OK + b": 1\r\nContent-Length: 0\r\n\r\n"),
    ("a trailer line without a colon", CHUNKED + b"0\r\nnot a field\r\n\r\n"),
    ("switching protocols unasked", b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n"),
    ("oversize body by Content-Length", OK + b"Content-Length: 600000000\r\n\r\n" + b"x" * 1000),
    ("oversize body by one chunk", CHUNKED + b"%x\r\n" % (MAX_BODY_BYTES + 1)),
    ("oversize body in chunks", CHUNKED + (b"100000\r\n" + b"x" * 0x100000 + b"\r\n") * 5),
    ("oversize body until the close", OK + b"\r\n" + b"x" * (MAX_BODY_BYTES + 1)),
    ("oversize head, unterminated", OK + b"X-A: " + b"a" * (MAX_HEAD_BYTES + 1)),
    ("oversize head, whole", OK + b"X-A: " + b"a" * (MAX_HEAD_BYTES + 1) + b"\r\nContent-Length: 0\r\n\r\n"),
    ("oversize trailers", CHUNKED + b"0\r\nX-A: " + b"a" * (MAX_HEAD_BYTES + 1)),
    ("unterminated chunk-size line of 1 MB", CHUNKED + b"1" * 1_000_000),
    ("chunk-size line of 1 MB of extensions", CHUNKED + b"5" + b";a=b" * 250_000 + b"\r\nhello\r\n"),
]


def pieces_of(stream: bytes, size: int | None) -> list[bytes]:
    if size is None:
        return [stream]
    return [stream[i : i + size] for i in range(0, len(stream), size)]


@pytest.mark.parametrize("piece_size", [None, 1000], ids=["whole", "1000-byte-pieces"])
@pytest.mark.parametrize("stream", [m[1] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_a_malformed_or_oversize_answer_is_refused_promptly(stream: bytes, piece_size: int | None) -> None:
    """Refused, not read as an answer nor waited on; within a second of CPU whichever
    way it arrives (a reader that is neither refuses nor answers by then fails here)."""
    started = time.process_time()
    with pytest.raises(HttpProtocolError):
        read_within_deadline(pieces_of(stream, piece_size), started)
    assert time.process_time() - started < DEADLINE_S


def read_within_deadline(pieces: list[bytes], started: float) -> None:
    """Feed ``pieces`` then end the connection; fail on an answer, or past the deadline."""
    reader = ResponseReader()
    for piece in pieces:
        assert reader.feed(piece) is None, "read as an answer"
        assert time.process_time() - started < DEADLINE_S, "neither refused nor answered"
    assert reader.end() is None, "read as an answer"
    pytest.fail("neither refused nor answered")


# A stream has no body limit of its own (a watch's reader bounds its lines): every other
# refusal holds.
STREAMED_MALFORMED = [m for m in MALFORMED if not m[0].startswith("oversize body")]


def read_streamed(pieces: list[bytes]) -> list[tuple[int, bytes]]:
    """Each answer's status and body, read as a watch reads them: the head, then the
    body's bytes as they arrive; answers one after another on the connection."""
    reader = ResponseReader(max_body=None)
    answers: list[tuple[int, bytes]] = []
    body = b""
    for piece in [*pieces, b""]:  # a last, empty feed: what waits in the buffer
        reader.buffer += piece
        while reader.feed_head(b""):
            body += reader.read_body()
            if not reader.body_complete:
                break
            answers.append((reader.status, body))
            reader.reset()
            body = b""
            if not reader.buffer:
                break
    if reader.feed_head(b"") and reader.end_body():  # framed by the connection's end
        answers.append((reader.status, body + reader.read_body()))
    return answers


@pytest.mark.parametrize("piece_size", [None, 1000], ids=["whole", "1000-byte-pieces"])
@pytest.mark.parametrize("stream", [m[1] for m in STREAMED_MALFORMED], ids=[m[0] for m in STREAMED_MALFORMED])
def test_a_malformed_answer_is_refused_promptly_when_streamed(stream: bytes, piece_size: int | None) -> None:
    started = time.process_time()
    with pytest.raises(HttpProtocolError):
        read_streamed(pieces_of(stream, piece_size))
    assert time.process_time() - started < DEADLINE_S


def test_a_stream_or_a_listing_reads_past_the_body_limit_of_a_write() -> None:
    """A 5 MiB body: refused as a write's answer, read as a listing's or a stream's."""
    body = b"x" * (5 * 1024 * 1024)
    answer = CHUNKED + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    with pytest.raises(HttpProtocolError):
        ResponseReader().feed(answer)
    listed = ResponseReader(max_body=MAX_LISTING_BYTES).feed(answer)
    assert listed is not None
    assert listed.body == body
    assert read_streamed(pieces_of(answer, 65536)) == [(200, body)]


def test_a_chunk_size_line_fed_a_byte_at_a_time_is_refused_at_its_bound() -> None:
    """Each byte searched once: 1 MB of a line that never ends, a byte at a time, is
    refused once it passes the bound, not after a rescan of all it holds per byte."""
    reader = ResponseReader()
    reader.feed(CHUNKED)
    started = time.process_time()
    for fed in range(1, 1_000_001):
        try:
            reader.feed(b"1")
        except HttpProtocolError:
            break
        assert time.process_time() - started < DEADLINE_S, f"neither refused nor answered after {fed} bytes"
    assert fed == MAX_CHUNK_LINE_BYTES + 1


# ---- answers as the grammar writes them, split anywhere ---------------------------

TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
tokens = st.text(TOKEN_CHARS, min_size=1, max_size=12).map(str.encode)
field_values = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=20).map(str.encode)
extra_fields = st.lists(
    st.tuples(tokens, field_values).filter(
        lambda f: f[0].lower() not in (b"content-length", b"transfer-encoding", b"connection")
    ),
    max_size=5,
)


@st.composite
def answers(draw: st.DrawFn) -> tuple[bytes, Response]:
    """An answer (framed by Content-Length or chunks, with extensions and trailers) and
    what reading it gives."""
    status = draw(st.sampled_from([200, 201, 404, 409, 500]))
    body = draw(st.binary(max_size=300))
    head = b"HTTP/1.1 %d Reason Phrase\r\n" % status
    for name, value in draw(extra_fields):
        head += name + b":" + draw(st.sampled_from([b"", b" ", b"\t"])) + value + b"\r\n"
    expected = Response(status, "Reason Phrase", body)
    if draw(st.booleans()):
        return head + b"Content-Length: %d\r\n\r\n" % len(body) + body, expected
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=4)))
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True) if b > a]
    stream = head + b"Transfer-Encoding: chunked\r\n\r\n"
    for chunk in chunks:
        extension = draw(st.sampled_from([b"", b";a", b' ; a = "q\\"d"', b";a=b;c"]))
        stream += b"%x%s\r\n%s\r\n" % (len(chunk), extension, chunk)
    trailers = b"".join(name + b": " + value + b"\r\n" for name, value in draw(extra_fields))
    return stream + b"0\r\n" + trailers + b"\r\n", expected


def split_at(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(stream)) for c in cuts})
    return [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]


@settings(deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(answers(), min_size=1, max_size=3), st.lists(st.integers(0, 2000), max_size=30))
def test_answers_split_anywhere_are_read_as_written(
    written: list[tuple[bytes, Response]], cuts: list[int]
) -> None:
    reader = ResponseReader()
    stream = b"".join(s for s, _ in written)
    read = [answer for piece in split_at(stream, cuts) if (answer := reader.feed(piece)) is not None]
    # One feed gives at most one answer; the rest wait in the buffer for the next feed.
    while (answer := reader.feed(b"")) is not None:
        read.append(answer)
    assert read == [expected for _, expected in written]
    assert not reader.buffer


@settings(deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(answers(), min_size=1, max_size=3), st.lists(st.integers(0, 2000), max_size=30))
def test_answers_split_anywhere_are_read_as_written_when_streamed(
    written: list[tuple[bytes, Response]], cuts: list[int]
) -> None:
    stream = b"".join(s for s, _ in written)
    read = read_streamed(split_at(stream, cuts))
    assert read == [(expected.status, expected.body) for _, expected in written]


# ---- arbitrary bytes, split anywhere ----------------------------------------------

FRAGMENTS = [
    OK,
    b"HTTP/1.0 204 No Content\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"Content-Length: 5\r\n",
    b"Content-Length: 0\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Connection: close\r\n",
    b"X-A: b\r\n",
    b"\r\n",
    b"\r",
    b"\n",
    b"5\r\nhello\r\n",
    b'5;x="y"\r\n',
    b"0\r\n",
    b"hello",
    b":",
    b" ",
    b"\xb2",
    b"HTTP/1.1 ",
    b"20",
    b"Content-Length: ",
    b"Transfer-Encoding: ",
    b"chunked",
    b"gzip",
    b";",
    b"-",
]
streams = st.one_of(
    st.binary(max_size=2000),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=8)), max_size=40).map(b"".join),
)


@settings(deadline=1000, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(streams, st.lists(st.integers(0, 2000), max_size=30))
def test_arbitrary_bytes_are_read_as_answers_or_refused(stream: bytes, cuts: list[int]) -> None:
    """Whatever arrives, however split: answers, or ``HttpProtocolError``; nothing
    else, and within the deadline."""
    reader = ResponseReader()
    try:
        for piece in split_at(stream, cuts):
            answer = reader.feed(piece)
            while answer is not None:
                assert 200 <= answer.status <= 599
                assert len(answer.body) <= MAX_BODY_BYTES
                answer = reader.feed(b"")
        answer = reader.end()
        assert answer is None or len(answer.body) <= MAX_BODY_BYTES
    except HttpProtocolError:
        pass


@settings(deadline=1000, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(streams, st.lists(st.integers(0, 2000), max_size=30))
def test_arbitrary_bytes_are_read_as_answers_or_refused_when_streamed(stream: bytes, cuts: list[int]) -> None:
    try:
        for status, _body in read_streamed(split_at(stream, cuts)):
            assert 200 <= status <= 599
    except HttpProtocolError:
        pass


# ---- a proxy's answer to CONNECT -----------------------------------------------------

TUNNEL_ANSWERS = [
    ("opened", b"HTTP/1.1 200 Connection established\r\n\r\n", (200, "Connection established")),
    ("opened, with fields", b"HTTP/1.1 200 OK\r\nVia: p\r\n\r\n", (200, "OK")),
    (
        "refused",
        b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n",
        (407, "Proxy Authentication Required"),
    ),
    ("not yet whole", b"HTTP/1.1 200 OK\r\n", None),
    ("bytes past an opening", b"HTTP/1.1 200 OK\r\n\r\n\x16\x03", HttpProtocolError),
    ("an interim answer", b"HTTP/1.1 100 Continue\r\n\r\n", HttpProtocolError),
    ("not HTTP", b"SSH-2.0-OpenSSH_9.6\r\n\r\n", HttpProtocolError),
    ("a folded field", b"HTTP/1.1 200 OK\r\nVia: a\r\n b\r\n\r\n", HttpProtocolError),
    ("an endless head", b"HTTP/1.1 200 OK\r\nX: " + b"a" * (MAX_HEAD_BYTES + 1), HttpProtocolError),
]


@pytest.mark.parametrize(
    ("received", "expected"), [r[1:] for r in TUNNEL_ANSWERS], ids=[r[0] for r in TUNNEL_ANSWERS]
)
def test_a_proxys_answer_to_connect(received: bytes, expected: object) -> None:
    if expected is HttpProtocolError:
        with pytest.raises(HttpProtocolError):
            read_tunnel_answer(received)
    else:
        assert read_tunnel_answer(received) == expected


@settings(deadline=1000, max_examples=300)
@given(streams)
def test_arbitrary_bytes_answering_connect_are_read_or_refused(received: bytes) -> None:
    try:
        answer = read_tunnel_answer(received)
    except HttpProtocolError:
        return
    assert answer is None or 200 <= answer[0] <= 599


# ---- through the pool --------------------------------------------------------------


def test_a_malformed_answer_fails_its_request_and_closes_its_connection() -> None:
    answers_given = [OK + b"Content-Length: 600000000\r\n\r\n", OK + b"Content-Length: 2\r\n\r\n{}"]
    connections = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            while answers_given:
                await reader.readuntil(b"\r\n\r\n")
                writer.write(answers_given.pop(0))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def scenario() -> tuple[str, Response, int]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = ConnectionPool(f"http://127.0.0.1:{port}", None, None, 1, 5.0, 5.0)
        try:
            with pytest.raises(HttpProtocolError) as refused:
                await pool.request("POST", "/x", {}, b"")
            answer = await pool.request("POST", "/x", {}, b"")
            return str(refused.value), answer, pool.open
        finally:
            await pool.close()
            server.close()

    message, answer, opened = asyncio.run(scenario())
    assert f"body is longer than {MAX_BODY_BYTES} bytes" in message
    assert (answer.status, answer.body, opened, connections) == (200, b"{}", 1, 2)

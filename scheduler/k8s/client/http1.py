"""HTTP/1.1 as the scheduler speaks it to the API server (sans-IO): a request's bytes,
and the answers read from the bytes a connection receives. Two drivers carry them over
persistent connections: ``transport.ConnectionPool`` on the event loop (the writes per
pod) and ``blocking.BlockingClient`` in threads (reads, listings, watches), both along
``route.Route`` (TLS, ``tls_server_name``, an HTTP proxy's CONNECT tunnel).

The request is a line, its headers, Content-Length and the body; an answer is a status
line, headers and a body framed by Content-Length, chunks or the end of the connection,
read whole (``feed``) or, for a watch, its head and then its body as it arrives
(``feed_head``, ``read_body``). No redirects nor compression (the API server sends
identity unless asked).

``ResponseReader`` reads answers as RFC 9112 writes them and refuses anything else with
``HttpProtocolError`` (the connection is then closed): a status of three ASCII digits, 100 to 599;
header lines of a token, a colon (no whitespace before it) and a value without control
characters but HTAB (no obs-fold, no bare CR or LF); at most one Content-Length, of
ASCII digits; ``chunked`` as the only transfer coding, never beside a Content-Length
nor in an HTTP/1.0 answer; chunk sizes of 1 to 16 hex digits (no sign, no ``0x``, no
spaces), extensions as the grammar writes them, each chunk ending with CRLF; no
protocol switch. It holds at most ``MAX_HEAD_BYTES`` of a head or of trailers,
``MAX_CHUNK_LINE_BYTES`` of a chunk-size line and ``max_body`` of a body
(``MAX_BODY_BYTES`` by default, ``MAX_LISTING_BYTES`` for a GET, none for a stream,
whose reader bounds its lines), and refuses an answer as soon as it declares or sends
more; it searches each received byte for a line's end once, however the answer is
split. A proxy's answer to CONNECT is read by the same rules (``read_tunnel_answer``).
tests/k8s/test_http1_strict.py holds the table of refusals and the fuzzing, whole and
streamed.

It is our own code rather than h11's (maintained, sans-IO, as strict) because h11
costs the loop 65 us more per write: 72 us to encode a request and parse the API
server's answer to an Event against 7-8 us here (6 us before these checks). Per write
on the loop, benchmarks/api_write_cost.py against the dev cluster (2 shared cores,
medians of 5 rounds of 300 Events; runs interleaved) gives 0.30 ms of CPU one at a
time and 0.11 ms all at once with this reader, 0.29 and 0.11 ms with the lenient one
it replaced, and 0.42 and 0.22 ms with h11 doing both (+45% and +100%). Reading a
body as it arrives (for watches) added about 0.4 us to a write's 9 us here (an Event's
answer with Content-Length; 1 us when chunked): CPU time, old and new interleaved, 4
rounds of 20,000, on 2 busy shared cores.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

# What an answer's head (status line and headers) or its trailers may hold: the API
# server's heads are < 1 KiB.
MAX_HEAD_BYTES = 64 * 1024
# What a chunk-size line (with its extensions) may hold: the API server sends none.
MAX_CHUNK_LINE_BYTES = 1024
# What an answer's body may hold. Our writes are answered with the object written (a
# Binding's Status, an Event, a pod after a status patch): the API server refuses a
# request body over 3 MiB and etcd an object over 1.5 MiB, so a real answer fits in
# 4 MiB, and 64 connections (the default) hold at most 256 MiB whatever a server sends.
MAX_BODY_BYTES = 4 * 1024 * 1024
# What a listing's body may hold (``ResponseReader(max_body=...)``): a 5,000-node
# listing is 39 MB of JSON, 50,000 pods a few hundred MB.
MAX_LISTING_BYTES = 2 * 1024 * 1024 * 1024
# RFC 9112 and 9110's grammar, on bytes (so [0-9] is ASCII only).
_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_STATUS_LINE = re.compile(rb"HTTP/1\.([0-9]) ([0-9]{3})(?: ([\t\x20-\x7e\x80-\xff]*))?")
# field-line CRLF, any number of them: the value holds no control character but HTAB.
_FIELD_LINES = re.compile(rb"(?:" + _TOKEN + rb":[\t\x20-\x7e\x80-\xff]*\r\n)*")
# The fields that frame the answer, in a block _FIELD_LINES accepted.
_FRAMING_FIELD = re.compile(rb"^(content-length|transfer-encoding|connection):(.*)\r$", re.M | re.I)
_CONTENT_LENGTH = re.compile(rb"[0-9]{1,18}")
_QUOTED = rb'"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t\x20-\x7e\x80-\xff])*"'
_CHUNK_LINE = re.compile(
    rb"([0-9A-Fa-f]{1,16})(?:[ \t]*;[ \t]*"
    + _TOKEN
    + rb"(?:[ \t]*=[ \t]*(?:"
    + _TOKEN
    + rb"|"
    + _QUOTED
    + rb"))?)*"
)


class HttpProtocolError(ConnectionError):
    """The server's answer is not HTTP/1.1 as RFC 9112 writes it, or larger than this
    client reads."""


@dataclass(frozen=True)
class Response:
    status: int
    reason: str
    body: bytes
    keep_alive: bool = True  # the server keeps the connection open after it
    # The header lines as received (``headers`` parses them); not compared.
    fields: bytes = field(default=b"", compare=False, repr=False)

    @cached_property
    def headers(self) -> Mapping[str, str]:
        """The header fields by lower-case name (repeated fields joined by ", "); parsed
        on first use, so a write whose answer is dropped never pays for it."""
        return parse_fields(self.fields)


def parse_fields(fields: bytes) -> dict[str, str]:
    """Header lines that ``_FIELD_LINES`` accepted, by lower-case name."""
    parsed: dict[str, str] = {}
    for line in fields.split(b"\r\n"):
        if not line:
            continue
        name, _colon, value = line.partition(b":")
        key = name.decode("ascii").lower()
        text = value.strip(b" \t").decode("latin-1")
        parsed[key] = f"{parsed[key]}, {text}" if key in parsed else text
    return parsed


class _Framing:
    LENGTH, CHUNKED, UNTIL_CLOSE = range(3)


class ResponseReader:
    """Reads one answer at a time from the bytes a connection receives: whole
    (``feed``), or its head and then its body as it arrives (``feed_head``,
    ``read_body``: a watch). ``max_body``: the most a body may hold (None: no limit, for
    a stream whose reader bounds what it keeps)."""

    def __init__(self, max_body: int | None = MAX_BODY_BYTES) -> None:
        self.buffer = bytearray()
        self.max_body = max_body
        self.reset()

    def reset(self) -> None:
        self.status = 0
        self.reason = ""
        self.fields = b""
        self.keep_alive = True
        self._framing = -1  # no head yet
        self._length = 0  # LENGTH: the body's bytes still to come
        self._body = bytearray()
        self._received = 0  # body bytes read so far
        self._complete = False
        self._chunk_left = -1  # -1: a chunk-size line comes next; -2: the trailers; -3: a chunk's CRLF
        self._searched = 0  # bytes of the buffer searched for a line's end, in vain

    def feed(self, data: bytes) -> Response | None:
        """Add received bytes; the answer once it is complete."""
        self.buffer += data
        if self._framing < 0 and not self._read_head():
            return None
        if self._framing == _Framing.LENGTH:  # sliced once, when it has all arrived
            if len(self.buffer) < self._length:
                return None
            body = bytes(self.buffer[: self._length])
            del self.buffer[: self._length]
            return self._done(body)
        self._read_body()
        return self._done(bytes(self._body)) if self._complete else None

    def end(self) -> Response | None:
        """The connection closed: the answer, when it was framed by the close."""
        if self._framing == _Framing.UNTIL_CLOSE:
            self._read_body()
            return self._done(bytes(self._body))
        return None

    def feed_head(self, data: bytes) -> bool:
        """Add received bytes; whether the head (status, reason, fields) has arrived.
        The body's bytes stay in the buffer for ``read_body``."""
        self.buffer += data
        return self._framing >= 0 or self._read_head()

    def read_body(self, data: bytes = b"") -> bytes:
        """After the head: add received bytes; the body's bytes decoded so far and not
        yet returned (``body_complete`` says when the last has been)."""
        self.buffer += data
        self._read_body()
        piece = bytes(self._body)
        self._body.clear()
        return piece

    @property
    def body_complete(self) -> bool:
        return self._complete

    def end_body(self) -> bool:
        """The connection closed during ``read_body``: whether the body was complete
        (framed by the close, or already whole)."""
        if self._framing == _Framing.UNTIL_CLOSE:
            self._complete = True
        return self._complete

    @property
    def started(self) -> bool:
        return bool(self.buffer) or self._framing >= 0

    def _done(self, body: bytes) -> Response:
        response = Response(self.status, self.reason, body, self.keep_alive, self.fields)
        self.reset()
        return response

    def _count(self, size: int) -> None:
        """``size`` more bytes of body declared or arrived: refused past ``max_body``."""
        self._received += size
        if self.max_body is not None and self._received > self.max_body:
            raise HttpProtocolError(f"an answer's body is longer than {self.max_body} bytes")

    def _find(self, end: bytes, limit: int, what: str) -> int:
        """Where ``end`` starts in the buffer, or -1 while it has not arrived; each byte
        searched once, and not past ``limit``."""
        found = self.buffer.find(end, max(0, self._searched - len(end) + 1), limit + len(end))
        if found < 0:
            if len(self.buffer) > limit:
                raise HttpProtocolError(f"an answer's {what} is longer than {limit} bytes")
            self._searched = len(self.buffer)
            return -1
        self._searched = 0  # the caller consumes what precedes ``end``
        return found

    def _read_head(self) -> bool:
        while True:
            end = self._find(b"\r\n\r\n", MAX_HEAD_BYTES, "head")
            if end < 0:
                return False
            head = bytes(self.buffer[: end + 2])
            del self.buffer[: end + 4]
            status, reason, minor_version, fields = parse_head(head)
            if status == 101:
                raise HttpProtocolError("the server switched protocols, unasked")
            if status < 200:
                continue  # an interim answer (100 Continue): the real one follows
            self.status, self.reason, self.fields = status, reason, fields
            self._frame(status, minor_version, fields)
            return True

    def _frame(self, status: int, minor_version: int, fields: bytes) -> None:
        lengths: list[bytes] = []
        codings: list[bytes] = []
        self.keep_alive = minor_version >= 1
        for framing in _FRAMING_FIELD.finditer(fields):
            name, value = framing[1].lower(), framing[2].strip(b" \t")
            if name == b"content-length":
                lengths.append(value)
            elif name == b"transfer-encoding":
                codings.append(value)
            elif any(option.strip(b" \t").lower() == b"close" for option in value.split(b",")):
                self.keep_alive = False
        if status in (204, 304):
            self._framing, self._length = _Framing.LENGTH, 0
        elif codings:
            if [coding.lower() for coding in codings] != [b"chunked"]:
                raise HttpProtocolError(f"a transfer coding other than chunked: {b', '.join(codings)[:80]!r}")
            if lengths or minor_version == 0:
                raise HttpProtocolError("chunked with a Content-Length, or in an HTTP/1.0 answer")
            self._framing = _Framing.CHUNKED
        elif lengths:
            if len(lengths) > 1 or _CONTENT_LENGTH.fullmatch(lengths[0]) is None:
                raise HttpProtocolError(f"not one Content-Length of 1 to 18 ASCII digits: {lengths[:2]!r}")
            self._framing, self._length = _Framing.LENGTH, int(lengths[0])
            self._count(self._length)
        else:
            self._framing = _Framing.UNTIL_CLOSE
            self.keep_alive = False

    def _read_body(self) -> None:
        """Move the body's bytes that have arrived from the buffer to ``_body``."""
        if self._complete:
            return
        if self._framing == _Framing.CHUNKED:
            self._read_chunks()
            return
        if self._framing == _Framing.LENGTH:
            taken = min(len(self.buffer), self._length)
            self._length -= taken
            self._complete = self._length == 0
        else:  # until the connection closes (``end``)
            taken = len(self.buffer)
            self._count(taken)
        self._body += self.buffer[:taken]
        del self.buffer[:taken]

    def _read_chunks(self) -> None:
        while True:
            if self._chunk_left == -2:
                self._read_trailers()
                return
            if self._chunk_left == -3:  # a chunk's data has been read: its CRLF
                if len(self.buffer) < 2:
                    return
                if self.buffer[:2] != b"\r\n":
                    raise HttpProtocolError("a chunk does not end with CRLF")
                del self.buffer[:2]
                self._chunk_left = -1
            if self._chunk_left == -1:
                line_end = self._find(b"\r\n", MAX_CHUNK_LINE_BYTES, "chunk-size line")
                if line_end < 0:
                    return
                line = _CHUNK_LINE.fullmatch(self.buffer, 0, line_end)
                if line is None:
                    raise HttpProtocolError(f"not a chunk-size line: {bytes(self.buffer[:line_end])[:40]!r}")
                size = int(line[1], 16)  # before the buffer (which ``line`` reads) changes
                del self.buffer[: line_end + 2]
                self._count(size)
                self._chunk_left = -2 if size == 0 else size
                continue
            if not self.buffer:
                return
            taken = min(len(self.buffer), self._chunk_left)
            self._body += self.buffer[:taken]
            del self.buffer[:taken]
            self._chunk_left -= taken
            if self._chunk_left == 0:
                self._chunk_left = -3

    def _read_trailers(self) -> None:
        """After the last chunk: trailer lines (read and dropped), then an empty line."""
        if self.buffer.startswith(b"\r\n"):
            del self.buffer[:2]
            self._complete = True
            return
        if len(self.buffer) < 2:
            return
        end = self._find(b"\r\n\r\n", MAX_HEAD_BYTES, "trailer section")
        if end < 0:
            return
        if _FIELD_LINES.fullmatch(self.buffer, 0, end + 2) is None:
            raise HttpProtocolError(f"not trailer lines: {bytes(self.buffer[:end])[:80]!r}")
        del self.buffer[: end + 4]
        self._complete = True


def parse_head(head: bytes) -> tuple[int, str, int, bytes]:
    """A head's status, reason, minor version and header lines (``head``: its bytes up
    to the CRLF of its last line); ``HttpProtocolError`` unless RFC 9112 writes it so."""
    line_end = head.find(b"\r\n")
    status_line = _STATUS_LINE.fullmatch(head, 0, line_end)
    if status_line is None:
        raise HttpProtocolError(f"not an HTTP/1.x status line: {head[:line_end][:80]!r}")
    fields = head[line_end + 2 :]
    if _FIELD_LINES.fullmatch(fields) is None:
        raise HttpProtocolError(f"not header lines as RFC 9112 writes them: {fields[:200]!r}")
    status = int(status_line[2])
    if not 100 <= status <= 599:  # RFC 9110 15: values outside are invalid
        raise HttpProtocolError(f"not an HTTP status: {status:03d}")
    return status, (status_line[3] or b"").decode("latin-1"), int(status_line[1]), fields


def read_tunnel_answer(received: bytes) -> tuple[int, str] | None:
    """A proxy's answer to CONNECT, from what the connection received so far: its
    status and reason once its head has arrived (None before). RFC 9110 9.3.6: a 2xx
    answer has no body, and the tunnel starts right after its head; the server (TLS)
    speaks only once spoken to, so any byte past the head is refused, as is an interim
    or switching answer."""
    end = received.find(b"\r\n\r\n", 0, MAX_HEAD_BYTES + 4)
    if end < 0:
        if len(received) > MAX_HEAD_BYTES:
            raise HttpProtocolError(f"a proxy's answer to CONNECT is longer than {MAX_HEAD_BYTES} bytes")
        return None
    status, reason, _minor, _fields = parse_head(received[: end + 2])
    if status < 200:
        raise HttpProtocolError(f"a proxy answered CONNECT with {status}")
    if 200 <= status <= 299 and len(received) > end + 4:
        raise HttpProtocolError("a proxy sent bytes past its answer to CONNECT")
    return status, reason


def encode_request(
    method: str, target: str, authority: str, headers: Mapping[str, str], body: bytes
) -> bytes:
    """A request's bytes: its line, ``Host``, ``headers``, ``Content-Length`` and
    ``body``. A header value with a line break raises ``ValueError`` (naming the
    header, not its value: a token)."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {authority}"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value:
            raise ValueError(f"header {name} has a line break in its value")
        lines.append(f"{name}: {value}")
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def encode_connect(authority: str, headers: Mapping[str, str]) -> bytes:
    """A CONNECT request for a tunnel to ``authority`` (host:port), with ``headers``
    (the proxy's: Proxy-Authorization, say)."""
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value:
            raise ValueError(f"header {name} has a line break in its value")
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

"""HTTP/1.1 as the scheduler's writes speak it (sans-IO): a request's bytes, and the
answers read from the bytes a connection receives. ``transport.ConnectionPool`` carries
them over persistent connections to the API server.

The writes made per pod (bind, event, status) are small JSON requests with small
answers, two per scheduled pod. The request is a line, its headers, Content-Length and
the body; an answer is a status line, headers and a body framed by Content-Length,
chunks or the end of the connection. No proxies, redirects nor compression (the API
server sends identity unless asked): ``transport.supports`` keeps the official client
for a Configuration that needs more.

``ResponseReader`` reads answers as RFC 9112 writes them and refuses anything else with
``HttpProtocolError`` (the connection is then closed): a status of three ASCII digits, 100 to 599;
header lines of a token, a colon (no whitespace before it) and a value without control
characters but HTAB (no obs-fold, no bare CR or LF); at most one Content-Length, of
ASCII digits; ``chunked`` as the only transfer coding, never beside a Content-Length
nor in an HTTP/1.0 answer; chunk sizes of 1 to 16 hex digits (no sign, no ``0x``, no
spaces), extensions as the grammar writes them, each chunk ending with CRLF; no
protocol switch. It holds at most ``MAX_HEAD_BYTES`` of a head or of trailers,
``MAX_CHUNK_LINE_BYTES`` of a chunk-size line and ``MAX_BODY_BYTES`` of a body, and
refuses an answer as soon as it declares or sends more; it searches each received byte
for a line's end once, however the answer is split (tests/k8s/test_http1_strict.py
holds the table of refusals and the fuzzing).

It is our own code rather than h11's (maintained, sans-IO, as strict) because h11
costs the loop 65 us more per write: 72 us to encode a request and parse the API
server's answer to an Event against 7-8 us here (6 us before these checks). Per write
on the loop, benchmarks/api_write_cost.py against the dev cluster (2 shared cores,
medians of 5 rounds of 300 Events; runs interleaved) gives 0.30 ms of CPU one at a
time and 0.11 ms all at once with this reader, 0.29 and 0.11 ms with the lenient one
it replaced, and 0.42 and 0.22 ms with h11 doing both (+45% and +100%).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

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


class _Framing:
    LENGTH, CHUNKED, UNTIL_CLOSE = range(3)


class ResponseReader:
    """Reads one answer at a time from the bytes a connection receives."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.reset()

    def reset(self) -> None:
        self.status = 0
        self.reason = ""
        self.keep_alive = True
        self._framing = -1  # no head yet
        self._length = 0
        self._body = bytearray()
        self._chunk_left = -1  # -1: a chunk-size line comes next; -2: the trailers
        self._searched = 0  # bytes of the buffer searched for a line's end, in vain

    def feed(self, data: bytes) -> Response | None:
        """Add received bytes; the answer once it is complete."""
        self.buffer += data
        if self._framing < 0 and not self._read_head():
            return None
        if self._framing == _Framing.LENGTH:
            if len(self.buffer) < self._length:
                return None
            body = bytes(self.buffer[: self._length])
            del self.buffer[: self._length]
            return self._done(body)
        if self._framing == _Framing.CHUNKED:
            return self._read_chunks()
        if len(self.buffer) > MAX_BODY_BYTES:  # until the connection closes: ``end``
            raise HttpProtocolError(f"an answer's body is longer than {MAX_BODY_BYTES} bytes")
        return None

    def end(self) -> Response | None:
        """The connection closed: the answer, when it was framed by the close."""
        if self._framing == _Framing.UNTIL_CLOSE:
            body = bytes(self.buffer)
            self.buffer.clear()
            return self._done(body)
        return None

    @property
    def started(self) -> bool:
        return bool(self.buffer) or self._framing >= 0

    def _done(self, body: bytes) -> Response:
        response = Response(self.status, self.reason, body, self.keep_alive)
        self.reset()
        return response

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
            if status == 101:
                raise HttpProtocolError("the server switched protocols, unasked")
            if status < 200:
                continue  # an interim answer (100 Continue): the real one follows
            self.status = status
            self.reason = (status_line[3] or b"").decode("latin-1")
            self._frame(status, int(status_line[1]), fields)
            return True

    def _frame(self, status: int, minor_version: int, fields: bytes) -> None:
        lengths: list[bytes] = []
        codings: list[bytes] = []
        self.keep_alive = minor_version >= 1
        for field in _FRAMING_FIELD.finditer(fields):
            name, value = field[1].lower(), field[2].strip(b" \t")
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
            if self._length > MAX_BODY_BYTES:
                raise HttpProtocolError(f"an answer's body is longer than {MAX_BODY_BYTES} bytes")
        else:
            self._framing = _Framing.UNTIL_CLOSE
            self.keep_alive = False

    def _read_chunks(self) -> Response | None:
        while True:
            if self._chunk_left == -2:
                return self._read_trailers()
            if self._chunk_left < 0:
                line_end = self._find(b"\r\n", MAX_CHUNK_LINE_BYTES, "chunk-size line")
                if line_end < 0:
                    return None
                line = _CHUNK_LINE.fullmatch(self.buffer, 0, line_end)
                if line is None:
                    raise HttpProtocolError(f"not a chunk-size line: {bytes(self.buffer[:line_end])[:40]!r}")
                size = int(line[1], 16)  # before the buffer (which ``line`` reads) changes
                del self.buffer[: line_end + 2]
                if len(self._body) + size > MAX_BODY_BYTES:
                    raise HttpProtocolError(f"an answer's body is longer than {MAX_BODY_BYTES} bytes")
                if size == 0:
                    self._chunk_left = -2
                    continue
                self._chunk_left = size
            if len(self.buffer) < self._chunk_left + 2:
                return None
            if self.buffer[self._chunk_left : self._chunk_left + 2] != b"\r\n":
                raise HttpProtocolError("a chunk does not end with CRLF")
            self._body += self.buffer[: self._chunk_left]
            del self.buffer[: self._chunk_left + 2]
            self._chunk_left = -1

    def _read_trailers(self) -> Response | None:
        """After the last chunk: trailer lines (read and dropped), then an empty line."""
        if self.buffer.startswith(b"\r\n"):
            del self.buffer[:2]
            return self._done(bytes(self._body))
        if len(self.buffer) < 2:
            return None
        end = self._find(b"\r\n\r\n", MAX_HEAD_BYTES, "trailer section")
        if end < 0:
            return None
        if _FIELD_LINES.fullmatch(self.buffer, 0, end + 2) is None:
            raise HttpProtocolError(f"not trailer lines: {bytes(self.buffer[:end])[:80]!r}")
        del self.buffer[: end + 4]
        return self._done(bytes(self._body))


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

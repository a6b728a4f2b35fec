"""``/metrics`` (Prometheus), ``/healthz`` (the process is alive: answering, and not
stuck at start) and ``/readyz`` (caches synced and a profile loaded) on one address:
what each request is answered, and the HTTP/1.1 of each connection (``Exchange``).

Served on the event loop by ``scheduler.k8s.serving.serving`` (TLS, delegated
authentication, bounded connections): GET and HEAD of those paths, keep-alive, nothing
else. The requests are parsed, and the answers framed, by h11 (sans-IO HTTP/1.1, no
dependencies): no HTTP is parsed by hand here. It was aiohttp's web server, whose import
(0.3-0.5 s on the 2-core machine) came before the first bind of every start; then a
parser of our own, lenient (no checks of tokens, obs-fold, bare CR, duplicate
Content-Length), which h11 replaced (issue 33). What h11 costs, measured on the 2-core
machine (Python 3.11, h11 0.16):

- import: 8-9 ms before the first bind, asyncio, ssl and re being loaded by then (20-50 ms
  from a bare interpreter; ``python -X importtime -c "import h11"``, 5 runs);
- CPU: 75-90 µs a request (a scrape's head with a 900-byte token, or a kubelet's probe),
  request parsed and answer framed, where the hand-written parser took 3-5 µs (best of
  7 x 2,000, timeit). A probe every few seconds and a scrape every 15 s: ~0.01% of a core.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import h11
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from scheduler.k8s.serving.metrics import Metrics

Probe = Callable[[], tuple[bool, str]]
# A request's line and headers may not be longer (Prometheus' and a kubelet's are
# < 1 KiB, a service account token ~1 KiB).
MAX_HEAD_BYTES = 16 * 1024
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}
# A refusal's body says why, in h11's words (which quote the offending line), this long.
MAX_REASON = 200


@dataclass
class StartupDeadline:
    """``/healthz`` while the caches sync: healthy for ``timeout_s`` after start, then
    unhealthy until they have synced, so that a kubelet restarts a scheduler stuck at
    start (the API server unreachable) instead of waiting on it forever. Once synced,
    always healthy: later API trouble is the watches' and the resync's to retry."""

    timeout_s: float
    synced: Callable[[], bool]
    clock: Callable[[], float] = time.monotonic
    started_at: float = field(init=False)

    def __post_init__(self) -> None:
        self.started_at = self.clock()

    def check(self) -> tuple[bool, str]:
        if self.synced():
            return True, "ok"
        waited = self.clock() - self.started_at
        if waited < self.timeout_s:
            return True, f"ok (starting: caches not synced for {waited:.0f} s)"
        return False, f"caches not synced {waited:.0f} s after start (startup_timeout_s: {self.timeout_s:g})"


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


Route = Callable[[], Answer]


def build_routes(metrics: Metrics, ready: Probe, healthy: Probe) -> dict[str, Route]:
    """What each path answers."""

    def probe(check: Probe) -> Route:
        def answer() -> Answer:
            ok, why = check()
            return Answer(200 if ok else 503, (why or "ok").encode())

        return answer

    return {
        "/metrics": lambda: Answer(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST),
        "/healthz": probe(healthy),
        "/readyz": probe(ready),
    }


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # without the query
    headers: dict[str, str]  # names in lower case, values as sent (a token is case-sensitive)


class Exchange:
    """One connection's HTTP/1.1, as h11 keeps it: fed the bytes received, it gives each
    request in turn (or the answer that refuses it), and the bytes of each answer.

    A request is refused, and the connection then closes, when h11 refuses it (400; 431
    past ``MAX_HEAD_BYTES`` of an unfinished head; 501 for a transfer coding other than
    chunked), when it is not HTTP/1.x (505: h11 parses an HTTP/2 preface as a request
    ``PRI *`` of version 2.0) or when it may have a body (400: Transfer-Encoding, or a
    Content-Length other than 0; nothing here takes one). HTTP/1.0 requests are answered
    and closed (h11 keeps no HTTP/1.0 connection alive).
    """

    def __init__(self) -> None:
        self.connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.method = b""  # of the request being answered: HEAD's answer has no body
        self.refused = False

    def receive(self, data: bytes) -> None:
        """Bytes from the client (never b"": the caller ends the connection at EOF)."""
        self.connection.receive_data(data)

    def next_request(self) -> Request | Answer | None:
        """The next request; the answer that refuses it; None until more bytes come."""
        found = self._next_request()
        self.refused = isinstance(found, Answer)
        return found

    def _next_request(self) -> Request | Answer | None:
        try:
            event = self.connection.next_event()
            if event is h11.NEED_DATA:
                return None
            if not isinstance(event, h11.Request):  # PAUSED or ConnectionClosed: not fed so
                return Answer(400, f"bad request: unexpected {event!r:.60}".encode())
            self.method = event.method
            if not event.http_version.startswith(b"1."):  # 1.2 is read as 1.1 (RFC 9110 2.5)
                return Answer(505, b"HTTP/1.x only")
            transfer_coded = any(name == b"transfer-encoding" for name, _ in event.headers)
            if transfer_coded or not isinstance(self.connection.next_event(), h11.EndOfMessage):
                return Answer(400, b"bad request: no request body expected")
        except h11.RemoteProtocolError as error:
            return Answer(error.error_status_hint, f"bad request: {error}"[:MAX_REASON].encode())
        return Request(
            method=event.method.decode("ascii"),  # h11 checked the method is a token
            path=event.target.split(b"?", 1)[0].decode("ascii"),  # and the target visible ASCII
            headers={name.decode("ascii"): value.decode("latin-1") for name, value in event.headers},
        )

    def answer(self, answer: Answer) -> list[bytes]:
        """The bytes of ``answer`` to the request just taken, or of its refusal (then
        with ``Connection: close``); to HEAD, the head GET would have."""
        headers = [("Content-Type", answer.content_type), ("Content-Length", str(len(answer.body)))]
        if self.refused:
            headers.append(("Connection", "close"))
        reason = REASONS.get(answer.status, "").encode()
        response = h11.Response(status_code=answer.status, headers=headers, reason=reason)
        sent = [self.connection.send(response) or b""]
        if answer.body and self.method != b"HEAD":  # as is, not copied (a scrape's may be MBs)
            sent += self.connection.send_with_data_passthrough(h11.Data(data=answer.body)) or []
        sent.append(self.connection.send(h11.EndOfMessage()) or b"")
        return [piece for piece in sent if piece]

    def next_cycle(self) -> bool:
        """Whether the connection takes another request (h11's keep-alive rules:
        HTTP/1.1 without ``Connection: close``, and nothing refused)."""
        if self.connection.our_state is h11.DONE and self.connection.their_state is h11.DONE:
            self.connection.start_next_cycle()
            self.method = b""
            return True
        return False


def parse_request(received: bytes) -> Request | Answer:
    """The first request in ``received`` (head and blank line), or the answer that
    refuses it; an unfinished head is refused as well."""
    exchange = Exchange()
    exchange.receive(received)
    return exchange.next_request() or Answer(400, b"bad request: unfinished head")


def route(request: Request, routes: dict[str, Route]) -> Answer:
    """The answer to a request that may be served."""
    found = routes.get(request.path)
    if request.method not in ("GET", "HEAD"):
        return Answer(405, b"GET or HEAD")
    if found is None:
        return Answer(404, b"not found")
    return found()

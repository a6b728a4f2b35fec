"""``/metrics``, ``/healthz`` and ``/readyz`` over the scheduler's small HTTP/1.1
server: what each request is answered, and keep-alive, against the real server on a
local port (http.client, as a kubelet's probe or Prometheus would ask; plain HTTP and
no authentication here: tests/k8s/test_serving.py has those)."""

from __future__ import annotations

import asyncio
import http.client

import pytest
from prometheus_client import CONTENT_TYPE_LATEST

from scheduler.k8s.serving.http import Answer, Exchange, build_routes, parse_request, route
from scheduler.k8s.serving.metrics import Metrics
from scheduler.k8s.serving.serving import serve

ROUTES = {
    "/healthz": lambda: Answer(200, b"ok"),
    "/readyz": lambda: Answer(503, b"caches not synced"),
}


def exchange_once(received: bytes) -> tuple[int, bytes, bytes, bool]:
    """The status, head and body answered to the first request in ``received``, and
    whether the connection is then kept."""
    exchange = Exchange()
    exchange.receive(received)
    request = exchange.next_request()
    assert request is not None, "an unfinished head"
    answer = request if isinstance(request, Answer) else route(request, ROUTES)
    head, _, body = b"".join(exchange.answer(answer)).partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), head, body, exchange.next_cycle()


@pytest.mark.parametrize(
    ("received", "status", "body", "keep_alive"),
    [
        pytest.param(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200, b"ok", True, id="GET, HTTP/1.1 keeps"),
        pytest.param(
            b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", 503, b"caches not synced", True, id="a failed probe"
        ),
        pytest.param(
            b"GET /healthz?verbose HTTP/1.1\r\nHost: x\r\n\r\n", 200, b"ok", True, id="query ignored"
        ),
        pytest.param(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200, b"", True, id="HEAD: no body"),
        pytest.param(
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            200,
            b"ok",
            False,
            id="close asked",
        ),
        pytest.param(b"GET /healthz HTTP/1.0\r\n\r\n", 200, b"ok", False, id="HTTP/1.0 closes"),
        # h11 keeps no HTTP/1.0 connection (its answer says Connection: close, which a
        # 1.0 client heeds); the hand-written parser kept these.
        pytest.param(
            b"GET /healthz HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", 200, b"ok", False, id="1.0 keep-alive"
        ),
        pytest.param(b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 404, b"not found", True, id="unknown path"),
        pytest.param(b"POST /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 405, b"GET or HEAD", True, id="a method"),
        pytest.param(
            b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
            400,
            None,
            False,
            id="a body",
        ),
        pytest.param(b"garbage\r\n\r\n", 400, None, False, id="not a request line"),
        pytest.param(b"GET /healthz SPDY/3\r\nHost: x\r\n\r\n", 400, None, False, id="not HTTP/1.x"),
        pytest.param(b"GET /healthz HTTP/1.1\r\n\r\n", 400, None, False, id="HTTP/1.1 without Host"),
    ],
)
def test_each_request_gets_its_answer(
    received: bytes, status: int, body: bytes | None, keep_alive: bool
) -> None:
    answered, head, sent, kept = exchange_once(received)
    assert answered == status
    assert kept is keep_alive
    assert (b"Connection: close" in head) is not keep_alive
    if body is not None:
        assert sent == body
    if received.startswith(b"HEAD"):  # the length GET would send
        assert b"Content-Length: 2" in head.split(b"\r\n")


def test_header_values_keep_their_case() -> None:
    """A bearer token is case-sensitive; the Connection header is not."""
    request = parse_request(
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer AbC\r\nConnection: Close\r\n\r\n"
    )
    assert not isinstance(request, Answer)
    assert request.headers["authorization"] == "Bearer AbC"
    assert exchange_once(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n")[3] is False


def test_the_server_answers_probes_and_metrics_on_one_kept_connection() -> None:
    metrics = Metrics()
    metrics.is_leader.set(1)
    ready = {"now": False}

    async def main() -> list[tuple[int, str, bytes]]:
        routes = build_routes(
            metrics, lambda: (ready["now"], "ok" if ready["now"] else "caches not synced"), lambda: (True, "")
        )
        server = await serve(routes, "127.0.0.1:0", ssl_context=None, auth=None)
        port = server.sockets[0].getsockname()[1]

        def ask() -> list[tuple[int, str, bytes]]:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            seen = []
            for path in ("/readyz", "/healthz", "/metrics", "/readyz"):
                connection.request("GET", path)
                answer = connection.getresponse()
                seen.append((answer.status, answer.getheader("Content-Type") or "", answer.read()))
                ready["now"] = True
            sockets = {connection.sock.getsockname()}  # one connection throughout
            connection.close()
            assert len(sockets) == 1
            return seen

        try:
            return await asyncio.to_thread(ask)
        finally:
            server.close()
            await server.wait_closed()

    seen = asyncio.run(main())
    assert [status for status, _, _ in seen] == [503, 200, 200, 200]
    assert [body for _, _, body in seen if body != seen[2][2]] == [b"caches not synced", b"ok", b"ok"]
    assert seen[2][1] == CONTENT_TYPE_LATEST
    assert b"\nrl_scheduler_leader 1.0\n" in seen[2][2]

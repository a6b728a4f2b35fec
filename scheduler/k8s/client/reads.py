"""GETs by path over the threads' HTTP/1.1 client (``scheduler.k8s.client.blocking``),
with the official loader's credentials but not the official client's generated API
classes: importing those built pydantic validators for every method and took 0.85 s
of each start (``CoreV1Api`` alone 0.6 s), before the first bind. Blocking: for worker
threads and the watches' threads. Light on purpose: ``rl-scheduler run`` asks for its
first listing with it before the rest of the scheduler is imported
(``scheduler.k8s.client.first_listing``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from scheduler.k8s.client import node_protobuf
from scheduler.k8s.client.messages import JSON, Timeout, parse_json, raise_for_status, request_headers
from scheduler.k8s.client.paths import NODES
from scheduler.k8s.process.heap import collector_paused

if TYPE_CHECKING:
    from scheduler.k8s.client.blocking import BlockingClient, Stream

# Shared with the event loop's writes, and read from here by many callers.
__all__ = [
    "JSON",
    "WORKER_PREFIX",
    "Listing",
    "Timeout",
    "decode_listing",
    "get_json",
    "get_listing",
    "listing",
    "listing_accept",
    "parse_json",
    "raise_for_status",
    "request_headers",
    "watch_stream",
    "with_query",
]


Listing = tuple[list[dict[str, Any]], str]
# Names the threads that make blocking API calls: at exit, the scheduler does
# not wait for one still blocked in a call (``operator.exit_past_blocked_calls``).
WORKER_PREFIX = "kube-api"


def with_query(path: str, query: Mapping[str, str] | None) -> str:
    return path + (f"?{urlencode(query)}" if query else "")


def get_json(http: BlockingClient, path: str, timeout: Timeout) -> dict[str, Any]:
    """GET ``path``, parsed (``ApiException`` unless 2xx)."""
    answer = http.request("GET", path, timeout=timeout)
    raise_for_status(answer)
    with collector_paused():  # a JSON document has no cycles (scheduler.k8s.process.heap)
        parsed: dict[str, Any] = parse_json(answer.body)
    return parsed


def watch_stream(http: BlockingClient, path: str, query: Mapping[str, str], timeout: Timeout) -> Stream:
    """A watch's GET, its body read as it arrives (``Stream``)."""
    return http.open_stream(with_query(path, query), timeout)


def listing(document: Mapping[str, Any]) -> Listing:
    """A list answer's items and its resourceVersion (where a watch starts)."""
    items: list[dict[str, Any]] = document.get("items") or []
    return items, str((document.get("metadata") or {}).get("resourceVersion") or "")


def listing_accept(path: str) -> str:
    """What a listing of ``path`` asks for: protobuf for nodes (the large listing,
    ``scheduler.k8s.client.node_protobuf``), JSON for the rest."""
    return node_protobuf.ACCEPT if path == NODES else JSON


def decode_listing(content_type: str, body: bytes) -> Listing:
    """A listing's items and resourceVersion from its answer, in the encoding the
    server chose (a server without protobuf answers JSON)."""
    with collector_paused():  # no cycles in either (scheduler.k8s.process.heap)
        if content_type.startswith(node_protobuf.CONTENT_TYPE):
            return node_protobuf.decode_node_list(body)
        return listing(parse_json(body))


def get_listing(http: BlockingClient, path: str, timeout: Timeout) -> Listing:
    """A listing of ``path``, read at once (``ApiException`` unless 2xx)."""
    answer = http.request("GET", path, accept=listing_accept(path), timeout=timeout)
    raise_for_status(answer)
    return decode_listing(answer.headers.get("content-type", ""), answer.body)

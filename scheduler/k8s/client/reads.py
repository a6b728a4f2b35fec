"""GETs by path through the official client's connection pool, TLS, proxy and
credentials, but not its generated API classes: importing those built pydantic
validators for every method and took 0.85 s of each start (``CoreV1Api`` alone
0.6 s), before the first bind. Blocking: for worker threads and the watches' threads.
Light on purpose: ``rl-scheduler run`` asks for its first listing with it before the
rest of the scheduler is imported (``scheduler.k8s.client.first_listing``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import pydantic_core

from scheduler.k8s.client import node_protobuf
from scheduler.k8s.client.paths import NODES
from scheduler.k8s.process.heap import collector_paused

if TYPE_CHECKING:
    from kubernetes import client


def parse_json(document: bytes) -> Any:
    """JSON to Python objects (dicts, lists, str, int, float, bool, None), as
    ``json.loads`` gives them, with pydantic's parser: a 5,000-node listing in 0.11 s
    against 0.16 s, a pod's watch event in 3.3 us against 7.5 us. Raises ``ValueError``
    on what is not JSON."""
    return pydantic_core.from_json(document)


JSON = "application/json"
Listing = tuple[list[dict[str, Any]], str]
# Names the threads that make the official client's calls: at exit, the scheduler does
# not wait for one still blocked in a call (``operator.exit_past_blocked_calls``).
WORKER_PREFIX = "kube-api"
# How the generated client authenticates every core and events call.
AUTH_SETTINGS = ["BearerToken"]
Timeout = tuple[float, float]  # (connect, read) seconds


def request_headers(
    api_client: client.ApiClient,
    method: str,
    path: str,
    content_type: str | None = None,
    accept: str = JSON,
) -> dict[str, str]:
    """A request's headers as the official client sends them: its default headers,
    ``accept`` (JSON), and the Configuration's token, refreshed by its hook (service
    account tokens rotate)."""
    headers = {**api_client.default_headers, "Accept": accept}
    if content_type is not None:
        headers["Content-Type"] = content_type
    api_client.update_params_for_auth(headers, None, AUTH_SETTINGS, path, method, None)
    return headers


def get(
    api_client: client.ApiClient,
    path: str,
    query: Mapping[str, str] | None,
    timeout: Timeout,
    accept: str = JSON,
) -> Any:
    """GET ``path`` (with ``query``); the urllib3 response, unread. A non-2xx answer
    raises ``ApiException`` as the generated methods do."""
    host = str(api_client.configuration.host).rstrip("/")
    url = host + path + (f"?{urlencode(query)}" if query else "")
    headers = request_headers(api_client, "GET", path, accept=accept)
    answer: Any = api_client.call_api("GET", url, header_params=headers, _request_timeout=timeout)
    if not 200 <= answer.status <= 299:
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415 - light module (above)

        answer.read()
        raise ApiException.from_response(http_resp=answer, body=None, data=None)
    return answer.response


def get_json(api_client: client.ApiClient, path: str, timeout: Timeout) -> dict[str, Any]:
    """``get``, read (the connection goes back to the pool at once) and parsed."""
    response = get(api_client, path, None, timeout)
    try:
        body = response.read()
    finally:
        response.release_conn()
    with collector_paused():  # a JSON document has no cycles (scheduler.k8s.process.heap)
        parsed: dict[str, Any] = parse_json(body)
    return parsed


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


def get_listing(api_client: client.ApiClient, path: str, timeout: Timeout) -> Listing:
    """A listing of ``path`` through the official client's pool, read at once."""
    response = get(api_client, path, None, timeout, accept=listing_accept(path))
    try:
        body = response.read()
    finally:
        response.release_conn()
    return decode_listing(str(response.headers.get("Content-Type") or ""), body)

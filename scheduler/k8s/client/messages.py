"""What every request to the API server and every answer share, whichever driver
carries them (``scheduler.k8s.client.blocking`` from threads, ``transport`` on the
event loop): the official client's headers and token, JSON parsing, and the error a
non-2xx answer raises."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pydantic_core

if TYPE_CHECKING:
    from kubernetes import client

    from scheduler.k8s.client.http1 import Response


def parse_json(document: bytes) -> Any:
    """JSON to Python objects (dicts, lists, str, int, float, bool, None), as
    ``json.loads`` gives them, with pydantic's parser: a 5,000-node listing in 0.11 s
    against 0.16 s, a pod's watch event in 3.3 us against 7.5 us. Raises ``ValueError``
    on what is not JSON."""
    return pydantic_core.from_json(document)


JSON = "application/json"
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


def raise_for_status(response: Response) -> None:
    """``ApiException`` with the answer's status, reason and body, unless it is 2xx (as
    the official client raises it)."""
    if not 200 <= response.status <= 299:
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415 - light module (above)

        raise ApiException(
            status=response.status,
            reason=response.reason,
            body=response.body.decode("utf-8", errors="replace"),
        )

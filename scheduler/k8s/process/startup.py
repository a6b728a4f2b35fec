"""The first listing of the cluster, retried until the API server answers.

A scheduler started while its API server cannot be reached (packets dropped before
kube-proxy programs the Service, a control plane still coming up) says so: one
WARNING per failed attempt, naming the server, the error and the delay before the
next one (1 s doubling to 30 s, as our watches back off). Each attempt's calls give
up after the client's connect and read timeouts, so a server that accepts and never
answers fails an attempt instead of hanging it. ``/healthz`` gives up on the whole
start after ``startup_timeout_s`` (``scheduler.k8s.serving.http.StartupDeadline``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.backoff import backoff_delays

log = logging.getLogger(__name__)
T = TypeVar("T")


def describe(error: BaseException) -> str:
    """An API call's failure as one short phrase: the status of a refusal, else the
    error's type and message."""
    if isinstance(error, ApiException):
        return f"{error.status} {error.reason}"
    # OSErrors carry (errno, message): the message says it.
    last = error.args[-1] if error.args else None
    return f"{type(error).__name__}: {last if isinstance(last, str) else error}"


async def sync_until_served(
    sync: Callable[[], Awaitable[T]],
    server: str,
    *,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """``sync()`` until it succeeds; each failure is logged with the next delay."""
    delays = backoff_delays()
    attempt = 1
    while True:
        backoff = next(delays)
        try:
            return await sync()
        except Exception as error:  # the API server is unreachable, or refused us: retry
            log.warning(
                "listing the cluster from %s failed (attempt %d): %s; retrying in %g s",
                server,
                attempt,
                describe(error),
                backoff,
            )
        await sleep(backoff)
        attempt += 1

"""The first listing, asked for before the rest of the scheduler is imported.

The API server took 0.4-2.6 s to answer a 5,000-node listing (39 MB of JSON, more on a
busy server), and the scheduler (its settings, the official client, kopf, the
profiles) takes about as long to import. ``rl-scheduler run`` therefore starts the
listings first, each in a thread of its own, with the credentials read by
``scheduler.k8s.client.endpoint`` (standard library only) and the kubeconfig the settings
will name (``speculated_kubeconfig``). Once the settings and the official client are
loaded, the early listings are kept only if they went to the same server with the
same credentials (``Endpoint.agrees_with``); otherwise they are dropped, and listed
again through the official client (``official_listing``), as when
``scheduler.k8s.client.endpoint`` cannot read the credentials at all.

The runtime's first ``list_and_apply`` takes each answer once
(``KubeApi.list_with_version``); a listing that failed here is asked for again there,
where failures are retried and logged. These eight requests do not wait on the
client's QPS bucket (it does not exist yet): the API server sees them at once, as it
would with any ``client.burst`` of 8 or more (kube-scheduler's default is 100).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from scheduler.k8s.client import reads
from scheduler.k8s.client.endpoint import Endpoint

if TYPE_CHECKING:
    from kubernetes import client

Listing = reads.Listing
Fetch = Callable[[str], Listing]
# The settings' defaults (``ClientSettings``): the early listings start before the
# settings are read. A listing slower than this fails, and is asked for again later
# with the settings' own timeouts.
EARLY_TIMEOUT: reads.Timeout = (5.0, 60.0)
KUBECONFIG_VARIABLE = "RL_SCHEDULER_CLIENT__KUBECONFIG"


class ListingError(Exception):
    """An early listing the API server refused (a status other than 2xx)."""


class FirstListing:
    """Listings of ``paths`` in flight, each through ``fetch`` in a thread of its own."""

    def __init__(self, fetch: Fetch, paths: Iterable[str], on_drop: Callable[[], None] | None = None) -> None:
        wanted = list(paths)
        self._on_drop = on_drop
        executor = ThreadPoolExecutor(len(wanted), thread_name_prefix=f"{reads.WORKER_PREFIX}-first-listing")
        self._answers: dict[str, Future[Listing]] = {path: executor.submit(fetch, path) for path in wanted}
        executor.shutdown(wait=False)  # its threads end with their listing

    def take(self, path: str) -> Future[Listing] | None:
        """The answer for ``path``, once; None after (or for a path not asked for)."""
        return self._answers.pop(path, None)

    def drop(self) -> None:
        """Forget every answer, and cut the listings still in flight short."""
        self._answers.clear()
        if self._on_drop is not None:
            self._on_drop()


def official_listing(
    api_client: client.ApiClient, paths: Iterable[str], timeout: reads.Timeout
) -> FirstListing:
    """The listings through the official client (its pool, proxy and credentials)."""
    return FirstListing(lambda path: reads.get_listing(api_client, path, timeout), paths)


def early_listing(
    endpoint: Endpoint, paths: Iterable[str], timeout: reads.Timeout = EARLY_TIMEOUT
) -> FirstListing:
    """The listings through ``endpoint``, without the official client."""
    reader = EndpointReader(endpoint, timeout)
    return FirstListing(reader.listing, paths, on_drop=reader.close)


def speculated_kubeconfig(
    flag: Path | None, settings_file: Path | None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The ``client.kubeconfig`` the settings will most likely hold, read before they
    are: the flag, else the environment, else the settings file's ``client.kubeconfig``
    (``clientConnection.kubeconfig`` in a KubeSchedulerConfiguration). Only a guess:
    the caller compares it with the settings once they are loaded."""
    from scheduler.k8s.process.kube_config import is_kube_scheduler_configuration  # noqa: PLC0415

    environ = os.environ if environ is None else environ
    if flag is not None:
        return flag
    if environ.get(KUBECONFIG_VARIABLE):
        return Path(environ[KUBECONFIG_VARIABLE])
    if settings_file is None:
        return None
    import yaml  # noqa: PLC0415

    try:
        document = yaml.safe_load(settings_file.read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(document, dict):
        return None
    section = document.get("clientConnection" if is_kube_scheduler_configuration(document) else "client")
    named = section.get("kubeconfig") if isinstance(section, dict) else None
    return Path(named) if isinstance(named, str) and named else None


class EndpointReader:
    """GETs over ``http.client``, one connection per call, with ``endpoint``'s TLS and
    credentials."""

    def __init__(self, endpoint: Endpoint, timeout: reads.Timeout) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._context = endpoint.ssl_context() if endpoint.secure else None
        self._lock = threading.Lock()
        self._open: set[http.client.HTTPConnection] = set()
        self._closed = False

    def get(self, path: str, accept: str = "application/json") -> tuple[str, bytes]:
        """The answer's content type and body; ``ListingError`` unless 2xx."""
        connection = self._connect()
        try:
            headers = {"Accept": accept, "User-Agent": "rl-scheduler"}
            if self.endpoint.authorization:
                headers["Authorization"] = self.endpoint.authorization
            connection.request("GET", path, headers=headers)
            answer = connection.getresponse()
            body = answer.read()
            if not 200 <= answer.status <= 299:
                raise ListingError(f"GET {path}: {answer.status} {answer.reason}: {body[:200]!r}")
            return answer.getheader("Content-Type") or "", body
        finally:
            with self._lock:
                self._open.discard(connection)
            connection.close()

    def listing(self, path: str) -> Listing:
        return reads.decode_listing(*self.get(path, reads.listing_accept(path)))

    def close(self) -> None:
        """Cut every request in flight short (their threads fail at once)."""
        with self._lock:
            self._closed = True
            open_now = list(self._open)
        for connection in open_now:
            if connection.sock is not None:
                with contextlib.suppress(OSError):
                    connection.sock.shutdown(socket.SHUT_RDWR)

    def _connect(self) -> http.client.HTTPConnection:
        connect_s, read_s = self.timeout
        host, port = self.endpoint.host, self.endpoint.port
        connection: http.client.HTTPConnection
        if self._context is not None:
            connection = http.client.HTTPSConnection(host, port, timeout=connect_s, context=self._context)
        else:
            connection = http.client.HTTPConnection(host, port, timeout=connect_s)
        with self._lock:
            if self._closed:
                raise ListingError("dropped before it was sent")
            self._open.add(connection)
        connection.connect()
        assert connection.sock is not None
        connection.sock.settimeout(read_s)
        if self._closed:  # dropped while connecting
            raise ListingError("dropped before it was sent")
        return connection

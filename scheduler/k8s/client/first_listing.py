"""The first listing, asked for before the rest of the scheduler is imported.

The API server took 0.4-2.6 s to answer a 5,000-node listing (39 MB of JSON, more on a
busy server), and the scheduler (its settings, the official client, kopf, the
profiles) takes about as long to import. ``rl-scheduler run`` therefore starts the
listings first (``early_listing``): it loads the credentials with the official loader
(``credentials.load_configuration``; importing it takes 0.25-0.5 s, which the start
pays once either way) from the kubeconfig the settings will most likely name
(``speculated_kubeconfig``), and sends each listing from a thread of its own over the
threads' HTTP/1.1 client (``scheduler.k8s.client.blocking``) while the main thread
imports the rest. The loader runs before the imports, not beside them: both are
CPU-bound under one GIL, so beside them it sent the listings later (see
``early_listing``). Once the
settings are read, the early listings are kept only if the settings name the same
kubeconfig (and the Configuration loaded is the client's); otherwise they are dropped
and listed again (``start_listing``) with the settings' own.

The runtime's first ``list_and_apply`` takes each answer once
(``KubeApi.list_with_version``); a listing that failed here is asked for again there,
where failures are retried and logged. These eight requests do not wait on the
client's QPS bucket (it does not exist yet): the API server sees them at once, as it
would with any ``client.burst`` of 8 or more (kube-scheduler's default is 100).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from scheduler.k8s.client import reads

if TYPE_CHECKING:
    from kubernetes import client

    from scheduler.k8s.client.blocking import BlockingClient

Listing = reads.Listing
Fetch = Callable[[str], Listing]
# The settings' defaults (``ClientSettings``): the early listings start before the
# settings are read. A listing slower than this fails, and is asked for again later
# with the settings' own timeouts.
EARLY_TIMEOUT: reads.Timeout = (5.0, 60.0)
KUBECONFIG_VARIABLE = "RL_SCHEDULER_CLIENT__KUBECONFIG"


class ListingDroppedError(ConnectionError):
    """An early listing dropped before it was sent."""


class FirstListing:
    """Listings of ``paths`` in flight, each through ``fetch`` in a thread of its own;
    ``on_done`` runs once every one has ended (or they are dropped)."""

    def __init__(
        self,
        fetch: Fetch,
        paths: Iterable[str],
        on_drop: Callable[[], None] | None = None,
    ) -> None:
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


class ListingClient:
    """The first listing's ``BlockingClient``, made once its Configuration is loaded
    (``configuration``, a future another thread settles), and closed when every
    listing has ended or the listings are dropped."""

    def __init__(
        self, configuration: Future[client.Configuration], listings: int, timeout: reads.Timeout
    ) -> None:
        self.configuration = configuration
        self.timeout = timeout
        self._lock = threading.Lock()
        self._client: BlockingClient | None = None
        self._left = listings
        self._dropped = False

    def listing(self, path: str) -> Listing:
        try:
            return reads.get_listing(self._connected(), path, self.timeout)
        finally:
            with self._lock:
                self._left -= 1
                done = self._left == 0
            if done:
                self.close()

    def close(self) -> None:
        """Close the connections; a listing in flight ends at once (with an error)."""
        with self._lock:
            self._dropped = True
            made = self._client
        if made is not None:
            made.close()

    def _connected(self) -> BlockingClient:
        configuration = self.configuration.result()  # raises what the loader raised
        from scheduler.k8s.client.blocking import BlockingClient  # noqa: PLC0415 - after the loader

        with self._lock:
            if self._dropped:
                raise ListingDroppedError("dropped before it was sent")
            if self._client is None:
                self._client = BlockingClient(configuration, None, self._left)
            return self._client


def start_listing(
    configuration: client.Configuration | Future[client.Configuration],
    paths: Iterable[str],
    timeout: reads.Timeout,
) -> FirstListing:
    """The listings of ``paths`` with ``configuration`` (or the one it will be)."""
    wanted = list(paths)
    if not isinstance(configuration, Future):
        loaded: Future[client.Configuration] = Future()
        loaded.set_result(configuration)
        configuration = loaded
    lister = ListingClient(configuration, len(wanted), timeout)
    return FirstListing(lister.listing, wanted, on_drop=lister.close)


def early_listing(
    kubeconfig: Path | None, paths: Iterable[str], timeout: reads.Timeout = EARLY_TIMEOUT
) -> tuple[FirstListing, Future[client.Configuration]]:
    """The listings with the credentials of ``kubeconfig`` (None: in-cluster, else the
    default kubeconfig), and the Configuration loaded (or the loader's error, which
    the listings fail with too).

    The credentials are loaded here, before the caller imports the rest: loaded in a
    thread beside those imports, the listings went out later. Against a local server
    that answers at once (6 interleaved starts on 2 busy shared cores), the first
    listing request came 0.52 s after the process started (median; 0.42-0.83) loaded
    first, 0.69 s (0.54-1.35) loaded in a thread, and 0.26 s (0.18-0.53) with the
    kubeconfig reader of our own this replaced; the first watch request, once the rest
    was imported and the listings applied, at 1.49, 1.43 and 1.50 s (medians)."""
    from scheduler.k8s.client.credentials import load_configuration  # noqa: PLC0415

    loaded: Future[client.Configuration] = Future()
    try:
        loaded.set_result(load_configuration(kubeconfig))
    except Exception as error:  # the caller reports it, where it knows the settings
        loaded.set_exception(error)
    return start_listing(loaded, paths, timeout), loaded


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

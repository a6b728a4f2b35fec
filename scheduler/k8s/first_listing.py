"""The first listing, asked for as soon as the credentials are loaded.

The API server took 0.4-0.7 s to answer a 5,000-node listing (21 MB of JSON), and the
rest of the scheduler (kopf, aiohttp, the metrics, the profiles) about as long to import
and build. ``rl-scheduler run`` starts the listings here, in threads of their own,
before it imports the rest, so that both happen at once. The runtime's first
``list_and_apply`` takes each answer once (``KubeApi.list_with_version``); a listing
that failed here is asked for again there, where failures are retried and logged.
These eight requests do not wait on the client's QPS bucket (it does not exist yet):
the API server sees them at once, as it would with any ``client.burst`` of 8 or more
(kube-scheduler's default is 100).
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from kubernetes import client

from scheduler.k8s import reads

Listing = tuple[list[dict[str, Any]], str]


class FirstListing:
    """Listings of ``paths`` in flight through ``api_client`` (which ``KubeApi`` then
    uses for everything else: the same pool and connections)."""

    def __init__(self, api_client: client.ApiClient, paths: Iterable[str], timeout: reads.Timeout) -> None:
        self.api_client = api_client
        wanted = list(paths)
        executor = ThreadPoolExecutor(len(wanted), thread_name_prefix=f"{reads.WORKER_PREFIX}-first-listing")
        self._answers: dict[str, Future[Listing]] = {
            path: executor.submit(self._list, path, timeout) for path in wanted
        }
        executor.shutdown(wait=False)  # its threads end with their listing

    def _list(self, path: str, timeout: reads.Timeout) -> Listing:
        return reads.listing(reads.get_json(self.api_client, path, timeout))

    def take(self, path: str) -> Future[Listing] | None:
        """The answer for ``path``, once; None after (or for a path not asked for)."""
        return self._answers.pop(path, None)

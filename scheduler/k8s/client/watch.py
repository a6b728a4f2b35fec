"""Watches of our own: the API server's stream of JSON lines, straight to the runtime.

Pods are the high-rate kind (every scheduled pod produces three or four events), and
nodes the large one (5,000 of them in one listing). Through kopf, the per-event
machinery (a body wrapper, a worker task per object, handler matching) cost the event
loop more CPU than scheduling a pod (py-spy, 1,000 pods bound at QPS 5000), and at
start-up it replayed the whole node listing our own listing had already applied (6 s
of the event loop for 5,000 nodes, before and while the first pods were scheduled).
Here a thread per kind reads the stream over the threads' HTTP/1.1 client
(``KubeApi.stream``, by path; ``scheduler.k8s.client.blocking``), decodes the lines,
and hands the events to the event loop in batches, in order. Namespaces, few and
rarely changed, stay on kopf.

A watch starts at the resourceVersion of the runtime's listing and resumes from the
last one it saw after a dropped connection (backoff 1 s doubling to 30 s). When the
API server has compacted that version away (410 Gone), it lists again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.api import KubeApi
from scheduler.k8s.client.backoff import backoff_delays
from scheduler.k8s.client.blocking import Stream
from scheduler.k8s.client.messages import parse_json

log = logging.getLogger(__name__)

Event = tuple[str, dict[str, Any]]
# The API server ends a watch after this long; a new one resumes where it stopped.
WATCH_TIMEOUT_S = 300
# The longest line a watch may send: one event, an object of at most 1.5 MiB (etcd's
# limit) in JSON with its envelope. A longer one ends the watch (it resumes, or lists).
MAX_LINE_BYTES = 16 * 1024 * 1024


class WatchLineTooLongError(ConnectionError):
    """A watch sent a line longer than ``MAX_LINE_BYTES``."""


class ResourceVersionGoneError(Exception):
    """The watch's resourceVersion is older than the API server keeps (410)."""


@dataclass
class LineDecoder:
    """Splits a watch stream's chunks into events; keeps the last resourceVersion.

    A line is ``{"type": ..., "object": {...}}``. BOOKMARK events only move the
    version; an ERROR event with code 410 raises ``ResourceVersionGoneError``; other ERROR
    events are logged and skipped. A line that is not JSON is logged and skipped; one
    longer than ``max_line`` raises ``WatchLineTooLongError`` (the stream has no limit
    of its own).
    """

    resource_version: str
    what: str = "watch"  # for log lines
    max_line: int = MAX_LINE_BYTES
    _partial: bytes = field(default=b"", repr=False)

    def feed(self, chunk: bytes) -> list[Event]:
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        if len(self._partial) > self.max_line or any(len(line) > self.max_line for line in lines):
            raise WatchLineTooLongError(f"{self.what}: a line is longer than {self.max_line} bytes")
        events: list[Event] = []
        for line in lines:
            event = self._decode(line)
            if event is not None:
                events.append(event)
        return events

    def _decode(self, line: bytes) -> Event | None:
        if not line.strip():
            return None
        try:
            message = parse_json(line)
            kind, obj = str(message["type"]), message["object"]
        except (ValueError, KeyError, TypeError) as error:
            log.warning("%s: skipped a line that is not a watch event (%s): %.200r", self.what, error, line)
            return None
        if kind == "ERROR":
            code = obj.get("code") if isinstance(obj, dict) else None
            if code == 410:
                raise ResourceVersionGoneError(str(obj.get("message", "")))
            log.warning("%s: the API server reported an error: %.300s", self.what, obj)
            return None
        version = (obj.get("metadata") or {}).get("resourceVersion") if isinstance(obj, dict) else None
        if version:
            self.resource_version = str(version)
        if kind == "BOOKMARK":
            return None
        return kind, obj


class ResourceWatch:
    """Feeds ``deliver(type, object)`` from a watch of the collection at ``path`` (over
    all namespaces, such as ``/api/v1/nodes``); ``relist()`` lists again (applying what
    it finds) and returns the listing's resourceVersion."""

    def __init__(
        self,
        api: KubeApi,
        kind: str,
        path: str,
        deliver: Callable[[str, dict[str, Any]], None],
        relist: Callable[[], Awaitable[str]],
    ) -> None:
        self.api = api
        self.kind = kind  # "pod", "node": for log lines and the thread's name
        self.path = path
        self.deliver = deliver
        self.relist = relist
        self._stream_now: Stream | None = None

    @property
    def what(self) -> str:
        return f"{self.kind} watch"

    async def run(self, resource_version: str) -> None:
        """Watch forever from ``resource_version``; one backoff serves a dropped watch
        and a failed listing."""
        version: str | None = resource_version  # None: list first
        delays = backoff_delays()
        while True:
            decoder: LineDecoder | None = None
            try:
                if version is None:
                    version = await self.relist()
                decoder = LineDecoder(version, self.what)
                await self._watch_once(decoder)
                delays = backoff_delays()  # the server's timeout: resume at once
            except ResourceVersionGoneError as gone:
                log.info("%s: version %s is gone (%s); listing again", self.what, version, gone)
                version = None
                continue
            except asyncio.CancelledError:
                self._close()
                raise
            except Exception as error:
                what = f"{self.what} dropped" if decoder is not None else f"{self.kind} listing failed"
                # 404: a kind the API server does not serve (yet): a CRD not installed.
                absent = isinstance(error, ApiException) and error.status == 404
                level = logging.DEBUG if absent else logging.WARNING
                backoff = next(delays)
                log.log(level, "%s (%s: %s); retry in %ds", what, type(error).__name__, error, backoff)
                await asyncio.sleep(backoff)
            if decoder is not None:
                version = decoder.resource_version

    async def _watch_once(self, decoder: LineDecoder) -> None:
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[None] = loop.create_future()

        def apply(events: list[Event]) -> None:
            for event_type, obj in events:
                try:
                    self.deliver(event_type, obj)
                except Exception:  # one bad event must not end the watch
                    log.exception("%s: handling a %s event failed", self.what, event_type)

        def settle(error: BaseException | None) -> None:
            if finished.done():
                return
            if error is None:
                finished.set_result(None)
            else:
                finished.set_exception(error)

        def read() -> None:
            error: BaseException | None = None
            try:
                for chunk in self._stream(decoder.resource_version):
                    events = decoder.feed(chunk)
                    if events:
                        loop.call_soon_threadsafe(apply, events)
            except ApiException as caught:
                error = ResourceVersionGoneError(caught.reason or "") if caught.status == 410 else caught
            except BaseException as caught:  # handed to the event loop, which decides
                error = caught
            with contextlib.suppress(RuntimeError):  # the loop closed: the process is ending
                loop.call_soon_threadsafe(settle, error)

        # A daemon thread: a watch blocked in a read must not hold the process at exit.
        threading.Thread(target=read, name=f"{self.kind}-watch", daemon=True).start()
        await finished

    def _stream(self, resource_version: str) -> Iterator[bytes]:
        query = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_TIMEOUT_S),
        }
        stream = self.api.stream(self.path, query, (self.api.timeout[0], WATCH_TIMEOUT_S + 30))
        self._stream_now = stream
        try:
            yield from stream
        finally:
            self._stream_now = None

    def _close(self) -> None:
        """End the thread's read by shutting its socket down (``Stream.shutdown``): the
        read returns at once and the thread ends, however long the next event takes."""
        stream = self._stream_now
        if stream is not None:
            stream.shutdown()

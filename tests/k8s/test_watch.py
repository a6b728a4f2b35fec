"""The watch's decoding of the API server's JSON lines (the stream itself is
exercised against a real API server in tests/e2e)."""

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from kubernetes import client

from scheduler.k8s.client import reads
from scheduler.k8s.client.api import KubeApi
from scheduler.k8s.client.blocking import BlockingClient, Stream
from scheduler.k8s.client.watch import (
    LineDecoder,
    ResourceVersionGoneError,
    ResourceWatch,
    WatchLineTooLongError,
)


def line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def pod(name: str, version: str) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


@pytest.mark.parametrize(
    ("chunks", "events", "version"),
    [
        pytest.param([line("ADDED", pod("a", "5"))], [("ADDED", "a")], "5", id="one event"),
        pytest.param(
            [line("ADDED", pod("a", "5")) + line("MODIFIED", pod("a", "6"))],
            [("ADDED", "a"), ("MODIFIED", "a")],
            "6",
            id="two in one chunk",
        ),
        pytest.param(
            [(raw := line("DELETED", pod("b", "9")))[:17], raw[17:40], raw[40:]],
            [("DELETED", "b")],
            "9",
            id="one split over three chunks",
        ),
        pytest.param(
            [line("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "77"}})],
            [],
            "77",
            id="bookmark moves the version only",
        ),
        pytest.param([b"\n  \n"], [], "1", id="blank lines"),
        pytest.param(
            [b"not json\n" + line("ADDED", pod("c", "3"))], [("ADDED", "c")], "3", id="garbage skipped"
        ),
        pytest.param(
            [line("ERROR", {"code": 500, "message": "boom"}) + line("ADDED", pod("d", "4"))],
            [("ADDED", "d")],
            "4",
            id="other errors skipped",
        ),
        pytest.param([line("ADDED", pod("e", "8"))[:-1]], [], "1", id="no newline yet"),
    ],
)
def test_decoder_splits_lines_and_tracks_the_version(
    chunks: list[bytes], events: list[tuple[str, str]], version: str
) -> None:
    decoder = LineDecoder("1")
    seen = [(kind, obj["metadata"]["name"]) for chunk in chunks for kind, obj in decoder.feed(chunk)]
    assert seen == events
    assert decoder.resource_version == version


def test_gone_version_raises() -> None:
    decoder = LineDecoder("1")
    status = {"kind": "Status", "code": 410, "message": "too old resource version: 1 (20)"}
    with pytest.raises(ResourceVersionGoneError, match="too old resource version"):
        decoder.feed(line("ERROR", status))


def test_a_line_longer_than_the_limit_ends_the_watch() -> None:
    """A stream has no body limit: the decoder bounds what one line may hold, whether
    the line has ended or is still arriving."""
    decoder = LineDecoder("1", max_line=200)
    assert decoder.feed(line("ADDED", pod("a", "2"))) == [("ADDED", pod("a", "2"))]
    with pytest.raises(WatchLineTooLongError, match="longer than 200 bytes"):
        decoder.feed(b"x" * 201)
    with pytest.raises(WatchLineTooLongError):
        LineDecoder("1", max_line=200).feed(b"y" * 300 + b"\n")


class ScriptedWatch(ResourceWatch):
    """A pod watch whose API server answers each watch call from a script."""

    def __init__(self, script: list[list[bytes]], relist_version: str, relist_failures: int = 0) -> None:
        # The API is never called: the script answers each watch (``_stream``).
        super().__init__(cast(KubeApi, None), "pod", "/api/v1/pods", self.record, self.relist_now)
        self.script = script
        self.relist_version = relist_version
        self.relist_failures = relist_failures
        self.started_at: list[str] = []
        self.delivered: list[tuple[str, str]] = []
        self.relists = 0
        self.done = asyncio.Event()

    def record(self, kind: str, manifest: dict[str, Any]) -> None:
        self.delivered.append((kind, manifest["metadata"]["name"]))
        if len(self.delivered) == 2:
            self.done.set()

    async def relist_now(self) -> str:
        self.relists += 1
        if self.relists <= self.relist_failures:
            raise ConnectionError("the API server is not answering")
        return self.relist_version

    def _stream(self, resource_version: str) -> Iterator[bytes]:
        self.started_at.append(resource_version)
        if not self.script:
            threading.Event().wait(2.0)  # an idle watch
            return
        yield from self.script.pop(0)


GONE = line("ERROR", {"kind": "Status", "code": 410, "message": "too old resource version"})


def run_until_done(watch: ScriptedWatch, resource_version: str) -> None:
    """Run the watch from ``resource_version`` until its script is played, then stop it."""

    async def scenario() -> None:
        task = asyncio.create_task(watch.run(resource_version))
        await asyncio.wait_for(watch.done.wait(), timeout=10)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())


def test_watch_resumes_from_the_last_version_and_relists_when_it_is_gone() -> None:
    watch = ScriptedWatch(
        [
            [line("ADDED", pod("a", "11"))],  # then the server ends the watch
            [GONE],
            [line("MODIFIED", pod("b", "31"))],
        ],
        relist_version="30",
    )

    run_until_done(watch, "10")
    assert watch.delivered == [("ADDED", "a"), ("MODIFIED", "b")]
    assert watch.relists == 1
    assert watch.started_at[:3] == ["10", "11", "30"]


def test_a_failed_listing_is_retried_before_the_watch_resumes() -> None:
    watch = ScriptedWatch(
        [[GONE], [line("ADDED", pod("a", "31")), line("MODIFIED", pod("a", "32"))]],
        relist_version="30",
        relist_failures=1,
    )

    run_until_done(watch, "10")
    assert watch.relists == 2
    assert watch.started_at[:2] == ["10", "30"]
    assert watch.delivered == [("ADDED", "a"), ("MODIFIED", "a")]


class SilentWatchServer:
    """Answers a watch with headers and then nothing for ``silent_s`` (an idle watch)."""

    def __init__(self, silent_s: float) -> None:
        self.silent_s = silent_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requested = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        connection, _ = self.listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            self.requested.set()
            time.sleep(self.silent_s)

    def stream(self, path: str, query: dict[str, str], timeout: tuple[float, float]) -> Stream:
        """``KubeApi.stream``: the watch's request, to this server."""
        http = BlockingClient(client.Configuration(host=f"http://127.0.0.1:{self.port}"))
        return reads.watch_stream(http, path, query, timeout)


def test_stopping_an_idle_watch_does_not_wait_for_its_next_event() -> None:
    """Cancelling the watch's task (at shutdown) ends the thread's blocked read at once;
    it used to hold the event loop until the next event or the watch's timeout."""
    server = SilentWatchServer(silent_s=5.0)
    api = cast(KubeApi, SimpleNamespace(timeout=(1.0, 30.0), stream=server.stream))
    watch = ResourceWatch(api, "pod", "/api/v1/pods", lambda *_: None, no_relist)

    async def scenario() -> float:
        task = asyncio.create_task(watch.run("1"))
        assert await asyncio.to_thread(server.requested.wait, 5)
        await asyncio.sleep(0.1)  # the thread is in its read
        started = time.monotonic()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return time.monotonic() - started

    assert asyncio.run(scenario()) < 1.0


async def no_relist() -> str:
    raise AssertionError("the watch does not list again")

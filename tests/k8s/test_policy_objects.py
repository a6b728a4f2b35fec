"""The blocking callers of the API server, on the wire against a local HTTP server:
``KubePolicyObjects`` (the policy versions' custom resources, for the scheduler's mirror
and the trainer's store) and the trainer's node listing. Each call's method, path,
query, content type and body; each answer read, or refused naming the field."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.scheduling.policy_versions import KubePolicyObjects
from scheduler.online.cli import _nodes_from_api
from scheduler.online.store_crd import CHANNELS, VERSIONS, PolicyVersionError, VersionExistsError
from tests.builders import node_manifest

PREFIX = "/apis/rl-scheduler.io/v1alpha1/namespaces/rl%20ns"
Answer = tuple[int, Any]  # status, the body (JSON unless bytes)


class Recorded:
    """The answers to give in turn, and the requests seen (method, path, content type, body)."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.requests: list[tuple[str, str, str | None, Any]] = []


@pytest.fixture
def server() -> Iterator[tuple[Recorded, client.ApiClient]]:
    recorded = Recorded()

    class Handler(BaseHTTPRequestHandler):
        def answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            content_type = self.headers.get("Content-Type")
            recorded.requests.append(
                (self.command, self.path, content_type, json.loads(body) if body else None)
            )
            assert self.headers.get("Authorization") == "Bearer t"
            status, reply = recorded.answers.pop(0)
            data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = answer  # noqa: N815 - http.server's names

        def log_message(self, *_: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    configuration = client.Configuration(host=f"http://127.0.0.1:{httpd.server_port}")
    configuration.api_key = {"authorization": "Bearer t"}
    try:
        yield recorded, client.ApiClient(configuration)
    finally:
        httpd.shutdown()
        httpd.server_close()


VERSION = {"metadata": {"name": "main-v000001"}, "spec": {"version": "v000001"}}
# Each row: the call, the answers given, the request expected, and the result (an
# exception type, or the value).
CASES = [
    pytest.param(
        lambda o: o.get(VERSIONS, "main-v000001"), [(200, VERSION)],
        ("GET", f"{PREFIX}/policyversions/main-v000001", None, None), VERSION, id="get",
    ),
    pytest.param(
        lambda o: o.get(CHANNELS, "main"), [(404, {"kind": "Status", "code": 404})],
        ("GET", f"{PREFIX}/policychannels/main", None, None), None, id="get-missing-is-none",
    ),
    pytest.param(
        lambda o: o.list(VERSIONS, "rl-scheduler.io/channel=main"), [(200, {"items": [VERSION]})],
        ("GET", f"{PREFIX}/policyversions?labelSelector=rl-scheduler.io%2Fchannel%3Dmain", None, None),
        [VERSION], id="list-by-label",
    ),
    pytest.param(
        lambda o: o.list(VERSIONS, "a=b"), [(200, {"items": None})],
        ("GET", f"{PREFIX}/policyversions?labelSelector=a%3Db", None, None), [], id="list-of-none",
    ),
    pytest.param(
        lambda o: o.create(VERSIONS, VERSION), [(201, VERSION)],
        ("POST", f"{PREFIX}/policyversions", "application/json", VERSION), VERSION, id="create",
    ),
    pytest.param(
        lambda o: o.create(VERSIONS, VERSION), [(409, {"kind": "Status", "code": 409})],
        ("POST", f"{PREFIX}/policyversions", "application/json", VERSION), VersionExistsError,
        id="create-taken-is-version-exists",
    ),
    pytest.param(
        lambda o: o.merge_patch(VERSIONS, "main-v000001", {"status": {"current": True}}, "status"),
        [(200, VERSION)],
        ("PATCH", f"{PREFIX}/policyversions/main-v000001/status", "application/merge-patch+json",
         {"status": {"current": True}}),
        VERSION, id="merge-patch-status",
    ),
    pytest.param(
        lambda o: o.merge_patch(CHANNELS, "main", {"spec": {"currentVersion": "v2"}}), [(404, {})],
        ("PATCH", f"{PREFIX}/policychannels/main", "application/merge-patch+json",
         {"spec": {"currentVersion": "v2"}}),
        None, id="merge-patch-missing-is-none",
    ),
    pytest.param(
        lambda o: o.get(VERSIONS, "x"), [(500, {"message": "etcd"})],
        ("GET", f"{PREFIX}/policyversions/x", None, None), ApiException, id="a-server-error-raises",
    ),
    pytest.param(
        lambda o: o.get(VERSIONS, "x"), [(200, ["not", "an", "object"])],
        ("GET", f"{PREFIX}/policyversions/x", None, None), PolicyVersionError, id="an-answer-not-an-object",
    ),
    pytest.param(
        lambda o: o.list(VERSIONS, "a=b"), [(200, {"items": {"a": 1}})],
        ("GET", f"{PREFIX}/policyversions?labelSelector=a%3Db", None, None), PolicyVersionError,
        id="items-not-a-list",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("call", "answers", "request_seen", "expected"), CASES)
def test_policy_objects_on_the_wire(
    server: tuple[Recorded, client.ApiClient],
    call: Any,
    answers: list[Answer],
    request_seen: Any,
    expected: Any,
) -> None:
    recorded, api_client = server
    recorded.answers = list(answers)
    objects = KubePolicyObjects(api_client, "rl ns")
    try:
        if isinstance(expected, type) and issubclass(expected, Exception):
            with pytest.raises(expected):
                call(objects)
        else:
            assert call(objects) == expected
    finally:
        objects.close()
    assert recorded.requests == [request_seen]


def test_the_trainers_twin_lists_nodes_and_skips_a_bad_one(
    server: tuple[Recorded, client.ApiClient], caplog: pytest.LogCaptureFixture
) -> None:
    recorded, api_client = server
    recorded.answers = [(200, {"items": [node_manifest("n1"), "not-a-node", node_manifest("n2")]})]
    nodes = _nodes_from_api(api_client)()
    assert [node.name for node in nodes] == ["n1", "n2"]
    assert recorded.requests == [("GET", "/api/v1/nodes", None, None)]
    assert "twin skips a node: a node of the listing: items[]: not an object" in caplog.text

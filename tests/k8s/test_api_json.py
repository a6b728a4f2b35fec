"""``KubeApi.request_json``: a call whose answer the caller needs (the Lease, volume and
claim patches) as plain JSON over the transport, against a local HTTP server: what is
sent, what comes back, and an answer that is not 2xx raised as ``ApiException`` with
its status, reason and body, as every write raises it. The Lease has a transport of
its own."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.client.api import MERGE_PATCH, KubeApi
from scheduler.k8s.process.settings import ClientSettings


class Recorder:
    """Answers each request with the next of ``answers`` (status, reason, body) and
    keeps the requests as (request line, headers, body)."""

    def __init__(self, answers: list[tuple[int, str, bytes]]) -> None:
        self.answers = answers
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.connections = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
                line, *fields = head.split("\r\n")[:-2]
                headers = {k.strip().lower(): v.strip() for k, v in (f.split(":", 1) for f in fields)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests.append((line, headers, body))
                status, reason, answer = self.answers.pop(0)
                writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(answer)}\r\n\r\n".encode())
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


async def exchange(
    answers: list[tuple[int, str, bytes]],
    method: str,
    path: str,
    body: Mapping[str, Any] | None,
    **options: Any,
) -> tuple[Any, Recorder]:
    recorder = Recorder(answers)
    server = await asyncio.start_server(recorder.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    configuration = client.Configuration(
        host=f"http://127.0.0.1:{port}", api_key={"authorization": "Bearer t"}
    )
    api = KubeApi(ClientSettings(), "json-test", "tester", configuration=configuration)
    try:
        if options.pop("lease", False):
            options["transport"] = api.lease_transport
        result: Any = await api.request_json(method, path, body, **options)
    except ApiException as error:
        result = error
    finally:
        await api.close()
        server.close()
    return result, recorder


LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/rl"
CASES = [
    pytest.param(
        "GET", LEASE, None, {}, (200, "OK", b'{"spec": {"holderIdentity": "a"}}'),
        {"spec": {"holderIdentity": "a"}}, None, id="a-read-is-parsed",
    ),
    pytest.param(
        "PUT", LEASE, {"spec": {"holderIdentity": "me"}}, {"lease": True}, (200, "OK", b'{"kind": "Lease"}'),
        {"kind": "Lease"}, "application/json", id="a-replace-over-the-leases-transport",
    ),
    pytest.param(
        "PATCH", "/api/v1/persistentvolumes/pv%2F1", {"spec": {}}, {"content_type": MERGE_PATCH},
        (200, "OK", b'{"metadata": {"resourceVersion": "7"}}'),
        {"metadata": {"resourceVersion": "7"}}, MERGE_PATCH, id="a-merge-patch",
    ),
    pytest.param(
        "DELETE", "/api/v1/namespaces/a/pods/p", None, {}, (200, "OK", b""), None, None, id="an-empty-answer",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body", "options", "answer", "expected", "content_type"), CASES)
def test_a_call_sends_json_and_parses_the_answer(
    method: str,
    path: str,
    body: dict[str, Any] | None,
    options: dict[str, Any],
    answer: tuple[int, str, bytes],
    expected: Any,
    content_type: str | None,
) -> None:
    result, recorder = asyncio.run(exchange([answer], method, path, body, **options))
    assert result == expected
    [(line, headers, sent)] = recorder.requests
    assert line == f"{method} {path} HTTP/1.1"
    assert headers["authorization"] == "Bearer t"
    assert headers["accept"] == "application/json"
    assert headers.get("content-type") == content_type  # only with a body
    assert (json.loads(sent) if sent else None) == body


@pytest.mark.parametrize(
    ("status", "reason"),
    [(404, "Not Found"), (409, "Conflict"), (422, "Unprocessable Entity"), (500, "Internal Server Error")],
)
def test_an_answer_that_is_not_2xx_raises_with_status_reason_and_body(status: int, reason: str) -> None:
    text = json.dumps({"kind": "Status", "code": status, "message": 'leases "rl" says no'})
    error, _ = asyncio.run(exchange([(status, reason, text.encode())], "GET", LEASE, None))
    assert isinstance(error, ApiException)
    assert (error.status, error.reason, error.body) == (status, reason, text)


def test_a_call_past_its_timeout_fails_and_its_connection_is_not_reused() -> None:
    async def scenario() -> tuple[type[BaseException], Any]:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            await asyncio.sleep(5)

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        api = KubeApi(
            ClientSettings(), "t", "t", configuration=client.Configuration(host=f"http://127.0.0.1:{port}")
        )
        try:
            with pytest.raises(TimeoutError) as raised:
                await api.request_json("GET", LEASE, timeout_s=0.2, transport=api.lease_transport)
            return raised.type, api.lease_transport.pool.open
        finally:
            await api.close()
            server.close()

    raised, still_open = asyncio.run(scenario())
    assert raised is TimeoutError
    assert still_open == 0


NO_GENERATED_CLASSES = """
import asyncio, json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kubernetes import client

from scheduler.k8s.client.api import KubeApi
from scheduler.k8s.process.leader import LeaderElector
from scheduler.k8s.process.settings import ClientSettings, LeaderElectionSettings
from scheduler.k8s.scheduling.policy_versions import KubePolicyObjects
from scheduler.k8s.serving.delegated_auth import TOKEN_REVIEWS, delegated_auth, token_review
from scheduler.online.cli import _nodes_from_api


class Server(BaseHTTPRequestHandler):
    def answer(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        missing = self.command == "GET" and "/leases/" in self.path
        body = json.dumps({"items": [], "status": {}, "metadata": {"name": "x"}}).encode()
        self.send_response(404 if missing else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = answer

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Server)
threading.Thread(target=server.serve_forever, daemon=True).start()
configuration = client.Configuration(host=f"http://127.0.0.1:{server.server_port}")
api = KubeApi(ClientSettings(), "t", "me", configuration=configuration)


async def lease():
    try:
        return await LeaderElector(api, "rl", LeaderElectionSettings(), "me").try_acquire_or_renew()
    finally:
        await api.close()


assert asyncio.run(lease())
assert KubePolicyObjects(api.api_client, "ns").get("policyversions", "x") is not None
assert _nodes_from_api(api.api_client)() == []
auth = delegated_auth(api.api_client, (5.0, 5.0))
assert auth.review(TOKEN_REVIEWS, token_review("t")) == {}
auth.close()
generated = ("kubernetes.client.api.", "kubernetes.client.models.")
print(json.dumps(sorted(m for m in sys.modules if m.startswith(generated))))
"""


def test_the_api_server_is_reached_without_the_generated_classes() -> None:
    """The Lease, the policy objects, the trainer's node listing and a TokenReview, in a
    fresh interpreter: no generated API class or model is imported on the way."""
    done = subprocess.run(
        [sys.executable, "-c", NO_GENERATED_CLASSES], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []

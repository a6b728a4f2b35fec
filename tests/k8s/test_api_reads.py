"""Listings and reads go by path over the threads' HTTP/1.1 client, with the official
loader's credentials but not the official client's generated API classes, whose
import took 0.85 s of every start. Against a local HTTP server: what is asked, what
comes back, and which modules the process has imported by then (in a fresh
interpreter: other tests import them); and the first listings of ``rl-scheduler
run``, started before the rest is imported, with a Configuration loaded already or
with one its own thread loads."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Prepended to each script: a kubeconfig for a local server on ``port``, token "secret".
WRITE_KUBECONFIG = textwrap.dedent(
    """
    def write_kubeconfig(path, port):
        with open(path, "w") as out:
            out.write(
                "apiVersion: v1\\nkind: Config\\ncurrent-context: c\\n"
                f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\\n"
                "users: [{name: u, user: {token: secret}}]\\n"
                "contexts: [{name: c, context: {cluster: c, user: u}}]\\n"
            )
        return path
    """
)


def run_script(script: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh interpreter, its kubeconfig path (then ``args``) as its
    arguments."""
    return subprocess.run(
        [sys.executable, "-c", WRITE_KUBECONFIG + script, str(tmp_path / "kubeconfig.yaml"), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,  # the early listing's read timeout is 120 s
    )


SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys, threading
    from pathlib import Path
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from kubernetes.client.exceptions import ApiException

    from scheduler.k8s.client.api import KubeApi
    from scheduler.k8s.process.settings import ClientSettings

    asked = []

    class Server(BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append((self.path, self.headers.get("Authorization")))
            if self.path.startswith("/api/v1/nodes"):
                listing = {"metadata": {"resourceVersion": "42"}, "items": [{"metadata": {"name": "a"}}]}
                body = json.dumps(listing)
                self.send_response(200)
            else:
                body = json.dumps({"kind": "Status", "code": 404, "reason": "NotFound"})
                self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = write_kubeconfig(sys.argv[1], server.server_port)
    api = KubeApi(ClientSettings(kubeconfig=config), "reads-test", "tester")

    async def main():
        listed = await api.list_with_version("/api/v1/nodes")
        try:
            await api.get_json("/api/v1/namespaces/x/pods/gone")
            missing = None
        except ApiException as error:
            missing = error.status
        exists = await api.pod_exists("x", "gone")
        await api.close()
        return listed, missing, exists

    listed, missing, exists = asyncio.run(main())
    asked_before = list(asked)
    generated = "kubernetes.client.api.core_v1_api" in sys.modules

    # Listings started early, with a Configuration loaded already and with one the
    # listing's own thread loads: each answer is taken once; a failed one is asked again.
    from scheduler.k8s.client.credentials import load_client_config
    from scheduler.k8s.client.first_listing import early_listing, start_listing

    settings = ClientSettings(kubeconfig=config)
    paths = ["/api/v1/nodes", "/api/v1/gone"]
    starts = {
        "loaded": lambda: start_listing(load_client_config(settings), paths, (5, 5)),
        "early": lambda: early_listing(Path(config), paths, (5, 5))[0],
    }

    async def early_then_later(later):
        first = await later.list_with_version("/api/v1/nodes")
        again = await later.list_with_version("/api/v1/nodes")
        try:
            await later.list_with_version("/api/v1/gone")
            gone = None
        except ApiException as error:
            gone = error.status
        await later.close()
        return first == again, gone

    early = {}
    for name, start in starts.items():
        asked.clear()
        later = KubeApi(settings, "reads-test", "tester", start())
        same, gone = asyncio.run(early_then_later(later))
        early[name] = {"same": same, "gone": gone, "asked": sorted(asked)}
    print(json.dumps({
        "listed": listed, "missing": missing, "exists": exists, "asked": asked_before,
        "generated": generated,
        "early": early,
    }))
    """
)


def test_listings_and_reads_go_by_path_without_the_generated_classes(tmp_path: Path) -> None:
    result = run_script(SCRIPT, tmp_path)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["listed"] == [[{"metadata": {"name": "a"}}], "42"]
    assert (seen["missing"], seen["exists"]) == (404, False)
    assert seen["asked"] == [
        ["/api/v1/nodes", "Bearer secret"],
        ["/api/v1/namespaces/x/pods/gone", "Bearer secret"],
        ["/api/v1/namespaces/x/pods/gone", "Bearer secret"],
    ]
    assert seen["generated"] is False
    # Nodes: once early, once more for the second listing; the failed one: early, then
    # again. Both ways send the kubeconfig's token.
    asked = [[path, "Bearer secret"] for path in ("/api/v1/gone",) * 2 + ("/api/v1/nodes",) * 2]
    assert seen["early"] == {
        "loaded": {"same": True, "gone": 404, "asked": asked},
        "early": {"same": True, "gone": 404, "asked": asked},
    }


SILENT_SERVER_EXIT = textwrap.dedent(
    """
    import logging, socket, sys, threading, time
    from pathlib import Path

    from scheduler.k8s.client import paths
    from scheduler.k8s.client.credentials import load_client_config
    from scheduler.k8s.client.first_listing import early_listing, start_listing
    from scheduler.k8s.process.operator import exit_past_blocked_calls
    from scheduler.k8s.process.settings import ClientSettings

    logging.basicConfig(level="INFO", stream=sys.stdout)
    listener = socket.create_server(("127.0.0.1", 0))
    held = []

    def accept_and_say_nothing():
        while True:
            connection, _ = listener.accept()
            held.append(connection)

    threading.Thread(target=accept_and_say_nothing, daemon=True).start()
    config = write_kubeconfig(sys.argv[1], listener.getsockname()[1])
    configuration = load_client_config(ClientSettings(kubeconfig=config))
    if sys.argv[2] == "loaded":
        start_listing(configuration, [paths.NODES], (5.0, 120.0))
    else:
        early_listing(Path(config), [paths.NODES], (5.0, 120.0))
    time.sleep(0.5)  # the listing is sent and waits for an answer that never comes
    exit_past_blocked_calls(0)
    print("returned: nothing was blocked")
    """
)


@pytest.mark.parametrize("way", ["loaded", "early"])
def test_a_stop_does_not_wait_for_an_early_listing_the_server_never_answers(tmp_path: Path, way: str) -> None:
    """The early listing's threads are API workers: stopping during a start against a
    server that accepts and never answers leaves at once, not after the read timeout."""
    result = run_script(SILENT_SERVER_EXIT, tmp_path, way)
    assert result.returncode == 0, result.stderr
    assert "exiting without waiting for kube-api-first-listing_0" in result.stdout

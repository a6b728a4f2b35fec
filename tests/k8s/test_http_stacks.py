"""One HTTP stack reaches the API server: the scheduler's own HTTP/1.1 client
(``scheduler.k8s.client.http1``, driven by ``transport`` on the event loop and by
``blocking`` in threads). In a fresh interpreter that imports what ``rl-scheduler run``
imports, the HTTP client libraries loaded are only those the official credential
loader brings with it (``kubernetes.config`` imports ``kubernetes.client``, whose REST
layer is urllib3, and requests for its OIDC refresh; ``http.client`` under both) and
kopf's aiohttp, plus h11, which parses the requests the metrics port serves
(``scheduler.k8s.serving.http``: the server side, never a client); and no module of the
scheduler's API layer imports one itself. That none of them carries a request to the
API server is tested against one (tests/e2e/test_http_stacks.py)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

LIBRARIES = [
    "http.client",
    "urllib3",
    "aiohttp",
    "requests",
    "httpx",
    "h11",
    "httpcore",
    "kubernetes_asyncio",
]
# Loaded with the official loader (kubernetes.config) and kopf, never called by us.
LOADED_BY_OTHERS = {"http.client", "urllib3", "requests", "aiohttp"}
# The metrics port's server side: h11 reads the requests it is sent.
SERVING = {"scheduler/k8s/serving/http.py": {"h11"}}
SCRIPT = f"""
import json, sys
import scheduler.cli, scheduler.k8s.process.cli
import scheduler.k8s.process.operator, scheduler.k8s.process.kopf_lifecycle
from scheduler.k8s.client import blocking, first_listing, transport, watch
import kubernetes.config
print(json.dumps([name for name in {LIBRARIES!r} if name in sys.modules]))
"""
ROOT = Path(__file__).resolve().parents[2]


def test_the_run_path_loads_no_http_library_of_its_own() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=False, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout))
    allowed = LOADED_BY_OTHERS.union(*SERVING.values())
    assert loaded <= allowed, loaded - allowed


def imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules


def test_no_module_of_the_api_layer_imports_an_http_library() -> None:
    """The scheduler's own modules (client, process, scheduling, serving): none names
    an HTTP client library (``kubernetes.client.rest``'s proxy rule is the official
    client's, read by ``route``), but the metrics port's server (``SERVING``)."""
    offenders = {}
    for path in sorted((ROOT / "scheduler" / "k8s").rglob("*.py")):
        named = {
            module
            for module in imported_modules(path)
            if any(module == library or module.startswith(library + ".") for library in LIBRARIES)
        }
        named -= SERVING.get(str(path.relative_to(ROOT)), set())
        if named:
            offenders[str(path.relative_to(ROOT))] = sorted(named)
    assert offenders == {}

"""Kubernetes' DRA test driver as a kubelet plugin on the real node.

``dra-test-driver`` (``k8s.io/kubernetes/test/e2e/dra/test-driver``, built by
``hack/build-binaries.sh dra``) is the driver Kubernetes' own end-to-end tests run. As a
kubelet plugin it publishes one ResourceSlice for the node (``device-00`` ...), registers
with the kubelet through the node's plugin registry, and on NodePrepareResources writes
a CDI spec per claim and request into the node's CDI folder. The spec sets
``claim_<claim>_<request>=true`` (non-alphanumerics as ``_``) and one variable per
opaque config parameter (``user_<key>`` from the claim, ``admin_<key>`` from the
DeviceClass) in each container that uses the claim; containerd applies it (CDI). On
NodeUnprepareResources it removes the spec.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from devcluster.binaries import ensure_binaries
from devcluster.realnode import node
from devcluster.realnode.config import NodeLayout

COMPONENT = "dra-test-driver"
DRIVER_NAME = "test-driver.cdi.k8s.io"
# The CDI kind of the driver's specs: ``<driver>/test``, each device ``claim-<uid>-<request>``.
CDI_KIND = f"{DRIVER_NAME}/test"
DEVICES = 4
_START_TIMEOUT_S = 30
# A unix socket's path is at most 107 bytes (sun_path is 108 with its NUL).
_MAX_SOCKET_PATH = 107


def claim_env_var(claim: str, request: str) -> str:
    """The variable the driver sets for a prepared claim's request (its cdi.go)."""
    return re.sub(r"[^a-zA-Z0-9]", "_", f"claim_{claim}_{request}")


def registration_socket(layout: NodeLayout) -> Path:
    """The socket the kubelet's plugin watcher finds (kubeletplugin's default name)."""
    return layout.plugins_registry / f"{DRIVER_NAME}-reg.sock"


def plugin_data_dir(layout: NodeLayout) -> Path:
    """Where the driver keeps its service socket (``<dir>/<driver>/dra.sock``): under the
    node's run folder, whose paths are short; the kubelet learns it at registration."""
    return layout.run / "plugins"


def check_socket_paths(layout: NodeLayout) -> None:
    """The registration socket lives in the kubelet's --root-dir, under the cache folder:
    a long cache path makes it too long for a unix socket, which bind() would refuse."""
    for socket in (registration_socket(layout), plugin_data_dir(layout) / DRIVER_NAME / "dra.sock"):
        if len(str(socket).encode()) > _MAX_SOCKET_PATH:
            raise node.RealNodeError(
                f"{COMPONENT}: socket path {socket} is {len(str(socket).encode())} bytes, over the "
                f"{_MAX_SOCKET_PATH} a unix socket allows; set RL_DEVCLUSTER_CACHE to a shorter folder"
            )


def cdi_specs(layout: NodeLayout) -> list[Path]:
    """The driver's CDI specs on the node now: one per prepared claim and request."""
    return sorted(layout.cdi_specs.glob(f"{DRIVER_NAME}-*.json"))


def start_driver(
    layout: NodeLayout,
    kubeconfig: Path,
    *,
    devices: int = DEVICES,
    out: TextIO | None = None,
) -> int:
    """Start the driver for ``layout``'s node (building it first if missing) and wait
    for its registration socket; returns its pid. ``node.down`` stops it too."""
    if COMPONENT in node.running(layout):
        raise node.RealNodeError(f"{COMPONENT} already runs on {layout.node_name}")
    check_socket_paths(layout)
    binaries = ensure_binaries(("dra",), out=out)
    # The driver makes the parent of its own folder only; kubeletplugin binds in it.
    for folder in (layout.cdi_specs, layout.plugins_registry, plugin_data_dir(layout) / DRIVER_NAME):
        folder.mkdir(parents=True, exist_ok=True)
    # The driver prefers $KUBECONFIG over its flag: give it this cluster's in both.
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    pid = node.start(
        layout,
        COMPONENT,
        [
            str(binaries.dra_test_driver),
            f"--kubeconfig={kubeconfig}",
            f"--drivername={DRIVER_NAME}",
            # CDI specs written and removed (3); each gRPC request from the kubelet (6)
            "-v=3",
            "--vmodule=nonblockinggrpcserver=6",
            "kubelet-plugin",
            f"--node-name={layout.node_name}",
            f"--num-devices={devices}",
            f"--cdi-dir={layout.cdi_specs}",
            f"--plugin-registration-path={layout.plugins_registry}",
            f"--datadir={plugin_data_dir(layout)}",
        ],
        env=env,
    )
    socket = registration_socket(layout)
    ready: Callable[[], bool] = socket.is_socket
    node.wait(layout, COMPONENT, ready, _START_TIMEOUT_S, f"its registration socket {socket}")
    return pid


def stop_driver(layout: NodeLayout) -> None:
    """Stop the driver (SIGTERM: it removes its sockets and withdraws its slice)."""
    node.stop(layout, (COMPONENT,))


def driver_log(layout: NodeLayout) -> str:
    path = layout.logs / f"{COMPONENT}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def wait_for_log(layout: NodeLayout, pattern: str, timeout_s: float) -> re.Match[str]:
    """The first match of ``pattern`` in the driver's log, waiting for it to appear."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = re.search(pattern, driver_log(layout))
        if found:
            return found
        if time.monotonic() > deadline:
            raise node.RealNodeError(f"{COMPONENT}: {pattern!r} not in its log after {timeout_s:.0f} s")
        time.sleep(0.5)

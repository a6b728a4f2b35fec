"""Helpers for tests against the dev cluster (used by tests/conftest.py)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from devcluster import kube, processes
from devcluster.cluster import ClusterInfo


@dataclass(frozen=True)
class DevCluster:
    """What the `dev_cluster` fixture yields: a running cluster and clients for it."""

    info: ClusterInfo

    @property
    def kubeconfig(self) -> Path:
        return self.info.kubeconfig

    def api_client(self) -> client.ApiClient:
        """A new ApiClient; close it (or use `with`) when done."""
        return kube.api_client(self.kubeconfig)

    def core_v1(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api_client())


@dataclass(frozen=True)
class Listener:
    pid: int
    address: str
    port: int


def _hex_to_ipv4(hex_addr: str) -> str:
    # /proc/net/tcp writes the address as a little-endian 32-bit hex number.
    return ".".join(str(int(hex_addr[i : i + 2], 16)) for i in (6, 4, 2, 0))


def _hex_to_ipv6(hex_addr: str) -> str:
    words = [hex_addr[i : i + 8] for i in range(0, 32, 8)]
    # Each 32-bit word is little-endian; rebuild the 16 bytes in network order.
    raw = b"".join(bytes.fromhex(w)[::-1] for w in words)
    return ":".join(raw[i : i + 2].hex() for i in range(0, 16, 2))


def listening_sockets(pids: list[int]) -> list[Listener]:
    """TCP sockets in LISTEN state owned by pids (what `ss -ltnp` shows, from /proc)."""
    owner: dict[str, int] = {}
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        try:
            links = [os.readlink(fd) for fd in fd_dir.iterdir()]
        except OSError:
            continue
        for link in links:
            match = re.fullmatch(r"socket:\[(\d+)\]", link)
            if match:
                owner[match.group(1)] = pid
    listeners = []
    for table, decode in (("tcp", _hex_to_ipv4), ("tcp6", _hex_to_ipv6)):
        path = Path(f"/proc/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in owner:  # 0A: TCP_LISTEN
                address, port = local.split(":")
                listeners.append(Listener(owner[inode], decode(address), int(port, 16)))
    return listeners


def cluster_pids(workdir: Path) -> list[int]:
    """Pids of the cluster's running components, from kwokctl's pid files."""
    return processes.running_pids(workdir)

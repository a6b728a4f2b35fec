"""Where a real node keeps its files, and the configuration of each component.

Addresses: the node's pods live on a bridge of their own (``rlnode0``, 10.244.0.0/24);
the bridge's address, 10.244.0.1, is the node's InternalIP and where the control plane
of a real-node cluster listens, so pods reach the API server through the ``kubernetes``
Service (10.96.0.1, which kube-proxy forwards there) as they would in any cluster, and
nothing listens on the machine's own network.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devcluster.binaries import cache_dir, read_versions

BRIDGE: str = "rlnode0"
POD_SUBNET: str = "10.244.0.0/24"
GATEWAY: str = "10.244.0.1"
SERVICE_SUBNET: str = "10.96.0.0/16"
# The first address of the Service range: the `kubernetes` Service, in the API server's
# certificate so pods can verify it.
KUBERNETES_SERVICE_IP: str = "10.96.0.1"
CNI_NETWORK: str = "rl-devcluster"
CNI_PLUGINS_DIR: Path = Path("/usr/lib/cni")
# The kubelet uses this folder whatever its --root-dir: two kubelets on one machine share it.
DEVICE_PLUGINS_DIR: Path = Path("/var/lib/kubelet/device-plugins")
KUBELET_PORT: int = 10250
RUN_ROOT: Path = Path("/run/rl-devcluster")
# Names the folder of the real node running on this machine (one per machine, whatever
# checkout or cache started it).
ACTIVE_NODE: Path = RUN_ROOT / "active-node"
# The real node's labels beyond the kubelet's own: a zone, as the KWOK nodes have
# (devcluster.nodes), so workloads that spread over zones place there too.
NODE_LABELS: dict[str, str] = {"topology.kubernetes.io/zone": "zone-a"}


@dataclass(frozen=True)
class NodeLayout:
    """Every path a real node uses. ``files`` and ``run`` belong to one cluster's node;
    ``images`` (containerd's content and snapshots) outlives it, so images imported once
    are there for the next node; it is named for the containerd version that owns it, so
    a containerd never opens a store that a newer one has migrated."""

    cluster: str
    files: Path
    run: Path
    images: Path
    pause_image: str

    @classmethod
    def of(cls, cluster: str, pause_image: str, cache: Path | None = None) -> NodeLayout:
        root = cache or cache_dir()
        return cls(
            cluster=cluster,
            files=root / "realnodes" / cluster,
            run=RUN_ROOT / cluster,
            images=root / "realnode-images" / f"containerd-{read_versions()['CONTAINERD_VERSION']}",
            pause_image=pause_image,
        )

    @property
    def node_name(self) -> str:
        return f"{self.cluster}-node"

    @property
    def containerd_socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def containerd_state(self) -> Path:
        return self.run / "containerd"

    @property
    def containerd_config(self) -> Path:
        return self.files / "containerd.toml"

    @property
    def kubelet_config(self) -> Path:
        return self.files / "kubelet.yaml"

    @property
    def kubelet_root(self) -> Path:
        return self.files / "kubelet"

    @property
    def plugins_registry(self) -> Path:
        """Where the kubelet watches for plugins' registration sockets (DRA drivers):
        ``plugins_registry`` under its --root-dir."""
        return self.kubelet_root / "plugins_registry"

    @property
    def cdi_specs(self) -> Path:
        """The node's CDI spec folder: a DRA driver writes a spec per prepared claim,
        containerd reads it to edit the container (the devices, env vars, mounts)."""
        return self.run / "cdi"

    @property
    def kube_proxy_config(self) -> Path:
        return self.files / "kube-proxy.yaml"

    @property
    def cni_config_dir(self) -> Path:
        return self.files / "cni"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.files / "cni-ipam"

    @property
    def logs(self) -> Path:
        return self.files / "logs"

    @property
    def pids(self) -> Path:
        return self.files / "pids"

    @property
    def host_record(self) -> Path:
        """What the machine looked like before the node started (``host.HostRecord``)."""
        return self.files / "host-record.json"


def containerd_config(layout: NodeLayout) -> str:
    """containerd 1.7's configuration (version 2): its own root, state and socket, the
    CRI plugin with runc on cgroupfs, our CNI folder and the locally built pause image.
    ``restrict_oom_score_adj``: root without CAP_SYS_RESOURCE may not lower a score.
    CDI on, reading only the node's own spec folder: the kubelet passes a prepared DRA
    claim's CDI device IDs in the CRI request, and containerd applies their specs."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return "\n".join(
        [
            "version = 2",
            f'root = "{layout.images}"',
            f'state = "{layout.containerd_state}"',
            "[grpc]",
            f'  address = "{layout.containerd_socket}"',
            f"[{cri}]",
            f'  sandbox_image = "{layout.pause_image}"',
            "  restrict_oom_score_adj = true",
            '  stream_server_address = "127.0.0.1"',
            '  stream_server_port = "0"',
            "  enable_cdi = true",
            f'  cdi_spec_dirs = ["{layout.cdi_specs}"]',
            f"[{cri}.containerd]",
            '  snapshotter = "overlayfs"',
            '  default_runtime_name = "runc"',
            f"[{cri}.containerd.runtimes.runc]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{cri}.containerd.runtimes.runc.options]",
            "  SystemdCgroup = false",
            f"[{cri}.cni]",
            f'  bin_dir = "{CNI_PLUGINS_DIR}"',
            f'  conf_dir = "{layout.cni_config_dir}"',
            "",
        ]
    )


def cni_config(layout: NodeLayout) -> dict[str, Any]:
    """A bridge network with host-local addresses kept in the node's own folder, so
    nothing lands in /var/lib/cni/networks; masquerade for traffic leaving the subnet."""
    return {
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(layout.cni_ipam_dir),
                    "ranges": [[{"subnet": POD_SUBNET, "gateway": GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "loopback"},
        ],
    }


def kubelet_config(layout: NodeLayout) -> dict[str, Any]:
    """The kubelet's KubeletConfiguration. Settings a development machine needs: cgroup
    v1 with the cgroupfs driver, swap allowed; anonymous, always-allowed access to its
    API on the node's address only (the API server's logs and exec go through it; the
    kwokctl control plane has no kubelet client certificate); image garbage collection
    and disk eviction out of the way of a busy disk."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": GATEWAY,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "clusterDomain": "cluster.local",
        "resolvConf": "/etc/resolv.conf",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "serializeImagePulls": False,
        "maxPods": 110,
        "shutdownGracePeriod": "0s",
    }


def kube_proxy_config(kubeconfig: Path, node_name: str) -> dict[str, Any]:
    """kube-proxy in iptables mode. Conntrack settings and route_localnet stay as the
    machine has them (0 and false leave them alone), so teardown has less to undo."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "hostnameOverride": node_name,
        "clusterCIDR": POD_SUBNET,
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "bindAddress": GATEWAY,
        "healthzBindAddress": f"{GATEWAY}:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "iptables": {"localhostNodePorts": False},
    }


def as_text(document: dict[str, Any]) -> str:
    """JSON: valid YAML for the kubelet and kube-proxy, and what CNI reads."""
    return json.dumps(document, indent=2) + "\n"

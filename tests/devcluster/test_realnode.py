"""The real node's configuration and host bookkeeping, without starting anything (the
node itself runs in tests/realnode)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devcluster.binaries import read_versions
from devcluster.realnode import config, host
from devcluster.realnode.config import NodeLayout


@pytest.fixture
def layout(tmp_path: Path) -> NodeLayout:
    return NodeLayout.of("rl-x", "localhost/pause:v1", cache=tmp_path)


def test_the_layout_keeps_a_node_s_state_apart_from_the_images_it_keeps(
    layout: NodeLayout, tmp_path: Path
) -> None:
    assert layout.node_name == "rl-x-node"
    assert layout.files == tmp_path / "realnodes" / "rl-x"
    assert (
        layout.images == tmp_path / "realnode-images" / f"containerd-{read_versions()['CONTAINERD_VERSION']}"
    )
    assert layout.cdi_specs == layout.run / "cdi"
    assert layout.plugins_registry == layout.kubelet_root / "plugins_registry"
    assert layout.run == Path("/run/rl-devcluster/rl-x")
    # a unix socket path must stay under 108 bytes
    assert len(str(layout.containerd_socket)) < 108


def test_containerd_uses_the_node_s_paths_runc_on_cgroupfs_and_the_local_pause_image(
    layout: NodeLayout,
) -> None:
    text = config.containerd_config(layout)
    for line in (
        f'root = "{layout.images}"',
        f'state = "{layout.containerd_state}"',
        f'  address = "{layout.containerd_socket}"',
        '  sandbox_image = "localhost/pause:v1"',
        "  restrict_oom_score_adj = true",
        "  SystemdCgroup = false",
        f'  conf_dir = "{layout.cni_config_dir}"',
        "  enable_cdi = true",
        f'  cdi_spec_dirs = ["{layout.cdi_specs}"]',
    ):
        assert line in text.splitlines(), line


def test_cni_addresses_stay_in_the_node_s_folder_on_its_bridge(layout: NodeLayout) -> None:
    bridge, loopback = config.cni_config(layout)["plugins"]
    assert bridge["bridge"] == config.BRIDGE
    assert bridge["ipam"]["dataDir"] == str(layout.cni_ipam_dir)
    assert bridge["ipam"]["ranges"] == [[{"subnet": config.POD_SUBNET, "gateway": config.GATEWAY}]]
    assert loopback == {"type": "loopback"}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        pytest.param("address", config.GATEWAY, id="API on the node's address only"),
        pytest.param("cgroupDriver", "cgroupfs", id="cgroupfs"),
        pytest.param("failCgroupV1", False, id="cgroup v1 allowed"),
        pytest.param("failSwapOn", False, id="swap allowed"),
        pytest.param("readOnlyPort", 0, id="no read-only port"),
        pytest.param("imageGCHighThresholdPercent", 100, id="images stay"),
    ],
)
def test_kubelet_settings_a_development_machine_needs(layout: NodeLayout, key: str, value: object) -> None:
    assert config.kubelet_config(layout)[key] == value


def test_kube_proxy_leaves_the_machine_s_conntrack_and_localnet_alone(tmp_path: Path) -> None:
    proxy = config.kube_proxy_config(tmp_path / "kubeconfig", "n")
    assert proxy["mode"] == "iptables"
    assert proxy["conntrack"]["maxPerCore"] == 0
    assert proxy["iptables"]["localhostNodePorts"] is False
    assert json.loads(config.as_text(proxy)) == proxy


def test_the_host_record_of_the_first_start_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    first = host.HostRecord.load_or_take(path)
    path.write_text(json.dumps({**json.loads(path.read_text()), "sysctls": {"kernel.panic": "7"}}))
    again = host.HostRecord.load_or_take(path)
    assert again.sysctls == {"kernel.panic": "7"}
    assert again.netns == first.netns


@pytest.mark.parametrize(
    ("mountinfo", "roots", "expected"),
    [
        pytest.param(
            ["/a/kubelet", "/a/kubelet/pods/x/volumes", "/b"],
            ["/a/kubelet"],
            ["/a/kubelet/pods/x/volumes", "/a/kubelet"],
            id="deepest first, others left",
        ),
        pytest.param(
            ["/a/kubelet-other"], ["/a/kubelet"], [], id="a sibling with the same prefix is not under"
        ),
        pytest.param([r"/a/k\040b"], ["/a/k b"], ["/a/k b"], id="octal escapes"),
    ],
)
def test_mounts_under(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    mountinfo: list[str],
    roots: list[str],
    expected: list[str],
) -> None:
    lines = [f"{i} 1 0:1 / {point} rw - tmpfs tmpfs rw" for i, point in enumerate(mountinfo)]
    fake = tmp_path / "mountinfo"
    fake.write_text("\n".join(lines) + "\n")
    real_path = host.Path

    def path(*parts: str) -> Path:
        return fake if parts == ("/proc/self/mountinfo",) else real_path(*parts)

    monkeypatch.setattr(host, "Path", path)
    assert host.mounts_under([Path(r) for r in roots]) == expected


JUMP = (
    '-A POSTROUTING -s 10.244.0.5/32 -m comment --comment "name: \\"rl-devcluster\\" id: \\"ab12\\"" '
    "-j CNI-77db82f84d8fbc943d7b0c81"
)
OWN = (
    '-A CNI-77db82f84d8fbc943d7b0c81 ! -d 224.0.0.0/4 -m comment --comment "name: \\"rl-devcluster\\" '
    'id: \\"ab12\\"" -j MASQUERADE'
)
OTHER_NETWORK = (
    '-A CNI-0123456789abcdef01234567 -m comment --comment "name: \\"podman\\" id: \\"cd34\\"" -j ACCEPT'
)


EMPTY = ":CNI-af614c477003679f5a9e2e5c - [0:0]"
OTHERS_JUMP = "-A POSTROUTING -s 10.88.0.2/32 -j CNI-af614c477003679f5a9e2e5c"


@pytest.mark.parametrize(
    ("rules", "known", "jumps", "chains"),
    [
        ([JUMP, OWN], None, [JUMP], ["CNI-77db82f84d8fbc943d7b0c81"]),
        (
            [OWN],
            None,
            [],
            ["CNI-77db82f84d8fbc943d7b0c81"],
        ),  # a DEL cut short: the jump went, the chain stayed
        ([OTHER_NETWORK, ":CNI-8de055173f8ecdedb323de8a - [0:0]"], None, [], []),  # not ours to remove
        ([EMPTY], [], [], ["CNI-af614c477003679f5a9e2e5c"]),  # cut short after the flush: new and empty
        ([EMPTY], ["CNI-af614c477003679f5a9e2e5c"], [], []),  # there before the node
        ([EMPTY, OTHERS_JUMP], [], [], []),  # another network jumps to it
        ([EMPTY], None, [], []),  # a record from before chains were kept: left alone
    ],
    ids=[
        "jump-and-chain",
        "chain-only",
        "other-networks",
        "new-empty",
        "known-empty",
        "jumped-to",
        "no-record",
    ],
)
def test_the_bridge_plugin_s_leftover_chains_of_our_network_are_found(
    rules: list[str], known: list[str] | None, jumps: list[str], chains: list[str]
) -> None:
    assert host.cni_leftovers(rules, known) == (jumps, chains)

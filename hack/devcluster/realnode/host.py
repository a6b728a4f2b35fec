"""What a real node changes on the machine, and undoing it.

A kubelet rewrites kernel settings it wants (``vm.overcommit_memory``, ``kernel.panic``
and others), creates cgroups, mounts volumes and network namespaces; the CNI bridge
plugin adds a bridge, addresses and masquerade rules; kube-proxy adds iptables chains.
``HostRecord`` is what the machine looked like before the first start (kept in the
node's folder, so a ``down`` from another process restores the same values), and
``restore`` puts it back after the processes have stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from devcluster.realnode.config import BRIDGE, CNI_NETWORK, DEVICE_PLUGINS_DIR, GATEWAY, NodeLayout

# Kernel settings the kubelet (setupKernelTunables), the CNI bridge plugin (forwarding)
# or kube-proxy may write.
SYSCTLS: tuple[str, ...] = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.route_localnet",
    "net.bridge.bridge-nf-call-iptables",
    "net.netfilter.nf_conntrack_max",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The kubelet's chains (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT) and
# kube-proxy's (KUBE-SERVICES, KUBE-SVC-..., ...), which `kube-proxy --cleanup` leaves
# only partly removed.
KUBE_CHAIN_PREFIX = "KUBE-"
CNI_RESULTS_DIR = Path("/var/lib/cni/results")
NETNS_DIR = Path("/run/netns")
KUBELET_CGROUP = "kubepods"


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctl(name: str) -> str | None:
    try:
        return _sysctl_path(name).read_text().strip()
    except OSError:
        return None


@dataclass
class HostRecord:
    """The machine before the node: kernel settings, network namespaces, and whether
    the folders and cgroups the kubelet shares with other kubelets existed."""

    sysctls: dict[str, str] = field(default_factory=dict)
    netns: list[str] = field(default_factory=list)
    device_plugins_dir_existed: bool = False
    kubelet_cgroups_existed: bool = False
    kube_chains_existed: bool = False
    # The nat table's CNI- chains (None in a record from before it was kept).
    cni_chains: list[str] | None = None

    @classmethod
    def snapshot(cls) -> HostRecord:
        values = {name: value for name in SYSCTLS if (value := read_sysctl(name)) is not None}
        return cls(
            sysctls=values,
            netns=sorted(p.name for p in NETNS_DIR.iterdir()) if NETNS_DIR.is_dir() else [],
            device_plugins_dir_existed=DEVICE_PLUGINS_DIR.exists(),
            kubelet_cgroups_existed=any(CGROUP_ROOT.glob(f"*/{KUBELET_CGROUP}")),
            kube_chains_existed=any(f":{KUBE_CHAIN_PREFIX}" in _saved(c, t) for c, t in _iptables_tables()),
            cni_chains=cni_chains(_saved("iptables", "nat").splitlines()),
        )

    @classmethod
    def load_or_take(cls, path: Path) -> HostRecord:
        """The record of the first start: a restart of the node keeps the original."""
        if path.is_file():
            return cls(**json.loads(path.read_text()))
        record = cls.snapshot()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(record), indent=2) + "\n")
        return record


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=False)


def bridge_exists() -> bool:
    return Path("/sys/class/net", BRIDGE).exists()


def create_bridge() -> None:
    """The pods' bridge with the node's address, made before the control plane starts
    so the API server can listen on it (the CNI plugin adopts it as it is)."""
    if not bridge_exists():
        _check(_run("ip", "link", "add", BRIDGE, "type", "bridge"), f"creating bridge {BRIDGE}")
    addresses = _run("ip", "-4", "-o", "addr", "show", "dev", BRIDGE).stdout
    if f" {GATEWAY}/" not in addresses:
        _check(_run("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE), f"addressing bridge {BRIDGE}")
    _check(_run("ip", "link", "set", BRIDGE, "up"), f"bringing bridge {BRIDGE} up")


def _check(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        raise OSError(f"{what} failed: {result.stderr.strip() or result.stdout.strip()}")


def _unescape(path: str) -> str:
    # /proc/self/mountinfo writes space, tab, newline and backslash as octal escapes.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def mounts_under(roots: Iterable[Path]) -> list[str]:
    """Mount points at or below ``roots``, deepest first."""
    prefixes = [str(root).rstrip("/") for root in roots]
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = _unescape(line.split()[4])
        if any(point == p or point.startswith(p + "/") for p in prefixes):
            found.append(point)
    return sorted(set(found), key=lambda p: p.count("/"), reverse=True)


def unmount_under(roots: Iterable[Path]) -> list[str]:
    """Unmount what a kubelet and containerd leave mounted (volumes, tokens, rootfs,
    shm); lazily when a mount is still busy. Returns what could not be unmounted."""
    stuck = []
    for point in mounts_under(roots):
        if _run("umount", point).returncode != 0 and _run("umount", "-l", point).returncode != 0:
            stuck.append(point)
    return stuck


def cni_leftovers(
    nat_rules: list[str], known: list[str] | None = None, network: str = CNI_NETWORK
) -> tuple[list[str], list[str]]:
    """From ``iptables-save -t nat``: the POSTROUTING jumps to the bridge plugin's
    per-pod chains of ``network``, and those chains. A chain is found by its jump or
    by its own rules (both carry a comment naming the network): a DEL cut short by
    the node's stop removes the jump and leaves the chain. A DEL cut short after the
    flush leaves it empty, with nothing naming the network: with ``known`` (the
    ``CNI-`` chains before the node started), a chain that is new and that no other
    rule jumps to is ours too."""
    marker = f'name: \\"{network}\\"'
    jumps, chains = [], set()
    for rule in nat_rules:
        if marker not in rule:
            continue
        if rule.startswith("-A POSTROUTING"):
            jump = re.search(r"-j (CNI-[0-9a-f]+)", rule)
            if jump:
                jumps.append(rule)
                chains.add(jump.group(1))
        else:
            own = re.match(r"-A (CNI-[0-9a-f]+) ", rule)
            if own:
                chains.add(own.group(1))
    if known is not None:
        jumped_to = {
            target.group(1)
            for rule in nat_rules
            if rule not in jumps and (target := re.search(r"-j (CNI-[0-9a-f]+)", rule))
        }
        chains.update(c for c in cni_chains(nat_rules) if c not in known and c not in jumped_to)
    return jumps, sorted(chains)


def cni_chains(nat_rules: list[str]) -> list[str]:
    """The ``CNI-`` chains ``iptables-save -t nat`` declares."""
    return [line[1:].split()[0] for line in nat_rules if line.startswith(":CNI-")]


def remove_cni_masquerade(known: list[str] | None) -> None:
    """The bridge plugin's per-pod masquerade chains (``CNI-...``), which its DEL removes;
    a pod torn down without DEL, or with a DEL cut short, leaves them."""
    jumps, chains = cni_leftovers(_saved("iptables", "nat").splitlines(), known)
    for rule in jumps:
        _run("iptables", "-t", "nat", "-D", *shlex.split(rule[len("-A ") :]))
    for chain in chains:
        _run("iptables", "-t", "nat", "-F", chain)
        _run("iptables", "-t", "nat", "-X", chain)


def _iptables_tables() -> list[tuple[str, str]]:
    return [
        (command, table) for command in ("iptables", "ip6tables") for table in ("filter", "nat", "mangle")
    ]


def _saved(command: str, table: str) -> str:
    """``<command>-save -t <table>``; empty on a machine without iptables (no chains
    either: the unit tier runs before the real-node tier installs it)."""
    if shutil.which(f"{command}-save") is None:
        return ""
    return _run(f"{command}-save", "-t", table).stdout


def remove_kube_chains() -> None:
    """Every KUBE-... chain and every rule that jumps to one, in both address families."""
    for command, table in _iptables_tables():
        lines = _saved(command, table).splitlines()
        chains = [line[1:].split()[0] for line in lines if line.startswith(f":{KUBE_CHAIN_PREFIX}")]
        for line in lines:
            if line.startswith("-A ") and f" -j {KUBE_CHAIN_PREFIX}" in line:
                chain = line.split()[1]
                if not chain.startswith(KUBE_CHAIN_PREFIX):
                    _run(command, "-t", table, "-D", *shlex.split(line[len("-A ") :]))
        for chain in chains:
            _run(command, "-t", table, "-F", chain)
        for chain in chains:
            _run(command, "-t", table, "-X", chain)


def remove_cni_results() -> None:
    """libcni's cached results of our pods (a DEL would have removed them): files named
    after our network and a container id, and the other files of those containers."""
    if not CNI_RESULTS_DIR.is_dir():
        return
    ours = [p for p in CNI_RESULTS_DIR.iterdir() if p.name.startswith(f"{CNI_NETWORK}-")]
    ids = {p.name[len(CNI_NETWORK) + 1 :].rsplit("-", 1)[0] for p in ours}
    for entry in CNI_RESULTS_DIR.iterdir():
        if entry in ours or any(f"-{container}-" in entry.name for container in ids):
            entry.unlink(missing_ok=True)


def remove_kubelet_cgroups() -> None:
    """Empty cgroups the kubelet made (``kubepods`` and below, in every hierarchy),
    innermost first. A cgroup with a process left in it stays, and is reported by the
    caller's check of the processes."""
    for hierarchy in CGROUP_ROOT.iterdir():
        top = hierarchy / KUBELET_CGROUP
        if not top.is_dir():
            continue
        for directory in sorted(top.rglob("*"), key=lambda p: str(p).count("/"), reverse=True):
            if directory.is_dir():
                with contextlib.suppress(OSError):
                    directory.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def remove_new_netns(record: HostRecord) -> None:
    """Network namespaces containerd made for pods (``cni-...``) that a torn-down
    sandbox left behind; those that existed before the node are left alone."""
    if not NETNS_DIR.is_dir():
        return
    for entry in NETNS_DIR.iterdir():
        if entry.name.startswith("cni-") and entry.name not in record.netns:
            _run("umount", str(entry))
            with contextlib.suppress(OSError):
                entry.unlink()


def restore_sysctls(record: HostRecord) -> list[str]:
    """Write back every recorded setting that changed; returns those restored."""
    restored = []
    for name, value in record.sysctls.items():
        if read_sysctl(name) != value:
            with contextlib.suppress(OSError):
                _sysctl_path(name).write_text(value)
                restored.append(f"{name}={value}")
    return restored


def restore(layout: NodeLayout) -> list[str]:
    """Undo the node's changes to the machine once its processes are gone. Returns
    a line per thing restored, for the log."""
    done: list[str] = []
    stuck = unmount_under([layout.kubelet_root, layout.containerd_state, layout.run])
    if stuck:
        done.append(f"could not unmount: {', '.join(stuck)}")
    record = HostRecord()
    if layout.host_record.is_file():
        record = HostRecord(**json.loads(layout.host_record.read_text()))
    remove_new_netns(record)
    remove_cni_masquerade(record.cni_chains)
    remove_cni_results()
    if not record.kube_chains_existed:
        remove_kube_chains()
    if bridge_exists():
        # The pods' veths go with their network namespaces, but the kernel frees those
        # in the background: delete the host ends on the bridge now.
        ports = _run("ip", "-o", "link", "show", "master", BRIDGE).stdout
        for port in re.findall(r"^\d+: ([^:@\s]+)", ports, flags=re.MULTILINE):
            _run("ip", "link", "delete", port)
        _run("ip", "link", "delete", BRIDGE)
        done.append(f"deleted bridge {BRIDGE}")
    if not record.kubelet_cgroups_existed:
        remove_kubelet_cgroups()
    socket = DEVICE_PLUGINS_DIR / "kubelet.sock"
    with contextlib.suppress(OSError):
        socket.unlink()
    if not record.device_plugins_dir_existed:
        with contextlib.suppress(OSError):
            os.removedirs(DEVICE_PLUGINS_DIR)
    restored = restore_sysctls(record)
    if restored:
        done.append(f"restored {' '.join(restored)}")
    layout.host_record.unlink(missing_ok=True)
    return done

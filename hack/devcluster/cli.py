"""`python -m devcluster COMMAND`: the dev cluster's day-to-day commands."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from kubernetes.client import CoreV1Api

from devcluster import cluster, hami, names, nodes, view, workload
from devcluster.binaries import ALL_GROUPS, Binaries, ensure_binaries, openb_file
from devcluster.clean import clean_pods
from devcluster.errors import DevClusterError, InvalidArgumentError
from devcluster.kube import core_v1, ensure_namespace, parse_quantity
from devcluster.realnode import images as realnode_images
from devcluster.realnode import node as realnode
from devcluster.usage import node_usage, totals


def _quantity(text: str, unit: Decimal, what: str) -> int:
    try:
        return int(parse_quantity(text) / unit)
    except (ValueError, InvalidOperation) as err:
        raise InvalidArgumentError(f"{what} {text!r} is not a Kubernetes quantity") from err


def _kubeconfig(args: argparse.Namespace) -> Path:
    if args.kubeconfig:
        return Path(args.kubeconfig)
    return cluster.info(args.name).kubeconfig


def _api(args: argparse.Namespace) -> CoreV1Api:
    return core_v1(_kubeconfig(args))


def cmd_build(args: argparse.Namespace) -> None:
    unknown = set(args.groups) - set(ALL_GROUPS)
    if unknown:
        raise InvalidArgumentError(f"unknown build groups {sorted(unknown)}; choose from {ALL_GROUPS}")
    ensure_binaries(tuple(args.groups) or ALL_GROUPS)


def cmd_up(args: argparse.Namespace) -> None:
    config = cluster.ClusterConfig(args.name, args.port, not args.no_kube_scheduler, real_node=args.real_node)
    info = cluster.up(config)
    print(info.kubeconfig)


IMAGE_NAMES = ("scheduler", "trainer")


def cmd_images(args: argparse.Namespace) -> None:
    """Build images with podman and, with a real node running, move them into it."""
    names = args.images or ["scheduler"]
    unknown = sorted(set(names) - set(IMAGE_NAMES))
    if unknown:
        raise InvalidArgumentError(f"unknown images {unknown}; choose from {list(IMAGE_NAMES)}")
    realnode_images.build(*names)
    if args.no_import:
        return
    layout = realnode.layout_of(args.name)
    if "containerd" not in realnode.running(layout):
        raise InvalidArgumentError(
            f"cluster {args.name!r} has no real node running (`up --real-node`); --no-import builds only"
        )
    for image in names:
        result = realnode_images.import_image(layout.containerd_socket, image)
        verb = "already in" if result.skipped else f"imported in {result.seconds:.1f} s into"
        print(f"{result.ref}: {verb} {layout.node_name}")


def cmd_hami_plugin(args: argparse.Namespace) -> None:
    """HAMi's device plugin's Allocate for the cluster's KWOK nodes (``up`` starts it),
    or for the nodes named with ``--node`` (a kind cluster's, say)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    hami.serve(_kubeconfig(args), nodes=args.node)


def cmd_down(args: argparse.Namespace) -> None:
    if not cluster.down(args.name):
        print(f"no cluster {args.name!r}", file=sys.stderr)


def cmd_status(args: argparse.Namespace) -> None:
    info = cluster.info(args.name)
    listed: list[Any] = _api(args).list_node().items
    ready = sum(nodes.is_ready(n) for n in listed)
    print(f"cluster {info.name}: running at {info.server}\nkubeconfig: {info.kubeconfig}\n"
          f"nodes: {len(listed)} ({ready} ready)")  # fmt: skip


def cmd_kubeconfig(args: argparse.Namespace) -> None:
    print(cluster.info(args.name).kubeconfig)


def cmd_kubectl(args: argparse.Namespace) -> None:
    """Run the pinned kubectl against the cluster (so no other kubeconfig is touched)."""
    kubectl = Binaries.in_cache().kubectl
    argv = [str(kubectl), "--kubeconfig", str(_kubeconfig(args)), *args.kubectl_args]
    os.execv(argv[0], argv)


def cmd_helm(args: argparse.Namespace) -> None:
    """Run the pinned helm against the cluster."""
    helm = ensure_binaries(("helm",)).helm
    argv = [str(helm), "--kubeconfig", str(_kubeconfig(args)), *args.helm_args]
    os.execv(argv[0], argv)


def cmd_nodes(args: argparse.Namespace) -> None:
    if args.delete:
        print(f"deleted {nodes.delete_generated_nodes(_api(args))} nodes")
        return
    taints = [nodes.Taint.parse(t) for t in args.taint]
    if args.kwok_taint:
        taints.append(nodes.KWOK_TAINT)
    topology = nodes.Topology(args.zones, args.racks_per_zone)
    # Validate everything before touching the cluster.
    if args.mix:
        specs = nodes.mix_node_specs(args.count, nodes.parse_mix(args.mix), topology, taints)
    else:
        specs = nodes.openb_node_specs(Path(args.openb), args.count, topology, taints)
    api = _api(args)
    start = time.monotonic()
    result = nodes.create_nodes(api, specs)
    print(f"created {len(result.created)} nodes, {len(result.existing)} existed already "
          f"({time.monotonic() - start:.1f} s)")  # fmt: skip
    if args.wait:
        nodes.wait_ready(api, [s.name for s in specs], timeout_s=args.wait)
        print(f"all {len(specs)} nodes Ready ({time.monotonic() - start:.1f} s)")


def cmd_workload(args: argparse.Namespace) -> None:
    size = workload.PodRequest(
        cpu_milli=_quantity(args.cpu, Decimal("0.001"), "--cpu"),
        memory_mib=_quantity(args.memory, Decimal(2**20), "--memory"),
        gpu_count=args.gpus,
        gpu_milli=args.gpu_milli,
        gpu_models=tuple(m for m in (args.gpu_model or "").split("|") if m),
        lifetime_s=args.lifetime,
    )
    if args.openb_trace:
        requests = workload.openb_trace_requests(
            Path(args.openb_trace), args.start, args.limit, args.speed, not args.no_lifetimes
        )
    elif args.target_cpu is not None or args.target_memory is not None:
        api = _api(args)
        requested, allocatable = totals(
            node_usage(api.list_node().items, api.list_pod_for_all_namespaces().items)
        )
        requests = workload.target_load_requests(
            requested, allocatable, size, args.target_cpu, args.target_memory
        )
    else:
        requests = workload.fixed_requests(args.count, size)
    kubeconfig = _kubeconfig(args)
    api = _api(args)
    ensure_namespace(api, args.namespace, kubeconfig)
    run_id = args.run_id or workload.new_run_id()
    print(f"run {run_id}: {len(requests)} pods for {args.scheduler} in {args.namespace}")
    result = workload.run_workload(
        api,
        requests,
        namespace=args.namespace,
        scheduler_name=args.scheduler,
        run_id=run_id,
        realtime=not args.all_at_once,
        wait_for_lifetimes=not args.no_wait,
    )
    print(f"run {run_id}: created {result.created}, deleted {result.deleted}, "
          f"failed {result.failed}")  # fmt: skip


def cmd_view(args: argparse.Namespace) -> None:
    api = _api(args)
    if args.once:
        print(view.snapshot(api, args.max_rows))
    else:
        view.watch(api, args.interval, args.max_rows)


def cmd_clean(args: argparse.Namespace) -> None:
    api = _api(args)
    n = clean_pods(api, namespace=args.namespace, run_id=args.run, expired_only=args.expired)
    print(f"deleted {n} generated pods")
    if args.nodes:
        print(f"deleted {nodes.delete_generated_nodes(api)} generated nodes")


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default=cluster.DEFAULT_NAME, help="cluster (default %(default)s)")
    p.add_argument("--kubeconfig", help="talk to this cluster instead of --name's")


def _add_nodes_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--count", type=int, default=10, help="how many (default %(default)s)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--openb", default=str(openb_file("openb_node_list_gpu_node")),
                        help="openb node list CSV (default: the GPU nodes)")  # fmt: skip
    source.add_argument("--mix", help="node types and weights, e.g. cpu-small=3,gpu-t4=1")
    p.add_argument("--zones", type=int, default=3)
    p.add_argument("--racks-per-zone", type=int, default=4)
    p.add_argument("--taint", action="append", default=[], help="key[=value]:Effect, repeatable")
    p.add_argument("--kwok-taint", action="store_true", help="add KWOK's fake-node taint")
    p.add_argument("--wait", type=float, default=0, metavar="SECONDS", help="wait until Ready")
    p.add_argument("--delete", action="store_true", help="delete the generated nodes instead")


def _add_workload_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scheduler", default=names.DEFAULT_SCHEDULER, help="spec.schedulerName")
    p.add_argument("--namespace", default=names.DEFAULT_NAMESPACE)
    p.add_argument("--count", type=int, default=10, help="fixed number of pods (default mode)")
    p.add_argument("--target-cpu", type=float, help="fill to this share of allocatable CPU")
    p.add_argument("--target-memory", type=float, help="fill to this share of allocatable memory")
    p.add_argument("--cpu", default="500m", help="CPU request per pod")
    p.add_argument("--memory", default="512Mi", help="memory request per pod")
    p.add_argument("--gpus", type=int, default=0, help="nvidia.com/gpu per pod")
    p.add_argument("--gpu-milli", type=int, default=1000, help="share of one GPU, 10-1000 in steps of 10")
    p.add_argument("--gpu-model", help="accepted GPU models (nvidia.com/use-gputype), e.g. 'V100M16|V100M32'")
    p.add_argument("--lifetime", type=float, help="seconds each pod lives (default: forever)")
    p.add_argument("--openb-trace", help="replay pods from an openb_pod_list_*.csv")
    p.add_argument("--start", type=int, default=0, help="first trace row")
    p.add_argument("--limit", type=int, default=100, help="trace rows to replay")
    p.add_argument("--speed", type=float, default=1000.0, help="trace seconds per real second")
    p.add_argument("--no-lifetimes", action="store_true", help="trace pods never leave")
    p.add_argument("--all-at-once", action="store_true", help="ignore trace arrival times")
    p.add_argument("--no-wait", action="store_true", help="exit after creating the pods")
    p.add_argument("--run-id", help="label value for this run (default: generated)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="devcluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    commands: list[tuple[str, Callable[[argparse.Namespace], None], str]] = [
        ("build", cmd_build, "build the pinned binaries that are not cached yet"),
        ("up", cmd_up, "start the cluster (building binaries first if needed)"),
        ("images", cmd_images, "build the rl-scheduler images with podman and load them into the real node"),
        ("down", cmd_down, "stop the cluster and delete its state"),
        ("status", cmd_status, "is the cluster up, where, how many nodes"),
        ("kubeconfig", cmd_kubeconfig, "print the cluster's kubeconfig path"),
        ("kubectl", cmd_kubectl, "run the pinned kubectl against the cluster"),
        ("helm", cmd_helm, "run the pinned helm against the cluster"),
        ("nodes", cmd_nodes, "create fake KWOK nodes"),
        ("workload", cmd_workload, "create generated pods"),
        ("view", cmd_view, "live requested/allocatable per node"),
        ("clean", cmd_clean, "delete generated pods (only those)"),
        (
            "hami-plugin",
            cmd_hami_plugin,
            "play HAMi's device plugin's Allocate for KWOK nodes (up starts it)",
        ),
    ]
    parsers = {}
    for name, func, help_text in commands:
        parsers[name] = p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func)
        _add_common(p)
    parsers["kubectl"].add_argument("kubectl_args", nargs=argparse.REMAINDER, help="kubectl arguments")
    parsers["helm"].add_argument("helm_args", nargs=argparse.REMAINDER, help="helm arguments")
    parsers["build"].add_argument("groups", nargs="*", help=f"of {' '.join(ALL_GROUPS)}")
    up = parsers["up"]
    up.add_argument("--port", type=int, default=0, help="API server port on 127.0.0.1 (0: any)")
    up.add_argument("--no-kube-scheduler", action="store_true", help="do not run kube-scheduler")
    up.add_argument(
        "--real-node", action="store_true", help="also start a real node (kubelet, kube-proxy, containerd)"
    )
    parsers["hami-plugin"].add_argument(
        "--node", action="append", default=[], help="serve this node (repeatable; default: the KWOK nodes)"
    )
    images = parsers["images"]
    images.add_argument("images", nargs="*", help=f"of {' '.join(IMAGE_NAMES)} (default: scheduler)")
    images.add_argument("--no-import", action="store_true", help="build only")
    _add_nodes_args(parsers["nodes"])
    _add_workload_args(parsers["workload"])
    view = parsers["view"]
    view.add_argument("--once", action="store_true", help="print once and exit")
    view.add_argument("--interval", type=float, default=2.0, help="seconds between redraws")
    view.add_argument("--max-rows", type=int, default=40, help="busiest nodes shown")
    clean = parsers["clean"]
    clean.add_argument("--namespace", help="default: all namespaces")
    clean.add_argument("--run", help="only this workload run id")
    clean.add_argument("--expired", action="store_true", help="only pods past their lifetime")
    clean.add_argument("--nodes", action="store_true", help="also delete generated nodes")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except DevClusterError as err:
        print(f"devcluster {args.command}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    return 0

"""``rl-scheduler pending``: when each pending pod of ours is likely to start.

Lists the cluster's nodes and pods once (credentials as ``rl-scheduler run`` finds
them: ``--kubeconfig``, in-cluster, ``KUBECONFIG``, ``~/.kube/config``), builds the
scheduler's state from them as its cache does, and forecasts, for every pending pod
whose schedulerName is one of the scheduler's profiles (``--config`` and
``RL_SCHEDULER_*`` as ``run`` reads them, ``--scheduler-name`` to name others), when it
is likely to start: the running scheduler's forecast (``lifetimes_starts``), with the
same lifetime model (the policy store's current ``lifetimes/``, else the shipped one),
the profile's filters and the pods ahead of it (higher priority, or the same and
created earlier).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from scheduler.cli_values import COUNT, existing_file, number
from scheduler.errors import CommandLineError, SchedulerInputError

COMMAND = "pending"


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        COMMAND,
        help="list pending pods of rl-scheduler's profiles with when each is likely to start",
        description=__doc__,
    )
    parser.add_argument("--config", type=existing_file, help="the scheduler's settings file (YAML)")
    parser.add_argument(
        "--kubeconfig", type=existing_file, help="kubeconfig; in-cluster credentials when unset"
    )
    parser.add_argument(
        "--scheduler-name",
        action="append",
        help="a schedulerName whose pending pods to list (repeatable); default: the scheduler's profiles",
    )
    parser.add_argument(
        "--policy-store", type=Path, help="the policy store whose current lifetimes/ model to use [settings]"
    )
    parser.add_argument("--namespace", "-n", help="only this namespace's pods")
    parser.add_argument("--samples", type=number(int, COUNT), default=128, help="Monte Carlo samples per pod")
    parser.add_argument("--output", "-o", choices=("table", "json"), default="table", help="output format")
    parser.set_defaults(handler=pending)


def _api(kubeconfig: Path | None) -> Any:
    """A ``BlockingClient`` with the credentials ``rl-scheduler run`` would find."""
    from kubernetes.config import ConfigException  # noqa: PLC0415

    from scheduler.k8s.client.blocking import BlockingClient  # noqa: PLC0415
    from scheduler.k8s.client.credentials import kubeconfig_problem, load_client_config  # noqa: PLC0415
    from scheduler.k8s.process.settings import ClientSettings  # noqa: PLC0415

    try:
        configuration = load_client_config(ClientSettings(kubeconfig=kubeconfig))
    except ConfigException as error:
        raise CommandLineError(COMMAND, "--kubeconfig", kubeconfig_problem(kubeconfig, error)) from None
    return BlockingClient(configuration)


def _items(http: Any, path: str, what: str) -> list[dict[str, Any]]:
    """A listing's items; one line (no traceback) when the API server does not answer
    or answers something that is not a listing."""
    try:
        answer = http.json("GET", path, timeout=(5.0, 60.0))
    except Exception as error:  # connection refused, 403, a proxy's HTML: all one line
        status = getattr(error, "status", None)
        reason = getattr(error, "reason", None) or (str(error).splitlines() or [""])[0][:200]
        detail = f"HTTP {status} {reason}" if status else f"{type(error).__name__}: {reason}"
        raise SchedulerInputError(f"listing {what}", "api", detail) from None
    items = (answer.get("items") or []) if isinstance(answer, dict) else None
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise SchedulerInputError(f"listing {what}", "items", "not a list of objects")
    return items


def _created(manifest: Mapping[str, Any]) -> float:
    text = str((manifest.get("metadata") or {}).get("creationTimestamp") or "")
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return math.inf


def _duration(seconds: float | None) -> str:
    from scheduler.k8s.scheduling.lifetimes_starts import duration_text  # noqa: PLC0415

    if seconds is None:
        return "-"
    return duration_text(seconds) if math.isfinite(seconds) else "never"


def pending_rows(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    namespaces: Sequence[Mapping[str, Any]],
    settings: Any,
    scheduler_names: Sequence[str] | None,
    policy_store: Path | None,
    samples: int,
    namespace: str | None = None,
    now: float | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """Per pending pod of ours (most urgent first): its name, schedulerName, how long it
    has waited and its p50 and p90 (None without a lifetime model); and the model used."""
    from scheduler.framework.plugin import FilterPlugin  # noqa: PLC0415
    from scheduler.k8s.scheduling.cache import PodChange, SchedulerCache  # noqa: PLC0415
    from scheduler.k8s.scheduling.lifetimes import LiveLifetimes  # noqa: PLC0415
    from scheduler.k8s.scheduling.lifetimes_starts import StartPredictions, pods_ahead  # noqa: PLC0415
    from scheduler.k8s.scheduling.queue import held_before_queue  # noqa: PLC0415
    from scheduler.plugins.filters.unsupported import Unsupported  # noqa: PLC0415
    from scheduler.plugins.registry import PLUGINS, ProfileContext, resolve_factory  # noqa: PLC0415

    now = time.time() if now is None else now
    profiles = {p.scheduler_name: p for p in settings.scheduler_profiles()}
    names = list(scheduler_names or profiles)
    cache = SchedulerCache(names)
    for item in namespaces:
        cache.on_namespace("ADDED", item)
    for item in nodes:
        cache.on_node("ADDED", item)
    waiting: dict[str, tuple[Any, float]] = {}
    for item in pods:
        try:
            event = cache.on_pod("ADDED", item)
        except SchedulerInputError:
            continue
        if event.change is PodChange.PENDING and event.pod is not None:
            waiting[event.key] = (event.pod, _created(item))
    lifetimes = LiveLifetimes(policy_store, clock=lambda: now)
    starts = StartPredictions(lifetimes, samples=samples, min_interval_s=0.0, clock=lambda: now)
    fallback = settings.scheduler_profiles()[0]

    def filters_of(scheduler_name: str) -> list[FilterPlugin]:
        resolved = profiles.get(scheduler_name, fallback)
        ctx = ProfileContext()
        built: list[FilterPlugin] = [Unsupported()]
        for name in resolved.filters:
            factory = PLUGINS[name].filter
            assert factory is not None
            built.append(resolve_factory(factory)(resolved.args[name], ctx))
        return built

    queued = [(pod, created) for pod, created in waiting.values()]
    order = sorted(waiting.values(), key=lambda pc: (-pc[0].priority, pc[1], pc[0].key))
    rows = []
    filters: dict[str, list[FilterPlugin]] = {}
    for pod, created in order:
        if namespace is not None and pod.namespace != namespace:
            continue
        gated = held_before_queue(pod)
        predicted = None
        if not gated:
            chosen = filters.setdefault(pod.scheduler_name, filters_of(pod.scheduler_name))
            ahead = functools.partial(pods_ahead, pod, queued)
            predicted = starts.predict(pod, cache.state, chosen, ahead, cache.namespace_labels)
        rows.append(
            {
                "namespace": pod.namespace,
                "name": pod.name,
                "scheduler": pod.scheduler_name,
                "waiting_s": max(now - created, 0.0) if math.isfinite(created) else None,
                "gated": gated,
                "p50_s": None if predicted is None else predicted.p50_s,
                "p90_s": None if predicted is None else predicted.p90_s,
            }
        )
    return rows, f"{lifetimes.source} {lifetimes.version}"


def pending(args: argparse.Namespace) -> int:
    from scheduler.k8s.process.settings import load_settings  # noqa: PLC0415
    from scheduler.sim.report import format_table  # noqa: PLC0415

    settings = load_settings(args.config)
    http = _api(args.kubeconfig)
    try:
        nodes = _items(http, "/api/v1/nodes", "nodes")
        pods = _items(http, "/api/v1/pods", "pods")
        namespaces = _items(http, "/api/v1/namespaces", "namespaces")
    finally:
        http.close()
    store = args.policy_store if args.policy_store is not None else settings.policy_store
    rows, model = pending_rows(
        nodes, pods, namespaces, settings, args.scheduler_name, store, args.samples, args.namespace
    )
    if args.output == "json":  # never (inf) as null: JSON has no infinity
        print(json.dumps({"lifetime_model": model, "pods": _json_safe(rows)}, indent=2))
        return 0
    table = [
        [
            r["namespace"],
            r["name"],
            r["scheduler"],
            _duration(r["waiting_s"]),
            "gated" if r["gated"] else _duration(r["p50_s"]),
            "gated" if r["gated"] else _duration(r["p90_s"]),
        ]
        for r in rows
    ]
    if not table:
        names = args.scheduler_name or [p.scheduler_name for p in settings.scheduler_profiles()]
        print(f"no pending pods of {', '.join(names)}")
        return 0
    print(format_table(["NAMESPACE", "NAME", "SCHEDULER", "WAITING", "LIKELY START (p50)", "p90"], table))
    print(f"(lifetime model: {model}; times from now, the pods ahead of each placed first)")
    return 0


def _json_safe(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``inf`` as null: never (JSON has no infinity)."""
    return [
        {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        for row in rows
    ]

"""``rl-scheduler run``: schedule the pods of a real cluster that opt in with
``spec.schedulerName``."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from scheduler.cli_values import COUNT, POSITIVE, existing_dir, existing_file, number
from scheduler.errors import SchedulerInputError


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "run",
        help="run the scheduler against a Kubernetes cluster",
        description=__doc__
        + " Settings come from --config (YAML), then RL_SCHEDULER_* variables, then flags.",
    )
    parser.add_argument("--config", type=existing_file, help="settings file (YAML)")
    parser.add_argument(
        "--kubeconfig", type=existing_file, help="kubeconfig; in-cluster credentials when unset"
    )
    parser.add_argument("--scheduler-name", help="the schedulerName pods use to opt in [rl-scheduler]")
    parser.add_argument("--profile", help="score profile: gnn, fgd, best-fit, default, ... [gnn]")
    parser.add_argument(
        "--checkpoint", type=existing_dir, help="fixed learned policy checkpoint folder [shipped]"
    )
    parser.add_argument(
        "--policy-store", type=Path, help="folder of policy versions the trainer publishes (its current one)"
    )
    parser.add_argument("--metrics-address", help="host:port for /metrics, /healthz, /readyz [0.0.0.0:10260]")
    parser.add_argument("--qps", type=number(float, POSITIVE), help="API requests per second [50]")
    parser.add_argument("--burst", type=number(int, COUNT), help="API request burst [100]")
    parser.add_argument("--no-leader-elect", action="store_true", help="schedule without taking the Lease")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kubernetes.config import ConfigException  # noqa: PLC0415

    from scheduler.k8s.operator import (  # noqa: PLC0415 - keeps other commands light
        configure_logging,
        exit_past_blocked_calls,
    )
    from scheduler.k8s.operator import run as run_operator  # noqa: PLC0415
    from scheduler.k8s.settings import SettingsError, load_settings  # noqa: PLC0415

    client: dict[str, Any] = {}
    overrides: dict[str, Any] = {
        "scheduler_name": args.scheduler_name,
        "profile": args.profile,
        "checkpoint": args.checkpoint,
        "policy_store": args.policy_store,
        "metrics_address": args.metrics_address,
    }
    settings = load_settings(args.config, **overrides)
    updates: dict[str, Any] = {}
    for name in ("qps", "burst", "kubeconfig"):
        value = getattr(args, name)
        if value is not None:
            client[name] = value
    if client:
        updates["client"] = settings.client.model_copy(update=client)
    if args.no_leader_elect:
        updates["leader_election"] = settings.leader_election.model_copy(update={"enabled": False})
    if updates:
        settings = settings.model_copy(update=updates)
    configure_logging(settings.log_level)
    try:
        asyncio.run(run_operator(settings))
    except ConfigException as error:
        # No in-cluster configuration and no readable kubeconfig: a bad command line.
        path = settings.client.kubeconfig
        if args.kubeconfig is not None:
            raise SchedulerInputError("run", "--kubeconfig", f"{args.kubeconfig}: {error}") from None
        problem = (
            "no such file"
            if path is not None and not path.exists()
            else f"{error} (outside a cluster, pass --kubeconfig or set KUBECONFIG)"
        )
        raise SettingsError(str(path or "kubeconfig"), "client.kubeconfig", problem) from None
    exit_past_blocked_calls(0)
    return 0

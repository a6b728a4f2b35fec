"""``rl-scheduler run``: schedule the pods of a real cluster that opt in with
``spec.schedulerName``."""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scheduler.cli_values import COUNT, POSITIVE, existing_dir, existing_file, number
from scheduler.errors import CommandLineError

if TYPE_CHECKING:
    from concurrent.futures import Future

    from kubernetes import client

    from scheduler.k8s.client.first_listing import FirstListing
    from scheduler.k8s.process.settings import Settings


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
    parser.add_argument(
        "--profile", help="score profile: fgd-reserve, gnn, fgd, best-fit, default, ... [fgd-reserve]"
    )
    parser.add_argument(
        "--checkpoint", type=existing_dir, help="fixed learned policy checkpoint folder [shipped]"
    )
    parser.add_argument(
        "--policy-store", type=Path, help="folder of policy versions the trainer publishes (its current one)"
    )
    parser.add_argument(
        "--metrics-address", help="host:port for /metrics, /healthz, /readyz (HTTPS) [0.0.0.0:10259]"
    )
    parser.add_argument("--qps", type=number(float, POSITIVE), help="API requests per second [50]")
    parser.add_argument("--burst", type=number(int, COUNT), help="API request burst [100]")
    parser.add_argument("--no-leader-elect", action="store_true", help="schedule without taking the Lease")
    parser.set_defaults(handler=run)


def check_credentials(
    args: argparse.Namespace, settings: Settings, early: EarlyListing | None = None
) -> client.Configuration:
    """Load the client's credentials once before anything starts (the early listing's
    thread has, when the settings name the kubeconfig it guessed); none is one line
    naming where the kubeconfig was given (the option, or the settings' field)."""
    from kubernetes.config import ConfigException  # noqa: PLC0415

    from scheduler.k8s.client.credentials import kubeconfig_problem, load_client_config  # noqa: PLC0415
    from scheduler.k8s.process.settings import SettingsError  # noqa: PLC0415

    try:
        return load_client_config(settings.client, early.loaded() if early is not None else None)
    except ConfigException as error:
        if early is not None:
            early.listing.drop()
        problem = kubeconfig_problem(settings.client.kubeconfig, error)
        if args.kubeconfig is None and settings.client.kubeconfig is not None:
            raise SettingsError(str(args.config or "settings"), "client.kubeconfig", problem) from None
        raise CommandLineError("run", "--kubeconfig", problem) from None


def run(args: argparse.Namespace) -> int:
    """``rl-scheduler run``, with the cyclic collector paused until the start's heap is
    frozen (``scheduler.k8s.process.heap``), or until a start that fails returns."""
    from scheduler.k8s.process.heap import end_start_pause, pause_for_start  # noqa: PLC0415

    pause_for_start()
    try:
        return run_scheduler(args)
    finally:
        end_start_pause()


def run_scheduler(args: argparse.Namespace) -> int:
    early: EarlyListing | None = start_early_listing(args)
    from scheduler.k8s.process.settings import load_settings  # noqa: PLC0415

    client_settings: dict[str, Any] = {}
    overrides: dict[str, Any] = {
        "scheduler_name": args.scheduler_name,
        "profile": args.profile,
        "checkpoint": args.checkpoint,
        "policy_store": args.policy_store,
        "metrics_address": args.metrics_address,
    }
    try:
        settings = load_settings(args.config, **overrides)
    except Exception:
        if early is not None:
            early.listing.drop()
        raise
    updates: dict[str, Any] = {}
    for name in ("qps", "burst", "kubeconfig"):
        value = getattr(args, name)
        if value is not None:
            client_settings[name] = value
    if client_settings:
        updates["client"] = settings.client.model_copy(update=client_settings)
    if args.no_leader_elect:
        updates["leader_election"] = settings.leader_election.model_copy(update={"enabled": False})
    if updates:
        settings = settings.model_copy(update=updates)
    if early is not None and not early.serves(settings):
        early = None
    configuration = check_credentials(args, settings, early)
    first_listing = early.listing if early is not None else start_listing(configuration, settings)
    # Imported while the first listing is in flight (scheduler.k8s.client.first_listing).
    from scheduler.k8s.process.operator import (  # noqa: PLC0415 - keeps other commands light
        configure_logging,
        exit_past_blocked_calls,
    )
    from scheduler.k8s.process.operator import run as run_operator  # noqa: PLC0415

    configure_logging(settings.log_level)
    asyncio.run(run_operator(settings, configuration, first_listing))
    exit_past_blocked_calls(0)
    return 0


@dataclass(frozen=True)
class EarlyListing:
    """The listings ``rl-scheduler run`` starts before it reads its settings, and the
    credentials they were sent with (loaded by the official loader in a thread)."""

    listing: FirstListing
    kubeconfig: Path | None  # the settings' client.kubeconfig, as guessed
    configuration: Future[client.Configuration]

    def serves(self, settings: Settings) -> bool:
        """Whether the settings name the kubeconfig guessed (else the listings are
        dropped)."""
        if settings.client.kubeconfig == self.kubeconfig:
            return True
        self.listing.drop()
        return False

    def loaded(self) -> client.Configuration | None:
        """The Configuration the thread loaded (its ``ConfigException`` raised here);
        None where it failed otherwise: the caller loads it again, and says why."""
        from kubernetes.config import ConfigException  # noqa: PLC0415

        try:
            return self.configuration.result()
        except ConfigException:
            raise
        except Exception:
            return None


def start_early_listing(args: argparse.Namespace) -> EarlyListing:
    """The first listing, sent before the settings are read and while the rest is
    imported (``scheduler.k8s.client.first_listing``)."""
    from scheduler.k8s.client import paths  # noqa: PLC0415
    from scheduler.k8s.client.first_listing import early_listing, speculated_kubeconfig  # noqa: PLC0415

    kubeconfig = speculated_kubeconfig(args.kubeconfig, args.config)
    listing, configuration = early_listing(kubeconfig, paths.LISTED)
    return EarlyListing(listing, kubeconfig, configuration)


def start_listing(configuration: client.Configuration, settings: Settings) -> FirstListing:
    from scheduler.k8s.client import paths  # noqa: PLC0415
    from scheduler.k8s.client.first_listing import start_listing  # noqa: PLC0415

    timeout = (settings.client.connect_timeout_s, settings.client.read_timeout_s)
    return start_listing(configuration, paths.LISTED, timeout)

"""``rl-scheduler trainer`` (the sidecar) and ``rl-scheduler policy`` (published
versions: list them, roll back, submit a candidate to the gate).

With ``--policy-namespace`` the versions are custom resources in that namespace
(``scheduler.online.store_crd``): the trainer publishes PolicyVersions and points the
PolicyChannel, and ``policy list/rollback`` read and point the same channel, as
``kubectl get policyversions`` and ``kubectl patch policychannel`` do. Without it, the
folder ``<shared dir>/policies`` is the store."""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from scheduler.cli_values import COUNT, NON_NEGATIVE, PORT, POSITIVE, existing_dir, existing_file, number
from scheduler.errors import CommandLineError, SchedulerInputError
from scheduler.objects.node import Node
from scheduler.plugins.profiles import profile_names

DEFAULT_SHARED = Path("/var/lib/rl-scheduler")
SHARED_HELP = "volume shared with the scheduler"
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def register(commands: Any) -> None:
    trainer: argparse.ArgumentParser = commands.add_parser(
        "trainer",
        help="improve the policy from what the scheduler logs (the sidecar)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    trainer.add_argument("--shared-dir", type=Path, default=DEFAULT_SHARED, help=SHARED_HELP)
    trainer.add_argument(
        "--kubeconfig", type=existing_file, help="kubeconfig; in-cluster credentials when unset"
    )
    trainer.add_argument(
        "--interval", type=number(float, POSITIVE), default=300.0, help="seconds between rounds"
    )
    trainer.add_argument(
        "--min-new-arrivals", type=number(int, COUNT), default=200, help="pod arrivals needed for a round"
    )
    trainer.add_argument(
        "--window", type=number(int, COUNT), default=3000, help="recent arrivals the twin draws from"
    )
    trainer.add_argument(
        "--margin", type=number(float, NON_NEGATIVE), default=0.2, help="points a candidate must win by"
    )
    trainer.add_argument("--generations", type=number(int, COUNT), default=6, help="ES generations per round")
    trainer.add_argument(
        "--pairs", type=number(int, COUNT), default=3, help="ES antithetic pairs per generation"
    )
    trainer.add_argument(
        "--fallback-profile",
        default="fgd",
        choices=profile_names(),
        metavar="PROFILE",
        help="heuristic the candidate must also beat",
    )
    trainer.add_argument(
        "--scheduler-metrics",
        default="https://127.0.0.1:10259/metrics",
        help="the scheduler's, for rollbacks (on the loopback, its certificate is not verified)",
    )
    trainer.add_argument(
        "--scheduler-metrics-token-file",
        type=Path,
        default=SERVICE_ACCOUNT_TOKEN,
        help="bearer token sent to the scheduler's /metrics (read at each scrape; none if absent)",
    )
    trainer.add_argument(
        "--rollback-after",
        type=number(float, NON_NEGATIVE),
        default=300.0,
        help="seconds to watch a promotion",
    )
    trainer.add_argument(
        "--lifetime-refit-interval",
        type=number(float, NON_NEGATIVE),
        default=600.0,
        help="least seconds between refits of the lifetime model (0: never refit)",
    )
    trainer.add_argument(
        "--lifetime-min-ended",
        type=number(int, COUNT),
        default=200,
        help="observed pods that must have ended since the last lifetime refit",
    )
    trainer.add_argument(
        "--lifetime-margin",
        type=number(float, NON_NEGATIVE),
        default=0.05,
        help="nats per held-out pod a refitted lifetime model must win by",
    )
    trainer.add_argument(
        "--metrics-port",
        type=number(int, PORT),
        default=10261,
        help="port of the trainer's /metrics (HTTPS; a token allowed to get /metrics, as the scheduler's)",
    )
    trainer.add_argument(
        "--tls-cert-file", type=existing_file, help="serving certificate (PEM); self-signed when unset"
    )
    trainer.add_argument("--tls-private-key-file", type=existing_file, help="its private key (PEM)")
    trainer.add_argument("--once", action="store_true", help="run one round and exit")
    _store_arguments(trainer)
    trainer.set_defaults(handler=run_trainer)

    policy: argparse.ArgumentParser = commands.add_parser("policy", help="published policy versions")
    policy.add_argument("--shared-dir", type=Path, default=DEFAULT_SHARED, help=SHARED_HELP)
    policy.add_argument(
        "--kubeconfig", type=existing_file, help="kubeconfig (with --policy-namespace); in-cluster when unset"
    )
    _store_arguments(policy)
    actions = policy.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="versions, the current one marked")
    listing.set_defaults(handler=list_versions)
    back = actions.add_parser("rollback", help="point current at the previous version")
    back.set_defaults(handler=rollback)
    submit = actions.add_parser("submit", help="hand a checkpoint to the trainer's promotion gate")
    submit.add_argument("checkpoint", type=existing_dir, help="checkpoint folder")
    submit.set_defaults(handler=submit_candidate)


def _store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy-namespace",
        help="namespace of the PolicyVersion and PolicyChannel objects (policy versions as custom "
        "resources); unset: the folder <shared dir>/policies",
    )
    parser.add_argument(
        "--policy-channel", default="rl-scheduler", help="the PolicyChannel (with --policy-namespace)"
    )


def policy_store(args: argparse.Namespace, api_client: Any = None) -> Any:
    """The store ``args`` name: the custom resources in ``--policy-namespace`` (its
    local cache ``<shared dir>/policy-versions``), else the folder ``<shared dir>/policies``."""
    from scheduler.online.store import PolicyStore  # noqa: PLC0415

    if args.policy_namespace is None:
        return PolicyStore(args.shared_dir / "policies")
    from scheduler.k8s.scheduling.policy_versions import KubePolicyObjects  # noqa: PLC0415
    from scheduler.online.store_crd import CrdPolicyStore  # noqa: PLC0415

    objects = KubePolicyObjects(api_client or _api_client(args.kubeconfig), args.policy_namespace)
    return CrdPolicyStore(objects, args.policy_channel, args.shared_dir / "policy-versions")


def _api_client(kubeconfig: Path | None) -> Any:
    from kubernetes import client  # noqa: PLC0415 - the trainer alone needs the API client
    from kubernetes.config import ConfigException  # noqa: PLC0415

    from scheduler.k8s.client.credentials import kubeconfig_problem, load_client_config  # noqa: PLC0415
    from scheduler.k8s.process.settings import ClientSettings  # noqa: PLC0415

    try:
        configuration = load_client_config(ClientSettings(kubeconfig=kubeconfig))
    except ConfigException as error:
        raise CommandLineError("trainer", "--kubeconfig", kubeconfig_problem(kubeconfig, error)) from None
    return client.ApiClient(configuration)


def _metrics_server(api_client: Any, args: argparse.Namespace) -> Any:
    """Serves a registry as the scheduler serves its port: HTTPS, /metrics to a token
    allowed to get it (delegated to the API server), /healthz open."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest  # noqa: PLC0415

    from scheduler.k8s.process.settings import ClientSettings, ServingSettings  # noqa: PLC0415
    from scheduler.k8s.serving.delegated_auth import delegated_auth  # noqa: PLC0415
    from scheduler.k8s.serving.http import Answer  # noqa: PLC0415
    from scheduler.k8s.serving.serving import serve_in_thread  # noqa: PLC0415

    if (args.tls_cert_file is None) != (args.tls_private_key_file is None):
        raise CommandLineError("trainer", "--tls-cert-file", "needs --tls-private-key-file, and the reverse")
    client_settings = ClientSettings()
    timeout = (client_settings.connect_timeout_s, client_settings.read_timeout_s)
    serving = ServingSettings(tls_cert_file=args.tls_cert_file, tls_key_file=args.tls_private_key_file)

    def serve(registry: Any) -> None:
        routes = {
            "/metrics": lambda: Answer(200, generate_latest(registry), CONTENT_TYPE_LATEST),
            "/healthz": lambda: Answer(200, b"ok"),
        }
        auth = delegated_auth(api_client, timeout, serving.always_allow_paths)
        serve_in_thread(routes, f"0.0.0.0:{args.metrics_port}", serving, auth)

    return serve


def _nodes_from_api(api_client: Any) -> Any:
    """The nodes, listed (the trainer's account may list nodes and nothing else of the
    cluster: the chart's rbac.yaml; another call here needs a rule there), over a
    ``BlockingClient`` with ``api_client``'s Configuration and credentials."""
    from scheduler.k8s.client.blocking import BlockingClient  # noqa: PLC0415 - the trainer alone
    from scheduler.k8s.process.settings import ClientSettings  # noqa: PLC0415
    from scheduler.objects.node_manifest import node_from_manifest  # noqa: PLC0415

    http = BlockingClient(api_client.configuration, api_client, max_connections=1)
    defaults = ClientSettings()
    timeout = (defaults.connect_timeout_s, defaults.read_timeout_s)

    def list_nodes() -> list[Node]:
        answer = http.json("GET", "/api/v1/nodes", timeout=timeout)
        items = (answer.get("items") or []) if isinstance(answer, dict) else None
        if not isinstance(items, list):
            raise SchedulerInputError("listing nodes", "items", "not a list")
        nodes = []
        log = logging.getLogger("rl-scheduler.trainer")
        for item in items:
            try:
                if not isinstance(item, dict):
                    raise SchedulerInputError("a node of the listing", "items[]", "not an object")
                nodes.append(node_from_manifest(item))
            except SchedulerInputError as error:
                log.warning("twin skips a node: %s", error)
        return nodes

    return list_nodes


def run_trainer(args: argparse.Namespace) -> int:
    from scheduler.online.lifetime_refit import RefitConfig  # noqa: PLC0415
    from scheduler.online.trainer import Trainer, TrainerConfig  # noqa: PLC0415 - torch loads here
    from scheduler.online.tuning import TuningArgs  # noqa: PLC0415

    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = TrainerConfig(
        shared_dir=args.shared_dir,
        interval_s=args.interval,
        min_new_arrivals=args.min_new_arrivals,
        window=args.window,
        margin=args.margin,
        fallback_profile=args.fallback_profile,
        tuning=TuningArgs(generations=args.generations, pairs=args.pairs),
        scheduler_metrics_url=args.scheduler_metrics,
        scheduler_metrics_token_file=args.scheduler_metrics_token_file,
        rollback_after_s=args.rollback_after,
        lifetime_refit_interval_s=args.lifetime_refit_interval,
        lifetime_min_new_ended=args.lifetime_min_ended,
        lifetime_refit=RefitConfig(margin=args.lifetime_margin),
    )
    api_client = _api_client(args.kubeconfig)
    trainer = Trainer(config, _nodes_from_api(api_client), store=policy_store(args, api_client))
    if args.once:
        verdict = trainer.round(int(time.time()))
        print(verdict.describe() if verdict else "not enough new arrivals for a round")
        return 0
    trainer.run_forever(_metrics_server(api_client, args))
    return 0


def list_versions(args: argparse.Namespace) -> int:
    store = policy_store(args)
    current = store.current()
    for version in store.versions():
        print(f"{'*' if version == current else ' '} {version}")
    if current is None:
        print("no published version: the scheduler uses the policy shipped in the package")
    return 0


def rollback(args: argparse.Namespace) -> int:
    store = policy_store(args)
    print(f"current is now {store.rollback()}")
    return 0


def submit_candidate(args: argparse.Namespace) -> int:
    """Check the checkpoint as the scheduler would load it (manifest, feature schema,
    the weights' SHA-256 against the manifest's, every tensor's shape), copy it into
    the trainer's inbox and check the copy's SHA-256 again before it becomes visible."""
    from scheduler.policy.weights import (  # noqa: PLC0415
        CheckpointError,
        load_weights,
        sha256,
        weights_file_name,
    )

    loaded = load_weights(args.checkpoint)  # refuse what the trainer and the scheduler would refuse
    folder, weights_file = loaded.path, weights_file_name(loaded.path, loaded.manifest)
    inbox = args.shared_dir / "candidates"
    staging = inbox / f".{folder.name}-{time.time_ns()}"
    try:
        inbox.mkdir(parents=True, exist_ok=True)
        shutil.copytree(folder, staging)
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        where = error.filename or inbox
        raise CommandLineError("policy", "--shared-dir", f"{where}: cannot write: {error.strerror}") from None
    if sha256(staging / weights_file) != loaded.manifest["weights"]["sha256"]:
        shutil.rmtree(staging, ignore_errors=True)
        raise CheckpointError(str(folder / weights_file), "sha256", "the file changed while it was copied")
    final = inbox / staging.name.lstrip(".")
    staging.rename(final)
    print(f"submitted {final.name}; the trainer's next round puts it through the gate")
    return 0

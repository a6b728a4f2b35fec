"""Where the API client's credentials come from, and why none could be loaded.

The client's order, as kubectl's: a kubeconfig named by the caller (``--kubeconfig``
or ``client.kubeconfig``); else the pod's service account when running in a cluster;
else ``KUBECONFIG`` (a list of files, separated as ``PATH`` is); else
``~/.kube/config``. ``KUBECONFIG`` is read when the credentials are loaded, not when
the client library was imported (it reads it once, at import).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubernetes import client

    from scheduler.k8s.process.settings import ClientSettings

HOME_KUBECONFIG = "~/.kube/config"
IN_CLUSTER_VARIABLE = "KUBERNETES_SERVICE_HOST"


def default_kubeconfig(environ: Mapping[str, str] | None = None) -> str:
    """The kubeconfig file(s) used outside a cluster when none is named."""
    return (os.environ if environ is None else environ).get("KUBECONFIG") or HOME_KUBECONFIG


def kubeconfig_problem(kubeconfig: Path | None, error: Exception) -> str:
    """One line on why no credentials loaded, given the kubeconfig the caller named (or
    None) and the client's ``ConfigException``."""
    if kubeconfig is not None:
        return f"{kubeconfig}: no such file" if not kubeconfig.exists() else f"{kubeconfig}: {error}"
    where = "not in a cluster" if IN_CLUSTER_VARIABLE not in os.environ else "no in-cluster credentials"
    listed = os.environ.get("KUBECONFIG")
    if listed:
        files = [part for part in listed.split(os.pathsep) if part]
        if not any(Path(part).expanduser().is_file() for part in files):
            return f"{where}, and KUBECONFIG={listed} names no file; pass --kubeconfig or fix KUBECONFIG"
        return f"KUBECONFIG={listed}: {error}"
    if not Path(HOME_KUBECONFIG).expanduser().is_file():
        return f"{where}, and no kubeconfig ({HOME_KUBECONFIG} absent); pass --kubeconfig or set KUBECONFIG"
    return f"{HOME_KUBECONFIG}: {error}"


def load_configuration(kubeconfig: Path | None) -> client.Configuration:
    """The official loader's Configuration, in the order above: ``kubeconfig`` when
    named, else in-cluster, else ``KUBECONFIG`` or ``~/.kube/config`` (raises
    ``ConfigException``). The only credential loader: ``rl-scheduler run``'s first
    listing calls it from a thread before the settings are read
    (``scheduler.k8s.client.first_listing``)."""
    # Imported here: 0.4-0.5 s, which the first listing's thread spends while the main
    # thread imports the rest.
    from kubernetes import client, config  # noqa: PLC0415

    configuration = client.Configuration()
    if kubeconfig is not None:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig), client_configuration=configuration
        )
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=default_kubeconfig(), client_configuration=configuration
            )
    return configuration


def load_client_config(
    settings: ClientSettings, configuration: client.Configuration | None = None
) -> client.Configuration:
    """The client's Configuration from ``settings`` (raises ``ConfigException``), or
    ``configuration`` (loaded already for ``settings.kubeconfig``) with the settings'
    options."""
    if configuration is None:
        configuration = load_configuration(settings.kubeconfig)
    # One connection per worker thread, and a few for the calls of the event loop's own.
    configuration.connection_pool_maxsize = settings.workers + 4
    # Our callers retry with a log line and a backoff.
    configuration.retries = 0
    return configuration

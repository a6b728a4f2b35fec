"""The API server's address and credentials, read without the official client.

``rl-scheduler run`` asks for its first listing before anything else is imported
(``scheduler.k8s.client.first_listing``): importing the official client and its kubeconfig
loader took 0.4-0.5 s of a start, the settings 0.7 s more, and the API server needs
as long again to answer a 5,000-node listing. This module reads the common cases
with the standard library and yaml: the pod's service account, and a kubeconfig whose
user has a client certificate and/or a bearer token (``token`` or ``tokenFile``). For
anything else (exec plugins, auth providers, basic auth, impersonation, a proxy, a
``tls-server-name``, a ``KUBECONFIG`` that lists several files) it answers None, and
the listing waits for the official loader as before.

The precedence is the client's (``scheduler.k8s.client.credentials``), and so is what is read
(a token file as it is, with no whitespace trimmed). What this module read
is checked against the official client's Configuration once that is loaded
(``Endpoint.agrees_with``); a listing made with credentials that disagree is dropped.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from scheduler.k8s.client.credentials import IN_CLUSTER_VARIABLE, default_kubeconfig

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
IN_CLUSTER_PORT_VARIABLE = "KUBERNETES_SERVICE_PORT"
# What a kubeconfig entry may hold for this module to read it; any other key needs the
# official loader (``proxy-url``, ``tls-server-name``, ``exec``, ``auth-provider``, ...).
CLUSTER_KEYS = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "extensions",
    }
)
USER_KEYS = frozenset(
    {
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "token",
        "tokenFile",
        "extensions",
    }
)


@dataclass(frozen=True)
class Endpoint:
    """Where to send a request and how to authenticate it."""

    server: str  # scheme://host[:port], no trailing slash
    verify: bool = True
    ca_pem: bytes | None = None  # None: the system's certificate authorities
    certificate_pem: bytes | None = None
    key_pem: bytes | None = None
    authorization: str | None = None  # the Authorization header

    @property
    def host(self) -> str:
        return urlsplit(self.server).hostname or ""

    @property
    def port(self) -> int:
        parts = urlsplit(self.server)
        return parts.port or (443 if parts.scheme == "https" else 80)

    @property
    def secure(self) -> bool:
        return urlsplit(self.server).scheme == "https"

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if not self.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif self.ca_pem is not None:
            context.load_verify_locations(cadata=self.ca_pem.decode("ascii", "replace"))
        else:
            context.load_default_certs()
        if self.certificate_pem is not None and self.key_pem is not None:
            load_certificate_chain(context, self.certificate_pem, self.key_pem)
        return context

    def agrees_with(self, configuration: Any) -> bool:
        """Whether the official client's ``Configuration`` would make the same request:
        the same server, verification, authorities, client certificate and token."""
        try:
            return (
                str(configuration.host).rstrip("/") == self.server
                and bool(configuration.verify_ssl) == self.verify
                and not configuration.proxy
                and getattr(configuration, "tls_server_name", None) is None
                and (not self.verify or _file_bytes(configuration.ssl_ca_cert) == self.ca_pem)
                and _file_bytes(configuration.cert_file) == self.certificate_pem
                and _file_bytes(configuration.key_file) == self.key_pem
                and _authorization(configuration) == self.authorization
            )
        except OSError:
            return False


def load_certificate_chain(context: ssl.SSLContext, certificate_pem: bytes, key_pem: bytes) -> None:
    """``SSLContext.load_cert_chain`` reads files only: the PEM goes through a private
    temporary file, removed at once (the official client leaves its own in /tmp)."""
    with tempfile.TemporaryDirectory(prefix="rl-scheduler-tls-") as folder:
        certificate, key = Path(folder, "tls.crt"), Path(folder, "tls.key")
        certificate.write_bytes(certificate_pem)
        key.touch(mode=0o600)
        key.write_bytes(key_pem)
        context.load_cert_chain(certificate, key)


def _file_bytes(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


def _authorization(configuration: Any) -> str | None:
    header: str | None = configuration.get_api_key_with_prefix(
        "BearerToken"
    ) or configuration.get_api_key_with_prefix("authorization")
    if header is None:
        return None
    scheme, _sep, token = header.rpartition(" ")
    return f"{(scheme or 'Bearer').capitalize()} {token}"


def resolve(kubeconfig: Path | None, environ: Mapping[str, str] | None = None) -> Endpoint | None:
    """The endpoint the client would use, in its order: ``kubeconfig`` when named; else
    the pod's service account when in a cluster; else ``KUBECONFIG`` or
    ``~/.kube/config``. None where only the official loader can tell."""
    environ = os.environ if environ is None else environ
    if kubeconfig is not None:
        return from_kubeconfig(kubeconfig)
    if IN_CLUSTER_VARIABLE in environ:
        return in_cluster(environ)
    files = [part for part in default_kubeconfig(environ).split(os.pathsep) if part]
    if len(files) != 1:
        return None
    return from_kubeconfig(Path(files[0]).expanduser())


def in_cluster(environ: Mapping[str, str], folder: Path = SERVICE_ACCOUNT) -> Endpoint | None:
    """The service account's token and authority, the Service's address."""
    host, port = environ.get(IN_CLUSTER_VARIABLE, ""), environ.get(IN_CLUSTER_PORT_VARIABLE, "")
    if not host or not port:
        return None
    try:
        token = (folder / "token").read_text()
        ca_pem = (folder / "ca.crt").read_bytes()
    except OSError:
        return None
    if not token:
        return None
    server_host = f"[{host}]" if ":" in host or "%" in host else host
    return Endpoint(f"https://{server_host}:{port}", ca_pem=ca_pem, authorization=f"Bearer {token}")


def from_kubeconfig(path: Path) -> Endpoint | None:
    """The current context's cluster and user, where this module can read them."""
    try:
        document = yaml.safe_load(path.read_text())
        return _endpoint(document, path.parent.absolute())
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError, binascii.Error):
        return None


def _named(entries: Any, name: Any, key: str) -> dict[str, Any]:
    for entry in entries or ():
        if entry.get("name") == name:
            found: dict[str, Any] = entry[key] or {}
            return found
    raise KeyError(name)


def _endpoint(document: Any, base: Path) -> Endpoint | None:
    context = _named(document["contexts"], document["current-context"], "context")
    cluster = _named(document["clusters"], context["cluster"], "cluster")
    user = _named(document.get("users"), context["user"], "user") if context.get("user") else {}
    if set(cluster) - CLUSTER_KEYS or set(user) - USER_KEYS or "server" not in cluster:
        return None
    server = str(cluster["server"]).rstrip("/")
    secure = server.startswith("https")
    token = user.get("token") or (_read(base, user["tokenFile"]).decode() if user.get("tokenFile") else None)
    return Endpoint(
        server=server,
        verify=not cluster.get("insecure-skip-tls-verify", False),
        ca_pem=_file_or_data(cluster, "certificate-authority", base) if secure else None,
        certificate_pem=_file_or_data(user, "client-certificate", base) if secure else None,
        key_pem=_file_or_data(user, "client-key", base) if secure else None,
        authorization=f"Bearer {token}" if token else None,
    )


def _file_or_data(entry: dict[str, Any], key: str, base: Path) -> bytes | None:
    """``<key>-data`` (base64) before ``<key>`` (a file, relative to the kubeconfig)."""
    if entry.get(f"{key}-data"):
        return base64.b64decode(entry[f"{key}-data"])
    if entry.get(key):
        return _read(base, entry[key])
    return None


def _read(base: Path, name: str) -> bytes:
    return (base / name).read_bytes()

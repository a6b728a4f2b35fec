"""The API server's address and credentials as ``scheduler.k8s.client.endpoint`` reads them
without the official client: the same as the official loader where it reads them at
all (``agrees_with`` holds), None where only the official loader can tell, and the
kubeconfig the settings will name, guessed before they are read."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from scheduler.k8s.client import endpoint
from scheduler.k8s.client.first_listing import speculated_kubeconfig

CA, CERT, KEY = b"-----CA-----\n", b"-----CERT-----\n", b"-----KEY-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(folder: Path, cluster: dict[str, Any], user: dict[str, Any], name: str = "kubeconfig") -> Path:
    (folder / "pki").mkdir(exist_ok=True)
    for file, data in (("ca.crt", CA), ("tls.crt", CERT), ("tls.key", KEY), ("token", b"from-file")):
        (folder / "pki" / file).write_bytes(data)
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "here",
        "contexts": [
            {"name": "elsewhere", "context": {"cluster": "other", "user": "u"}},
            {"name": "here", "context": {"cluster": "c", "user": "u"}},
        ],
        "clusters": [
            {"name": "other", "cluster": {"server": "https://10.0.0.9:6443"}},
            {"name": "c", "cluster": cluster},
        ],
        "users": [{"name": "u", "user": user}],
    }
    path = folder / name
    path.write_text(yaml.safe_dump(document))
    return path


def official(path: Path) -> client.Configuration:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=configuration)  # type: ignore[no-untyped-call]
    return configuration


SERVER = "https://127.0.0.1:6443"
READ = [
    pytest.param(
        {"server": SERVER + "/", "certificate-authority": "pki/ca.crt"},
        {"client-certificate": "pki/tls.crt", "client-key": "pki/tls.key"},
        endpoint.Endpoint(SERVER, ca_pem=CA, certificate_pem=CERT, key_pem=KEY),
        id="certificate files, relative to the kubeconfig; trailing slash dropped",
    ),
    pytest.param(
        {"server": SERVER, "certificate-authority-data": b64(CA)},
        {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)},
        endpoint.Endpoint(SERVER, ca_pem=CA, certificate_pem=CERT, key_pem=KEY),
        id="certificate data, base64",
    ),
    pytest.param(
        {"server": SERVER, "certificate-authority-data": b64(CA), "certificate-authority": "pki/none"},
        {"token": "abc"},
        endpoint.Endpoint(SERVER, ca_pem=CA, authorization="Bearer abc"),
        id="data before file; a token",
    ),
    pytest.param(
        {"server": SERVER, "certificate-authority": "pki/ca.crt"},
        {"tokenFile": "pki/token"},
        endpoint.Endpoint(SERVER, ca_pem=CA, authorization="Bearer from-file"),
        id="a token file",
    ),
    pytest.param(
        {"server": SERVER, "insecure-skip-tls-verify": True},
        {"token": "abc", "client-certificate-data": b64(CERT), "client-key-data": b64(KEY)},
        endpoint.Endpoint(
            SERVER, verify=False, certificate_pem=CERT, key_pem=KEY, authorization="Bearer abc"
        ),
        id="no verification; token and certificate",
    ),
    pytest.param(
        {"server": "http://127.0.0.1:8080"},
        {"token": "abc", "client-certificate": "pki/tls.crt"},
        endpoint.Endpoint("http://127.0.0.1:8080", authorization="Bearer abc"),
        id="plain HTTP: no TLS files",
    ),
]


@pytest.mark.parametrize(("cluster", "user", "expected"), READ)
def test_a_kubeconfig_it_reads_as_the_official_loader_does(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any], expected: endpoint.Endpoint
) -> None:
    path = kubeconfig(tmp_path, cluster, user)
    read = endpoint.from_kubeconfig(path)
    assert read == expected
    assert read.agrees_with(official(path))


NOT_READ = [
    pytest.param({"server": SERVER, "proxy-url": "http://proxy:3128"}, {"token": "t"}, id="a proxy"),
    pytest.param({"server": SERVER, "tls-server-name": "api"}, {"token": "t"}, id="a TLS server name"),
    pytest.param({"server": SERVER}, {"exec": {"command": "get-token"}}, id="an exec plugin"),
    pytest.param({"server": SERVER}, {"auth-provider": {"name": "oidc"}}, id="an auth provider"),
    pytest.param({"server": SERVER}, {"username": "a", "password": "b"}, id="basic auth"),
    pytest.param({"server": SERVER}, {"as": "someone", "token": "t"}, id="impersonation"),
    pytest.param({"certificate-authority": "pki/ca.crt"}, {"token": "t"}, id="no server"),
    pytest.param({"server": SERVER}, {"tokenFile": "pki/missing"}, id="a token file that is not there"),
]


@pytest.mark.parametrize(("cluster", "user"), NOT_READ)
def test_what_only_the_official_loader_can_tell_is_left_to_it(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]
) -> None:
    assert endpoint.from_kubeconfig(kubeconfig(tmp_path, cluster, user)) is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("::: not yaml", id="not YAML"),
        pytest.param("apiVersion: v1\nkind: Config\n", id="no context"),
        pytest.param("current-context: x\ncontexts: []\n", id="a context not listed"),
    ],
)
def test_a_kubeconfig_it_cannot_read_is_left_to_the_official_loader(tmp_path: Path, text: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    assert endpoint.from_kubeconfig(path) is None
    assert endpoint.from_kubeconfig(tmp_path / "absent") is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param({"server": "https://127.0.0.1:6444"}, "host", id="another server"),
        pytest.param({"authorization": "Bearer other"}, "token", id="another token"),
        pytest.param({"certificate_pem": b"other"}, "certificate", id="another certificate"),
        pytest.param({"ca_pem": b"other"}, "authority", id="another authority"),
        pytest.param({"verify": False}, "verification", id="no verification"),
    ],
)
def test_an_endpoint_that_disagrees_with_the_official_client_is_caught(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    path = kubeconfig(
        tmp_path,
        {"server": SERVER, "certificate-authority": "pki/ca.crt"},
        {"token": "abc", "client-certificate": "pki/tls.crt", "client-key": "pki/tls.key"},
    )
    read = endpoint.from_kubeconfig(path)
    assert read is not None
    assert read.agrees_with(official(path))
    changed = endpoint.Endpoint(**{**read.__dict__, **change})
    assert not changed.agrees_with(official(path)), field


def test_in_cluster_it_reads_the_service_account(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_bytes(CA)
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert endpoint.in_cluster(environ, tmp_path) == endpoint.Endpoint(
        "https://10.96.0.1:443", ca_pem=CA, authorization="Bearer sa-token"
    )
    ipv6 = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    read = endpoint.in_cluster(ipv6, tmp_path)
    assert read is not None
    assert (read.server, read.host, read.port) == (
        "https://[fd00::1]:443",
        "fd00::1",
        443,
    )
    assert endpoint.in_cluster({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, tmp_path) is None
    assert endpoint.in_cluster(environ, tmp_path / "absent") is None


def test_resolve_follows_the_clients_order(tmp_path: Path) -> None:
    named = kubeconfig(tmp_path, {"server": SERVER}, {"token": "named"}, "named")
    listed = kubeconfig(tmp_path, {"server": SERVER}, {"token": "listed"}, "listed")
    in_cluster = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}

    def token(kubeconfig: Path | None, environ: dict[str, str]) -> str | None:
        read = endpoint.resolve(kubeconfig, environ)
        return None if read is None else read.authorization

    assert token(named, {**in_cluster, "KUBECONFIG": str(listed)}) == "Bearer named"
    # In a cluster without the service account's files: the official loader decides.
    assert token(None, {**in_cluster, "KUBECONFIG": str(listed)}) is None
    assert token(None, {"KUBECONFIG": str(listed)}) == "Bearer listed"
    assert token(None, {"KUBECONFIG": os.pathsep.join([str(listed), str(named)])}) is None


@pytest.mark.parametrize(
    ("flag", "environ", "settings", "expected"),
    [
        pytest.param(
            "flag.yaml", {"RL_SCHEDULER_CLIENT__KUBECONFIG": "env.yaml"}, None, "flag.yaml", id="flag"
        ),
        pytest.param(
            None,
            {"RL_SCHEDULER_CLIENT__KUBECONFIG": "env.yaml"},
            "client: {kubeconfig: f}",
            "env.yaml",
            id="env",
        ),
        pytest.param(None, {}, "client: {kubeconfig: file.yaml, qps: 5}", "file.yaml", id="settings file"),
        pytest.param(
            None,
            {},
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "clientConnection: {kubeconfig: kube.yaml}\n",
            "kube.yaml",
            id="KubeSchedulerConfiguration",
        ),
        pytest.param(None, {}, "profile: fgd", None, id="none named"),
        pytest.param(None, {}, "client: [1]\n", None, id="a settings file the settings will refuse"),
        pytest.param(None, {}, ":: bad", None, id="not YAML"),
    ],
)
def test_the_kubeconfig_the_settings_will_name_is_guessed_before_they_are_read(
    tmp_path: Path, flag: str | None, environ: dict[str, str], settings: str | None, expected: str | None
) -> None:
    settings_file = None
    if settings is not None:
        settings_file = tmp_path / "settings.yaml"
        settings_file.write_text(settings)
    guess = speculated_kubeconfig(Path(flag) if flag else None, settings_file, environ)
    assert guess == (Path(expected) if expected else None)

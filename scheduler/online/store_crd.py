"""Policy versions as Kubernetes objects: the store every scheduler replica, the
trainer and ``kubectl`` share.

    PolicyVersion  <channel>-v000002   one published version: its files, each base64
                                       with its SHA-256, and a summary for kubectl
    PolicyChannel  <channel>           spec.currentVersion: the version that schedules

(``rl-scheduler.io/v1alpha1``, namespaced, in the release namespace; the CRDs are the
chart's ``crds/policyversions.yaml``.) A version is a checkpoint folder, a manifest and
about 37 KB of safetensors (and a small ``lifetimes/``), so it fits in its object: the
files travel base64 in ``spec.files`` (refused above ``MAX_ENCODED_BYTES`` in all,
well under etcd's 1.5 MiB request limit), each with its SHA-256. Versions are immutable
(the CRD's validation rule refuses a changed ``spec``). Switching is one write, to the
channel's ``spec.currentVersion``, so every reader sees the old or the new version
and never a mixture; rolling back is that same write:

    kubectl -n <namespace> patch policychannel <channel> --type merge \\
        -p '{"spec":{"currentVersion":"v000001"}}'

Why objects rather than the folder on a volume (``scheduler.online.store``): two
scheduler replicas could share that folder only on a ReadWriteMany volume, and
``kubectl`` could not see it. Why one object per version and not a ConfigMap: a
structural schema validates the shape, printer columns make ``kubectl get
policyversions`` useful, and RBAC can grant exactly these kinds.

This module is the pure part (encoding, decoding, verification, the refusal of a bad
object) and ``CrdPolicyStore``, the trainer's store: a ``PolicyStore`` whose versions
and current version live in the API server, reached through ``PolicyObjects``
(``scheduler.k8s.scheduling.policy_versions`` implements it with the official client
and mirrors the channel into the scheduler). Its folder is a cache of the versions it
has materialised, each verified file by file, so loaders keep taking a ``Path``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from scheduler.online.store import PolicyStore, PolicyStoreError, write_files

log = logging.getLogger(__name__)

GROUP = "rl-scheduler.io"
API_VERSION = "v1alpha1"
VERSIONS = "policyversions"
CHANNELS = "policychannels"
CHANNEL_LABEL = "rl-scheduler.io/channel"
DEFAULT_CHANNEL = "rl-scheduler"
MANIFEST = "manifest.json"
# The files' base64 in all: 1 MiB, two thirds of etcd's default request limit (1.5 MiB),
# leaving room for the rest of the object. A version is about 50 KB of base64 today.
MAX_ENCODED_BYTES = 1 << 20
_VERSION = re.compile(r"v\d{6}")
_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class PolicyVersionError(PolicyStoreError):
    """A policy version or channel object that cannot be used; names the object
    (``PolicyVersion <namespace>/<name>``) and the field."""


class VersionExistsError(Exception):
    """Another writer created this version's object first (HTTP 409)."""


class PolicyObjects(Protocol):
    """The API calls the store makes, in one namespace (bodies as JSON dicts)."""

    namespace: str

    def get(self, plural: str, name: str) -> dict[str, Any] | None: ...

    def list(self, plural: str, label_selector: str) -> list[dict[str, Any]]: ...

    def create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        """Raises ``VersionExistsError`` when the name is taken."""
        ...

    def merge_patch(
        self, plural: str, name: str, patch: dict[str, Any], subresource: str = ""
    ) -> dict[str, Any] | None:
        """A JSON merge patch (of ``subresource``, ``status``, when given); None when
        the object does not exist."""
        ...


def version_object_name(channel: str, version: str) -> str:
    return f"{channel}-{version}"


def describe(body: Mapping[str, Any], kind: str = "PolicyVersion") -> str:
    """``PolicyVersion <namespace>/<name>``, for errors and logs."""
    meta = body.get("metadata") if isinstance(body.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    return f"{kind} {meta.get('namespace', '?')}/{meta.get('name', '?')}"


@dataclass(frozen=True)
class GateSummary:
    """What ``kubectl get policyversions`` shows of a version's manifest."""

    stage: str | None = None
    verdict: str | None = None
    score: float | None = None


def gate_summary(manifest: Mapping[str, Any]) -> GateSummary:
    """The training stage, and the gate's verdict and candidate score when the
    manifest records them (``training.gate``: ``promote``, ``reason``, ``candidate``)."""
    training = manifest.get("training")
    if not isinstance(training, Mapping):
        return GateSummary()
    stage = training.get("stage")
    gate = training.get("gate")
    verdict = score = None
    if isinstance(gate, Mapping):
        if isinstance(gate.get("promote"), bool):
            verdict = "promoted" if gate["promote"] else "rejected"
        candidate = gate.get("candidate")
        if isinstance(candidate, (int, float)) and not isinstance(candidate, bool):
            score = round(float(candidate), 4)
    return GateSummary(stage if isinstance(stage, str) else None, verdict, score)


def read_folder(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by its relative POSIX path."""
    return {
        item.relative_to(folder).as_posix(): item.read_bytes()
        for item in sorted(folder.rglob("*"))
        if item.is_file()
    }


def encode_version(
    files: Mapping[str, bytes], channel: str, version: str, where: str = "policy version"
) -> dict[str, Any]:
    """The PolicyVersion object of ``files`` (a checkpoint folder's, ``read_folder``)."""
    if not _VERSION.fullmatch(version):
        raise PolicyVersionError(where, "spec.version", f"{version!r} is not of the form v000001")
    if MANIFEST not in files:
        raise PolicyVersionError(where, "spec.files", f"no {MANIFEST}: not a checkpoint")
    entries = []
    total = 0
    for name in sorted(files):
        _check_path(where, "spec.files", name)
        data = base64.b64encode(files[name]).decode("ascii")
        total += len(data)
        entries.append({"path": name, "sha256": hashlib.sha256(files[name]).hexdigest(), "data": data})
    if total > MAX_ENCODED_BYTES:
        raise PolicyVersionError(
            where,
            "spec.files",
            f"{total} bytes of base64 in all, over the {MAX_ENCODED_BYTES} a PolicyVersion holds "
            "(etcd refuses objects over 1.5 MiB); a policy checkpoint is about 50 KB",
        )
    try:
        manifest = json.loads(files[MANIFEST])
    except (UnicodeDecodeError, ValueError) as error:
        raise PolicyVersionError(where, f"spec.files[{MANIFEST}]", f"not JSON: {error}") from None
    summary = gate_summary(manifest if isinstance(manifest, Mapping) else {})
    spec: dict[str, Any] = {"channel": channel, "version": version, "files": entries, "size": total}
    if summary.stage is not None:
        spec["stage"] = summary.stage
    if summary.verdict is not None:
        spec["verdict"] = summary.verdict
    if summary.score is not None:
        spec["score"] = summary.score
    return {
        "apiVersion": f"{GROUP}/{API_VERSION}",
        "kind": "PolicyVersion",
        "metadata": {"name": version_object_name(channel, version), "labels": {CHANNEL_LABEL: channel}},
        "spec": spec,
    }


def _check_path(where: str, field: str, name: object) -> str:
    if not isinstance(name, str) or not _PATH.fullmatch(name) or ".." in name.split("/"):
        raise PolicyVersionError(where, field, f"{name!r} is not a relative path inside a version")
    return name


def version_of(body: Mapping[str, Any]) -> str:
    """``spec.version`` of a PolicyVersion, checked."""
    spec = body.get("spec")
    version = spec.get("version") if isinstance(spec, Mapping) else None
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise PolicyVersionError(describe(body), "spec.version", f"{version!r} is not of the form v000001")
    return version


def decode_version(body: Mapping[str, Any], expected: str | None = None) -> dict[str, bytes]:
    """The files of a PolicyVersion, each checked against its SHA-256; a bad object is
    refused with ``PolicyVersionError`` naming it and the field."""
    where = describe(body)
    version = version_of(body)
    if expected is not None and version != expected:
        raise PolicyVersionError(where, "spec.version", f"{version}, where the channel names {expected}")
    spec = body["spec"]
    entries = spec.get("files")
    if not isinstance(entries, list) or not entries:
        raise PolicyVersionError(where, "spec.files", "expected a list of files")
    files: dict[str, bytes] = {}
    total = 0
    for i, entry in enumerate(entries):
        field = f"spec.files[{i}]"
        if not isinstance(entry, Mapping):
            raise PolicyVersionError(where, field, "expected {path, sha256, data}")
        name = _check_path(where, f"{field}.path", entry.get("path"))
        if name in files:
            raise PolicyVersionError(where, f"{field}.path", f"{name} twice")
        data, digest = entry.get("data"), entry.get("sha256")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise PolicyVersionError(where, f"{field}.sha256", "expected 64 lowercase hex digits")
        if not isinstance(data, str):
            raise PolicyVersionError(where, f"{field}.data", "expected base64")
        total += len(data)
        if total > MAX_ENCODED_BYTES:
            raise PolicyVersionError(where, "spec.files", f"over {MAX_ENCODED_BYTES} bytes of base64")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as error:
            raise PolicyVersionError(where, f"{field}.data", f"not base64: {error}") from None
        actual = hashlib.sha256(raw).hexdigest()
        if actual != digest:
            raise PolicyVersionError(
                where, f"{field}.sha256", f"{name} has SHA-256 {actual}, the object says {digest}"
            )
        files[name] = raw
    if MANIFEST not in files:
        raise PolicyVersionError(where, "spec.files", f"no {MANIFEST}: not a checkpoint")
    return files


def pointed_version(channel: Mapping[str, Any] | None) -> str | None:
    """A PolicyChannel's ``spec.currentVersion`` (None when unset), checked."""
    if channel is None:
        return None
    spec = channel.get("spec")
    version = spec.get("currentVersion") if isinstance(spec, Mapping) else None
    if version is None:
        return None
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise PolicyVersionError(
            describe(channel, "PolicyChannel"),
            "spec.currentVersion",
            f"{version!r} is not of the form v000001",
        )
    return version


def materialise(folder_store: PolicyStore, body: Mapping[str, Any], version: str) -> Path:
    """``version``'s folder in the local cache, written from ``body`` once its files
    are verified. The digests it was written from are kept beside it
    (``.vNNNNNN.sha256.json``): a folder from an object of the same files is reused,
    and one from an object deleted and created again with other files is replaced."""
    files = decode_version(body, version)
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    folder = folder_store.root / version
    record = folder_store.root / f".{version}.sha256.json"
    if folder.is_dir():
        try:
            cached = json.loads(record.read_text())
        except (OSError, ValueError):
            cached = None
        if cached == digests:
            return folder
        log.warning("%s: the cached %s differs from the object; writing it again", describe(body), folder)
        trash = folder_store.root / f".{version}.tmp-replaced-{os.getpid()}"
        os.rename(folder, trash)
        shutil.rmtree(trash, ignore_errors=True)
    installed = folder_store.install(version, write_files(files))
    record.write_text(json.dumps(digests, sort_keys=True))
    return installed


class CrdPolicyStore(PolicyStore):
    """The policy store in the API server, with ``PolicyStore``'s interface: the
    trainer publishes through it and ``rl-scheduler policy list/rollback`` reads and
    points it. ``root`` is the local cache of materialised versions."""

    def __init__(self, objects: PolicyObjects, channel: str, cache: Path) -> None:
        super().__init__(cache)
        self.objects = objects
        self.channel = channel

    @property
    def where(self) -> str:
        return f"PolicyChannel {self.objects.namespace}/{self.channel}"

    def _bodies(self) -> dict[str, dict[str, Any]]:
        bodies = {}
        for body in self.objects.list(VERSIONS, f"{CHANNEL_LABEL}={self.channel}"):
            try:
                bodies[version_of(body)] = body
            except PolicyVersionError as error:
                log.warning("skipping a policy version: %s", error)
        return bodies

    def versions(self) -> list[str]:
        return sorted(self._bodies())

    def _body(self, version: str) -> dict[str, Any] | None:
        return self.objects.get(VERSIONS, version_object_name(self.channel, version))

    def current(self) -> str | None:
        pointed = pointed_version(self.objects.get(CHANNELS, self.channel))
        if pointed is not None:
            return pointed
        versions = self.versions()
        return versions[-1] if versions else None

    def current_path(self) -> Path | None:
        version = self.current()
        if version is None:
            return None
        body = self._body(version)
        if body is None:
            raise PolicyVersionError(self.where, "spec.currentVersion", f"no PolicyVersion {version}")
        return materialise(self, body, version)

    def publish(self, write: Callable[[Path], object]) -> str:
        with tempfile.TemporaryDirectory(prefix="policy-version-") as staging:
            write(Path(staging))
            files = read_folder(Path(staging))
        for _attempt in range(5):
            versions = self.versions()
            version = f"v{int(versions[-1][1:]) + 1 if versions else 1:06d}"
            body = encode_version(files, self.channel, version, f"PolicyVersion {self.objects.namespace}")
            try:
                self.objects.create(VERSIONS, body)
            except VersionExistsError:  # another writer took the number: take the next
                continue
            self.point_current(version)
            return version
        raise PolicyVersionError(self.where, "spec.currentVersion", "five writers raced for version numbers")

    def point_current(self, version: str) -> None:
        if self._body(version) is None:
            raise PolicyVersionError(self.where, "spec.currentVersion", f"no published version {version!r}")
        patch = {"spec": {"currentVersion": version}}
        if self.objects.merge_patch(CHANNELS, self.channel, patch) is None:
            channel = {
                "apiVersion": f"{GROUP}/{API_VERSION}",
                "kind": "PolicyChannel",
                "metadata": {"name": self.channel},
                **patch,
            }
            try:
                self.objects.create(CHANNELS, channel)
            except VersionExistsError:  # created meanwhile: point it
                self.objects.merge_patch(CHANNELS, self.channel, patch)

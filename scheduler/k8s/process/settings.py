"""The operator's settings: one typed object, from a YAML file and ``RL_SCHEDULER_*``
environment variables (the environment wins), validated at start.

    scheduler_name: rl-scheduler
    profile: fgd-reserve          # or gnn (the learned policy), fgd, best-fit, default, ...
    fallback_profile: fgd         # used while the learned policy cannot be loaded
    policy_store: /var/lib/rl-scheduler/policies  # versions the trainer publishes (current)
    policy_versions: {namespace: rl-scheduler, channel: rl-scheduler}  # ... or as custom resources
    checkpoint: /models/gnn       # a fixed checkpoint; the shipped one when unset
    weights: {NodeResourcesFit: 2}  # score weights of the profile's plugins, by name
    profiles: []                  # more profiles (schedulerNames), as KubeSchedulerConfiguration's
    client: {qps: 50, burst: 100, connect_timeout_s: 5, read_timeout_s: 60}
    metrics_address: 0.0.0.0:10259  # HTTPS; /metrics needs a token allowed to get it
    serving: {tls_cert_file: null, tls_key_file: null, max_connections: 256}
    startup_timeout_s: 120        # /healthz fails while caches are not synced after this
    leader_election: {enabled: true, namespace: kube-system}

The learned policy comes from ``policy_store``'s ``current`` version once the trainer
has published one; until then (the store missing or empty) from ``checkpoint``, or the
checkpoint shipped in the package when that is unset. A ``checkpoint`` that is missing
or bad makes the fallback profile schedule. (A ``checkpoint`` naming a store folder,
as older settings did, is still read as a store.) With ``policy_versions.namespace``
set, the versions are custom resources in that namespace (``scheduler.online.store_crd``)
and ``policy_store`` is the local folder their current version is written to.

The process is live (``/healthz``) while it starts, for ``startup_timeout_s``: a
scheduler that could not list the cluster by then (the API server unreachable) fails
its liveness probe, so the kubelet restarts it. Every start-up call to the API
server gives up after ``client.connect_timeout_s`` to connect (and complete TLS) and
``client.read_timeout_s`` without a byte of the answer, and is retried.

``profile`` (with ``weights``) is the profile of ``scheduler_name``; ``profiles`` adds
others in one process, each a KubeSchedulerConfiguration profile (``schedulerName``,
``plugins``, ``pluginConfig``) that may start from a preset (``preset: fgd``); one
named ``scheduler_name`` replaces ``profile``. A KubeSchedulerConfiguration file
(``kind: KubeSchedulerConfiguration``) is read as settings too
(``scheduler.k8s.process.kube_config``).

Nested fields come from the environment as ``RL_SCHEDULER_CLIENT__QPS=5000``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from scheduler.errors import SchedulerInputError
from scheduler.k8s.process.kube_config import is_kube_scheduler_configuration, settings_values
from scheduler.plugins.profile_config import (
    PluginRef,
    Plugins,
    PluginSet,
    ProfileConfig,
    ResolvedProfile,
    error_path,
)
from scheduler.plugins.profiles import preset, profile_names, resolve

__all__ = ["Settings", "SettingsError", "load_settings", "profile_names"]

# Weights under the names they had before NodeResourcesFit scored with a strategy.
WEIGHT_ALIASES = {"LeastAllocated": "NodeResourcesFit", "MostAllocated": "NodeResourcesFit"}


class SettingsError(SchedulerInputError):
    """A setting that is missing, malformed or out of range."""


class ClientSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    qps: float = Field(50.0, gt=0, description="API requests per second (kube-scheduler: 50)")
    burst: int = Field(100, ge=1, description="requests allowed above qps in a burst (kube-scheduler: 100)")
    workers: int = Field(16, ge=1, le=256, description="threads for listings, reads and reviews")
    connections: int = Field(
        64,
        ge=1,
        le=1024,
        description="connections for binds, events and status writes, one write in flight on each",
    )
    kubeconfig: Path | None = Field(None, description="kubeconfig file; in-cluster config when unset")
    connect_timeout_s: float = Field(
        5.0, gt=0, description="seconds to connect to the API server (TCP and TLS) before a call fails"
    )
    read_timeout_s: float = Field(
        60.0, gt=0, description="seconds a call waits for the next bytes of an answer (watches excepted)"
    )


class ServingSettings(BaseModel):
    """The port of /metrics, /healthz and /readyz (``scheduler.k8s.serving.serving``)."""

    model_config = ConfigDict(extra="forbid")

    tls_cert_file: Path | None = Field(
        None,
        description=(
            "serving certificate (PEM), read again when it changes; "
            "a self-signed one is made at start when unset"
        ),
    )
    tls_key_file: Path | None = Field(None, description="its private key (PEM)")
    always_allow_paths: list[str] = Field(
        default_factory=lambda: ["/healthz", "/readyz", "/livez"],
        description="paths served without authentication (kube-scheduler's "
        "--authorization-always-allow-paths); the rest need a token allowed to get them",
    )
    max_connections: int = Field(
        256, ge=1, le=65536, description="open connections; past it the one idle longest is closed"
    )
    read_timeout_s: float = Field(
        10.0, gt=0, description="seconds for the TLS handshake and each request's head"
    )
    write_timeout_s: float = Field(10.0, gt=0, description="seconds for an answer to be taken by the client")
    idle_timeout_s: float = Field(60.0, gt=0, description="a kept connection without a request is closed")

    @model_validator(mode="after")
    def _pair(self) -> ServingSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together")
        return self


class LeaderElectionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        True, description="only the replica holding the Lease schedules; off: every replica does"
    )
    name: str = Field("", description="Lease name; the scheduler name when empty")
    namespace: str = Field("kube-system", description="namespace of the Lease")
    lease_duration_s: float = Field(
        15.0, gt=0, description="how long a Lease not renewed stays held (kube's 15 s)"
    )
    renew_deadline_s: float = Field(
        10.0, gt=0, description="the leader stops scheduling when it cannot renew for this long (kube's 10 s)"
    )
    retry_period_s: float = Field(
        2.0, gt=0, description="how often the Lease is renewed or tried (kube's 2 s)"
    )
    identity: str = Field("", description="holder identity; <hostname>_<random> when empty")

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElectionSettings:
        if not self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError(
                "need retry_period_s < renew_deadline_s < lease_duration_s, got "
                f"{self.retry_period_s} / {self.renew_deadline_s} / {self.lease_duration_s}"
            )
        return self


class PolicyVersionsSettings(BaseModel):
    """Policy versions as custom resources (``scheduler.online.store_crd``): the
    PolicyChannel whose current version schedules, mirrored into ``cache_dir``."""

    model_config = ConfigDict(extra="forbid")

    namespace: str | None = Field(
        None,
        description="namespace of the PolicyVersion and PolicyChannel objects the trainer publishes "
        "(the release's); off if unset",
    )
    channel: str = Field(
        "rl-scheduler",
        min_length=1,
        max_length=50,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="name of the PolicyChannel whose spec.currentVersion schedules",
    )
    cache_dir: Path = Field(
        Path("/tmp/rl-scheduler/policy-versions"),
        description="local folder the current version is written to (verified) and loaded from",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RL_SCHEDULER_", env_nested_delimiter="__", extra="forbid")

    scheduler_name: str = Field(
        "rl-scheduler", min_length=1, description="pods opt in with this schedulerName"
    )
    # The best placement measured, at a cost close to FGD's: the learned policy (gnn) does not beat it
    # on the trace replays (docs/evaluation.md, "The learned policy"), so it is not the default.
    profile: str = Field("fgd-reserve", description="score profile")
    fallback_profile: str = Field("fgd", description="heuristic used when the policy cannot be loaded")
    weights: dict[str, int] = Field(
        default_factory=dict, description="weights of the profile's score plugins, by plugin name"
    )
    profiles: list[ProfileConfig] = Field(
        default_factory=list,
        description="more profiles in this process, each with its own schedulerName "
        "(KubeSchedulerConfiguration's profiles; preset: a built-in profile to start from)",
    )
    checkpoint: Path | None = Field(
        None, description="fixed policy checkpoint folder; the shipped one if unset"
    )
    policy_store: Path | None = Field(
        None,
        description="folder of policy versions the trainer publishes; its current version "
        "schedules once there is one, checkpoint (or the shipped policy) until then",
    )
    policy_versions: PolicyVersionsSettings = Field(default_factory=PolicyVersionsSettings)
    policy_reload_s: float = Field(30.0, gt=0, description="how often to look for a newer policy")
    resync_s: float = Field(
        120.0, gt=0, description="how often to list the cluster and drop what watches missed"
    )
    experience_dir: Path | None = Field(
        None, description="where decisions are logged for the trainer; off if unset"
    )
    experience_max_mb: int = Field(
        256, ge=1, description="size cap of the experience log (oldest segments go)"
    )
    dra_gpu_classes: list[str] = Field(
        ["gpu.nvidia.com"],
        description="DeviceClasses whose DRA devices are whole GPUs: the GPU scores (FGD, the policy) "
        "count them as a node's GPUs and a claim for them as a GPU request",
    )
    typical_pods_trace: str = Field("default", description="openb trace whose mix seeds FGD's typical pods")
    typical_pods_window: int = Field(
        5000, ge=0, description="recent pod arrivals FGD's typical pods follow; 0: fixed"
    )
    metrics_address: str = Field(
        "0.0.0.0:10259", description="host:port of /metrics, /healthz and /readyz (HTTPS, as kube-scheduler)"
    )
    serving: ServingSettings = Field(default_factory=ServingSettings)
    startup_timeout_s: float = Field(
        120.0, gt=0, description="/healthz fails when the caches have not synced this long after start"
    )
    client: ClientSettings = Field(default_factory=ClientSettings)
    leader_election: LeaderElectionSettings = Field(default_factory=LeaderElectionSettings)
    seed: int = Field(0, description="seed for tie-breaking among equally scored nodes")
    log_level: str = Field("INFO", pattern="^(DEBUG|INFO|WARNING|ERROR)$", description="the log's threshold")

    @field_validator("profile", "fallback_profile")
    @classmethod
    def _known_profile(cls, value: str) -> str:
        known = profile_names()
        if value not in known:
            raise ValueError(f"unknown profile {value!r}; known: {', '.join(known)}")
        return value

    @field_validator("metrics_address")
    @classmethod
    def _address(cls, value: str) -> str:
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected host:port, got {value!r}")
        return value

    @model_validator(mode="after")
    def _one_policy_store(self) -> Settings:
        """With policy versions in the API server, the folder store the profiles load
        from is their local cache."""
        if self.policy_versions.namespace is not None:
            if self.policy_store is not None and self.policy_store != self.policy_versions.cache_dir:
                raise SettingsError(
                    "settings",
                    "policy_store",
                    "set with policy_versions.namespace: the versions come from the API server "
                    "(set policy_versions.cache_dir for where they are kept locally)",
                )
            self.policy_store = self.policy_versions.cache_dir
        return self

    @model_validator(mode="after")
    def _fallback_is_heuristic(self) -> Settings:
        if preset(self.fallback_profile).learned:
            raise ValueError(f"fallback_profile must be a heuristic profile, not {self.fallback_profile}")
        self.scheduler_profiles()  # every profile resolves, or the field at fault is named
        return self

    def _own_profile(self) -> ProfileConfig:
        """``profile`` with ``weights``, for ``scheduler_name``."""
        scores = {name for name, _ in preset(self.profile).scores}
        enabled = []
        for name, weight in self.weights.items():
            plugin = WEIGHT_ALIASES.get(name, name)
            if plugin not in scores:
                raise SettingsError(
                    "settings",
                    f"weights.{name}",
                    f"not a score plugin of profile {self.profile} (its scores: {', '.join(sorted(scores))})",
                )
            enabled.append(PluginRef(name=plugin, weight=weight))
        plugins = Plugins(score=PluginSet(enabled=tuple(enabled)))
        return ProfileConfig(scheduler_name=self.scheduler_name, preset=self.profile, plugins=plugins)

    def scheduler_profiles(self) -> list[ResolvedProfile]:
        """Every profile this process schedules with, ``scheduler_name``'s first."""
        named = [(f"profiles[{i}]", p) for i, p in enumerate(self.profiles)]
        seen: dict[str, str] = {}
        for path, profile in named:
            if profile.scheduler_name in seen:
                raise SettingsError(
                    "settings",
                    f"{path}.schedulerName",
                    f"{profile.scheduler_name} is the schedulerName of {seen[profile.scheduler_name]} too",
                )
            seen[profile.scheduler_name] = path
        if self.scheduler_name not in seen:
            named.insert(0, ("profile", self._own_profile()))
        else:
            named.sort(key=lambda item: item[1].scheduler_name != self.scheduler_name)
        return [resolve(profile, "settings", path) for path, profile in named]

    @property
    def lease_name(self) -> str:
        return self.leader_election.name or self.scheduler_name

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],  # noqa: ARG003
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,  # noqa: ARG003
        file_secret_settings: PydanticBaseSettingsSource,  # noqa: ARG003
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The environment overrides the file (passed as init values).
        return env_settings, init_settings


def load_settings(path: Path | None = None, **overrides: Any) -> Settings:
    """Settings from ``path`` (YAML), the environment and ``overrides``; a clear
    ``SettingsError`` naming the file and the field on anything invalid."""
    where = str(path) if path else "settings"
    values: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except OSError as error:
            raise SettingsError(where, "file", f"cannot read: {error.strerror}") from None
        except yaml.YAMLError as error:
            raise SettingsError(where, "file", f"not valid YAML: {error}") from None
        if not isinstance(loaded, dict):
            raise SettingsError(where, "file", "expected a mapping of settings")
        if is_kube_scheduler_configuration(loaded):
            try:
                loaded = settings_values(loaded, where)
            except SchedulerInputError as error:
                raise SettingsError(where, error.field, error.problem) from None
        values.update(loaded)
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Settings(**values)
    except ValidationError as error:
        first = error.errors()[0]
        cause = (first.get("ctx") or {}).get("error")
        if isinstance(cause, SchedulerInputError):
            raise SettingsError(where, cause.field, cause.problem) from None
        field = error_path(first["loc"]) or "settings"
        problem = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
        raise SettingsError(where, field, problem) from None

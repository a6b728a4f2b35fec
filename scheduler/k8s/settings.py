"""The operator's settings: one typed object, from a YAML file and ``RL_SCHEDULER_*``
environment variables (the environment wins), validated at start.

    scheduler_name: rl-scheduler
    profile: gnn                  # or fgd, best-fit, default, ...
    fallback_profile: fgd         # used while the learned policy cannot be loaded
    policy_store: /var/lib/rl-scheduler/policies  # versions the trainer publishes (current)
    checkpoint: /models/gnn       # a fixed checkpoint; the shipped one when unset
    weights: {LeastAllocated: 2}  # score weights by plugin (kube profiles; preferences in all)
    client: {qps: 50, burst: 100, connect_timeout_s: 5, read_timeout_s: 60}
    metrics_address: 0.0.0.0:10260
    startup_timeout_s: 120        # /healthz fails while caches are not synced after this
    leader_election: {enabled: true, namespace: kube-system}

The learned policy comes from ``policy_store``'s ``current`` version once the trainer
has published one; until then (the store missing or empty) from ``checkpoint``, or the
checkpoint shipped in the package when that is unset. A ``checkpoint`` that is missing
or bad makes the fallback profile schedule. (A ``checkpoint`` naming a store folder,
as older settings did, is still read as a store.)

The process is live (``/healthz``) while it starts, for ``startup_timeout_s``: a
scheduler that could not list the cluster by then (the API server unreachable) fails
its liveness probe, so the kubelet restarts it. Every start-up call to the API
server gives up after ``client.connect_timeout_s`` to connect (and complete TLS) and
``client.read_timeout_s`` without a byte of the answer, and is retried.

Nested fields come from the environment as ``RL_SCHEDULER_CLIENT__QPS=5000``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from scheduler.errors import SchedulerInputError
from scheduler.plugins.registry import profile_names

LEARNED_PROFILES = ("gnn",)


class SettingsError(SchedulerInputError):
    """A setting that is missing, malformed or out of range."""


class ClientSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    qps: float = Field(50.0, gt=0, description="API requests per second (kube-scheduler: 50)")
    burst: int = Field(100, ge=1, description="requests allowed above qps in a burst (kube-scheduler: 100)")
    workers: int = Field(16, ge=1, le=256, description="threads for listings, leases and other calls")
    connections: int = Field(
        256,
        ge=1,
        le=1024,
        description="concurrent binds, events and status writes (kube-scheduler's are not capped)",
    )
    kubeconfig: Path | None = Field(None, description="kubeconfig file; in-cluster config when unset")
    connect_timeout_s: float = Field(
        5.0, gt=0, description="seconds to connect to the API server (TCP and TLS) before a call fails"
    )
    read_timeout_s: float = Field(
        60.0, gt=0, description="seconds a call waits for the next bytes of an answer (watches excepted)"
    )


class LeaderElectionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    name: str = Field("", description="Lease name; the scheduler name when empty")
    namespace: str = "kube-system"
    lease_duration_s: float = Field(15.0, gt=0)
    renew_deadline_s: float = Field(10.0, gt=0)
    retry_period_s: float = Field(2.0, gt=0)
    identity: str = Field("", description="holder identity; <hostname>_<random> when empty")

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElectionSettings:
        if not self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError(
                "need retry_period_s < renew_deadline_s < lease_duration_s, got "
                f"{self.retry_period_s} / {self.renew_deadline_s} / {self.lease_duration_s}"
            )
        return self


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RL_SCHEDULER_", env_nested_delimiter="__", extra="forbid")

    scheduler_name: str = Field(
        "rl-scheduler", min_length=1, description="pods opt in with this schedulerName"
    )
    profile: str = Field("gnn", description="score profile")
    fallback_profile: str = Field("fgd", description="heuristic used when the policy cannot be loaded")
    weights: dict[str, int] = Field(default_factory=dict, description="score plugin weights by plugin name")
    checkpoint: Path | None = Field(
        None, description="fixed policy checkpoint folder; the shipped one if unset"
    )
    policy_store: Path | None = Field(
        None,
        description="folder of policy versions the trainer publishes; its current version "
        "schedules once there is one, checkpoint (or the shipped policy) until then",
    )
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
    typical_pods_trace: str = Field("default", description="openb trace whose mix seeds FGD's typical pods")
    typical_pods_window: int = Field(
        5000, ge=0, description="recent pod arrivals FGD's typical pods follow; 0: fixed"
    )
    metrics_address: str = Field("0.0.0.0:10260", description="host:port of /metrics, /healthz and /readyz")
    startup_timeout_s: float = Field(
        120.0, gt=0, description="/healthz fails when the caches have not synced this long after start"
    )
    client: ClientSettings = Field(default_factory=ClientSettings)
    leader_election: LeaderElectionSettings = Field(default_factory=LeaderElectionSettings)
    seed: int = Field(0, description="seed for tie-breaking among equally scored nodes")
    log_level: str = Field("INFO", pattern="^(DEBUG|INFO|WARNING|ERROR)$")

    @field_validator("profile", "fallback_profile")
    @classmethod
    def _known_profile(cls, value: str) -> str:
        # The learned profile registers itself when its package (torch) is imported.
        known = sorted({*profile_names(), *LEARNED_PROFILES})
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
    def _fallback_is_heuristic(self) -> Settings:
        if self.fallback_profile == "gnn":
            raise ValueError("fallback_profile must be a heuristic profile, not gnn")
        return self

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
        values.update(loaded)
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Settings(**values)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "settings"
        raise SettingsError(where, field, first["msg"]) from None

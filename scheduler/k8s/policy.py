"""Which profile scores pods, and keeping it current.

The configured profile (the learned ``gnn`` policy by default) is loaded from its
checkpoint; if that is missing, corrupt or of another feature schema, the heuristic
fallback profile schedules instead, a log line and ``rl_scheduler_policy_load_failures_total``
say why. A newer checkpoint (a newer version folder, or a rewritten manifest) is
loaded in the background and swapped in between two decisions, without a restart.
Loading reads safetensors and JSON only; it never runs code from the file.

FGD-style scores measure fragmentation against the typical workload: it starts as the
mix of an openb trace and then follows the recent pod arrivals of this cluster.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scheduler.errors import SchedulerInputError
from scheduler.framework.profile import Profile
from scheduler.k8s.metrics import Metrics
from scheduler.k8s.settings import LEARNED_PROFILES, Settings
from scheduler.objects.pod import Pod
from scheduler.online.store import PolicyStore
from scheduler.plugins.registry import ProfileContext, build_profile
from scheduler.sim.catalog import pod_list_path
from scheduler.sim.trace import load_pods
from scheduler.state.fragmentation import PodShape, TypicalPods, pod_shape, typical_pods

log = logging.getLogger(__name__)


def checkpoint_fingerprint(path: Path | None) -> tuple[str, float] | None:
    """Identifies the checkpoint to load: a folder with ``manifest.json``, or the
    ``current`` version of a policy store the trainer publishes to."""
    if path is None or not path.is_dir():
        return None
    chosen = path if (path / "manifest.json").is_file() else PolicyStore(path).current_path()
    if chosen is None:
        return None
    try:
        return str(chosen), (chosen / "manifest.json").stat().st_mtime
    except OSError:
        return str(chosen), 0.0


def failure_reason(field: str) -> str:
    """A checkpoint error's field as a small set of metric label values."""
    if field in ("path", "file"):
        return "missing"
    if field in ("format", "format_version", "feature_schema_version", "features", "model"):
        return "incompatible"
    return "corrupt"


@dataclass
class ActiveProfile:
    profile: Profile
    source: str  # "policy" or "fallback"
    version: str  # vN of a policy store, "shipped", "heuristic", or "none" (fallback)
    detail: str = ""  # why the fallback schedules


class TypicalWorkload:
    """FGD's typical pods: a trace's mix at first, then the recent arrivals."""

    def __init__(self, trace: str, window: int) -> None:
        self.window: deque[PodShape] = deque(maxlen=max(window, 1))
        self.enabled = window > 0
        self._since_update = 0
        try:
            self.current = typical_pods(pod_shape(p) for p in load_pods(pod_list_path(trace)))
        except SchedulerInputError as error:
            log.warning("typical pods: %s; starting from the observed workload only", error)
            self.current = TypicalPods((), ())

    def observe(self, pod: Pod) -> bool:
        """Record an arrival; True when the typical pods were recomputed."""
        if not self.enabled:
            return False
        self.window.append(pod_shape(pod))
        self._since_update += 1
        maxlen = self.window.maxlen or 1
        if len(self.window) >= maxlen // 2 and self._since_update >= max(1, maxlen // 5):
            self._since_update = 0
            self.current = typical_pods(self.window)
            return True
        return False


class PolicyManager:
    def __init__(self, settings: Settings, metrics: Metrics, workload: TypicalWorkload) -> None:
        self.settings = settings
        self.metrics = metrics
        self.workload = workload
        self.rng = np.random.default_rng(settings.seed)
        self._fingerprint: tuple[str, float] | None = None
        self.active = self._fallback("not loaded yet")
        self.load()

    def _context(self, checkpoint: Path | None = None) -> ProfileContext:
        return ProfileContext(
            rng=self.rng,
            typical_pods=self.workload.current,
            weights=self.settings.weights,
            checkpoint=checkpoint,
        )

    def _fallback(self, why: str) -> ActiveProfile:
        profile = build_profile(self.settings.fallback_profile, self._context())
        return ActiveProfile(profile, "fallback", "none", why)

    def _publish(self) -> None:
        self.metrics.policy_info.clear()
        self.metrics.policy_info.labels(
            self.active.profile.name, self.active.version, self.active.source
        ).set(1)
        # vN of a policy store counts N; the shipped checkpoint and heuristics count 0.
        version = self.active.version
        numeric = int(version[1:]) if self.active.source == "policy" and version[1:].isdigit() else 0
        self.metrics.policy_version.set(numeric)

    def load(self) -> None:
        """(Re)build the configured profile; on a bad checkpoint, the fallback."""
        if self.settings.profile not in LEARNED_PROFILES:
            self.active = ActiveProfile(
                build_profile(self.settings.profile, self._context()), "policy", "heuristic"
            )
            self._publish()
            return
        fingerprint = checkpoint_fingerprint(self.settings.checkpoint)
        self._fingerprint = fingerprint
        checkpoint = Path(fingerprint[0]) if fingerprint else self.settings.checkpoint
        if (
            fingerprint is None
            and checkpoint is not None
            and checkpoint.is_dir()
            and not any(checkpoint.iterdir())
        ):
            # An empty policy store (nothing published yet): start from the shipped policy.
            checkpoint = None
        try:
            importlib.import_module("scheduler.policy")  # registers the learned profiles
            profile = build_profile(self.settings.profile, self._context(checkpoint))
        except ImportError as error:
            self.metrics.policy_load_failures.labels("unavailable").inc()
            log.error(
                "learned policy unavailable (%s); %s schedules instead", error, self.settings.fallback_profile
            )
            self.active = self._fallback(f"unavailable: {error}")
        except SchedulerInputError as error:
            self.metrics.policy_load_failures.labels(failure_reason(error.field)).inc()
            log.error("policy not loaded, %s schedules instead: %s", self.settings.fallback_profile, error)
            self.active = self._fallback(str(error))
        else:
            # A store's version folder names the version; the packaged checkpoint is "shipped".
            version = Path(fingerprint[0]).name if fingerprint else "shipped"
            self.active = ActiveProfile(profile, "policy", version)
            log.info("scheduling with %s policy %s", profile.name, self.active.version)
        self._publish()

    def on_arrival(self, pod: Pod) -> None:
        if self.workload.observe(pod):
            # New typical pods: rebuild so FGD-style scores measure against them.
            self.load()

    async def watch(self) -> None:
        """Reload when a newer checkpoint appears."""
        while True:
            await asyncio.sleep(self.settings.policy_reload_s)
            if self.settings.profile not in LEARNED_PROFILES:
                continue
            fingerprint = await asyncio.to_thread(checkpoint_fingerprint, self.settings.checkpoint)
            if fingerprint != self._fingerprint:
                log.info("new policy checkpoint %s", fingerprint[0] if fingerprint else None)
                await asyncio.to_thread(self.load)

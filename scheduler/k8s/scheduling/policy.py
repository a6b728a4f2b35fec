"""Which profile scores pods, and keeping it current.

The configured profile (the learned ``gnn`` policy by default) is loaded from the
current version of the policy store the trainer publishes to (``policy_store``); while
that store is missing or holds no version yet (a fresh install), from ``checkpoint``,
or the checkpoint shipped in the package when that is unset. If the checkpoint to load
is missing, corrupt, malformed or of another feature schema (whatever fails while it
loads, at start or on a reload), the heuristic fallback profile schedules instead, a
log line and ``rl_scheduler_policy_load_failures_total`` say why (``reason``:
``missing``, ``incompatible``, ``corrupt``, ``unavailable`` without the numpy policy's
dependencies, ``error`` for anything unforeseen, logged with its traceback).
A newer checkpoint (a newly published version, or a rewritten manifest) is loaded in
the background and swapped in between two decisions, without a restart; no failure
ends that background loop. Loading reads safetensors and JSON only; it never runs
code from the file.

With ``policy_versions.namespace`` set, the versions are custom resources
(``scheduler.online.store_crd``) and ``policy_store`` is the local folder that
``PolicyVersionMirror`` (``scheduler.k8s.scheduling.policy_versions``) keeps the
channel's current version in: read once before the first profile is built
(``policy_version_mirror``), then followed through kopf's watch. The loading and its
fallback stay the same; a version object the mirror refuses never reaches them.

FGD-style scores measure fragmentation against the typical workload: it starts as the
mix of an openb trace and then follows the recent pod arrivals of this cluster.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.errors import SchedulerInputError
from scheduler.framework.profile import Profile
from scheduler.k8s.process.settings import Settings
from scheduler.k8s.serving.metrics import Metrics
from scheduler.objects.pod import Pod
from scheduler.online.store import PolicyStore
from scheduler.plugins.profile_config import ResolvedProfile
from scheduler.plugins.profiles import build, preset
from scheduler.plugins.registry import ProfileContext
from scheduler.plugins.remaining_lifetimes import HiddenLifetimes, RemainingLifetimes
from scheduler.sim.catalog import pod_list_path
from scheduler.sim.trace import load_pod_shapes
from scheduler.state.fragmentation import PodShape, TypicalPods, pod_shape, typical_pods

if TYPE_CHECKING:
    from scheduler.k8s.scheduling.policy_versions import PolicyVersionMirror

log = logging.getLogger(__name__)


MANIFEST = "manifest.json"
SHIPPED = "shipped"


@dataclass(frozen=True)
class CheckpointChoice:
    """The checkpoint to load: a folder, or None for the one shipped in the package."""

    path: Path | None
    version: str  # vN of a policy store, a fixed checkpoint's folder name, or "shipped"
    modified: float = 0.0  # its manifest's mtime: a rewritten manifest is a new checkpoint
    waiting_for: Path | None = None  # the policy store that has no version yet

    @property
    def fingerprint(self) -> tuple[str, float]:
        return str(self.path or SHIPPED), self.modified


def _published(store: Path) -> Path | None:
    """The folder of a store's current version; None while it holds none."""
    return PolicyStore(store).current_path() if store.is_dir() else None


def _modified(folder: Path) -> float:
    try:
        return (folder / MANIFEST).stat().st_mtime
    except OSError:
        return 0.0


def choose_checkpoint(policy_store: Path | None, checkpoint: Path | None) -> CheckpointChoice:
    """The store's current version; else ``checkpoint``; else the shipped one. A
    ``checkpoint`` that names a store folder (one without a manifest) is read as a
    store, as it was before ``policy_store`` existed: its current version, or the
    shipped checkpoint while the folder is empty."""
    if policy_store is not None:
        published = _published(policy_store)
        if published is not None:
            return CheckpointChoice(published, published.name, _modified(published))
    waiting_for = policy_store
    if checkpoint is not None and checkpoint.is_dir() and not (checkpoint / MANIFEST).is_file():
        published = _published(checkpoint)
        if published is not None:
            return CheckpointChoice(published, published.name, _modified(published))
        if not any(checkpoint.iterdir()):
            return CheckpointChoice(None, SHIPPED, waiting_for=checkpoint)
    if checkpoint is not None:
        return CheckpointChoice(checkpoint, checkpoint.name, _modified(checkpoint), waiting_for)
    return CheckpointChoice(None, SHIPPED, waiting_for=waiting_for)


def failure_reason(field: str) -> str:
    """A checkpoint error's field (``model.hidden``: its top-level field counts) as a
    small set of metric label values."""
    top = field.split(".", 1)[0]
    if top in ("path", "file"):
        return "missing"
    if top in ("format", "format_version", "feature_schema_version", "features", "model"):
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
            self.current = typical_pods(load_pod_shapes(pod_list_path(trace)))
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
    """The profiles of this process, one per schedulerName, each built and kept current.

    A profile with a learned plugin reads the chosen checkpoint; while that cannot be
    loaded, the ``fallback_profile`` preset schedules its pods instead."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        workload: TypicalWorkload,
        lifetimes: RemainingLifetimes | None = None,
        versions: PolicyVersionMirror | None = None,
    ) -> None:
        self.settings = settings
        # The channel of policy versions in the API server, mirrored into policy_store
        # (kopf's handlers feed it: ``policy_versions.register``); None with a folder store.
        self.versions = versions
        self.metrics = metrics
        self.workload = workload
        # What lifetime-aware plugins are told (``lifetimes.LiveLifetimes`` live).
        self.lifetimes: RemainingLifetimes = lifetimes if lifetimes is not None else HiddenLifetimes()
        self.rng = np.random.default_rng(settings.seed)
        self.profiles = settings.scheduler_profiles()
        self._fingerprint: tuple[str, float] | None = None
        self.by_scheduler = {p.scheduler_name: self._fallback(p, "not loaded yet") for p in self.profiles}
        self.load()
        for resolved in self.profiles:
            if not resolved.learned:
                log.info(
                    "scheduling %s with the %s profile (a heuristic)", resolved.scheduler_name, resolved.name
                )
        if settings.policy_store is not None and not self.learned:
            log.warning(
                "policy store %s is set but no profile is learned: the trainer's versions are not used "
                "(profile gnn, or a profile with preset gnn, schedules with them)",
                settings.policy_store,
            )

    @property
    def active(self) -> ActiveProfile:
        """The profile of ``scheduler_name`` (the first one)."""
        return self.by_scheduler[self.profiles[0].scheduler_name]

    @property
    def scheduler_names(self) -> list[str]:
        return [p.scheduler_name for p in self.profiles]

    def profile_for(self, scheduler_name: str) -> ActiveProfile | None:
        return self.by_scheduler.get(scheduler_name)

    @property
    def learned(self) -> bool:
        return any(p.learned for p in self.profiles)

    def _context(self, checkpoint: Path | None = None) -> ProfileContext:
        return ProfileContext(
            rng=self.rng, typical_pods=self.workload.current, checkpoint=checkpoint, lifetimes=self.lifetimes
        )

    def _fallback(self, resolved: ResolvedProfile, why: str) -> ActiveProfile:
        fallback = preset(self.settings.fallback_profile, resolved.scheduler_name)
        return ActiveProfile(build(fallback, self._context()), "fallback", "none", why)

    def _publish(self) -> None:
        self.metrics.policy_info.clear()
        numeric = 0
        for active in self.by_scheduler.values():
            self.metrics.policy_info.labels(active.profile.name, active.version, active.source).set(1)
            # vN of a policy store counts N; the shipped checkpoint and heuristics count 0.
            version = active.version
            if active.source == "policy" and version[1:].isdigit():
                numeric = max(numeric, int(version[1:]))
        self.metrics.policy_version.set(numeric)

    def load(self) -> None:
        """(Re)build every profile; a learned one that cannot load gets the fallback."""
        choice: CheckpointChoice | OSError | None = None
        announce = False
        if self.learned:
            try:
                choice = choose_checkpoint(self.settings.policy_store, self.settings.checkpoint)
            except OSError as error:  # a store folder that cannot be listed
                choice = error
        if isinstance(choice, CheckpointChoice):
            announce = choice.fingerprint != self._fingerprint
            self._fingerprint = choice.fingerprint
            if announce and choice.waiting_for is not None:
                learned = next(p.name for p in self.profiles if p.learned)
                log.info(
                    "policy store %s has no version yet: scheduling with %s until the trainer publishes one",
                    choice.waiting_for,
                    f"the {learned} policy in {choice.path}"
                    if choice.path
                    else f"the shipped {learned} policy",
                )
        for resolved in self.profiles:
            if choice is None or not resolved.learned:
                active = ActiveProfile(build(resolved, self._context()), "policy", "heuristic")
            elif isinstance(choice, OSError):
                self.metrics.policy_load_failures.labels("missing").inc()
                log.error(
                    "policy store unreadable, %s schedules instead: %s",
                    self.settings.fallback_profile,
                    choice,
                )
                active = self._fallback(resolved, f"policy store unreadable: {choice}")
            else:
                active = self._load_learned(resolved, choice, announce)
            self.by_scheduler[resolved.scheduler_name] = active
        self._publish()

    def _load_learned(
        self, resolved: ResolvedProfile, choice: CheckpointChoice, announce: bool
    ) -> ActiveProfile:
        fallback = self.settings.fallback_profile
        try:
            profile = build(resolved, self._context(choice.path))
        except ImportError as error:
            self.metrics.policy_load_failures.labels("unavailable").inc()
            log.error("learned policy unavailable (%s); %s schedules instead", error, fallback)
            return self._fallback(resolved, f"unavailable: {error}")
        except SchedulerInputError as error:
            self.metrics.policy_load_failures.labels(failure_reason(error.field)).inc()
            log.error("policy not loaded, %s schedules instead: %s", fallback, error)
            return self._fallback(resolved, str(error))
        except Exception as error:  # a checkpoint must never stop the scheduler; a bug shows its traceback
            self.metrics.policy_load_failures.labels("error").inc()
            log.exception("policy %s not loaded, %s schedules instead", choice.path or SHIPPED, fallback)
            return self._fallback(resolved, f"error: {error!r}")
        if announce:
            log.info("scheduling %s with %s policy %s", resolved.scheduler_name, profile.name, choice.version)
        return ActiveProfile(profile, "policy", choice.version)

    def on_arrival(self, pod: Pod) -> None:
        if self.workload.observe(pod):
            # New typical pods: rebuild so FGD-style scores measure against them.
            self.load()

    async def watch(self) -> None:
        """Reload when a newer checkpoint appears. Nothing a checkpoint or the store does
        ends this loop: a candidate that cannot load gets the fallback (``load``), and
        any other failure is logged with its traceback (once while it repeats) and
        counted, while the profiles in use keep scheduling."""
        failing = ""
        while True:
            await asyncio.sleep(self.settings.policy_reload_s)
            if not self.learned:
                continue
            try:
                await self._reload_if_new()
            except Exception as error:
                if repr(error) != failing:
                    self.metrics.policy_load_failures.labels("error").inc()
                    log.exception("policy reload failed; the profiles in use keep scheduling")
                failing = repr(error)
            else:
                failing = ""

    async def _reload_if_new(self) -> None:
        choice = await asyncio.to_thread(
            choose_checkpoint, self.settings.policy_store, self.settings.checkpoint
        )
        if choice.fingerprint != self._fingerprint:
            log.info("new policy checkpoint %s", choice.path or SHIPPED)
            await asyncio.to_thread(self.load)


def policy_version_mirror(
    settings: Settings, api_client: Any, metrics: Metrics
) -> PolicyVersionMirror | None:
    """The mirror of ``settings.policy_versions``' channel, synced once (two GETs; call
    it in a thread), or None when the versions are not custom resources. An API server
    that does not answer, or a cluster without the CRD, leaves the cache as it is (the
    shipped or fixed checkpoint schedules) and the watch catches up."""
    wanted = settings.policy_versions
    if wanted.namespace is None:
        return None
    from scheduler.k8s.scheduling.policy_versions import (  # noqa: PLC0415
        KubePolicyObjects,
        PolicyVersionMirror,
    )

    mirror = PolicyVersionMirror(
        KubePolicyObjects(api_client, wanted.namespace),
        wanted.channel,
        wanted.cache_dir,
        on_refused=lambda reason: metrics.policy_load_failures.labels(reason).inc(),
    )
    try:
        mirror.sync()
    except Exception as error:  # the scheduler starts regardless; kopf's watch follows
        log.warning(
            "policy channel %s not read at start (%s); following it once kopf watches", mirror.where, error
        )
    return mirror

"""The live scheduler's lifetime source: how long the pods on the cluster will still run.

``LiveLifetimes`` answers what lifetime-aware plugins ask (``RemainingLifetimes``:
``ProfileContext.lifetimes``, so ``fgd-reserve-lifetime`` and any lifetime-reading
policy work live) and what start forecasts sample (``remaining_quantiles``), from a
``scheduler.lifetimes`` model at each pod's age:

- **Which model.** ``<policy_store>/current/lifetimes/`` when the current version of the
  policy store has that folder (the trainer publishes refitted models there,
  ``scheduler.online.lifetime_refit``, in ``model_file``'s format): source ``store``,
  version the store's ``vNNNNNN``. Otherwise the model shipped in the package (fitted
  on openb ``default``): source ``shipped``. ``rl_scheduler_lifetime_model_info{source,
  version}`` is 1 for the one loaded.
- **Reloads.** Every ``policy_reload_s`` (``watch``) the choice is made again; a new
  version, or a rewritten manifest, is loaded in a thread and swapped in between two
  decisions. A model file that does not load (missing, corrupt, another feature
  version) is refused with a log line and counted
  (``rl_scheduler_lifetime_model_load_failures_total{reason}``); the shipped model
  takes over, and should even that fail, nothing is known (source ``none``: plugins
  score as without lifetimes and no start is forecast). Never a crash.
- **Ages.** ``now - status.startTime``; before the kubelet has set it, from when this
  process saw the pod bound (``bound``); 0 for a pod not started (the pod being
  placed).
- **Cost.** A pod's features are made once and kept by its key (``forget`` drops
  them); each question is one numpy pass over the pods asked about.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scheduler.lifetimes.features import pod_features
from scheduler.lifetimes.model import FloatArray, LifetimeModel
from scheduler.lifetimes.model_file import (
    DEFAULT_MODEL,
    MANIFEST_FILE,
    LifetimeModelError,
    default_model_path,
    load_lifetime_model,
)
from scheduler.objects.pod import Pod
from scheduler.online.store import PolicyStore
from scheduler.plugins.remaining_lifetimes import gpu_residents
from scheduler.resources.gpu import MAX_GPUS_PER_NODE
from scheduler.state.cluster_state import ClusterState, IntArray

log = logging.getLogger(__name__)

LIFETIMES_DIR = "lifetimes"  # a store version's lifetime model (``lifetime_refit.LIFETIMES_DIR``)
SHIPPED, STORE, NONE = "shipped", "store", "none"
MEDIAN = 0.5
MAX_KEPT = 200_000  # pods whose features are kept
# A node's answer to lifetime-aware plugins is asked of the model again after this long
# (sooner when the node changes).
REFRESH_S = 10.0


@dataclass
class _NodeResidents:
    """A node's GPU residents at a node version: when each started, its features, and
    per (pod, GPU held) entry the pod and the GPU; the latest median remaining lifetime
    per GPU as asked of the model at ``asked_at``."""

    version: int
    started: FloatArray
    features: FloatArray
    entry_pod: IntArray
    entry_gpu: IntArray
    free_in: FloatArray = field(default_factory=lambda: np.zeros(MAX_GPUS_PER_NODE))
    asked_at: float = -math.inf


@dataclass(frozen=True)
class ModelChoice:
    """The model folder to load, where it comes from and which version it is."""

    folder: Path | None  # None: nothing to load (source ``none``)
    source: str
    version: str
    modified: float = 0.0  # the manifest's mtime: a rewritten manifest is a new model

    @property
    def fingerprint(self) -> tuple[str, str, float]:
        return str(self.folder), self.version, self.modified


def _modified(folder: Path) -> float:
    try:
        return (folder / MANIFEST_FILE).stat().st_mtime
    except OSError:
        return 0.0


def shipped_choice() -> ModelChoice:
    folder = default_model_path()
    return ModelChoice(folder, SHIPPED, DEFAULT_MODEL, _modified(folder))


def choose_model(policy_store: Path | None) -> ModelChoice:
    """The store's current version's ``lifetimes/`` when it has one, else the shipped
    model. A store that cannot be read counts as having none."""
    if policy_store is not None:
        try:
            current = PolicyStore(policy_store).current_path() if policy_store.is_dir() else None
            if current is not None and (current / LIFETIMES_DIR).is_dir():
                folder = current / LIFETIMES_DIR
                return ModelChoice(folder, STORE, current.name, _modified(folder))
        except OSError as error:
            log.warning("policy store %s unreadable for the lifetime model: %s", policy_store, error)
    return shipped_choice()


def failure_reason(error: Exception) -> str:
    """A load failure as a small set of label values."""
    if isinstance(error, LifetimeModelError):
        if error.field == "file":
            return "missing"
        if error.field in ("format", "format_version", "feature_version", "features"):
            return "incompatible"
        return "corrupt"
    return "error"


class LiveLifetimes:
    """A lifetime model at the pods' ages (``RemainingLifetimes``), kept current."""

    def __init__(
        self,
        policy_store: Path | None = None,
        *,
        on_loaded: Callable[[str, str], None] | None = None,
        on_failure: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
        load: Callable[[Path], LifetimeModel] = load_lifetime_model,
    ) -> None:
        self.policy_store = policy_store
        self.on_loaded = on_loaded
        self.on_failure = on_failure
        self.clock = clock
        self._load = load
        self.model: LifetimeModel | None = None
        self.source = NONE
        self.version = NONE
        self._fingerprint: tuple[str, str, float] | None = None
        self._features: dict[str, tuple[str, FloatArray]] = {}  # by key: (uid, features)
        # When this process saw each pod bound (its age until startTime is set).
        self._bound_at: dict[str, float] = {}
        # What each node's GPUs hold, by row, while the node's version stands.
        self._nodes_of: ClusterState | None = None
        self._model_of: LifetimeModel | None = None
        self._by_row: dict[int, _NodeResidents] = {}
        self.reload()

    # ---- the model ------------------------------------------------------------

    def reload(self) -> bool:
        """Load the chosen model if it changed; True when something new is in use."""
        choice = choose_model(self.policy_store)
        if choice.fingerprint == self._fingerprint:
            return False
        self._fingerprint = choice.fingerprint
        for candidate in (choice, shipped_choice()) if choice.source != SHIPPED else (choice,):
            model = self._try_load(candidate)
            if model is not None:
                self._use(model, candidate.source, candidate.version)
                return True
        self._use(None, NONE, NONE)
        return True

    def _try_load(self, choice: ModelChoice) -> LifetimeModel | None:
        assert choice.folder is not None
        try:
            return self._load(choice.folder)
        except Exception as error:  # any failure of a model file is the file's: refused, never a crash
            reason = failure_reason(error)
            if self.on_failure is not None:
                self.on_failure(reason)
            fallback = "the shipped model" if choice.source != SHIPPED else "no lifetime model"
            if reason == "error":
                log.exception("lifetime model %s not loaded; %s in use", choice.folder, fallback)
            else:
                log.error("lifetime model %s refused (%s); %s in use", choice.folder, error, fallback)
            return None

    def _use(self, model: LifetimeModel | None, source: str, version: str) -> None:
        changed = (source, version) != (self.source, self.version)
        self.model, self.source, self.version = model, source, version
        if self.on_loaded is not None:
            self.on_loaded(source, version)
        if changed:
            log.info("lifetime model: %s %s", source, version)

    async def watch(self, period_s: float) -> None:
        """Look for a newer model every ``period_s``; never returns, never raises."""
        while True:
            await asyncio.sleep(period_s)
            try:
                choice = await asyncio.to_thread(choose_model, self.policy_store)
                if choice.fingerprint != self._fingerprint:
                    loaded = await asyncio.to_thread(self._load_choice, choice)
                    self._apply(choice, loaded)
            except Exception:  # the model in use keeps answering
                log.exception("lifetime model reload failed; the model in use stays")

    def _load_choice(self, choice: ModelChoice) -> tuple[LifetimeModel | None, ModelChoice | None]:
        """Off the event loop: the chosen model, else the shipped one, else nothing."""
        for candidate in (choice, shipped_choice()) if choice.source != SHIPPED else (choice,):
            model = self._try_load(candidate)
            if model is not None:
                return model, candidate
        return None, None

    def _apply(self, choice: ModelChoice, loaded: tuple[LifetimeModel | None, ModelChoice | None]) -> None:
        self._fingerprint = choice.fingerprint
        model, used = loaded
        if model is None or used is None:
            self._use(None, NONE, NONE)
        else:
            self._use(model, used.source, used.version)

    # ---- pods -----------------------------------------------------------------

    def bound(self, key: str, at: float | None = None) -> None:
        """The pod was seen bound (its age counts from here until startTime is set)."""
        if len(self._bound_at) >= MAX_KEPT:
            self._bound_at.clear()
        self._bound_at.setdefault(key, self.clock() if at is None else at)

    def forget(self, key: str) -> None:
        """The pod is gone."""
        self._bound_at.pop(key, None)
        self._features.pop(key, None)

    def ages_s(self, pods: Sequence[Pod]) -> FloatArray:
        now = self.clock()
        started = [p.start_time if p.start_time is not None else self._bound_at.get(p.key, now) for p in pods]
        return np.maximum(now - np.array(started, np.float64), 0.0)

    def features(self, pods: Sequence[Pod]) -> FloatArray:
        rows = []
        for pod in pods:
            known = self._features.get(pod.key)
            if known is None or known[0] != pod.uid:
                if len(self._features) >= MAX_KEPT:  # pods never forgotten: start over
                    self._features.clear()
                known = self._features[pod.key] = (pod.uid, pod_features(pod))
            rows.append(known[1])
        return np.array(rows, np.float64).reshape(len(pods), -1)

    def remaining_quantiles(self, pods: Sequence[Pod], levels: FloatArray) -> FloatArray:
        """``[pods, levels]`` remaining seconds at each quantile level, at the pods'
        ages (a start forecast's ``RemainingSampler``); the model must be loaded."""
        model = self.model
        if model is None:
            raise RuntimeError("no lifetime model loaded")
        if not pods:
            return np.zeros((0, len(levels)), np.float64)
        return model.remaining_quantiles(
            self.features(pods), self.ages_s(pods), tuple(float(q) for q in levels)
        )

    # ---- RemainingLifetimes ---------------------------------------------------

    def pod_remaining_s(self, pod: Pod) -> float | None:
        if self.model is None:
            return None
        return float(self.remaining_quantiles([pod], np.array([MEDIAN]))[0, 0])

    def gpu_free_in_s(self, state: ClusterState, nodes: IntArray) -> FloatArray | None:
        """Per node and GPU, the latest median remaining lifetime of its residents. A
        node's answer is kept while its version stands and for ``REFRESH_S`` (its
        residents' ages move on meanwhile by less than that); the nodes due are asked
        of the model in one pass (``test_cost_per_cycle...`` measures a cycle)."""
        model = self.model
        if model is None:
            return None
        if (
            self._nodes_of is not state
            or self._model_of is not model
            or len(self._by_row) > 4 * max(len(state), 1024)
        ):
            self._nodes_of, self._model_of, self._by_row = state, model, {}
        versions = state.node_version
        now = self.clock()
        parts: list[_NodeResidents] = []
        due: list[_NodeResidents] = []
        for row in nodes.tolist():
            known = self._by_row.get(row)
            if known is None or known.version != versions[row]:
                known = self._by_row[row] = self._residents_of(state, row)
            if known.started.size and now - known.asked_at >= REFRESH_S:
                due.append(known)
            parts.append(known)
        if due:
            started = np.concatenate([p.started for p in due])
            medians = model.remaining_quantiles(
                np.concatenate([p.features for p in due]), np.maximum(now - started, 0.0), (MEDIAN,)
            )[:, 0]
            at = 0
            for part in due:
                mine = np.maximum(medians[at : at + part.started.size], 0.0)
                at += part.started.size
                part.free_in[:] = 0.0
                np.maximum.at(part.free_in, part.entry_gpu, mine[part.entry_pod])
                part.asked_at = now
        if not parts:
            return np.zeros((0, MAX_GPUS_PER_NODE), np.float64)
        return np.stack([p.free_in for p in parts])

    def _residents_of(self, state: ClusterState, row: int) -> _NodeResidents:
        residents = gpu_residents(state, np.array([row], np.int64))
        pods = residents.pods
        started = np.array(
            [p.start_time if p.start_time is not None else self._bound_at.get(p.key, np.nan) for p in pods],
            np.float64,
        )
        # A pod neither started nor seen bound: its age counts from now (0) on, as this
        # process first sees it placed.
        unseen = np.isnan(started)
        if unseen.any():
            now = self.clock()
            for i in np.flatnonzero(unseen).tolist():
                self.bound(pods[i].key, now)
            started[unseen] = now
        return _NodeResidents(
            int(state.node_version[row]),
            started,
            self.features(pods),
            residents.entry_pod,
            residents.entry_gpu,
        )

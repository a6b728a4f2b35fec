"""When a pending pod is likely to start, from the cluster's state and how long the pods
on it will still run (numpy only; the replay and the live scheduler run the same code).

The question. A pod fits no node now. Which residents must leave, on which node, before
it fits, and when will they have left? Each resident's remaining lifetime is a
distribution (the lifetime model's at its age; or the oracle's one true value). A
Monte Carlo answers it:

1. **Where only room is missing.** The profile's own filters run once over every node
   (PreFilter, then each filter on the nodes still in); a node stays a candidate unless
   a filter rejects it for a reason that residents leaving cannot fix (taints, affinity,
   the wrong GPU type, a request larger than the node: every rejection but a resolvable
   ``Insufficient <resource>``, ``Too many pods`` or ``Insufficient nvidia.com/gpu``).
   A PreFilter that rejects every node means never. Pod affinity and topology spread
   that later departures would satisfy are not modelled: such a node is out.
2. **Samples of the future.** ``samples`` draws of every resident's remaining lifetime:
   each resident gets the levels ``(i + 0.5) / samples`` of its distribution in an order
   of its own (a Latin hypercube: exact marginals, residents independent), via the
   source's inverse CDF.
3. **The queue ahead.** The pods ahead of it (``ahead``: higher priority, or the same
   and queued earlier; the first ``max_ahead``, 32) are placed first, in order, each in
   each sample on the node where it fits first given those before it, on the GPUs it
   would get there (the lowest-numbered that fit; a share, the fullest that fits). It
   takes its room at that start and gives it back at its start plus its own lifetime
   (sampled at age 0); until it starts, the room is the later pods' (a pod that fits
   goes, whoever waits before it: the replay's FIFO pass, kube's queue). One that could
   not start before giving up (``ahead_deadlines_s``: the replay's max wait) takes none.
4. **First fit per node and sample.** On a candidate node, the events (residents
   leaving, pods ahead starting and leaving) happen in time order; the pod fits after
   an event when, as ``NodeResourcesFit`` and ``GpuShare`` see it, each resource it asks
   for has room (its pod count too) and ``count`` GPUs it may use each fit its per-GPU
   request (``gpu_fit``'s rules: cores, memory, slots, all slots for a whole GPU, HAMi
   for a share), counted once every event of that time has happened. The first such
   time is the node's in that sample; the start is the earliest over the nodes.
   ``inf``: never (no node ever fits, or what must leave never ends).
5. **Quantiles.** p50 and p90 of the start over the samples (``inverted_cdf``: a start
   some sample had).

What it leaves out (``docs/lifetimes.md``, "Predicted starts", measures what that costs
in the replay): pods arriving later that take room freed before it is enough (later
starts than predicted), other choices of node or GPU by the profile's scores than
first fit, preemption, and resident lifetimes' dependence on one another (drawn
independently).

Cost. At most ``samples`` (128) x the residents of ``max_nodes`` (32) candidate nodes
that hold something the pod waits for, once, and once more per pod ahead with its
events: when more nodes are candidates, the ``PRESELECT`` x ``max_nodes`` closest to
fitting by the state's arrays are looked at, and of them the ``max_nodes`` that fit
soonest with every resident at its median are sampled. ``ahead_time_s`` bounds the
time spent on the pods ahead (the live scheduler gives them 0.1 s). Measured on a
shared 2-core machine, 1,000 8-GPU nodes with 16 pods each, a 4-GPU pod, 32 nodes
sampled: 12 ms alone, 164 ms with 8 pods ahead, 1.4 s with 32 and 141 ms with 32 given
0.1 s (``tests/lifetimes/test_start_forecast.py`` prints it with ``-s``); in the
replays (34-48 GPUs, up to 30 pods queued) 12-59 ms a forecast with the queue.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from scheduler.framework.plugin import CycleContext, FilterPlugin, run_pre_filters
from scheduler.framework.status import Code
from scheduler.objects.pod import PODS, Pod
from scheduler.plugins.filters.gpu_share import INSUFFICIENT_GPU
from scheduler.plugins.filters.node_resources_fit import TOO_MANY_PODS, is_checked_resource
from scheduler.resources.gpu import MAX_GPUS_PER_NODE, MILLI_PER_GPU
from scheduler.state.cluster_state import ClusterState
from scheduler.state.gpu_fit import eligible_gpus, gpus_with_room

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
# (pods, quantile levels [S] in (0, 1)) -> remaining seconds [len(pods), S], each row the
# pod's inverse CDF at the levels (``inf``: never ends).
RemainingSampler = Callable[[Sequence[Pod], FloatArray], FloatArray]

START_QUANTILES = (0.5, 0.9)
DEFAULT_SAMPLES = 128
DEFAULT_MAX_NODES = 32
DEFAULT_MAX_AHEAD = 32
# Candidates looked at resident by resident: this many times ``max_nodes`` (those
# closest to fitting by the state's arrays), of which the ``max_nodes`` that fit soonest
# with every resident at its median are sampled.
PRESELECT = 2
_RESOLVABLE_PREFIX = "Insufficient "


@dataclass(frozen=True)
class StartForecast:
    """Seconds from now until the pod starts, one per sample, sorted (``inf``: never)."""

    samples_s: FloatArray
    candidate_nodes: int = 0  # nodes where only room was missing
    modelled_nodes: int = 0  # of them, those sampled (at most ``max_nodes``)
    ahead: int = 0  # pods ahead in the queue taken into account
    notes: tuple[str, ...] = field(default=())

    def quantile(self, q: float) -> float:
        if self.samples_s.size == 0:
            return float("inf")
        return float(np.quantile(self.samples_s, q, method="inverted_cdf"))

    @property
    def p50_s(self) -> float:
        return self.quantile(0.5)

    @property
    def p90_s(self) -> float:
        return self.quantile(0.9)

    def share_before(self, seconds: float) -> float:
        """The share of samples in which the pod started strictly before ``seconds``:
        a wait ``w`` is within the ``q`` quantile exactly when this is below ``q``."""
        if self.samples_s.size == 0:
            return 0.0
        return float(np.searchsorted(self.samples_s, seconds, side="left")) / self.samples_s.size


def never(note: str = "") -> StartForecast:
    return StartForecast(np.full(1, np.inf), notes=(note,) if note else ())


def _resolvable(reason: str, code: Code) -> bool:
    """A rejection residents leaving can lift: room, as the resource filters word it."""
    if code != Code.UNSCHEDULABLE:
        return False
    return reason in (TOO_MANY_PODS, INSUFFICIENT_GPU) or reason.startswith(_RESOLVABLE_PREFIX)


def room_candidates(
    ctx: CycleContext, filters: Sequence[FilterPlugin], rows: IntArray | None = None
) -> tuple[IntArray, frozenset[str]] | None:
    """The nodes (of ``rows``; all when None) the filters reject for room at most, and
    the resources the profile's NodeResourcesFit ignores; None when PreFilter rejects
    every node."""
    active, status = run_pre_filters(ctx, filters)
    if not status.ok:
        return None
    ignored: set[str] = set()
    candidates = np.arange(len(ctx.state), dtype=np.int64) if rows is None else rows
    for plugin in active:
        ignored |= set(getattr(plugin, "ignored_resources", ()) or ())
        if candidates.size == 0:
            break
        blocked = np.zeros(candidates.size, np.bool_)
        for rejection in plugin.filter(ctx, candidates):
            if not _resolvable(rejection.reason, rejection.code):
                blocked |= rejection.nodes
        if blocked.any():
            candidates = candidates[~blocked]
    return candidates, frozenset(ignored)


@dataclass
class _Need:
    """What a pod asks, over all the state's resource columns then 3 x G GPU columns."""

    request: IntArray  # [R] the pod's request (pods counts 1): what it takes when placed
    checked: BoolArray  # [R] the columns the resource filter checks for it
    gpu_count: int
    gpu_milli: int
    gpu_memory_mib: int
    gpu_memory_percent: int
    eligible: BoolArray | None  # [N, G] GPUs of the type the pod accepts; None: any
    share: bool  # not whole GPUs: a HAMi node only


def _need(state: ClusterState, pod: Pod, ignored: frozenset[str]) -> _Need | None:
    request = state.request_vector(pod)
    checked = np.zeros(request.size, np.bool_)
    checked[state.resource_index[PODS]] = True
    for name, amount in pod.requests.items():
        if amount <= 0 or name in ignored or not is_checked_resource(name):
            continue
        column = state.resource_index.get(name)
        if column is None:
            return None  # no node has any of it
        checked[column] = True
    gpu = pod.gpu
    return _Need(
        request,
        checked,
        gpu.count,
        gpu.milli_per_gpu,
        gpu.memory_mib,
        gpu.memory_percent,
        eligible_gpus(state, gpu) if gpu.count else None,
        bool(gpu.count) and not gpu.is_whole,
    )


@dataclass
class _Nodes:
    """Candidate nodes as arrays over ``W = R + 3G`` columns (the resources, then per GPU
    its free cores, memory and slots): the room now and what each resident gives back
    when it leaves; residents padded to ``K`` (a padded one holds nothing)."""

    rows: IntArray  # [M] rows of the state
    residents: list[list[Pod]]
    room: IntArray  # [M, W]
    release: IntArray  # [M, K, W]
    gpu_slots: IntArray  # [M, G]
    gpu_memory: IntArray  # [M, G] MiB
    gpu_count: IntArray  # [M]
    sharing: BoolArray  # [M]

    def __len__(self) -> int:
        return int(self.rows.size)

    def take(self, keep: IntArray) -> _Nodes:
        residents = [self.residents[i] for i in keep.tolist()]
        k = max((len(r) for r in residents), default=0)
        return _Nodes(
            self.rows[keep],
            residents,
            self.room[keep],
            self.release[keep][:, :k],
            self.gpu_slots[keep],
            self.gpu_memory[keep],
            self.gpu_count[keep],
            self.sharing[keep],
        )


def _nodes(state: ClusterState, rows: IntArray) -> _Nodes:
    r, g = len(state.resource_names), MAX_GPUS_PER_NODE
    width = r + 3 * g
    residents = [list(state.pods_on_node[int(row)].values()) for row in rows]
    k = max((len(on) for on in residents), default=0)
    release = np.zeros((rows.size, k, width), np.int64)
    for m, on in enumerate(residents):
        for i, pod in enumerate(on):
            release[m, i, :r] = state.request_vector(pod)
            for use in state.placements[pod.key].gpu_use:
                release[m, i, r + use.index] += use.milli
                release[m, i, r + g + use.index] += use.memory_mib
                release[m, i, r + 2 * g + use.index] += use.slots
    room = np.concatenate(
        [
            state.allocatable[rows] - state.requested[rows],
            state.gpu_free_milli[rows],
            state.gpu_free_memory[rows],
            state.gpu_free_slots[rows],
        ],
        axis=1,
    )
    return _Nodes(
        rows,
        residents,
        room,
        release,
        state.gpu_slots[rows],
        state.gpu_memory[rows],
        state.gpu_count[rows],
        state.gpu_sharing[rows],
    )


def _memory_need(need: _Need, gpu_memory: IntArray) -> IntArray:
    """MiB the pod takes of each GPU (HAMi floors a percentage: ``memory_on``)."""
    if need.gpu_memory_mib:
        return np.full(gpu_memory.shape, need.gpu_memory_mib, np.int64)
    out: IntArray = gpu_memory * need.gpu_memory_percent // 100
    return out


def _usable_gpus(need: _Need, nodes: _Nodes) -> BoolArray:
    """``[M, G]``: the GPUs the pod may use at all (type, HAMi for a share)."""
    usable: BoolArray = np.arange(MAX_GPUS_PER_NODE)[None, :] < nodes.gpu_count[:, None]
    if need.eligible is not None:
        usable &= need.eligible[nodes.rows]
    if need.share:
        usable &= nodes.sharing[:, None]
    if _whole(need) and (need.gpu_memory_mib or need.gpu_memory_percent):
        usable &= nodes.gpu_memory >= _memory_need(need, nodes.gpu_memory)
    return usable


def _whole(need: _Need) -> bool:
    """Whole GPUs: a GPU fits exactly when no one holds any of its slots (its cores and
    memory are then all free, checked once against the request in ``_usable_gpus``)."""
    return need.gpu_milli >= MILLI_PER_GPU


def _columns(need: _Need) -> IntArray:
    """The columns a fit test of ``need`` reads: the checked resources, then (a GPU pod)
    each GPU's free slots, and for a part of a GPU its free cores and memory (when it
    asks for some) before them."""
    r, g = need.checked.size, MAX_GPUS_PER_NODE
    parts = [np.flatnonzero(need.checked)]
    if need.gpu_count and not _whole(need):
        parts.append(np.arange(r, r + g))
        if need.gpu_memory_mib or need.gpu_memory_percent:
            parts.append(np.arange(r + g, r + 2 * g))
    if need.gpu_count:
        parts.append(np.arange(r + 2 * g, r + 3 * g))
    return np.concatenate(parts).astype(np.int64)


@dataclass
class _Ahead:
    """Pods ahead, placed per sample, as events besides the residents' departures: each
    takes its room at its start (a negative release) and gives it back at its end,
    ``[M, S, E, W]`` and when ``[M, S, E]``; ``taken``: all they take ``[M, S, W]``."""

    taken: IntArray
    release: IntArray
    leave: FloatArray


@dataclass
class _Fit:
    """Per node and sample: when the pod first fits (``inf``: never), the GPUs that fit
    it then and their free cores ``[M, S, G]``."""

    at: FloatArray
    gpus: BoolArray
    gpu_milli: IntArray


# Elements of the largest array one fit test builds (nodes are taken in chunks below it).
_CHUNK_ELEMENTS = 1 << 20


def first_fit(need: _Need, nodes: _Nodes, leave_s: FloatArray, ahead: _Ahead | None = None) -> _Fit:
    """Per node and sample, when the pod first fits if the residents leave at
    ``leave_s`` (``[M, S, K]``) and the pods ``ahead`` are where they were placed."""
    m, s, k = leave_s.shape
    g = MAX_GPUS_PER_NODE
    columns = _columns(need)
    extra = 0 if ahead is None else ahead.leave.shape[2]
    step = max(1, _CHUNK_ELEMENTS // max(s * (k + extra + 1) * columns.size, 1))
    at = np.full((m, s), np.inf)
    gpus = np.zeros((m, s, g), np.bool_)
    milli = np.zeros((m, s, g), np.int64)
    usable = _usable_gpus(need, nodes) if need.gpu_count else None
    for lo in range(0, m, step):
        part = slice(lo, min(m, lo + step))
        at[part], gpus[part], milli[part] = _first_fit(
            need, nodes, part, leave_s[part], ahead, columns, None if usable is None else usable[part]
        )
    return _Fit(at, gpus, milli)


def _first_fit(
    need: _Need,
    nodes: _Nodes,
    part: slice,
    leave: FloatArray,
    ahead: _Ahead | None,
    columns: IntArray,
    usable: BoolArray | None,
) -> tuple[FloatArray, BoolArray, IntArray]:
    m, s, _ = leave.shape
    g = MAX_GPUS_PER_NODE
    now = nodes.room[part][:, None, columns]  # [m, 1, c]
    columns, now, request = _short_columns(need, columns, now, None if ahead is None else ahead.taken[part])
    release, leave = _relevant_residents(nodes.release[part][:, :, columns], leave)
    times, room = _room_after_events(release, leave, now, ahead, part, columns)
    checked = request.size
    fits = np.all(room[..., :checked] >= request, axis=3)  # [m, S, K + 1]
    if ahead is not None:
        # Pods ahead take room as well as residents give it: the room only counts once
        # every event of its time has happened (after the last one of a time).
        at_prefix = np.concatenate([np.zeros((m, s, 1)), times], axis=2)
        next_event = np.concatenate([times, np.full((m, s, 1), np.inf)], axis=2)
        fits &= (at_prefix < next_event) & np.isfinite(at_prefix)
    free = fitting = None
    if usable is not None:
        free, fitting = _fitting_gpus(need, nodes, part, room[..., checked:], usable)
        fits &= np.count_nonzero(fitting, axis=3) >= need.gpu_count
    first = np.argmax(fits, axis=2)[..., None]  # [m, S, 1]
    ok = np.take_along_axis(fits, first, axis=2)[..., 0]
    padded = np.concatenate([np.zeros((m, s, 1)), times], axis=2)
    at = np.where(ok, np.take_along_axis(padded, first, axis=2)[..., 0], np.inf)
    if fitting is None:
        return at, np.zeros((m, s, g), np.bool_), np.zeros((m, s, g), np.int64)
    pick_first = first[..., None]
    gpus = np.take_along_axis(fitting, pick_first, axis=2)[:, :, 0] & ok[..., None]
    if free is None:
        return at, gpus, np.where(gpus, MILLI_PER_GPU, 0)
    milli = np.take_along_axis(free, pick_first, axis=2)[:, :, 0]
    return at, gpus, milli


def _short_columns(
    need: _Need, columns: IntArray, now: IntArray, taken: IntArray | None
) -> tuple[IntArray, IntArray, IntArray]:
    """A resource no node here is short of, even with every pod ahead holding its share
    (``taken``), never stops the pod: its column goes. The columns kept, the room now in
    them and the request in the resources kept."""
    checked = int(np.count_nonzero(need.checked))
    least = now if taken is None else now - taken[:, :, columns]
    short = np.any(least[:, :, :checked] < need.request[need.checked], axis=(0, 1))
    keep = np.concatenate([np.flatnonzero(short), np.arange(checked, columns.size)])
    return columns[keep], now[:, :, keep], need.request[need.checked][short]


def _relevant_residents(release: IntArray, leave: FloatArray) -> tuple[IntArray, FloatArray]:
    """Only the residents that hold something the pod waits for, padded per node (a
    padded one gives nothing and never leaves): ``[m, K', c]`` and ``[m, S, K']``."""
    m, s, k = leave.shape
    relevant = np.any(release != 0, axis=2)  # [m, K]
    kept = int(relevant.sum(axis=1).max(initial=0))
    if kept == k:
        return release, leave
    pick = np.argsort(~relevant, axis=1, kind="stable")[:, :kept]  # [m, K']
    mask = np.take_along_axis(relevant, pick, axis=1)
    release = np.take_along_axis(release, pick[:, :, None], axis=1) * mask[:, :, None]
    leave = np.take_along_axis(leave, np.broadcast_to(pick[:, None, :], (m, s, kept)), axis=2)
    return release, np.where(mask[:, None, :], leave, np.inf)


def _room_after_events(
    release: IntArray, leave: FloatArray, now: IntArray, ahead: _Ahead | None, part: slice, columns: IntArray
) -> tuple[FloatArray, IntArray]:
    """The events in time order per node and sample ``[m, S, E]`` (residents leaving;
    pods ahead starting and ending), and the room after each prefix of them
    ``[m, S, E + 1, c]`` (the first: now)."""
    m, s, k = leave.shape
    if ahead is None:
        order = np.argsort(leave, axis=2, kind="stable")
        gathered = release[np.arange(m)[:, None, None], order]  # [m, S, K, c]
    else:
        leave = np.concatenate([leave, ahead.leave[part]], axis=2)
        everyone = np.concatenate(
            [np.broadcast_to(release[:, None], (m, s, k, columns.size)), ahead.release[part][..., columns]],
            axis=2,
        )
        order = np.argsort(leave, axis=2, kind="stable")
        gathered = np.take_along_axis(everyone, order[..., None], axis=2)
    times = np.take_along_axis(leave, order, axis=2)
    room = np.empty((m, s, times.shape[2] + 1, columns.size), np.int64)
    room[:, :, :1] = now[:, :, None]
    np.cumsum(gathered, axis=2, out=room[:, :, 1:])
    room[:, :, 1:] += now[:, :, None]
    return times, room


def _fitting_gpus(
    need: _Need, nodes: _Nodes, part: slice, per_gpu: IntArray, usable: BoolArray
) -> tuple[IntArray | None, BoolArray]:
    """``[m, S, E + 1, G]``: the GPUs that fit the pod after each prefix of events
    (``gpu_fit``'s rules), and their free cores (None for whole GPUs: all of them)."""
    g = MAX_GPUS_PER_NODE
    slots = per_gpu[..., -g:]
    free = None
    if _whole(need):
        fitting = slots == nodes.gpu_slots[part][:, None, None, :]
    else:
        free = per_gpu[..., :g]
        fitting = (free >= need.gpu_milli if need.gpu_milli else free > 0) & (slots > 0)
        if per_gpu.shape[3] == 3 * g:
            memory_need = _memory_need(need, nodes.gpu_memory[part])[:, None, None, :]
            fitting &= per_gpu[..., g : 2 * g] >= memory_need
    fitting &= usable[:, None, None, :]
    return free, fitting


def _levels(samples: int) -> FloatArray:
    return (np.arange(samples, dtype=np.float64) + 0.5) / samples


def _quantiles(sampler: RemainingSampler, pods: Sequence[Pod], levels: FloatArray) -> FloatArray:
    if not pods:
        return np.zeros((0, levels.size), np.float64)
    out = np.asarray(sampler(pods, levels), np.float64)
    if out.shape != (len(pods), levels.size):
        raise ValueError(f"lifetime sampler: expected shape ({len(pods)}, {levels.size}), got {out.shape}")
    return out


def _shuffled(quantiles: FloatArray, rng: np.random.Generator) -> FloatArray:
    """Each row's levels in an order of its own (a Latin hypercube over the pods)."""
    if quantiles.shape[1] <= 1:
        return quantiles
    order = rng.permuted(np.tile(np.arange(quantiles.shape[1]), (quantiles.shape[0], 1)), axis=1)
    drawn: FloatArray = np.take_along_axis(quantiles, order, axis=1)
    return drawn


def _leave_times(nodes: _Nodes, drawn: FloatArray) -> FloatArray:
    """``[M, S, K]`` from one row of samples per resident (in node order); padding never
    leaves."""
    m = len(nodes)
    k = nodes.release.shape[1]
    s = drawn.shape[1]
    leave = np.full((m, s, k), np.inf)
    at = 0
    for i, on in enumerate(nodes.residents):
        leave[i, :, : len(on)] = drawn[at : at + len(on)].T
        at += len(on)
    return leave


def _closest(state: ClusterState, pod: Pod, need: _Need, candidates: IntArray, keep: int) -> IntArray:
    """The ``keep`` candidates closest to fitting, from the state's arrays alone (no
    resident is looked at): the least missing, as shares of the node, of each resource
    the pod asks, plus the share of its GPUs that do not fit now."""
    columns = np.flatnonzero(need.checked)
    free = state.allocatable[candidates][:, columns] - state.requested[candidates][:, columns]
    size = np.maximum(state.allocatable[candidates][:, columns], 1)
    missing = (np.maximum(need.request[columns] - free, 0) / size).sum(axis=1)
    if need.gpu_count:
        room = gpus_with_room(state, candidates, pod.gpu)
        missing = missing + np.maximum(need.gpu_count - room, 0) / need.gpu_count
    chosen: IntArray = candidates[np.sort(np.argsort(missing, kind="stable")[:keep])]
    return chosen


def _soonest(need: _Need, nodes: _Nodes, sampler: RemainingSampler, max_nodes: int) -> _Nodes:
    """The ``max_nodes`` nodes that fit soonest with every resident at its median."""
    residents = [p for on in nodes.residents for p in on]
    median = _quantiles(sampler, residents, np.array([0.5]))
    at = first_fit(need, nodes, _leave_times(nodes, median)).at[:, 0]
    keep = np.sort(np.argsort(at, kind="stable")[:max_nodes])
    return nodes.take(keep)


def forecast_start(
    state: ClusterState,
    pod: Pod,
    filters: Sequence[FilterPlugin],
    sampler: RemainingSampler,
    *,
    ahead: Sequence[Pod] = (),
    ahead_deadlines_s: Sequence[float] | None = None,
    samples: int = DEFAULT_SAMPLES,
    max_nodes: int = DEFAULT_MAX_NODES,
    max_ahead: int = DEFAULT_MAX_AHEAD,
    ahead_time_s: float | None = None,
    seed: int = 0,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> StartForecast:
    """When ``pod`` (pending) is likely to start on ``state``'s nodes as ``filters`` see
    them, residents leaving as ``sampler`` forecasts; ``ahead``: pods ahead of it in the
    queue, placed first (the first ``max_ahead``); ``ahead_deadlines_s``: seconds from now
    after which each gives up waiting (the replay's max wait; none live): one that could
    not start by then never takes room; ``ahead_time_s``: once placing them has taken
    this long, the rest are left out (the live scheduler's bound; None: no limit). The
    same inputs and ``seed`` give the same answer (without a time limit). A sampler
    whose every pod has one value at every level (the oracle) is sampled once."""
    rng = np.random.default_rng(seed)
    labels = namespace_labels or {}
    found = room_candidates(CycleContext(state, pod, labels), filters)
    if found is None:
        return never("rejected at PreFilter")
    candidates, ignored = found
    need = _need(state, pod, ignored)
    if need is None or candidates.size == 0:
        return never("no node where only room is missing")
    found_nodes = int(candidates.size)
    if candidates.size > PRESELECT * max_nodes:
        candidates = _closest(state, pod, need, candidates, PRESELECT * max_nodes)
    nodes = _nodes(state, candidates)
    if len(nodes) > max_nodes:
        nodes = _soonest(need, nodes, sampler, max_nodes)
    taken = list(ahead[:max_ahead])
    levels = _levels(samples)
    residents = [p for on in nodes.residents for p in on]
    quantiles = _quantiles(sampler, [*residents, *taken], levels)
    if quantiles.size and np.all(quantiles == quantiles[:, :1]):
        quantiles = quantiles[:, :1]  # one value per pod: one sample says it all
    drawn = _shuffled(quantiles, rng)
    leave = _leave_times(nodes, drawn[: len(residents)])
    deadlines = (
        np.full(len(taken), np.inf) if ahead_deadlines_s is None else np.asarray(ahead_deadlines_s, float)
    )
    stop_at = None if ahead_time_s is None else time.perf_counter() + ahead_time_s
    placed, placed_count = (
        _place_ahead(state, nodes, leave, taken, drawn[len(residents) :], deadlines, filters, labels, stop_at)
        if taken
        else (None, 0)
    )
    start = first_fit(need, nodes, leave, placed).at.min(axis=0)
    return StartForecast(
        np.sort(start), candidate_nodes=found_nodes, modelled_nodes=len(nodes), ahead=placed_count
    )


def _chosen_gpus(need: _Need, fitting: BoolArray, free_milli: IntArray) -> BoolArray:
    """``[S, G]``: the GPUs a pod gets of those fitting it: the ``count`` lowest-numbered;
    a share, the fitting GPU with the fewest cores free (best fit)."""
    if need.share:
        cores = np.where(fitting, free_milli, np.iinfo(np.int64).max)
        chosen = np.zeros_like(fitting)
        chosen[np.arange(fitting.shape[0]), np.argmin(cores, axis=1)] = True
        out: BoolArray = chosen & fitting
        return out
    ranked: BoolArray = fitting & (np.cumsum(fitting, axis=1) <= need.gpu_count)
    return ranked


def _place_ahead(
    state: ClusterState,
    nodes: _Nodes,
    leave: FloatArray,
    ahead: Sequence[Pod],
    lifetimes: FloatArray,
    deadlines: FloatArray,
    filters: Sequence[FilterPlugin],
    labels: Mapping[str, Mapping[str, str]],
    stop_at: float | None = None,
) -> tuple[_Ahead, int]:
    """Places each pod of ``ahead`` in order, per sample on the node where it fits first
    (the first such node on a tie), given the pods before it: it takes its room at that
    start and gives it back at its start plus its own lifetime (``lifetimes``:
    ``[A, S]`` at age 0). Room a pod ahead will take is the later pods' until then (the
    FIFO pass: a pod that fits goes, whoever waits before it)."""
    m, s, _ = leave.shape
    s = max(s, lifetimes.shape[1])
    if leave.shape[1] != s:
        leave = np.broadcast_to(leave, (m, s, leave.shape[2]))
    r, g = len(state.resource_names), MAX_GPUS_PER_NODE
    width = nodes.room.shape[1]
    placed = _Ahead(
        np.zeros((m, s, width), np.int64), np.zeros((m, s, 0, width), np.int64), np.zeros((m, s, 0))
    )
    samples = np.arange(s)
    count = 0
    for a, other in enumerate(ahead):
        if stop_at is not None and time.perf_counter() > stop_at:
            break
        count += 1
        found = room_candidates(CycleContext(state, other, labels), filters, nodes.rows)
        their = None if found is None else _need(state, other, found[1])
        if found is None or their is None:
            continue
        fit = first_fit(their, nodes, leave, placed)
        at = np.where(np.isin(nodes.rows, found[0])[:, None], fit.at, np.inf)
        where = np.argmin(at, axis=0)  # [S]
        start = at[where, samples]
        ok = start <= deadlines[a]
        take = np.zeros((m, s, width), np.int64)
        take[where[ok], samples[ok], :r] = their.request
        if their.gpu_count:
            chosen = (
                _chosen_gpus(their, fit.gpus[where, samples], fit.gpu_milli[where, samples]) & ok[:, None]
            )
            memory = _memory_need(their, nodes.gpu_memory[where])  # [S, G]
            take[where, samples, r : r + g] += chosen * their.gpu_milli
            take[where, samples, r + g : r + 2 * g] += chosen * memory
            take[where, samples, r + 2 * g :] += chosen
        gone = np.where(ok, start + np.broadcast_to(lifetimes[a], (s,)), np.inf)
        mine = np.zeros((m, s), np.bool_)
        mine[where[ok], samples[ok]] = True
        events = np.stack([-take, take], axis=2)  # [m, S, 2, W]: taken at the start, back at the end
        when = np.stack(
            [np.where(mine, start[None, :], np.inf), np.where(mine, gone[None, :], np.inf)], axis=2
        )
        placed = _Ahead(
            placed.taken + take,
            np.concatenate([placed.release, events], axis=2),
            np.concatenate([placed.leave, when], axis=2),
        )
    return placed, count

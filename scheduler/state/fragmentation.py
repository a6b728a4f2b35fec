"""GPU fragmentation as the FGD paper defines it (Weng et al., USENIX ATC'23).

A node's fragment amount is the idle GPU share that the *typical* workload could not
use there, in expectation over the typical pods' frequencies:

    F(node) = sum_t freq_t * frag_t(node)
    frag_t  = sum of the free share of GPUs with free < milli_t   if t fits (GPU type
              allowed, enough GPUs with free >= milli_t, enough CPU)
            = idle GPU share of the node                            otherwise

CPU-only typical pods can use no GPU, so for them the whole idle share counts. The
typical pods are the most frequent pod shapes (CPU, GPU milli, GPU count, GPU type)
that together cover 95% of the workload, frequencies renormalised over that set.

The FGD simulator accumulates F per node in float64, bin by bin (q1_lack_both,
q2_lack_gpu, q3_satisfied, q4_lack_cpu, xl_satisfied, xr_lack_cpu, no_access), one
typical pod after another, and sums the bins except q3. ``frag_amount`` follows the
same order of operations (sequential ``cumsum`` per bin), so FGD's truncated integer
scores tie exactly where the simulator's do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.objects.pod import Pod
from scheduler.resources.gpu import parse_model_list, type_matches

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Bins of the FGD simulator, in its order.
Q1_LACK_BOTH, Q2_LACK_GPU, Q3_SATISFIED, Q4_LACK_CPU, XL_SATISFIED, XR_LACK_CPU, NO_ACCESS = range(7)
_FRAGMENT_BINS = (Q1_LACK_BOTH, Q2_LACK_GPU, Q4_LACK_CPU, XL_SATISFIED, XR_LACK_CPU, NO_ACCESS)
# Batches of at most this many states are answered from the memo; at most this many
# states are remembered (then it starts again).
MEMO_BATCH = 64
MEMO_SIZE = 1 << 16


@dataclass(frozen=True, slots=True)
class PodShape:
    """What fragmentation looks at in a pod: CPU, per-GPU share, GPU count, GPU type."""

    cpu_milli: int
    gpu_milli: int
    gpu_count: int
    gpu_type: str = ""  # "V100M16|V100M32" (``GpuRequest.type_constraint``); empty for any type

    def sort_key(self) -> tuple[int, int, int, str]:
        return (self.cpu_milli, self.gpu_milli, self.gpu_count, self.gpu_type)


def pod_shape(pod: Pod) -> PodShape:
    """A pod's shape; GPU type only for GPU pods (the simulator drops it otherwise)."""
    count = pod.gpu.count if pod.gpu.milli_per_gpu else 0
    if not count:
        return PodShape(pod.cpu_milli, 0, 0)
    return PodShape(pod.cpu_milli, pod.gpu.milli_per_gpu, count, pod.gpu.type_constraint)


@dataclass(frozen=True)
class TypicalPods:
    """The typical workload: shapes in the simulator's order with their frequencies."""

    shapes: tuple[PodShape, ...]
    freq: tuple[float, ...]

    @property
    def cpu_milli(self) -> IntArray:
        return np.array([s.cpu_milli for s in self.shapes], np.int64)

    @property
    def gpu_milli(self) -> IntArray:
        return np.array([s.gpu_milli for s in self.shapes], np.int64)

    @property
    def gpu_count(self) -> IntArray:
        return np.array([s.gpu_count for s in self.shapes], np.int64)

    def accessible(self, gpu_models: Sequence[str]) -> npt.NDArray[np.bool_]:
        """``[T, M + 1]``: may shape t run on GPU type m? Column M is "no known type"."""
        out = np.ones((len(self.shapes), len(gpu_models) + 1), np.bool_)
        for t, shape in enumerate(self.shapes):
            models, excluded = parse_model_list(shape.gpu_type)
            if models or excluded:
                # HAMi's CheckType: a GPU type matches an accepted entry it contains.
                out[t, :-1] = [type_matches(m, models, excluded) for m in gpu_models]
                out[t, -1] = not models  # an unknown type is refused only by a list of accepted types
        return out


def typical_pods(shapes: Iterable[PodShape], popularity_percent: int = 95) -> TypicalPods:
    """The simulator's ``GetTypicalPods``: count shapes, most frequent first (ties by
    shape, descending), keep the head covering ``popularity_percent`` of the pods."""
    counts = Counter(shapes)
    total = float(sum(counts.values()))
    if total == 0:
        return TypicalPods((), ())
    ordered = sorted(counts.items(), key=lambda item: (item[1], item[0].sort_key()), reverse=True)
    expected = popularity_percent * total / 100.0
    covered, kept = 0.0, 0
    while covered < expected and kept < len(ordered):
        covered += ordered[kept][1]
        kept += 1
    head = ordered[:kept]
    if kept < len(ordered):
        freq = tuple((count / total) / (covered / total) for _, count in head)
    else:
        freq = tuple(count / total for _, count in head)
    return TypicalPods(tuple(shape for shape, _ in head), freq)


class FragmentationModel:
    """Computes F for batches of (possibly hypothetical) node states."""

    def __init__(self, typical: TypicalPods) -> None:
        self.typical = typical
        self._cpu = typical.cpu_milli
        self._milli = typical.gpu_milli
        self._count = typical.gpu_count
        self._freq = np.array(typical.freq, np.float64)
        self._is_gpu = self._milli > 0
        self._models: tuple[str, ...] = ()
        self._access = typical.accessible(())
        # F of states asked for in small batches: (CPU left, free GPU bytes, model id) -> F,
        # for the model list ``_models`` (ids mean other models in another).
        self._memo: dict[tuple[int, bytes, int], float] = {}

    def _accessible(self, gpu_models: Sequence[str]) -> npt.NDArray[np.bool_]:
        if tuple(gpu_models) != self._models:
            self._models = tuple(gpu_models)
            self._access = self.typical.accessible(self._models)
            self._memo.clear()
        return self._access

    def frag_amount(
        self,
        cpu_left: IntArray,
        gpu_left: IntArray,
        model_id: IntArray,
        gpu_models: Sequence[str],
    ) -> FloatArray:
        """F per state: ``cpu_left [B]``, ``gpu_left [B, G]`` (milli free per GPU, 0 for
        absent GPUs), ``model_id [B]`` (index into ``gpu_models``, -1 unknown).

        A scheduler asks for a few states per decision (the node a pod just took, the
        states a pod would leave), where numpy's per-call cost is most of the time, and
        the same states come again (nodes of one type, filled alike). A batch of at
        most ``MEMO_BATCH`` states is answered from a memo of the values computed
        before; the rest are computed together as for any batch. Same floats either
        way: F is a function of the state."""
        batch = cpu_left.shape[0]
        if not self._freq.size or batch == 0:
            return np.zeros(batch, np.float64)
        if batch > MEMO_BATCH:
            return self._frag_amount_distinct(cpu_left, gpu_left, model_id, gpu_models)
        self._accessible(gpu_models)  # a new model list empties the memo
        keys = [
            (int(c), row.tobytes(), int(m)) for c, row, m in zip(cpu_left, gpu_left, model_id, strict=True)
        ]
        memo = self._memo
        values = [memo.get(key) for key in keys]
        missing = [i for i, value in enumerate(values) if value is None]
        if missing:
            # The answer is built from ``values``, never read back from the memo: a full
            # memo is emptied here, and the keys this batch found in it go with it.
            if len(memo) + len(missing) > MEMO_SIZE:
                memo.clear()
            rows = np.array(missing, np.int64)
            computed = self._frag_amount(cpu_left[rows], gpu_left[rows], model_id[rows], gpu_models)
            for i, value in zip(missing, computed.tolist(), strict=True):
                values[i] = memo[keys[i]] = value
        return np.array(values, np.float64)

    def _frag_amount_distinct(
        self,
        cpu_left: IntArray,
        gpu_left: IntArray,
        model_id: IntArray,
        gpu_models: Sequence[str],
    ) -> FloatArray:
        """``_frag_amount`` of each distinct state once, spread back over the batch.

        A large batch is mostly a cluster's nodes, or the states a pod would leave on
        them, and nodes of one type filled alike repeat a few states: the first
        decision on the throughput benchmark's 5,000 empty nodes asks for F of 5,000
        states, 15 of them distinct. Measured on synthetic batches (best of 5, 2-core dev
        machine, the ``default`` trace's 35 typical pods, 8 GPUs): 5,000 states of 6
        distinct 30.4 ms computed whole, 0.9 ms distinct; 40,000 of 20: 278 and 20 ms;
        all distinct (random GPU states, the worst case): 5,000 19.3 and 29.8 ms, 40,000
        350 and 277 ms. F is a function of the state, row by row: the floats are the same."""
        states = np.ascontiguousarray(np.column_stack((cpu_left, model_id, gpu_left)), dtype=np.int64)
        rows = states.view(np.dtype((np.void, states.dtype.itemsize * states.shape[1]))).ravel()
        _, first, where = np.unique(rows, return_index=True, return_inverse=True)
        distinct = states[first]
        values = self._frag_amount(distinct[:, 0], distinct[:, 2:], distinct[:, 1], gpu_models)
        return values[where.reshape(-1)]

    def _frag_amount(
        self,
        cpu_left: IntArray,
        gpu_left: IntArray,
        model_id: IntArray,
        gpu_models: Sequence[str],
    ) -> FloatArray:
        idle = gpu_left.sum(axis=1)  # [B]
        fits_gpu = gpu_left[:, None, :] >= self._milli[None, :, None]  # [B, T, G]
        can_host = fits_gpu.sum(axis=2) >= self._count[None, :]  # [B, T]
        stranded = np.where(fits_gpu, 0, gpu_left[:, None, :]).sum(axis=2)  # [B, T]
        return self.frag_from_counts(cpu_left, idle, can_host, stranded, model_id, gpu_models)

    def frag_from_counts(
        self,
        cpu_left: IntArray,
        idle: IntArray,
        can_host: npt.NDArray[np.bool_],
        stranded: IntArray,
        model_id: IntArray,
        gpu_models: Sequence[str],
    ) -> FloatArray:
        """F per state from per-typical-pod summaries: ``idle [B]`` free milli,
        ``can_host [B, T]`` enough GPUs with room for shape t, ``stranded [B, T]`` free
        milli on GPUs too small for t. Callers that update these incrementally (one
        GPU changes) get the same floats as ``frag_amount``."""
        batch = cpu_left.shape[0]
        if not self._freq.size or batch == 0:
            return np.zeros(batch, np.float64)
        cpu_ok = cpu_left[:, None] >= self._cpu[None, :]
        access = self._accessible(gpu_models)[:, model_id].T  # [B, T]; -1 picks "unknown"

        gpu_pod = self._is_gpu[None, :]
        satisfied = gpu_pod & access & can_host & cpu_ok
        which = np.full((batch, self._freq.size), XR_LACK_CPU, np.int64)
        which[~gpu_pod.repeat(batch, 0) & cpu_ok] = XL_SATISFIED
        which[gpu_pod & ~access] = NO_ACCESS
        which[gpu_pod & access & can_host & ~cpu_ok] = Q4_LACK_CPU
        which[gpu_pod & access & ~can_host & cpu_ok] = Q2_LACK_GPU
        which[gpu_pod & access & ~can_host & ~cpu_ok] = Q1_LACK_BOTH
        which[satisfied] = Q3_SATISFIED

        whole = self._freq[None, :] * idle[:, None].astype(np.float64)
        part = self._freq[None, :] * stranded.astype(np.float64)
        total = np.zeros(batch, np.float64)
        for bin_id in _FRAGMENT_BINS:
            contribution = np.where(which == bin_id, whole, 0.0)
            if bin_id == Q2_LACK_GPU:
                # A satisfied shape leaves its stranded share in q2, in the same sequence.
                contribution = np.where(satisfied, part, contribution)
            total = total + np.cumsum(contribution, axis=1)[:, -1]
        return total

"""Fast inference for the per-node scorers (``gnn``, ``mlp``): the torch model's
weights run in numpy, with everything cached between decisions. Nothing here
imports torch: the live scheduler runs its policy with numpy alone.

Scoring one pod live must take about a millisecond on a small machine, where torch's
per-call overhead alone is larger. The arithmetic here is the torch model's,
operation for operation (``tests/policy`` checks they agree): the node encoder, the
GATv2 layer (PyG's ``GATv2Conv``: per-head ``att . leaky_relu(W_l x_j + W_r x_i)``,
softmax over each node's incoming edges and a self loop, mean over heads, bias) and
the head.

Caches, all keyed on ``ClusterState.node_version``:
- node encodings: a placement re-encodes one node;
- embeddings: the GATv2 layer reruns for the changed nodes and the nodes they feed;
- logits per pod request (CPU, memory, GPU share, count, models): a pod scores again
  only the nodes whose state or embedding changed since the last pod that asked the
  same, so most decisions touch a handful of nodes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.objects.pod import Pod
from scheduler.policy.config import (
    GAT_NEGATIVE_SLOPE,
    PER_NODE_KINDS,
    PRESSURE_PIVOT,
    PRIOR_POINTS,
    ScorerConfig,
)
from scheduler.policy.features import (
    CPU_LEFT_AFTER,
    CPU_PRESSURE,
    FGD_SCORE,
    IDLE_GPUS_AFTER,
    IS_CPU_ONLY,
    IS_SHARE,
    PAIR_FEATURES,
)
from scheduler.policy.graph import GraphBuilder
from scheduler.state.cluster_state import ClusterState, IntArray

FloatArray = npt.NDArray[np.float32]
PodKey = tuple[int, int, int, int, tuple[str, ...], tuple[object, ...]]
_MAX_POD_KEYS = 256
# Padded edges mixed at once (a start mixes every node: in chunks, to bound the temporaries).
_MIX_EDGES = 1 << 15
# Changed nodes whose graph targets are gathered in Python rather than numpy.
_FEW_CHANGED = 8


class NumpyScorer:
    """A per-node scorer (``gnn``, ``mlp``) from its weights as numpy arrays, named as
    the torch model's ``state_dict`` (``weights.load_weights`` reads them from a
    checkpoint; ``model.numpy_scorer`` converts a torch model's). Linear layers are
    kept transposed, ``x @ w + b``."""

    def __init__(self, config: ScorerConfig, arrays: Mapping[str, FloatArray]) -> None:
        if config.kind not in PER_NODE_KINDS:
            raise ValueError(f"numpy inference supports per-node scorers, not {config.kind!r}")
        self.config = config

        def weight(name: str) -> FloatArray:
            return np.asarray(arrays[name], dtype=np.float32).T.copy()

        def vector(name: str) -> FloatArray:
            return np.array(arrays[name], dtype=np.float32)

        self.enc_w, self.enc_b = weight("encoder.0.weight"), vector("encoder.0.bias")
        self.has_conv = config.kind == "gnn"
        if self.has_conv:
            self.heads, self.channels = config.heads, config.hidden
            self.lin_l_w, self.lin_l_b = weight("conv.lin_l.weight"), vector("conv.lin_l.bias")
            self.lin_r_w, self.lin_r_b = weight("conv.lin_r.weight"), vector("conv.lin_r.bias")
            self.att = vector("conv.att").reshape(self.heads, self.channels)
            self.conv_bias = vector("conv.bias")
            self.slope = GAT_NEGATIVE_SLOPE
        self.head_w1, self.head_b1 = weight("head.0.weight"), vector("head.0.bias")
        self.head_w2, self.head_b2 = weight("head.2.weight"), vector("head.2.bias")
        self.hidden = config.hidden
        self.prior = np.float32(PRIOR_POINTS * config.prior_weight)
        self.reserve: FloatArray | None = None
        self._reserve_levels: dict[bytes, np.float32] = {}
        self.reserve_weight = np.float32(0.0)
        self.reserve_bounds = (np.float32(0.0), np.float32(np.inf))
        if config.reserve_term:
            self.reserve = vector("reserve.reserve")
            self.reserve_weight = np.float32(float(arrays["reserve.weight"]))
            self.reserve_bounds = (np.float32(config.reserve_min), np.float32(config.reserve_max))

    def encode(self, node_x: FloatArray) -> FloatArray:
        out: FloatArray = np.maximum(node_x @ self.enc_w + self.enc_b, 0.0)
        return out

    def sides(self, encoded: FloatArray) -> tuple[FloatArray, FloatArray]:
        """The GATv2 layer's two transforms of each node, ``([N, heads * C], [N, heads * C])``:
        as a source (``lin_l``) and as a target (``lin_r``). A node's pair changes only
        with its encoding, so a cache keeps them per node."""
        if not self.has_conv:
            empty = np.zeros((encoded.shape[0], 0), np.float32)
            return empty, empty
        source: FloatArray = encoded @ self.lin_l_w + self.lin_l_b
        target: FloatArray = encoded @ self.lin_r_w + self.lin_r_b
        return source, target

    def mix(
        self, encoded: FloatArray, source: FloatArray, target: FloatArray, padding: FloatArray
    ) -> FloatArray:
        """Embeddings of T targets from their own ``encoded [T, H]`` and ``target [T,
        heads * C]`` sides and the source sides of their incoming edges, padded to D per
        target (self loop included): ``source [T, D, heads * C]``, ``padding [T, D]`` 0
        for an edge and -inf for padding. Sums run over D in edge order, as a
        segment-wise reduction would."""
        if not self.has_conv:
            return encoded
        heads, channels = self.heads, self.channels
        t, d = padding.shape
        x_l = source.reshape(t, d, heads, channels)
        z = x_l + target.reshape(t, 1, heads, channels)
        np.maximum(z, z * np.float32(self.slope), out=z)  # leaky ReLU (slope < 1)
        alpha = np.einsum("tdhc,hc->tdh", z, self.att)  # [T, D, heads]
        alpha += padding[:, :, None]
        alpha -= alpha.max(axis=1, keepdims=True)
        weights = np.exp(alpha, out=alpha)
        weights /= weights.sum(axis=1, keepdims=True) + np.float32(1e-16)
        np.multiply(x_l, weights[:, :, :, None], out=z)
        conv = z.sum(axis=1).sum(axis=1) / np.float32(heads) + self.conv_bias  # mean over heads
        out: FloatArray = (encoded + np.maximum(conv, 0.0)).astype(np.float32)
        return out

    def head_hidden(self, embedding: FloatArray, pair_x: FloatArray, pod_x: FloatArray) -> FloatArray:
        """The head's hidden units (after the ReLU), one row per candidate."""
        pod = np.repeat(pod_x[None, :], pair_x.shape[0], axis=0)
        features = np.concatenate([embedding, pair_x, pod], axis=1)
        hidden: FloatArray = np.maximum(features @ self.head_w1 + self.head_b1, 0.0)
        return hidden

    def head(self, embedding: FloatArray, pair_x: FloatArray, pod_x: FloatArray) -> FloatArray:
        hidden = self.head_hidden(embedding, pair_x, pod_x)
        residual = (hidden @ self.head_w2 + self.head_b2)[:, 0]
        if self.reserve is not None:
            residual = residual + self.reserve_penalty(pair_x, pod_x)
        out: FloatArray = (pair_x[:, FGD_SCORE] * self.prior + residual).astype(np.float32)
        return out

    def reserve_level(self, pod_x: FloatArray) -> np.float32:
        """The reserve (cores per idle GPU) ``model.ReserveTerm`` asks of a pod, kept per
        pod row: a stream of pods asks for a few rows again and again."""
        assert self.reserve is not None
        key = pod_x.tobytes()
        level = self._reserve_levels.get(key)
        if level is None:
            base, slope, share_offset, whole_offset, cpu_offset = self.reserve
            share, cpu_only = pod_x[IS_SHARE], pod_x[IS_CPU_ONLY]
            reserve = (
                base
                + slope * (pod_x[CPU_PRESSURE] - np.float32(PRESSURE_PIVOT))
                + share_offset * share
                + whole_offset * (1.0 - share - cpu_only)
                + cpu_offset * cpu_only
            )
            level = np.float32(np.clip(reserve, *self.reserve_bounds))
            if len(self._reserve_levels) >= _MAX_POD_KEYS:
                self._reserve_levels.clear()
            self._reserve_levels[key] = level
        return level

    def reserve_penalty(self, pair_x: FloatArray, pod_x: FloatArray) -> FloatArray:
        """``model.ReserveTerm`` in numpy."""
        reserve = self.reserve_level(pod_x)
        shortfall = np.maximum(
            reserve * pair_x[:, IDLE_GPUS_AFTER] * np.float32(8.0)
            - pair_x[:, CPU_LEFT_AFTER] * np.float32(128.0),
            0.0,
        )
        penalty: FloatArray = (-self.reserve_weight * shortfall).astype(np.float32)
        return penalty


# The pair features kept per pod request, together at most this large: a placement
# changes one node's features but the embeddings of its graph neighbours too (a dozen
# nodes), whose logits must be made again with the same pair features.
PAIR_CACHE_BYTES = 32 * 2**20


@dataclass
class _Logits:
    node_version: IntArray  # of the node when its logit (and pair features) were made
    embedding_version: IntArray
    values: FloatArray
    pair_x: FloatArray | None = None  # [N, len(PAIR_FEATURES)], while the budget allows


def pod_key(pod: Pod) -> PodKey:
    """What the logits depend on: the pod's shape and which GPUs fit it (its GPU choice
    feeds the pair features)."""
    gpu = pod.gpu
    return (pod.cpu_milli, pod.memory, gpu.milli_per_gpu, gpu.count, gpu.models, gpu.gpu_filter_key)


class CachedScorer:
    """Logits of one state's nodes for a stream of pods, recomputing what changed."""

    def __init__(
        self, scorer: NumpyScorer, builder: GraphBuilder, pair_cache_bytes: int = PAIR_CACHE_BYTES
    ) -> None:
        self.scorer = scorer
        self.builder = builder
        self.pair_cache_bytes = pair_cache_bytes
        self._serial = -1
        self._edges_id = -1
        self._version = np.zeros(0, np.int64)
        self._encoded = np.zeros((0, scorer.hidden), np.float32)
        self._embedding = np.zeros((0, scorer.hidden), np.float32)
        self._embedding_version = np.zeros(0, np.int64)
        self._clock = 0
        self._source = np.zeros((0, 0), np.float32)
        self._target = np.zeros((0, 0), np.float32)
        self._in_src = np.zeros((0, 1), np.int64)
        self._in_padding = np.zeros((0, 1), np.float32)
        self._out_ptr = np.zeros(1, np.int64)
        self._out_dst = np.zeros(0, np.int64)
        self._logits: OrderedDict[PodKey, _Logits] = OrderedDict()

    def _new_entry(self, n: int) -> _Logits:
        """Logits for a new pod request, with room for its pair features; the least
        recently used requests give theirs up to keep all within ``pair_cache_bytes``."""
        entry = _Logits(np.full(n, -1, np.int64), np.full(n, -1, np.int64), np.zeros(n, np.float32))
        size = n * len(PAIR_FEATURES) * 4
        if size > self.pair_cache_bytes:
            return entry
        holders = [other for other in self._logits.values() if other.pair_x is not None]
        for other in holders[: max(0, len(holders) + 1 - self.pair_cache_bytes // size)]:
            other.pair_x = None  # least recently used first: their stale nodes get new rows
        entry.pair_x = np.zeros((n, len(PAIR_FEATURES)), np.float32)
        return entry

    def _index_edges(self, edges: IntArray, n: int) -> None:
        """Incoming edges per target, self loop first, padded to the largest in-degree
        (``_in_src [N, D]``, ``_in_padding`` 0 for an edge, -inf for padding);
        outgoing targets per node."""
        loops = np.arange(n, dtype=np.int64)
        src = np.concatenate([loops, edges[0]])
        dst = np.concatenate([loops, edges[1]])
        order = np.lexsort((np.arange(src.size), dst))  # by target, self loop first
        counts = np.bincount(dst, minlength=n)
        width = int(counts.max()) if n else 1
        rows = dst[order]
        cols = np.arange(src.size) - np.repeat(np.cumsum(counts) - counts, counts)
        self._in_src = np.repeat(loops[:, None], width, axis=1)
        self._in_src[rows, cols] = src[order]
        self._in_padding = np.full((n, width), -np.inf, np.float32)
        self._in_padding[rows, cols] = 0.0
        order = np.argsort(edges[0], kind="stable")
        self._out_dst = edges[1][order]
        self._out_ptr = np.searchsorted(edges[0][order], np.arange(n + 1)).astype(np.int64)

    def _mix(self, targets: IntArray) -> FloatArray:
        """Embeddings of ``targets``, in chunks of about ``_MIX_EDGES`` padded edges."""
        width = self._in_padding.shape[1]
        step = max(1, _MIX_EDGES // width)
        if targets.size <= step:
            return self._mix_chunk(targets)
        return np.concatenate([self._mix_chunk(targets[i : i + step]) for i in range(0, targets.size, step)])

    def _mix_chunk(self, targets: IntArray) -> FloatArray:
        return self.scorer.mix(
            self._encoded[targets],
            self._source[self._in_src[targets]],
            self._target[targets],
            self._in_padding[targets],
        )

    def _encode(self, rows: IntArray | slice, node_x: FloatArray) -> None:
        encoded = self.scorer.encode(node_x)
        self._encoded[rows] = encoded
        self._source[rows], self._target[rows] = self.scorer.sides(encoded)

    def refresh(self, state: ClusterState) -> None:
        """Bring encodings and embeddings up to date with ``state``."""
        node_x, stale = self.builder.node_features_and_stale(state)
        edges = self.builder.edge_index
        n = len(state)
        if state.serial != self._serial or id(edges) != self._edges_id or self._version.size != n:
            self._serial, self._edges_id = state.serial, id(edges)
            self._index_edges(edges, n)
            self._logits.clear()
            width = self.scorer.heads * self.scorer.channels if self.scorer.has_conv else 0
            self._encoded = np.zeros((n, self.scorer.hidden), np.float32)
            self._source = np.zeros((n, width), np.float32)
            self._target = np.zeros((n, width), np.float32)
            self._encode(slice(None), node_x)
            self._embedding = self._mix(np.arange(n, dtype=np.int64))
            self._clock += 1
            self._embedding_version = np.full(n, self._clock, np.int64)
            self._version = state.node_version.copy()
            return
        changed = np.flatnonzero(self._version != state.node_version)
        if stale.size and not set(stale.tolist()) <= set(changed.tolist()):
            changed = np.union1d(changed, stale)  # the builder made rows of unmoved nodes again
        if changed.size == 0:
            return
        self._encode(changed, node_x[changed])
        self._version[changed] = state.node_version[changed]
        affected = changed
        if self.scorer.has_conv:
            rows = changed.tolist()
            spans = [self._out_dst[self._out_ptr[i] : self._out_ptr[i + 1]] for i in rows]
            if len(rows) <= _FEW_CHANGED:  # a placement: a node and its targets, in Python
                fed = {j for span in spans for j in span.tolist()}
                affected = np.array(sorted(fed.union(rows)), np.int64)
            else:
                affected = np.unique(np.concatenate([changed, *spans]))
        self._embedding[affected] = self._mix(affected)
        self._clock += 1
        self._embedding_version[affected] = self._clock

    def embeddings(self, state: ClusterState) -> FloatArray:
        """Every node's embedding ``[N, hidden]`` in ``state``, brought up to date."""
        self.refresh(state)
        return self._embedding

    def logits(self, state: ClusterState, pod: Pod, nodes: IntArray) -> FloatArray:
        """Unquantised logits of ``nodes`` for ``pod``."""
        self.refresh(state)
        key = pod_key(pod)
        entry = self._logits.get(key)
        n = len(state)
        if entry is None:
            entry = self._new_entry(n)
            self._logits[key] = entry
            if len(self._logits) > _MAX_POD_KEYS:
                self._logits.popitem(last=False)
        else:
            self._logits.move_to_end(key)
        moved = entry.node_version[nodes] != state.node_version[nodes]
        stale = nodes[moved | (entry.embedding_version[nodes] != self._embedding_version[nodes])]
        if stale.size:
            if entry.pair_x is None:
                pair_x, _ = self.builder.pair_features(state, pod, stale)
            else:
                # Nodes whose own state moved get new pair features; the others only a
                # new embedding (a neighbour's changed): their pair features stand.
                changed = nodes[moved]
                if changed.size:
                    entry.pair_x[changed] = self.builder.pair_features(state, pod, changed)[0]
                pair_x = entry.pair_x[stale]
            pod_x = self.builder.pod_features(pod, state)
            entry.values[stale] = self.scorer.head(self._embedding[stale], pair_x, pod_x)
            entry.node_version[stale] = state.node_version[stale]
            entry.embedding_version[stale] = self._embedding_version[stale]
        values: FloatArray = entry.values[nodes]
        return values

"""Node scorers in torch-geometric, for training. The live scheduler runs the per-node
kinds (``gnn``, ``mlp``) in numpy (``inference``) from the same weights; their config
and the constants both share are in ``config``, which does not import torch.

The policy scores every feasible node and takes the best; the number of nodes is free.

``gnn`` (the shipped kind): a per-node MLP encodes each node's features, a GATv2
attention layer mixes in the node's structural neighbours (same shape, same zone),
and a per-node head reads ``[embedding, pair features, pod features]``:

    logit(node) = prior_weight * FGD score (points, 0..99)
                - weight * max(reserve * idle GPUs after - cores left after, 0)
                + head(...)

The middle term (``reserve_term``) is a learned CPU reserve per idle GPU: the capacity
FGD strands at saturation is idle GPUs on nodes whose CPU is gone. ``reserve`` is a
learned linear function of the workload's CPU pressure and the pod's kind, kept within
``[reserve_min, reserve_max]`` (4-9 cores, the teacher's bounds), ``weight``
a learned price per missing core. With ``prior_weight = 1`` the head learns a further
correction to FGD; its last layer starts at zero, so an untrained scorer with a zero
reserve weight *is* FGD (ties go to the first node in state order, as FGD's do). With
``prior_weight = 0`` and no reserve term it is a scorer learned from scratch.
Logits are rounded to steps of ``score_step`` points before the argmax: differences
smaller than a step are ties, settled by node order, which keeps the first-fit
packing that makes FGD strong (spreading ties at random costs it ~5 points).

The seed projects' designs are here for honest comparison: ``mlp`` (per-node head,
no message passing), ``flat-mlp`` (one MLP over the whole cluster's features to a
fixed list of ``max_nodes`` actions) and ``pooled-gnn`` (GATv2, then the graph is
pooled into one vector and mapped to a fixed list of actions). Any kind can carry a
value head (actor-critic); a DQN reads the logits as Q-values.
"""

from __future__ import annotations

import warnings
from typing import cast

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor, nn

with warnings.catch_warnings():
    # torch-geometric scripts a few helpers with torch.jit at import, which warns.
    warnings.simplefilter("ignore", FutureWarning)
    from torch_geometric.nn import GATv2Conv

from scheduler.policy.config import (
    GAT_NEGATIVE_SLOPE,
    PRESSURE_PIVOT,
    PRIOR_POINTS,
    RESERVE_INIT,
    RESERVE_WEIGHT_INIT,
    ScorerConfig,
)
from scheduler.policy.features import (
    CPU_LEFT_AFTER,
    CPU_PRESSURE,
    FGD_SCORE,
    IDLE_GPUS_AFTER,
    IS_CPU_ONLY,
    IS_SHARE,
)
from scheduler.policy.inference import NumpyScorer


class ReserveTerm(nn.Module):
    """``-weight * max(reserve * idle GPUs after - cores left after, 0)`` in points, with
    ``reserve = clamp(base + slope * (pressure - pivot) + offset[pod kind], low, high)``
    cores per GPU."""

    def __init__(self, low: float, high: float) -> None:
        super().__init__()
        self.low, self.high = low, high
        self.reserve = nn.Parameter(torch.tensor(RESERVE_INIT))
        self.weight = nn.Parameter(torch.tensor(RESERVE_WEIGHT_INIT))

    def forward(self, pair_x: Tensor, pod_x: Tensor) -> Tensor:
        pod = pod_x if pod_x.dim() == 2 else pod_x.unsqueeze(0)
        share, cpu_only = pod[:, IS_SHARE], pod[:, IS_CPU_ONLY]
        whole = 1.0 - share - cpu_only
        base, slope, share_offset, whole_offset, cpu_offset = self.reserve
        rule = (
            base
            + slope * (pod[:, CPU_PRESSURE] - PRESSURE_PIVOT)
            + share_offset * share
            + whole_offset * whole
            + cpu_offset * cpu_only
        )
        # Clamped in value, not in gradient (straight-through): a rule past a bound on
        # every decision of a trace would otherwise get no gradient from that trace and
        # stay wherever the other traces pull it.
        reserve = rule + (rule.clamp(self.low, self.high) - rule).detach()
        shortfall = torch.relu(reserve * pair_x[:, IDLE_GPUS_AFTER] * 8.0 - pair_x[:, CPU_LEFT_AFTER] * 128.0)
        penalty: Tensor = -self.weight * shortfall
        return penalty


def _mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, outputs))


class NodeScorer(nn.Module):
    """Scores candidate nodes for one pod; see the module docstring."""

    def __init__(self, config: ScorerConfig) -> None:
        super().__init__()
        self.config = config
        hidden = config.hidden
        self.encoder = nn.Sequential(nn.Linear(config.node_features, hidden), nn.ReLU())
        self.conv: GATv2Conv | None = None
        if config.kind in ("gnn", "pooled-gnn"):
            self.conv = GATv2Conv(
                hidden,
                hidden,
                heads=config.heads,
                concat=False,
                negative_slope=GAT_NEGATIVE_SLOPE,
                add_self_loops=True,
            )
        if config.kind in ("gnn", "mlp"):
            width = hidden + config.pair_features + config.pod_features
            self.head = _mlp(width, config.head_hidden, 1)
        else:
            # Seed designs: the whole cluster (flattened or pooled) maps to a fixed action list.
            width = (hidden * config.max_nodes if config.kind == "flat-mlp" else hidden) + config.pod_features
            self.head = _mlp(width, config.head_hidden, config.max_nodes)
        last = cast(nn.Linear, self.head[-1])
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)
        self.reserve: ReserveTerm | None = None
        if config.reserve_term and config.kind in ("gnn", "mlp"):
            self.reserve = ReserveTerm(config.reserve_min, config.reserve_max)
        self.value: nn.Sequential | None = None
        if config.value_head:
            self.value = _mlp(hidden + config.pod_features, config.head_hidden, 1)

    # ---- pieces the live plugin caches separately ----------------------------------

    def encode(self, node_x: Tensor) -> Tensor:
        """Per-node encoding (no neighbours): ``[N, F] -> [N, H]``."""
        encoded: Tensor = self.encoder(node_x)
        return encoded

    def mix(self, encoded: Tensor, edge_index: Tensor) -> Tensor:
        """Neighbour mixing: ``[N, H] -> [N, H]`` (identity without a GNN)."""
        if self.conv is None:
            return encoded
        mixed: Tensor = encoded + torch.relu(self.conv(encoded, edge_index))
        return mixed

    def embed(self, node_x: Tensor, edge_index: Tensor) -> Tensor:
        return self.mix(self.encode(node_x), edge_index)

    def head_logits(self, embedding: Tensor, pair_x: Tensor, pod_x: Tensor) -> Tensor:
        """Logits of the candidates of per-node kinds: ``embedding [K, H]``,
        ``pair_x [K, P]``, ``pod_x [Q]`` (or ``[K, Q]``)."""
        pod = pod_x.expand(pair_x.shape[0], -1) if pod_x.dim() == 1 else pod_x
        residual: Tensor = self.head(torch.cat([embedding, pair_x, pod], dim=1)).squeeze(1)
        prior: Tensor = pair_x[:, FGD_SCORE] * PRIOR_POINTS * self.config.prior_weight
        if self.reserve is not None:
            residual = residual + self.reserve(pair_x, pod)
        return prior + residual

    # ---- whole decisions ---------------------------------------------------------------

    def forward(
        self, node_x: Tensor, edge_index: Tensor, candidates: Tensor, pair_x: Tensor, pod_x: Tensor
    ) -> Tensor:
        """Logits of ``candidates`` (indices into ``node_x``)."""
        embedding = self.embed(node_x, edge_index)
        if self.config.kind in ("gnn", "mlp"):
            return self.head_logits(embedding[candidates], pair_x, pod_x)
        if self.config.kind == "flat-mlp":
            flat = torch.zeros(self.config.max_nodes, self.config.hidden)
            count = min(embedding.shape[0], self.config.max_nodes)
            flat[:count] = embedding[:count]
            summary = flat.reshape(-1)
        else:
            summary = embedding.mean(dim=0)
        actions: Tensor = self.head(torch.cat([summary, pod_x]))
        logits = actions[candidates.clamp(max=self.config.max_nodes - 1)]
        beyond = candidates >= self.config.max_nodes
        return torch.where(beyond, torch.full_like(logits, -1e9), logits)

    def state_value(self, node_x: Tensor, edge_index: Tensor, pod_x: Tensor) -> Tensor:
        """The critic: mean-pooled embedding and the pod -> expected return."""
        if self.value is None:
            raise RuntimeError("this scorer has no value head")
        pooled = self.embed(node_x, edge_index).mean(dim=0)
        value: Tensor = self.value(torch.cat([pooled, pod_x])).squeeze(0)
        return value


def quantize(logits: Tensor, step: float) -> Tensor:
    """Logits rounded to steps of ``step`` (no change for step 0). Rounding, not
    flooring: the prior is a whole number of points, so a residual within half a step
    of zero leaves the node in its FGD bucket."""
    return torch.floor(logits / step + 0.5) if step > 0 else logits


def best_candidate(logits: Tensor, step: float) -> int:
    """Position of the chosen candidate: the highest quantised logit, first on ties."""
    values = quantize(logits, step)
    return int(torch.nonzero(values == values.max())[0, 0])


def state_arrays(model: NodeScorer) -> dict[str, npt.NDArray[np.float32]]:
    """The model's ``state_dict`` as float32 numpy arrays (copies), as
    ``weights.load_weights`` reads them from a checkpoint."""
    return {
        name: tensor.detach().to(torch.float32).numpy().copy() for name, tensor in model.state_dict().items()
    }


def numpy_scorer(model: NodeScorer) -> NumpyScorer:
    """A per-node model's current weights in numpy, for fast episodes in training."""
    return NumpyScorer(model.config, state_arrays(model))

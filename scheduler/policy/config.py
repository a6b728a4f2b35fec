"""A scorer's configuration and the constants its arithmetic shares, without torch.

The torch model (``model``), the numpy inference (``inference``) and the checkpoint
readers (``weights``, ``checkpoint``) all read these, so the live scheduler can load
and run a policy with numpy alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from scheduler.policy.features import NODE_FEATURES, PAIR_FEATURES, POD_FEATURES

ScorerKind = Literal["gnn", "mlp", "flat-mlp", "pooled-gnn"]
SCORER_KINDS: tuple[ScorerKind, ...] = ("gnn", "mlp", "flat-mlp", "pooled-gnn")
# Kinds that score each node on its own and run in numpy: the live scheduler serves
# these. The fixed-action seed designs (flat-mlp, pooled-gnn) run in torch only.
PER_NODE_KINDS: tuple[ScorerKind, ...] = ("gnn", "mlp")
PRIOR_POINTS = 100.0  # the pair feature fgd_score is FGD's score / 100
RESERVE_MIN, RESERVE_MAX = 4.0, 9.0  # cores per idle GPU, as the teacher's rule is clipped
GAT_NEGATIVE_SLOPE = 0.2  # GATv2's leaky ReLU (PyG's default), in torch and numpy alike


@dataclass(frozen=True)
class ScorerConfig:
    """Everything needed to rebuild a scorer (stored in the checkpoint manifest)."""

    kind: ScorerKind = "gnn"
    hidden: int = 32
    heads: int = 2
    head_hidden: int = 64
    prior_weight: float = 1.0
    reserve_term: bool = True
    # The reserve (cores per idle GPU) is kept within these bounds, the teacher's: a
    # linear rule fitted on two workloads must not extrapolate to others (unclamped,
    # it asked 11 cores per GPU on openb cpu0, where 9 beats FGD and 12 loses to it).
    reserve_min: float = RESERVE_MIN
    reserve_max: float = RESERVE_MAX
    score_step: float = 0.5
    value_head: bool = False
    max_nodes: int = 0  # fixed action list of flat-mlp / pooled-gnn
    node_features: int = len(NODE_FEATURES)
    pair_features: int = len(PAIR_FEATURES)
    pod_features: int = len(POD_FEATURES)

    def __post_init__(self) -> None:
        if not 0.0 <= self.reserve_min <= self.reserve_max:
            raise ValueError(
                f"reserve_min {self.reserve_min} and reserve_max {self.reserve_max} "
                "need 0 <= reserve_min <= reserve_max"
            )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScorerConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown)}")
        config = cls(**data)
        if config.kind not in SCORER_KINDS:
            raise ValueError(f"kind {config.kind!r} is not one of {', '.join(SCORER_KINDS)}")
        if config.kind in ("flat-mlp", "pooled-gnn") and config.max_nodes <= 0:
            raise ValueError(f"kind {config.kind!r} needs max_nodes > 0")
        return config


PRESSURE_PIVOT = 0.832  # the default openb trace's CPU pressure
RESERVE_INIT = (8.0, 0.0, 0.0, 0.0, 0.0)  # base, pressure slope, share, whole-GPU, CPU-only offsets
RESERVE_WEIGHT_INIT = 0.0


def per_node_shapes(config: ScorerConfig) -> dict[str, tuple[int, ...]]:
    """The tensors (name -> shape) of a per-node scorer (``gnn``, ``mlp``), in the order
    and with the names of ``model.NodeScorer(config).state_dict()``: ``nn.Sequential``
    indices, and PyG ``GATv2Conv(hidden, hidden, heads, concat=False)``'s ``att``
    ``[1, heads, hidden]``, ``bias`` ``[hidden]``, ``lin_l`` / ``lin_r``
    ``[heads * hidden, hidden]`` (``tests/policy`` checks them against torch)."""
    if config.kind not in PER_NODE_KINDS:
        raise ValueError(f"kind {config.kind!r} is not a per-node scorer ({', '.join(PER_NODE_KINDS)})")
    hidden, heads, head_hidden = config.hidden, config.heads, config.head_hidden
    shapes: dict[str, tuple[int, ...]] = {
        "encoder.0.weight": (hidden, config.node_features),
        "encoder.0.bias": (hidden,),
    }
    if config.kind == "gnn":
        shapes |= {
            "conv.att": (1, heads, hidden),
            "conv.bias": (hidden,),
            "conv.lin_l.weight": (heads * hidden, hidden),
            "conv.lin_l.bias": (heads * hidden,),
            "conv.lin_r.weight": (heads * hidden, hidden),
            "conv.lin_r.bias": (heads * hidden,),
        }
    shapes |= {
        "head.0.weight": (head_hidden, hidden + config.pair_features + config.pod_features),
        "head.0.bias": (head_hidden,),
        "head.2.weight": (1, head_hidden),
        "head.2.bias": (1,),
    }
    if config.reserve_term:
        shapes |= {"reserve.reserve": (len(RESERVE_INIT),), "reserve.weight": ()}
    if config.value_head:
        shapes |= {
            "value.0.weight": (head_hidden, hidden + config.pod_features),
            "value.0.bias": (head_hidden,),
            "value.2.weight": (1, head_hidden),
            "value.2.bias": (1,),
        }
    return shapes

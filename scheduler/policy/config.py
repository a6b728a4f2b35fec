"""A scorer's configuration and the constants its arithmetic shares, without torch.

The torch model (``model``), the numpy inference (``inference``) and the checkpoint
readers (``weights``, ``checkpoint``) all read these, so the live scheduler can load
and run a policy with numpy alone. A configuration read from a file
(``ScorerConfig.from_json``) is validated strictly: an integer is a JSON integer (not
``"32"``, ``32.0`` or ``true``), a float is finite, every size is within bounds, and
the weights it asks for stay within ``MAX_PARAMETERS``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, Strict, TypeAdapter, ValidationError

from scheduler.policy.features import NODE_FEATURES, PAIR_FEATURES, POD_FEATURES

ScorerKind = Literal["gnn", "mlp", "flat-mlp", "pooled-gnn"]
SCORER_KINDS: tuple[ScorerKind, ...] = ("gnn", "mlp", "flat-mlp", "pooled-gnn")
# Kinds that score each node on its own and run in numpy: the live scheduler serves
# these. The fixed-action seed designs (flat-mlp, pooled-gnn) run in torch only.
PER_NODE_KINDS: tuple[ScorerKind, ...] = ("gnn", "mlp")
PRIOR_POINTS = 100.0  # the pair feature fgd_score is FGD's score / 100
RESERVE_MIN, RESERVE_MAX = 4.0, 9.0  # cores per idle GPU, as the teacher's rule is clipped
GAT_NEGATIVE_SLOPE = 0.2  # GATv2's leaky ReLU (PyG's default), in torch and numpy alike

# A configuration read from a file asks for at most this many weights (64 MiB of
# float32). The shipped policy has 8,935 (35 KiB); torch allocates a config's weights
# before it reads them, so a manifest must not be able to ask for gigabytes, and a
# policy 1,800 times the shipped one would be too slow to score every node anyway.
MAX_PARAMETERS = 16 * 2**20
# Per-field bounds, far above anything trained here (hidden 32, heads 2, head_hidden
# 64; max_nodes is one action per node of a trace's cluster), so that no single field
# is absurd before the parameter count is checked.
MAX_WIDTH = 4096  # hidden, head_hidden
MAX_HEADS = 64
MAX_ACTIONS = 65_536  # max_nodes of the fixed-action kinds
MAX_FEATURES = 1024  # node_features, pair_features, pod_features

NODE_FEATURE_COUNT, PAIR_FEATURE_COUNT, POD_FEATURE_COUNT = (
    len(NODE_FEATURES),
    len(PAIR_FEATURES),
    len(POD_FEATURES),
)

Width = Annotated[int, Strict(), Field(ge=1, le=MAX_WIDTH)]
Heads = Annotated[int, Strict(), Field(ge=1, le=MAX_HEADS)]
Actions = Annotated[int, Strict(), Field(ge=0, le=MAX_ACTIONS)]
FeatureCount = Annotated[int, Strict(), Field(ge=1, le=MAX_FEATURES)]
Finite = Annotated[float, Strict(), Field(allow_inf_nan=False)]
NonNegative = Annotated[float, Strict(), Field(ge=0.0, allow_inf_nan=False)]
Flag = Annotated[bool, Strict()]


class ConfigFieldError(ValueError):
    """A scorer configuration read from a file that cannot be used: ``field`` is its
    path inside the configuration (``"hidden"``; ``""`` for the whole of it)."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}" if field else problem)


# pydantic's wording for the errors a JSON file can have, in a file's terms.
_PLAIN = {
    "unexpected_keyword_argument": "unknown field",
    "extra_forbidden": "unknown field",
    "missing": "missing",
    "dataclass_type": "expected a JSON object",
    "model_type": "expected a JSON object",
    "dict_type": "expected a JSON object",
    "list_type": "expected a JSON array",
    "string_type": "expected a string",
    "int_type": "expected an integer",
    "float_type": "expected a number",
    "bool_type": "expected true or false",
}


def first_problem(error: ValidationError) -> tuple[str, str]:
    """A pydantic error as ``(field path, problem)``: its first error, the path dotted
    (``weights.sha256``), the offending value quoted when it is a short scalar."""
    first = error.errors(include_url=False)[0]
    field = ".".join(str(part) for part in first["loc"])
    kind = first["type"]
    cause = first.get("ctx", {}).get("error")
    problem = str(cause) if kind == "value_error" and cause is not None else _PLAIN.get(kind, first["msg"])
    value = first.get("input")
    quoted = kind not in ("missing", "unexpected_keyword_argument", "extra_forbidden")
    if quoted and (value is None or isinstance(value, str | int | float)):
        shown = repr(value)
        problem += f", got {shown if len(shown) <= 40 else shown[:37] + '...'}"
    return field, problem


@dataclass(frozen=True)
class ScorerConfig:
    """Everything needed to rebuild a scorer (stored in the checkpoint manifest). The
    field types' bounds apply to a configuration read from a file (``from_json``)."""

    # Read by pydantic when it validates a manifest's ``model``: no unknown fields.
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    kind: ScorerKind = "gnn"
    hidden: Width = 32
    heads: Heads = 2
    head_hidden: Width = 64
    prior_weight: Finite = 1.0
    reserve_term: Flag = True
    # The reserve (cores per idle GPU) is kept within these bounds, the teacher's: a
    # linear rule fitted on two workloads must not extrapolate to others (unclamped,
    # it asked 11 cores per GPU on openb cpu0, where 9 beats FGD and 12 loses to it).
    reserve_min: Finite = RESERVE_MIN  # 0 <= reserve_min <= reserve_max: __post_init__
    reserve_max: Finite = RESERVE_MAX
    score_step: NonNegative = 0.5
    value_head: Flag = False
    max_nodes: Actions = 0  # fixed action list of flat-mlp / pooled-gnn
    node_features: FeatureCount = NODE_FEATURE_COUNT
    pair_features: FeatureCount = PAIR_FEATURE_COUNT
    pod_features: FeatureCount = POD_FEATURE_COUNT

    def __post_init__(self) -> None:
        if not 0.0 <= self.reserve_min <= self.reserve_max:
            raise ValueError(
                f"reserve_min {self.reserve_min} and reserve_max {self.reserve_max} "
                "need 0 <= reserve_min <= reserve_max"
            )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> ScorerConfig:
        """The configuration a JSON object describes (a manifest's ``model``), strictly
        validated. Raises ``ConfigFieldError`` naming the field."""
        try:
            config = _CONFIG.validate_python(data)
        except ValidationError as error:
            raise ConfigFieldError(*first_problem(error)) from None
        if config.kind in ("flat-mlp", "pooled-gnn") and config.max_nodes <= 0:
            raise ConfigFieldError("max_nodes", f"kind {config.kind!r} needs max_nodes > 0")
        count = parameter_count(config)
        if count > MAX_PARAMETERS:
            raise ConfigFieldError(
                "", f"{count:,} weights, more than the {MAX_PARAMETERS:,} a policy may have"
            )
        return config


_CONFIG = TypeAdapter(ScorerConfig)


PRESSURE_PIVOT = 0.832  # the default openb trace's CPU pressure
RESERVE_INIT = (8.0, 0.0, 0.0, 0.0, 0.0)  # base, pressure slope, share, whole-GPU, CPU-only offsets
RESERVE_WEIGHT_INIT = 0.0


def parameter_count(config: ScorerConfig) -> int:
    """How many weights ``model.NodeScorer(config)`` has (``tests/policy`` checks it
    against torch), computed without allocating them."""
    if config.kind in PER_NODE_KINDS:
        return sum(math.prod(shape) for shape in per_node_shapes(config).values())
    hidden, heads, head_hidden = config.hidden, config.heads, config.head_hidden
    count = (config.node_features + 1) * hidden  # encoder
    if config.kind == "pooled-gnn":
        count += heads * hidden + hidden + 2 * (heads * hidden * (hidden + 1))  # GATv2
    width = (hidden * config.max_nodes if config.kind == "flat-mlp" else hidden) + config.pod_features
    count += (width + 1) * head_hidden + (head_hidden + 1) * config.max_nodes  # head
    if config.value_head:
        count += (hidden + config.pod_features + 1) * head_hidden + head_hidden + 1
    return count


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

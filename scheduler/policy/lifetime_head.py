"""GnnLifetimeScore: the learned policy with what the lifetime source says (the
``gnn-lifetime`` profile).

The value of placing a pod on a feasible node is the ``gnn`` checkpoint's (quantised)
logit plus a learned lifetime head over ``lifetime_features.LIFETIME_PAIR_FEATURES``:

    value(node) = gnn_logit(node) + w . lifetime_features(node)

When the features are unknown (hidden lifetimes, a CPU-only pod) the head adds nothing
and the values, hence the decisions, are ``gnn``'s exactly. GPUs are chosen as
``gnn`` chooses them.

A head is a folder: ``head.safetensors`` (one float32 tensor ``weights``, one per
feature) and ``manifest.json`` (format, ``lifetime_schema_version``, the feature names,
``horizon_hours``, the weights' SHA-256, how it was trained). JSON and safetensors only;
a head of another schema, other features, a bad hash or non-finite weights is refused
with ``CheckpointError``. The shipped head is ``checkpoints/gnn-lifetime``; the gnn
checkpoint under it is the profile's (``ProfileContext.checkpoint``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load as parse_safetensors
from safetensors.numpy import save as dump_safetensors

from scheduler.framework.plugin import CycleContext
from scheduler.plugins.args import GnnLifetimeArgs
from scheduler.plugins.registry import ProfileContext
from scheduler.plugins.remaining_lifetimes import RemainingLifetimes
from scheduler.plugins.scores.fgd_reserve_lifetime import Blocked
from scheduler.policy.features import FloatArray
from scheduler.policy.lifetime_features import (
    LIFETIME_PAIR_FEATURES,
    LIFETIME_SCHEMA_VERSION,
    SECONDS_PER_HOUR,
    lifetime_pair_rows,
)
from scheduler.policy.plugin import gnn_score
from scheduler.policy.scoring import integer_scores
from scheduler.policy.weights import CheckpointError
from scheduler.state.cluster_state import ClusterState, IntArray

HEAD_FORMAT = "rl-scheduler-lifetime-head"
HEAD_FILE = "head.safetensors"
MANIFEST_FILE = "manifest.json"
DEFAULT_HEAD = "gnn-lifetime"


@dataclass(frozen=True)
class LifetimeHead:
    """Points per unit of each lifetime feature, and the longest remaining lifetime
    believed (a pod that never ends counts as this long)."""

    weights: FloatArray  # [len(LIFETIME_PAIR_FEATURES)]
    horizon_s: float = 168 * SECONDS_PER_HOUR
    training: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def teacher(cls, weight: float = 10.0, blocked: Blocked = "GPUHours") -> LifetimeHead:
        """The hand rule ``fgd-reserve-lifetime`` as a head: ``-weight`` on
        ``blocked_gpu_hours`` (GPUHours) or ``blocked_node_hours`` (NodeHours), 0
        elsewhere (the starting point of training)."""
        feature = "blocked_gpu_hours" if blocked == "GPUHours" else "blocked_node_hours"
        weights = np.zeros(len(LIFETIME_PAIR_FEATURES), np.float32)
        weights[LIFETIME_PAIR_FEATURES.index(feature)] = -weight
        return cls(weights)

    def correction(
        self, lifetimes: RemainingLifetimes, state: ClusterState, ctx_pod: Any, nodes: IntArray
    ) -> FloatArray | None:
        rows = lifetime_pair_rows(lifetimes, state, ctx_pod, nodes, self.horizon_s)
        if rows is None:
            return None
        out: FloatArray = (rows @ self.weights).astype(np.float32)
        return out


def default_head_path() -> Path:
    return Path(str(resources.files("scheduler.policy").joinpath("checkpoints", DEFAULT_HEAD)))


def save_head(folder: Path, head: LifetimeHead) -> Path:
    """Write ``folder/head.safetensors`` and ``folder/manifest.json``; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    data = dump_safetensors({"weights": np.ascontiguousarray(head.weights, np.float32)})
    (folder / HEAD_FILE).write_bytes(data)
    manifest = {
        "format": HEAD_FORMAT,
        "lifetime_schema_version": LIFETIME_SCHEMA_VERSION,
        "features": list(LIFETIME_PAIR_FEATURES),
        "horizon_hours": head.horizon_s / SECONDS_PER_HOUR,
        "weights": {"file": HEAD_FILE, "sha256": hashlib.sha256(data).hexdigest()},
        "weights_by_feature": {
            n: float(w) for n, w in zip(LIFETIME_PAIR_FEATURES, head.weights, strict=True)
        },
        "training": head.training,
    }
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return folder


def load_head(folder: Path | None = None) -> LifetimeHead:
    """The head in ``folder`` (the shipped one if None); ``CheckpointError`` naming the
    field when it cannot be used."""
    folder = folder or default_head_path()
    where = str(folder)
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text())
    except (OSError, ValueError) as error:
        raise CheckpointError(where, MANIFEST_FILE, f"not readable ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != HEAD_FORMAT:
        raise CheckpointError(where, "format", f"expected {HEAD_FORMAT!r}")
    if manifest.get("lifetime_schema_version") != LIFETIME_SCHEMA_VERSION:
        raise CheckpointError(
            where,
            "lifetime_schema_version",
            f"{manifest.get('lifetime_schema_version')!r}, this build reads {LIFETIME_SCHEMA_VERSION}",
        )
    if manifest.get("features") != list(LIFETIME_PAIR_FEATURES):
        raise CheckpointError(where, "features", "not this build's lifetime features")
    try:
        data = (folder / HEAD_FILE).read_bytes()
    except OSError as error:
        raise CheckpointError(where, HEAD_FILE, f"not readable ({error})") from None
    if hashlib.sha256(data).hexdigest() != manifest.get("weights", {}).get("sha256"):
        raise CheckpointError(where, "weights.sha256", "does not match the file")
    try:
        weights = parse_safetensors(data)["weights"].astype(np.float32)
    except Exception as error:
        raise CheckpointError(where, HEAD_FILE, f"not a readable safetensors file ({error})") from None
    if weights.shape != (len(LIFETIME_PAIR_FEATURES),) or not np.isfinite(weights).all():
        raise CheckpointError(where, "weights", f"expected {len(LIFETIME_PAIR_FEATURES)} finite values")
    horizon = manifest.get("horizon_hours")
    if not isinstance(horizon, (int, float)) or not 0 < horizon <= 8760:
        raise CheckpointError(where, "horizon_hours", "expected hours in (0, 8760]")
    return LifetimeHead(weights, float(horizon) * SECONDS_PER_HOUR, dict(manifest.get("training", {})))


class GnnLifetimeScore:
    """Score plugin and GPU selector: ``gnn``'s logits plus the lifetime head."""

    name = "GnnLifetimeScore"

    def __init__(self, base: Any, head: LifetimeHead, lifetimes: RemainingLifetimes) -> None:
        self.base = base  # a GnnScore
        self.head = head
        self.lifetimes = lifetimes

    def values(self, state: ClusterState, pod: Any, nodes: IntArray) -> FloatArray:
        logits: FloatArray = self.base.logits(state, pod, nodes)
        correction = self.head.correction(self.lifetimes, state, pod, nodes)
        return logits if correction is None else logits + correction

    def score(self, ctx: CycleContext, nodes: IntArray) -> IntArray:
        return integer_scores(self.values(ctx.state, ctx.pod, nodes))

    def select_gpus(self, ctx: CycleContext, node: int) -> tuple[int, ...]:
        selected: tuple[int, ...] = self.base.select_gpus(ctx, node)
        return selected


def gnn_lifetime_score(args: GnnLifetimeArgs, ctx: ProfileContext) -> GnnLifetimeScore:
    """The ``GnnLifetimeScore`` plugin: ``ctx.checkpoint``'s gnn and the head in
    ``args.head`` (the shipped one if empty)."""
    head = load_head(Path(args.head) if args.head else None)
    return GnnLifetimeScore(gnn_score(args, ctx), head, ctx.lifetimes)

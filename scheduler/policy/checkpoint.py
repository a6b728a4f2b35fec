"""Checkpoints: a folder with ``model.safetensors`` (the weights) and ``manifest.json``
(the model config, the feature schema, how it was trained and evaluated).

Loading never runs code: JSON and safetensors only (``torch.load`` is not used
anywhere). A checkpoint is refused with a ``CheckpointError`` naming the file and the
field when the manifest does not parse, its feature schema differs from this
version's, its weights fail the manifest's SHA-256, or a tensor is missing or has
another shape. The live operator catches the error and falls back to a heuristic.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from scheduler.errors import SchedulerInputError
from scheduler.policy.graph import FEATURE_SCHEMA_VERSION, NODE_FEATURES, PAIR_FEATURES, POD_FEATURES
from scheduler.policy.model import NodeScorer, ScorerConfig

FORMAT = "rl-scheduler-policy"
FORMAT_VERSION = 1
WEIGHTS_FILE = "model.safetensors"
MANIFEST_FILE = "manifest.json"
DEFAULT_CHECKPOINT = "gnn-fgd-residual"


class CheckpointError(SchedulerInputError):
    """A checkpoint that cannot be used (missing, corrupted, other feature schema)."""


@dataclass
class Checkpoint:
    model: NodeScorer
    manifest: dict[str, Any]
    path: Path

    @property
    def config(self) -> ScorerConfig:
        return self.model.config


@dataclass
class Manifest:
    """What ``save_checkpoint`` writes beside the weights."""

    training: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, Any] = field(default_factory=dict)


def default_checkpoint_path() -> Path:
    """The checkpoint shipped in the package."""
    return Path(str(resources.files("scheduler.policy").joinpath("checkpoints", DEFAULT_CHECKPOINT)))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def save_checkpoint(model: NodeScorer, folder: Path, extra: Manifest | None = None) -> Path:
    """Write ``folder/model.safetensors`` and ``folder/manifest.json``; returns the folder."""
    extra = extra or Manifest()
    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / WEIGHTS_FILE
    tensors = {name: t.detach().contiguous().clone() for name, t in model.state_dict().items()}
    save_file(tensors, str(weights), metadata={"format": FORMAT})
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "feature_schema_version": FEATURE_SCHEMA_VERSION,
        "features": {"node": list(NODE_FEATURES), "pair": list(PAIR_FEATURES), "pod": list(POD_FEATURES)},
        "model": model.config.to_json(),
        "weights": {"file": WEIGHTS_FILE, "sha256": _sha256(weights)},
        "training": extra.training,
        "evaluation": extra.evaluation,
    }
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return folder


def read_manifest(path: Path) -> tuple[Path, dict[str, Any]]:
    """``(folder, manifest)`` of a checkpoint folder (or its manifest file)."""
    folder = path.parent if path.name == MANIFEST_FILE else path
    manifest_path = folder / MANIFEST_FILE
    where = str(manifest_path)
    if not folder.is_dir():
        raise CheckpointError(str(folder), "path", "no such checkpoint folder")
    if not manifest_path.is_file():
        raise CheckpointError(where, "file", f"missing; a checkpoint folder holds {MANIFEST_FILE}")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(where, "content", f"not valid JSON ({error})") from None
    if not isinstance(manifest, dict):
        raise CheckpointError(where, "content", "expected a JSON object")
    if manifest.get("format") != FORMAT:
        raise CheckpointError(where, "format", f"expected {FORMAT!r}, got {manifest.get('format')!r}")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            where, "format_version", f"expected {FORMAT_VERSION}, got {manifest.get('format_version')!r}"
        )
    schema = manifest.get("feature_schema_version")
    if schema != FEATURE_SCHEMA_VERSION:
        raise CheckpointError(
            where,
            "feature_schema_version",
            f"the checkpoint was trained on feature schema {schema!r}; this scheduler computes "
            f"schema {FEATURE_SCHEMA_VERSION}. Retrain it (rl-scheduler train) or use a matching release",
        )
    expected = {"node": list(NODE_FEATURES), "pair": list(PAIR_FEATURES), "pod": list(POD_FEATURES)}
    if manifest.get("features") != expected:
        raise CheckpointError(where, "features", "feature names differ from this scheduler's schema")
    return folder, manifest


def load_checkpoint(path: Path | None = None) -> Checkpoint:
    """Load and check a checkpoint (the shipped one when ``path`` is None)."""
    folder, manifest = read_manifest(path or default_checkpoint_path())
    where = str(folder / MANIFEST_FILE)
    try:
        config = ScorerConfig.from_json(dict(manifest.get("model") or {}))
    except (TypeError, ValueError) as error:
        raise CheckpointError(where, "model", str(error)) from None
    info = manifest.get("weights") or {}
    weights = folder / str(info.get("file", WEIGHTS_FILE))
    if not weights.is_file():
        raise CheckpointError(str(weights), "file", "missing")
    if _sha256(weights) != info.get("sha256"):
        raise CheckpointError(
            str(weights), "sha256", "does not match the manifest: the file is corrupted or was replaced"
        )
    try:
        tensors = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(str(weights), "content", f"not a readable safetensors file ({error})") from None
    model = NodeScorer(config)
    expected = model.state_dict()
    for name, tensor in expected.items():
        if name not in tensors:
            raise CheckpointError(str(weights), name, "tensor missing")
        if tensors[name].shape != tensor.shape:
            raise CheckpointError(
                str(weights), name, f"shape {tuple(tensors[name].shape)}, expected {tuple(tensor.shape)}"
            )
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise CheckpointError(str(weights), unexpected[0], "unexpected tensor for this model config")
    model.load_state_dict({name: t.to(torch.float32) for name, t in tensors.items()})
    model.eval()
    return Checkpoint(model, manifest, folder)

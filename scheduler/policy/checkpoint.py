"""Checkpoints for training: save a torch scorer, load one back into torch.

The format, and every check made on loading, are ``weights``' (the live scheduler's
torch-free reader): ``load_checkpoint`` reads the manifest and the weights there,
checks each tensor against the torch model the config builds (so it also loads the
fixed-action seed kinds), and fills that model. Loading never runs code: JSON and
safetensors only (``torch.load`` is not used anywhere).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from scheduler.policy.config import ScorerConfig
from scheduler.policy.features import FEATURE_SCHEMA_VERSION
from scheduler.policy.model import NodeScorer
from scheduler.policy.weights import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST_FILE,
    WEIGHTS_FILE,
    CheckpointError,
    default_checkpoint_path,
    feature_names,
    read_arrays,
    read_config,
    read_manifest,
    sha256,
)

__all__ = [
    "MANIFEST_FILE",
    "WEIGHTS_FILE",
    "Checkpoint",
    "CheckpointError",
    "Manifest",
    "default_checkpoint_path",
    "load_checkpoint",
    "read_manifest",
    "save_checkpoint",
]


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
        "features": feature_names(),
        "model": model.config.to_json(),
        "weights": {"file": WEIGHTS_FILE, "sha256": sha256(weights)},
        "training": extra.training,
        "evaluation": extra.evaluation,
    }
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return folder


def load_checkpoint(path: Path | None = None) -> Checkpoint:
    """Load and check a checkpoint (the shipped one when ``path`` is None) into torch."""
    folder, manifest = read_manifest(path or default_checkpoint_path())
    model = NodeScorer(read_config(folder, manifest))
    expected = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    arrays = read_arrays(folder, manifest, expected)
    model.load_state_dict({name: torch.from_numpy(array) for name, array in arrays.items()})
    model.eval()
    return Checkpoint(model, manifest, folder)

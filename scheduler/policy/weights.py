"""Reading a checkpoint without torch: the manifest, the config and the weights as numpy
arrays, every tensor checked by name and shape.

A checkpoint is a folder with ``model.safetensors`` (the weights) and ``manifest.json``
(the model config, the feature schema, how it was trained and evaluated). Reading
never runs code: JSON and safetensors only. A checkpoint is refused with a
``CheckpointError`` naming the file and the field when the manifest does not parse,
its feature schema differs from this version's, its weights fail the manifest's
SHA-256, or a tensor is missing, extra or has another shape. The live scheduler
loads its policy here (``load_weights``); training's ``checkpoint.load_checkpoint``
runs the same checks and then fills a torch model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from safetensors import SafetensorError
from safetensors.numpy import load_file

from scheduler.errors import SchedulerInputError
from scheduler.policy.config import PER_NODE_KINDS, ScorerConfig, per_node_shapes
from scheduler.policy.features import FEATURE_SCHEMA_VERSION, NODE_FEATURES, PAIR_FEATURES, POD_FEATURES

FORMAT = "rl-scheduler-policy"
FORMAT_VERSION = 1
WEIGHTS_FILE = "model.safetensors"
MANIFEST_FILE = "manifest.json"
DEFAULT_CHECKPOINT = "gnn-fgd-residual"
TRAINING_EXTRAS = "the training extras (torch, torch-geometric)"

FloatArray = npt.NDArray[np.float32]


class CheckpointError(SchedulerInputError):
    """A checkpoint that cannot be used (missing, corrupted, other feature schema)."""


@dataclass
class CheckpointWeights:
    """A checked checkpoint as numpy: ``arrays`` are float32, named as the torch model's
    ``state_dict``."""

    config: ScorerConfig
    arrays: dict[str, FloatArray]
    manifest: dict[str, Any]
    path: Path


def default_checkpoint_path() -> Path:
    """The checkpoint shipped in the package."""
    return Path(str(resources.files("scheduler.policy").joinpath("checkpoints", DEFAULT_CHECKPOINT)))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def feature_names() -> dict[str, list[str]]:
    """The manifest's ``features``: this version's feature names."""
    return {"node": list(NODE_FEATURES), "pair": list(PAIR_FEATURES), "pod": list(POD_FEATURES)}


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
    if manifest.get("features") != feature_names():
        raise CheckpointError(where, "features", "feature names differ from this scheduler's schema")
    return folder, manifest


def read_config(folder: Path, manifest: Mapping[str, Any]) -> ScorerConfig:
    """The manifest's ``model``, checked."""
    model = manifest.get("model") or {}
    try:
        if not isinstance(model, dict):
            raise TypeError(f"expected a JSON object, got {type(model).__name__}")
        return ScorerConfig.from_json(dict(model))
    except (TypeError, ValueError) as error:
        raise CheckpointError(str(folder / MANIFEST_FILE), "model", str(error)) from None


def weights_file_name(folder: Path, manifest: Mapping[str, Any]) -> str:
    """The manifest's ``weights.file``: a file name in the checkpoint folder, so that the
    folder is the whole checkpoint (what is copied, hashed and published)."""
    info = manifest.get("weights") or {}
    name = str(info.get("file", WEIGHTS_FILE)) if isinstance(info, dict) else WEIGHTS_FILE
    if Path(name).name != name or name in ("", ".", ".."):
        problem = f"{name!r} is not a file name in the checkpoint folder"
        raise CheckpointError(str(folder / MANIFEST_FILE), "weights.file", problem)
    return name


def read_arrays(
    folder: Path, manifest: Mapping[str, Any], expected: Mapping[str, tuple[int, ...]]
) -> dict[str, FloatArray]:
    """The weights the manifest names, checked against its SHA-256 and against
    ``expected`` (name -> shape): none missing, none extra, every shape equal."""
    info = manifest.get("weights") or {}
    if not isinstance(info, dict):
        raise CheckpointError(str(folder / MANIFEST_FILE), "weights", "expected a JSON object")
    weights = folder / weights_file_name(folder, manifest)
    if not weights.is_file():
        raise CheckpointError(str(weights), "file", "missing")
    if sha256(weights) != info.get("sha256"):
        raise CheckpointError(
            str(weights), "sha256", "does not match the manifest: the file is corrupted or was replaced"
        )
    try:
        tensors = load_file(str(weights))
    except (SafetensorError, OSError, ValueError, TypeError) as error:
        raise CheckpointError(str(weights), "content", f"not a readable safetensors file ({error})") from None
    for name, shape in expected.items():
        if name not in tensors:
            raise CheckpointError(str(weights), name, "tensor missing")
        if tuple(tensors[name].shape) != shape:
            raise CheckpointError(str(weights), name, f"shape {tuple(tensors[name].shape)}, expected {shape}")
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise CheckpointError(str(weights), unexpected[0], "unexpected tensor for this model config")
    return {name: np.asarray(tensors[name], dtype=np.float32) for name in expected}


def load_weights(path: Path | None = None) -> CheckpointWeights:
    """Load and check a per-node checkpoint (the shipped one when ``path`` is None) as
    numpy arrays. A checkpoint of a kind that runs in torch only is refused."""
    folder, manifest = read_manifest(path or default_checkpoint_path())
    config = read_config(folder, manifest)
    if config.kind not in PER_NODE_KINDS:
        raise CheckpointError(
            str(folder / MANIFEST_FILE),
            "model",
            f"kind {config.kind!r} runs in torch and needs {TRAINING_EXTRAS}; the scheduler serves "
            f"{' and '.join(PER_NODE_KINDS)} checkpoints. Compare it offline with rl-scheduler evaluate",
        )
    arrays = read_arrays(folder, manifest, per_node_shapes(config))
    return CheckpointWeights(config, arrays, manifest, folder)

"""Reading a checkpoint without torch: the manifest, the config and the weights as numpy
arrays, every field and every tensor checked before anything is trusted.

A checkpoint is a folder with ``model.safetensors`` (the weights) and ``manifest.json``
(the model config, the feature schema, how it was trained and evaluated). Reading
never runs code: JSON and safetensors only. A checkpoint is refused with a
``CheckpointError`` naming the file and the field (a dotted path such as
``weights.sha256`` or ``model.hidden``) when:

- the manifest is larger than ``MAX_MANIFEST_BYTES``, does not parse as JSON, or nests
  deeper than ``MAX_DEPTH``;
- it is of another format, format version or feature schema, or names other features;
- a field has another type than ``save_checkpoint`` writes (no coercion: ``"32"`` is
  not an integer, ``true`` is not 1), the model config has an unknown field, a size out
  of bounds, a non-finite float, or asks for more than ``config.MAX_PARAMETERS``
  weights (``ScorerConfig.from_json``); ``training`` and ``evaluation`` must be JSON
  objects (free-form, bounded by the file's size and nesting); other top-level fields
  are kept as they are;
- the weights file is missing, larger than ``MAX_WEIGHTS_BYTES``, fails the manifest's
  SHA-256 (checked on the very bytes that are then parsed) or is not safetensors;
- a tensor is missing, extra, of another shape, not float32, or holds a NaN or an
  infinity.

The live scheduler loads its policy here (``load_weights``); training's
``checkpoint.load_checkpoint`` runs the same checks and then fills a torch model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictStr, TypeAdapter, ValidationError
from safetensors.numpy import load as parse_safetensors

from scheduler.errors import SchedulerInputError
from scheduler.policy.config import (
    MAX_PARAMETERS,
    PER_NODE_KINDS,
    ConfigFieldError,
    ScorerConfig,
    first_problem,
    per_node_shapes,
)
from scheduler.policy.features import FEATURE_SCHEMA_VERSION, NODE_FEATURES, PAIR_FEATURES, POD_FEATURES

FORMAT = "rl-scheduler-policy"
FORMAT_VERSION = 1
WEIGHTS_FILE = "model.safetensors"
MANIFEST_FILE = "manifest.json"
DEFAULT_CHECKPOINT = "gnn-fgd-residual"
TRAINING_EXTRAS = "the training extras (torch, torch-geometric)"

# The shipped manifest is 8.7 KiB, its training and evaluation records included; a
# manifest a hundred times that is still a small read.
MAX_MANIFEST_BYTES = 2**20
# The shipped manifest nests 6 deep (evaluation.synthetic.policies.<name>.<by seed>).
MAX_DEPTH = 32
# The most weights a config may ask for, as float32, and a header: 65 MiB, 1,800 times
# the shipped 36 KiB. The file is read whole (hashed and parsed from the same bytes).
MAX_WEIGHTS_BYTES = 4 * MAX_PARAMETERS + 2**20

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


class WeightsEntry(BaseModel):
    """The manifest's ``weights``: the file (in the checkpoint folder) and its SHA-256
    (without one, no file matches: ``read_arrays`` refuses it as a mismatch)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: StrictStr = WEIGHTS_FILE
    sha256: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")] = ""


class FeatureNames(BaseModel):
    """The manifest's ``features``: the feature names the policy was trained on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node: list[StrictStr]
    pair: list[StrictStr]
    pod: list[StrictStr]


class ManifestFields(BaseModel):
    """The types of a manifest's fields, as ``save_checkpoint`` writes them. ``model`` is
    checked by ``ScorerConfig.from_json``; other top-level fields (``ablation``,
    ``tune``: what those commands record) are allowed and kept as they are."""

    model_config = ConfigDict(extra="allow", frozen=True)

    format: StrictStr
    format_version: Annotated[int, Field(strict=True)]
    feature_schema_version: Annotated[int, Field(strict=True)]
    features: FeatureNames
    model: dict[str, JsonValue]
    weights: WeightsEntry
    training: dict[str, JsonValue] = Field(default_factory=dict)
    evaluation: dict[str, JsonValue] = Field(default_factory=dict)


_WEIGHTS_ENTRY = TypeAdapter(WeightsEntry)


def _read_bounded(path: Path, limit: int, where: str) -> bytes:
    """The file's bytes; refused when it holds more than ``limit`` (read at most one
    byte more, so a file that grows meanwhile is refused too)."""
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        raise CheckpointError(where, "file", f"cannot be read ({error.strerror or error})") from None
    if len(data) > limit:
        raise CheckpointError(where, "size", f"larger than {limit:,} bytes")
    return data


def _deeper_than(value: object, limit: int) -> bool:
    """Whether a parsed JSON value nests more than ``limit`` arrays or objects deep."""
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return False


def _is(value: object, expected: int) -> bool:
    """``value`` is the JSON integer ``expected`` (``true`` is not 1)."""
    return type(value) is int and value == expected


def read_manifest(path: Path) -> tuple[Path, dict[str, Any]]:
    """``(folder, manifest)`` of a checkpoint folder (or its manifest file), every field
    checked (see the module docstring); the manifest is returned as parsed."""
    folder = path.parent if path.name == MANIFEST_FILE else path
    manifest_path = folder / MANIFEST_FILE
    where = str(manifest_path)
    if not folder.is_dir():
        raise CheckpointError(str(folder), "path", "no such checkpoint folder")
    if not manifest_path.is_file():
        raise CheckpointError(where, "file", f"missing; a checkpoint folder holds {MANIFEST_FILE}")
    data = _read_bounded(manifest_path, MAX_MANIFEST_BYTES, where)
    try:
        # pydantic's parser stops at 200 levels of nesting (json.loads raised RecursionError).
        manifest = pydantic_core.from_json(data)
    except (ValueError, RecursionError) as error:
        raise CheckpointError(where, "content", f"not valid JSON ({error})") from None
    if _deeper_than(manifest, MAX_DEPTH):
        raise CheckpointError(where, "content", f"nested deeper than {MAX_DEPTH} levels")
    if not isinstance(manifest, dict):
        raise CheckpointError(where, "content", "expected a JSON object")
    if manifest.get("format") != FORMAT:
        raise CheckpointError(where, "format", f"expected {FORMAT!r}, got {manifest.get('format')!r}")
    if not _is(manifest.get("format_version"), FORMAT_VERSION):
        raise CheckpointError(
            where, "format_version", f"expected {FORMAT_VERSION}, got {manifest.get('format_version')!r}"
        )
    schema = manifest.get("feature_schema_version")
    if not _is(schema, FEATURE_SCHEMA_VERSION):
        raise CheckpointError(
            where,
            "feature_schema_version",
            f"the checkpoint was trained on feature schema {schema!r}; this scheduler computes "
            f"schema {FEATURE_SCHEMA_VERSION}. Retrain it (rl-scheduler train) or use a matching release",
        )
    try:
        ManifestFields.model_validate(manifest)
    except ValidationError as error:
        raise CheckpointError(where, *first_problem(error)) from None
    if manifest["features"] != feature_names():
        raise CheckpointError(where, "features", "feature names differ from this scheduler's schema")
    read_config(folder, manifest)
    weights_file_name(folder, manifest)
    return folder, manifest


def read_config(folder: Path, manifest: Mapping[str, Any]) -> ScorerConfig:
    """The manifest's ``model``, checked: strictly typed and bounded
    (``ScorerConfig.from_json``), with as many features as the manifest names."""
    where = str(folder / MANIFEST_FILE)
    if "model" not in manifest:
        raise CheckpointError(where, "model", "missing")
    try:
        config = ScorerConfig.from_json(manifest["model"])
    except ConfigFieldError as error:
        field = f"model.{error.field}" if error.field else "model"
        raise CheckpointError(where, field, error.problem) from None
    counts = {
        "node_features": (config.node_features, len(NODE_FEATURES)),
        "pair_features": (config.pair_features, len(PAIR_FEATURES)),
        "pod_features": (config.pod_features, len(POD_FEATURES)),
    }
    for name, (count, expected) in counts.items():
        if count != expected:
            problem = f"{count}, but this scheduler computes {expected} (the manifest's features)"
            raise CheckpointError(where, f"model.{name}", problem)
    return config


def _weights_entry(folder: Path, manifest: Mapping[str, Any]) -> WeightsEntry:
    try:
        return _WEIGHTS_ENTRY.validate_python(manifest.get("weights"))
    except ValidationError as error:
        field, problem = first_problem(error)
        raise CheckpointError(
            str(folder / MANIFEST_FILE), f"weights.{field}" if field else "weights", problem
        ) from None


def weights_file_name(folder: Path, manifest: Mapping[str, Any]) -> str:
    """The manifest's ``weights.file``: a file name in the checkpoint folder, so that the
    folder is the whole checkpoint (what is copied, hashed and published)."""
    name = _weights_entry(folder, manifest).file
    if Path(name).name != name or name in ("", ".", "..") or "\x00" in name:
        problem = f"{name!r} is not a file name in the checkpoint folder"
        raise CheckpointError(str(folder / MANIFEST_FILE), "weights.file", problem)
    return name


def read_arrays(
    folder: Path, manifest: Mapping[str, Any], expected: Mapping[str, tuple[int, ...]]
) -> dict[str, FloatArray]:
    """The weights the manifest names, checked against its SHA-256 and against
    ``expected`` (name -> shape): none missing, none extra, every shape equal, every
    tensor float32 and finite."""
    info = _weights_entry(folder, manifest)
    weights = folder / weights_file_name(folder, manifest)
    if not weights.is_file():
        raise CheckpointError(str(weights), "file", "missing")
    data = _read_bounded(weights, MAX_WEIGHTS_BYTES, str(weights))
    # Hash the bytes that are parsed: the file may be replaced between two reads.
    if hashlib.sha256(data).hexdigest() != info.sha256:
        raise CheckpointError(
            str(weights), "sha256", "does not match the manifest: the file is corrupted or was replaced"
        )
    try:
        tensors = parse_safetensors(data)
    except Exception as error:  # any failure to parse untrusted bytes is the file's, not ours
        raise CheckpointError(str(weights), "content", f"not a readable safetensors file ({error})") from None
    for name, shape in expected.items():
        if name not in tensors:
            raise CheckpointError(str(weights), name, "tensor missing")
        tensor = tensors[name]
        if tuple(tensor.shape) != shape:
            raise CheckpointError(str(weights), name, f"shape {tuple(tensor.shape)}, expected {shape}")
        if tensor.dtype != np.float32:
            raise CheckpointError(str(weights), name, f"dtype {tensor.dtype}, expected float32")
        bad = int(np.size(tensor) - np.count_nonzero(np.isfinite(tensor)))
        if bad:
            raise CheckpointError(str(weights), name, f"{bad} value(s) NaN or infinite")
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

"""A lifetime model on disk: a folder with ``model.safetensors`` (``edges``, ``bias``,
``weights``, float32) and ``manifest.json`` (format, feature names, bins, the weights'
SHA-256, how it was fitted and how it calibrated). The conventions are the policy
checkpoint's (``scheduler.policy.weights``): JSON and safetensors only, never pickle,
and nothing trusted before it is checked.

A file is refused with a ``LifetimeModelError`` naming the file and the field when the
manifest is too large, not JSON, of another format or version, of another feature
version or other feature names, has a field of another type than ``save_lifetime_model``
writes (strict: ``"31"`` is not 31, ``true`` is not 1; unknown fields refused), or when
the weights file is missing, too large, fails its SHA-256, is not safetensors, lacks a
tensor or has an extra one, a tensor of another shape or dtype, a NaN or an infinity, or
edges that do not start at 0 and increase.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictStr, ValidationError
from safetensors.numpy import load as parse_safetensors
from safetensors.numpy import save as format_safetensors

from scheduler.errors import SchedulerInputError
from scheduler.lifetimes.features import LIFETIME_FEATURE_VERSION, LIFETIME_FEATURES
from scheduler.lifetimes.model import LifetimeModel
from scheduler.policy.config import first_problem

FORMAT = "rl-scheduler-lifetimes"
FORMAT_VERSION = 1
WEIGHTS_FILE = "model.safetensors"
MANIFEST_FILE = "manifest.json"
DEFAULT_MODEL = "openb-default"
MAX_MANIFEST_BYTES = 2**20
MAX_BINS = 256
# edges, bias and weights of MAX_BINS bins as float32, and the header.
MAX_WEIGHTS_BYTES = 4 * (MAX_BINS + 1 + MAX_BINS * (1 + len(LIFETIME_FEATURES))) + 2**16


class LifetimeModelError(SchedulerInputError):
    """A lifetime model file that cannot be used (missing, corrupted, other features)."""


class _WeightsEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    file: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9._-]+$")] = WEIGHTS_FILE
    sha256: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]


class _Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: StrictStr
    format_version: Annotated[int, Field(strict=True)]
    feature_version: Annotated[int, Field(strict=True)]
    features: list[StrictStr]
    bins: Annotated[int, Field(strict=True, ge=1, le=MAX_BINS)]
    weights: _WeightsEntry
    training: dict[str, JsonValue] = Field(default_factory=dict)
    evaluation: dict[str, JsonValue] = Field(default_factory=dict)


def default_model_path() -> Path:
    """The model fitted on the openb ``default`` trace, shipped in the package."""
    return Path(str(resources.files("scheduler.lifetimes").joinpath("models", DEFAULT_MODEL)))


def save_lifetime_model(
    model: LifetimeModel,
    folder: Path,
    training: dict[str, Any] | None = None,
    evaluation: dict[str, Any] | None = None,
) -> Path:
    """Write ``model`` into ``folder`` (created); returns the folder."""
    if model.features != len(LIFETIME_FEATURES):
        raise ValueError(f"the model reads {model.features} features, not {len(LIFETIME_FEATURES)}")
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {
        "edges": model.edges.astype(np.float32),
        "bias": model.bias.astype(np.float32),
        "weights": model.weights.astype(np.float32),
    }
    data = format_safetensors(tensors)
    (folder / WEIGHTS_FILE).write_bytes(data)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "feature_version": LIFETIME_FEATURE_VERSION,
        "features": list(LIFETIME_FEATURES),
        "bins": model.bins,
        "weights": {"file": WEIGHTS_FILE, "sha256": hashlib.sha256(data).hexdigest()},
        "training": training or {},
        "evaluation": evaluation or {},
    }
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return folder


def _read_bounded(path: Path, limit: int) -> bytes:
    if not path.is_file():
        raise LifetimeModelError(str(path), "file", "missing")
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        raise LifetimeModelError(str(path), "file", f"cannot be read ({error.strerror or error})") from None
    if len(data) > limit:
        raise LifetimeModelError(str(path), "size", f"larger than {limit:,} bytes")
    return data


def read_lifetime_manifest(folder: Path) -> dict[str, Any]:
    """The checked manifest of a model folder (see the module docstring)."""
    path = folder / MANIFEST_FILE
    where = str(path)
    data = _read_bounded(path, MAX_MANIFEST_BYTES)
    try:
        manifest = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise LifetimeModelError(where, "content", f"not valid JSON ({error})") from None
    if not isinstance(manifest, dict):
        raise LifetimeModelError(where, "content", "expected a JSON object")
    if manifest.get("format") != FORMAT:
        raise LifetimeModelError(where, "format", f"expected {FORMAT!r}, got {manifest.get('format')!r}")
    for name, expected in (("format_version", FORMAT_VERSION), ("feature_version", LIFETIME_FEATURE_VERSION)):
        value = manifest.get(name)
        if type(value) is not int or value != expected:
            raise LifetimeModelError(where, name, f"expected {expected}, got {value!r}")
    try:
        _Manifest.model_validate(manifest)
    except ValidationError as error:
        raise LifetimeModelError(where, *first_problem(error)) from None
    if manifest["features"] != list(LIFETIME_FEATURES):
        raise LifetimeModelError(where, "features", "feature names differ from this scheduler's")
    return manifest


def load_lifetime_model(folder: Path | None = None) -> LifetimeModel:
    """Load and check a model folder (the shipped one when ``folder`` is None)."""
    folder = folder or default_model_path()
    manifest = read_lifetime_manifest(folder)
    entry = _Manifest.model_validate(manifest).weights
    path = folder / entry.file
    data = _read_bounded(path, MAX_WEIGHTS_BYTES)
    where = str(path)
    if hashlib.sha256(data).hexdigest() != entry.sha256:
        raise LifetimeModelError(where, "sha256", "does not match the manifest: corrupted or replaced")
    try:
        tensors = parse_safetensors(data)
    except Exception as error:  # any failure to parse untrusted bytes is the file's
        raise LifetimeModelError(where, "content", f"not a readable safetensors file ({error})") from None
    bins = int(manifest["bins"])
    shapes = {"edges": (bins + 1,), "bias": (bins,), "weights": (bins, len(LIFETIME_FEATURES))}
    for name, shape in shapes.items():
        if name not in tensors:
            raise LifetimeModelError(where, name, "tensor missing")
        tensor = tensors[name]
        if tuple(tensor.shape) != shape:
            raise LifetimeModelError(where, name, f"shape {tuple(tensor.shape)}, expected {shape}")
        if tensor.dtype != np.float32:
            raise LifetimeModelError(where, name, f"dtype {tensor.dtype}, expected float32")
        bad = int(tensor.size - np.count_nonzero(np.isfinite(tensor)))
        if bad:
            raise LifetimeModelError(where, name, f"{bad} value(s) NaN or infinite")
    extra = sorted(set(tensors) - set(shapes))
    if extra:
        raise LifetimeModelError(where, extra[0], "unexpected tensor")
    edges = tensors["edges"].astype(np.float64)
    if edges[0] != 0.0 or np.any(np.diff(edges) <= 0):
        raise LifetimeModelError(where, "edges", "must start at 0 and increase")
    return LifetimeModel(
        edges=edges, bias=tensors["bias"].astype(np.float64), weights=tensors["weights"].astype(np.float64)
    )

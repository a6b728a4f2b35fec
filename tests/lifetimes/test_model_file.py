"""A model folder round-trips, and a bad one is refused naming the file and the field."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from scheduler.lifetimes.features import FEATURE_COUNT
from scheduler.lifetimes.model import LifetimeModel, default_edges
from scheduler.lifetimes.model_file import (
    MANIFEST_FILE,
    WEIGHTS_FILE,
    LifetimeModelError,
    load_lifetime_model,
    save_lifetime_model,
)


def a_model() -> LifetimeModel:
    rng = np.random.default_rng(0)
    return LifetimeModel(default_edges(), rng.normal(-8, 1, 31), rng.normal(0, 0.3, (31, FEATURE_COUNT)))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return save_lifetime_model(a_model(), tmp_path / "m", {"trace": "synthetic"}, {"note": "none"})


def test_round_trip_keeps_every_answer(folder: Path) -> None:
    model = a_model()
    loaded = load_lifetime_model(folder)
    x = np.random.default_rng(1).normal(0, 1, (50, FEATURE_COUNT))
    age = np.linspace(0, 1e5, 50)
    assert np.allclose(loaded.remaining_quantiles(x, age), model.remaining_quantiles(x, age), rtol=1e-5)
    assert loaded.weights.dtype == np.float64
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    assert manifest["training"] == {"trace": "synthetic"}


def test_shipped_model_loads() -> None:
    model = load_lifetime_model()
    assert model.features == FEATURE_COUNT
    median = model.remaining_quantiles(np.zeros((1, FEATURE_COUNT)), np.zeros(1), (0.5,))
    assert 1.0 < median[0, 0] < 1e6


def _edit_manifest(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / MANIFEST_FILE
        manifest = json.loads(path.read_text())
        change(manifest)
        path.write_text(json.dumps(manifest))

    return edit


def _edit_tensors(change: Callable[[dict[str, np.ndarray]], None]) -> Callable[[Path], None]:
    """Rewrite the weights and the manifest's SHA-256 to match (a well-formed file with
    bad content)."""

    def edit(folder: Path) -> None:
        tensors = dict(load_file(folder / WEIGHTS_FILE))
        change(tensors)
        save_file(tensors, folder / WEIGHTS_FILE)
        digest = hashlib.sha256((folder / WEIGHTS_FILE).read_bytes()).hexdigest()
        _edit_manifest(lambda m: m["weights"].update(sha256=digest))(folder)

    return edit


def _set(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda m: m.update({key: value})


def _nan(t: dict[str, np.ndarray]) -> None:
    t["weights"][3, 2] = np.nan


def _inf(t: dict[str, np.ndarray]) -> None:
    t["bias"][0] = np.inf


def _unordered(t: dict[str, np.ndarray]) -> None:
    t["edges"][5] = t["edges"][4]


BAD = [
    ("NaN weight", _edit_tensors(_nan), WEIGHTS_FILE, "weights", "NaN or infinite"),
    ("infinite bias", _edit_tensors(_inf), WEIGHTS_FILE, "bias", "NaN or infinite"),
    (
        "weights of another shape",
        _edit_tensors(lambda t: t.update(weights=t["weights"][:, :-1])),
        WEIGHTS_FILE,
        "weights",
        "shape",
    ),
    (
        "bias of another shape",
        _edit_tensors(lambda t: t.update(bias=t["bias"][:-1])),
        WEIGHTS_FILE,
        "bias",
        "shape",
    ),
    (
        "float64 weights",
        _edit_tensors(lambda t: t.update(weights=t["weights"].astype(np.float64))),
        WEIGHTS_FILE,
        "weights",
        "dtype",
    ),
    ("missing tensor", _edit_tensors(lambda t: t.pop("edges")), WEIGHTS_FILE, "edges", "missing"),
    (
        "extra tensor",
        _edit_tensors(lambda t: t.update(extra=np.zeros(2, np.float32))),
        WEIGHTS_FILE,
        "extra",
        "unexpected",
    ),
    ("edges not increasing", _edit_tensors(_unordered), WEIGHTS_FILE, "edges", "increase"),
    (
        "weights replaced",
        lambda f: (f / WEIGHTS_FILE).write_bytes(b"\x00" * 64),
        WEIGHTS_FILE,
        "sha256",
        "does not match",
    ),
    ("weights missing", lambda f: (f / WEIGHTS_FILE).unlink(), WEIGHTS_FILE, "file", "missing"),
    ("manifest missing", lambda f: (f / MANIFEST_FILE).unlink(), MANIFEST_FILE, "file", "missing"),
    (
        "not JSON",
        lambda f: (f / MANIFEST_FILE).write_text("{bins: 31"),
        MANIFEST_FILE,
        "content",
        "not valid JSON",
    ),
    ("a list", lambda f: (f / MANIFEST_FILE).write_text("[]"), MANIFEST_FILE, "content", "JSON object"),
    (
        "other format",
        _edit_manifest(_set("format", "rl-scheduler-policy")),
        MANIFEST_FILE,
        "format",
        "expected",
    ),
    (
        "version as a string",
        _edit_manifest(_set("format_version", "1")),
        MANIFEST_FILE,
        "format_version",
        "expected 1",
    ),
    (
        "version true",
        _edit_manifest(_set("format_version", True)),
        MANIFEST_FILE,
        "format_version",
        "expected 1",
    ),
    (
        "other feature version",
        _edit_manifest(_set("feature_version", 2)),
        MANIFEST_FILE,
        "feature_version",
        "expected 1",
    ),
    ("bins as a string", _edit_manifest(_set("bins", "31")), MANIFEST_FILE, "bins", "integer"),
    ("bins as a float", _edit_manifest(_set("bins", 31.0)), MANIFEST_FILE, "bins", "integer"),
    ("other bins", _edit_manifest(_set("bins", 30)), WEIGHTS_FILE, "edges", "shape"),
    ("features not a list", _edit_manifest(_set("features", "cpu")), MANIFEST_FILE, "features", "array"),
    (
        "other features",
        _edit_manifest(lambda m: m["features"].reverse()),
        MANIFEST_FILE,
        "features",
        "differ",
    ),
    ("unknown field", _edit_manifest(_set("surprise", 1)), MANIFEST_FILE, "surprise", ""),
    ("training not an object", _edit_manifest(_set("training", [])), MANIFEST_FILE, "training", ""),
    (
        "bad sha256",
        _edit_manifest(lambda m: m["weights"].update(sha256="xyz")),
        MANIFEST_FILE,
        "weights.sha256",
        "",
    ),
    (
        "weights path outside",
        _edit_manifest(lambda m: m["weights"].update(file="../x")),
        MANIFEST_FILE,
        "weights.file",
        "",
    ),
]


@pytest.mark.parametrize(("case", "damage", "file", "field", "problem"), BAD, ids=[b[0] for b in BAD])
def test_bad_files_are_refused(
    folder: Path, case: str, damage: Callable[[Path], None], file: str, field: str, problem: str
) -> None:
    damage(folder)
    with pytest.raises(LifetimeModelError) as caught:
        load_lifetime_model(folder)
    error = caught.value
    assert error.obj == str(folder / file), case
    assert error.field == field, case
    assert problem in error.problem, case


def test_a_model_of_other_features_is_not_written(tmp_path: Path) -> None:
    model = LifetimeModel(default_edges(), np.zeros(31), np.zeros((31, 2)))
    with pytest.raises(ValueError, match="features"):
        save_lifetime_model(model, tmp_path / "m")

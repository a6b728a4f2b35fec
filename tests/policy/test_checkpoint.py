"""Checkpoints: a round trip keeps the scorer; anything else is refused, by name."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from scheduler.policy.checkpoint import (
    MANIFEST_FILE,
    WEIGHTS_FILE,
    CheckpointError,
    default_checkpoint_path,
    load_checkpoint,
    save_checkpoint,
)
from scheduler.policy.config import ScorerConfig
from scheduler.policy.features import FEATURE_SCHEMA_VERSION
from scheduler.policy.model import NodeScorer


def trained_scorer(seed: int = 0) -> NodeScorer:
    torch.manual_seed(seed)
    model = NodeScorer(ScorerConfig(hidden=8, head_hidden=8))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    return model


def test_round_trip_keeps_every_weight_and_the_config(tmp_path: Path) -> None:
    model = trained_scorer()
    save_checkpoint(model, tmp_path / "ck")
    loaded = load_checkpoint(tmp_path / "ck")
    assert loaded.config == model.config
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], tensor), name
    manifest = json.loads((tmp_path / "ck" / MANIFEST_FILE).read_text())
    assert manifest["feature_schema_version"] == FEATURE_SCHEMA_VERSION
    # The manifest's path works too.
    assert load_checkpoint(tmp_path / "ck" / MANIFEST_FILE).config == model.config


def _flip_a_byte(folder: Path) -> None:
    weights = folder / WEIGHTS_FILE
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF
    weights.write_bytes(bytes(data))


def _truncate(folder: Path) -> None:
    weights = folder / WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:40])


def _edit_manifest(**changes: object) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / MANIFEST_FILE
        manifest = json.loads(path.read_text())
        manifest.update(changes)
        path.write_text(json.dumps(manifest))

    return edit


def _rehash(folder: Path) -> None:
    """A different model's weights under a manifest whose checksum was updated."""
    other = NodeScorer(ScorerConfig(hidden=16, head_hidden=8))
    save_checkpoint(other, folder / "other")
    (folder / WEIGHTS_FILE).write_bytes((folder / "other" / WEIGHTS_FILE).read_bytes())
    other_hash = json.loads((folder / "other" / MANIFEST_FILE).read_text())["weights"]["sha256"]
    _edit_manifest(weights={"file": WEIGHTS_FILE, "sha256": other_hash})(folder)


@pytest.mark.parametrize(
    ("damage", "file", "field", "words"),
    [
        pytest.param(_flip_a_byte, WEIGHTS_FILE, "sha256", "corrupted", id="a flipped byte in the weights"),
        pytest.param(_truncate, WEIGHTS_FILE, "sha256", "corrupted", id="truncated weights"),
        pytest.param(
            lambda f: (f / WEIGHTS_FILE).unlink(), WEIGHTS_FILE, "file", "missing", id="weights missing"
        ),
        pytest.param(
            lambda f: (f / MANIFEST_FILE).write_text("{not json"),
            MANIFEST_FILE,
            "content",
            "not valid JSON",
            id="a manifest that is not JSON",
        ),
        pytest.param(
            _edit_manifest(feature_schema_version=FEATURE_SCHEMA_VERSION + 1),
            MANIFEST_FILE,
            "feature_schema_version",
            f"schema {FEATURE_SCHEMA_VERSION}",
            id="another feature schema",
        ),
        pytest.param(
            _edit_manifest(features={"node": ["cpu"], "pair": [], "pod": []}),
            MANIFEST_FILE,
            "features",
            "differ",
            id="other feature names",
        ),
        pytest.param(
            _edit_manifest(format="pickle"),
            MANIFEST_FILE,
            "format",
            "rl-scheduler-policy",
            id="another format",
        ),
        pytest.param(
            _edit_manifest(model={"kind": "transformer"}),
            MANIFEST_FILE,
            "model.kind",
            "'transformer'",
            id="an unknown kind",
        ),
        pytest.param(
            _edit_manifest(model={"kind": "gnn", "reserve_min": 9.0, "reserve_max": 4.0}),
            MANIFEST_FILE,
            "model",
            "reserve_min <= reserve_max",
            id="reserve bounds out of order",
        ),
        pytest.param(_rehash, WEIGHTS_FILE, "encoder.0.weight", "shape", id="weights of another model size"),
    ],
)
def test_a_bad_checkpoint_is_refused_naming_file_and_field(
    tmp_path: Path, damage: Callable[[Path], None], file: str, field: str, words: str
) -> None:
    folder = save_checkpoint(trained_scorer(), tmp_path / "ck")
    damage(folder)
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(folder)
    error = caught.value
    assert error.obj.endswith(file)
    assert error.field == field
    assert words in error.problem
    assert str(error).startswith(str(folder))


def test_a_missing_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no such checkpoint folder"):
        load_checkpoint(tmp_path / "nowhere")


def test_the_shipped_checkpoint_loads() -> None:
    loaded = load_checkpoint()
    assert loaded.path == default_checkpoint_path()
    assert loaded.manifest["training"]["traces"]


def test_loading_never_unpickles() -> None:
    source = Path(__file__).resolve().parents[2] / "scheduler"
    offenders = [
        str(path)
        for path in source.rglob("*.py")
        if "torch.load(" in path.read_text() or "import pickle" in path.read_text()
    ]
    assert offenders == []

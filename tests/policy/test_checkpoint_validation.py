"""A checkpoint is validated before it is trusted: every manifest field has the type
``save_checkpoint`` writes, sizes and nesting are bounded, and every weight is a finite
float32. Whatever is wrong, the loaders raise ``CheckpointError`` naming the file and
the field (never a ``TypeError`` or a ``RecursionError``), the numpy one and the torch
one alike."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from scheduler.policy import weights
from scheduler.policy.checkpoint import load_checkpoint
from scheduler.policy.config import (
    MAX_PARAMETERS,
    ScorerConfig,
    parameter_count,
)
from scheduler.policy.weights import (
    MANIFEST_FILE,
    MAX_DEPTH,
    MAX_MANIFEST_BYTES,
    MAX_WEIGHTS_BYTES,
    WEIGHTS_FILE,
    CheckpointError,
    default_checkpoint_path,
    load_weights,
    read_manifest,
    sha256,
)

Damage = Callable[[Path], None]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of the shipped checkpoint, to damage."""
    return Path(shutil.copytree(default_checkpoint_path(), tmp_path / "ck"))


def edit(path: tuple[str, ...], value: object) -> Damage:
    """Set the manifest's field at ``path`` to ``value``."""

    def damage(folder: Path) -> None:
        manifest = json.loads((folder / MANIFEST_FILE).read_text())
        parent = manifest
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value
        (folder / MANIFEST_FILE).write_text(json.dumps(manifest))

    return damage


def delete(*path: str) -> Damage:
    def damage(folder: Path) -> None:
        manifest = json.loads((folder / MANIFEST_FILE).read_text())
        parent = manifest
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
        (folder / MANIFEST_FILE).write_text(json.dumps(manifest))

    return damage


def write_manifest(text: str | bytes) -> Damage:
    def damage(folder: Path) -> None:
        path = folder / MANIFEST_FILE
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    return damage


def nested(depth: int) -> object:
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


BAD_MANIFESTS = [
    # ---- weights ----
    pytest.param(
        edit(("weights", "sha256"), 5), "weights.sha256", "expected a string, got 5", id="sha256 a number"
    ),
    pytest.param(
        edit(("weights", "sha256"), "abc"), "weights.sha256", "match pattern", id="sha256 not a digest"
    ),
    pytest.param(
        edit(("weights", "file"), 5), "weights.file", "expected a string", id="weights file a number"
    ),
    pytest.param(
        edit(("weights", "file"), ["a"]), "weights.file", "expected a string", id="weights file a list"
    ),
    pytest.param(
        edit(("weights", "file"), "../x"), "weights.file", "not a file name", id="weights file a path"
    ),
    pytest.param(
        edit(("weights", "size"), 1), "weights.size", "unknown field", id="weights with an unknown field"
    ),
    pytest.param(edit(("weights",), []), "weights", "expected a JSON object", id="weights a list"),
    pytest.param(delete("weights"), "weights", "missing", id="weights missing"),
    pytest.param(edit(("weights", "sha256"), None), "weights.sha256", "expected a string", id="sha256 null"),
    # ---- model: each field of the wrong type, out of bounds, unknown ----
    pytest.param(
        edit(("model", "hidden"), "32"), "model.hidden", "expected an integer, got '32'", id="hidden a string"
    ),
    pytest.param(edit(("model", "hidden"), 32.0), "model.hidden", "expected an integer", id="hidden a float"),
    pytest.param(edit(("model", "hidden"), True), "model.hidden", "expected an integer", id="hidden a bool"),
    pytest.param(
        edit(("model", "hidden"), 0), "model.hidden", "greater than or equal to 1", id="hidden zero"
    ),
    pytest.param(edit(("model", "heads"), "2"), "model.heads", "expected an integer", id="heads a string"),
    pytest.param(
        edit(("model", "heads"), 10**6), "model.heads", "less than or equal to", id="a million heads"
    ),
    pytest.param(
        edit(("model", "head_hidden"), -1), "model.head_hidden", "greater than", id="head_hidden < 0"
    ),
    pytest.param(
        edit(("model", "max_nodes"), None), "model.max_nodes", "expected an integer", id="max_nodes null"
    ),
    pytest.param(
        edit(("model", "prior_weight"), "1"), "model.prior_weight", "expected a number", id="prior a string"
    ),
    pytest.param(
        edit(("model", "prior_weight"), math.inf), "model.prior_weight", "finite", id="prior infinite"
    ),
    pytest.param(
        edit(("model", "reserve_min"), math.nan), "model.reserve_min", "finite", id="reserve_min NaN"
    ),
    pytest.param(
        edit(("model", "score_step"), -0.5), "model.score_step", "greater than", id="negative score step"
    ),
    pytest.param(
        edit(("model", "reserve_term"), "yes"), "model.reserve_term", "true or false", id="flag a string"
    ),
    pytest.param(edit(("model", "value_head"), 0), "model.value_head", "true or false", id="flag a number"),
    pytest.param(edit(("model", "kind"), "transformer"), "model.kind", "'transformer'", id="an unknown kind"),
    pytest.param(edit(("model", "kind"), 3), "model.kind", "'gnn'", id="kind a number"),
    pytest.param(
        edit(("model", "depth"), 3), "model.depth", "unknown field", id="model with an unknown field"
    ),
    pytest.param(
        edit(("model", "node_features"), 10), "model.node_features", "computes 17", id="other feature count"
    ),
    pytest.param(
        edit(("model",), {"kind": "gnn", "hidden": 4096, "heads": 64}),
        "model",
        f"more than the {MAX_PARAMETERS:,}",
        id="a model of gigabytes",
    ),
    pytest.param(
        edit(("model",), {"kind": "flat-mlp"}),
        "model.max_nodes",
        "needs max_nodes > 0",
        id="flat-mlp no actions",
    ),
    pytest.param(edit(("model",), []), "model", "expected a JSON object", id="model a list"),
    pytest.param(delete("model"), "model", "missing", id="model missing"),
    # ---- features, records, versions ----
    pytest.param(edit(("features",), 3), "features", "expected a JSON object", id="features a number"),
    pytest.param(
        edit(("features", "node"), "cpu"),
        "features.node",
        "expected a JSON array",
        id="features.node a string",
    ),
    pytest.param(
        edit(("features", "pod"), [1, 2]), "features.pod.0", "expected a string", id="a feature name a number"
    ),
    pytest.param(edit(("training",), []), "training", "expected a JSON object", id="training a list"),
    pytest.param(
        edit(("evaluation",), "good"), "evaluation", "expected a JSON object", id="evaluation a string"
    ),
    pytest.param(
        edit(("format_version",), "1"), "format_version", "expected 1, got '1'", id="format_version a string"
    ),
    pytest.param(
        edit(("format_version",), True), "format_version", "expected 1, got True", id="format_version true"
    ),
    pytest.param(
        edit(("feature_schema_version",), 1.0), "feature_schema_version", "schema 1.0", id="schema a float"
    ),
    pytest.param(edit(("format",), 5), "format", "expected 'rl-scheduler-policy'", id="format a number"),
    # ---- the file as a whole ----
    pytest.param(write_manifest("[]"), "content", "expected a JSON object", id="a JSON array"),
    pytest.param(write_manifest("[" * 100_000), "content", "not valid JSON", id="nested 100000 deep"),
    pytest.param(
        edit(("training", "deep"), nested(MAX_DEPTH)),
        "content",
        f"deeper than {MAX_DEPTH}",
        id="nested 34 deep",
    ),
    pytest.param(write_manifest(b'{"format": "\xff"}'), "content", "not valid JSON", id="not UTF-8"),
    pytest.param(
        edit(("training", "padding"), "x" * MAX_MANIFEST_BYTES),
        "size",
        "larger than 1,048,576",
        id="over 1 MiB",
    ),
]


@pytest.mark.parametrize(("damage", "field", "words"), BAD_MANIFESTS)
def test_a_bad_manifest_is_refused_naming_the_field(
    folder: Path, damage: Damage, field: str, words: str
) -> None:
    damage(folder)
    for load in (read_manifest, load_weights, load_checkpoint):
        with pytest.raises(CheckpointError) as caught:
            load(folder)
        assert (caught.value.obj, caught.value.field) == (str(folder / MANIFEST_FILE), field), load
        assert words in caught.value.problem, (load, caught.value.problem)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(edit(("tune",), {"trials": [1, 2]}), id="a top-level record (tune, ablation)"),
        pytest.param(delete("evaluation"), id="no evaluation (an ablation's)"),
        pytest.param(edit(("model", "prior_weight"), 1), id="a float written as an integer"),
        pytest.param(edit(("training", "final_mse"), math.nan), id="a NaN in a free-form record"),
        pytest.param(edit(("training", "deep"), nested(MAX_DEPTH - 2)), id=f"nested {MAX_DEPTH} deep"),
    ],
)
def test_what_the_tools_write_still_loads(folder: Path, damage: Damage) -> None:
    damage(folder)
    before = json.loads((folder / MANIFEST_FILE).read_text())
    loaded = load_weights(folder)
    assert loaded.config == ScorerConfig()
    assert json.dumps(loaded.manifest, sort_keys=True) == json.dumps(before, sort_keys=True)


# ---- the weights --------------------------------------------------------------------


def rewrite_weights(change: Callable[[dict[str, np.ndarray]], None]) -> Damage:
    """Rewrite the weights with ``change`` and update the manifest's checksum, so only
    the tensor checks can refuse them."""

    def damage(folder: Path) -> None:
        arrays = {name: np.array(array) for name, array in load_weights(folder).arrays.items()}
        change(arrays)
        save_file(arrays, str(folder / WEIGHTS_FILE))
        edit(("weights", "sha256"), sha256(folder / WEIGHTS_FILE))(folder)

    return damage


def garbage(folder: Path) -> None:
    (folder / WEIGHTS_FILE).write_bytes(b"\xff" * 64)
    edit(("weights", "sha256"), sha256(folder / WEIGHTS_FILE))(folder)


def set_value(name: str, value: float) -> Callable[[dict[str, np.ndarray]], None]:
    def change(arrays: dict[str, np.ndarray]) -> None:
        arrays[name].flat[0] = value

    return change


def as_float64(arrays: dict[str, Any]) -> None:
    arrays["head.2.bias"] = arrays["head.2.bias"].astype(np.float64)


BAD_WEIGHTS = [
    pytest.param(
        rewrite_weights(set_value("head.0.bias", math.nan)), "head.0.bias", "NaN or infinite", id="a NaN"
    ),
    pytest.param(
        rewrite_weights(set_value("conv.att", math.inf)), "conv.att", "NaN or infinite", id="an infinity"
    ),
    pytest.param(
        rewrite_weights(set_value("reserve.weight", -math.inf)), "reserve.weight", "NaN", id="a -inf scalar"
    ),
    pytest.param(rewrite_weights(as_float64), "head.2.bias", "dtype float64, expected float32", id="float64"),
    pytest.param(garbage, "content", "not a readable safetensors file", id="not safetensors"),
]


@pytest.mark.parametrize(("damage", "field", "words"), BAD_WEIGHTS)
def test_bad_weights_are_refused_naming_file_and_tensor(
    folder: Path, damage: Damage, field: str, words: str
) -> None:
    damage(folder)
    for load in (load_weights, load_checkpoint):
        with pytest.raises(CheckpointError) as caught:
            load(folder)
        assert (caught.value.obj, caught.value.field) == (str(folder / WEIGHTS_FILE), field), load
        assert words in caught.value.problem, (load, caught.value.problem)


def test_weights_over_the_size_bound_are_refused_before_they_are_hashed(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = (folder / WEIGHTS_FILE).stat().st_size
    monkeypatch.setattr(weights, "MAX_WEIGHTS_BYTES", size - 1)
    with pytest.raises(CheckpointError) as caught:
        load_weights(folder)
    assert (caught.value.field, caught.value.problem) == ("size", f"larger than {size - 1:,} bytes")


def test_the_bounds_leave_room_for_the_shipped_checkpoint() -> None:
    """The shipped files are far within the bounds; the largest config's weights fit."""
    shipped = default_checkpoint_path()
    assert (shipped / MANIFEST_FILE).stat().st_size * 100 < MAX_MANIFEST_BYTES
    assert (shipped / WEIGHTS_FILE).stat().st_size * 1000 < MAX_WEIGHTS_BYTES
    assert 4 * MAX_PARAMETERS < MAX_WEIGHTS_BYTES


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(ScorerConfig(), id="gnn"),
        pytest.param(ScorerConfig(kind="mlp", value_head=True, hidden=4), id="mlp with a value head"),
        pytest.param(ScorerConfig(kind="flat-mlp", max_nodes=8, value_head=True), id="flat-mlp"),
        pytest.param(ScorerConfig(kind="pooled-gnn", max_nodes=8, heads=3), id="pooled-gnn"),
    ],
)
def test_the_parameter_count_is_the_torch_models(config: ScorerConfig) -> None:
    from scheduler.policy.model import NodeScorer  # noqa: PLC0415 - torch only here

    assert parameter_count(config) == sum(p.numel() for p in NodeScorer(config).parameters())

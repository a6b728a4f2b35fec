"""Whatever JSON a manifest holds, the checkpoint readers either accept it or raise
``CheckpointError``, quickly: the fallback policy can always take over."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.policy.config import ScorerConfig, per_node_shapes
from scheduler.policy.weights import (
    MANIFEST_FILE,
    CheckpointError,
    default_checkpoint_path,
    read_arrays,
    read_config,
    read_manifest,
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)
SHIPPED: dict[str, Any] = json.loads((default_checkpoint_path() / MANIFEST_FILE).read_text())
# Where a value can go: every field of the shipped manifest, down to the model's and
# the weights' own, and a field of each object that is not there.
PLACES = sorted(
    {(key,) for key in SHIPPED}
    | {(key, sub) for key in ("model", "weights", "features") for sub in SHIPPED[key]}
    | {("extra",), ("model", "extra"), ("weights", "extra"), ("features", "extra")}
)
EXPECTED = per_node_shapes(ScorerConfig())
FUZZ = settings(
    deadline=1000,  # ms per example: each reads the manifest and up to 36 KiB of weights
    max_examples=150,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def well_typed(config: ScorerConfig) -> bool:
    """Every field of the type it is declared with: ints are ints (not bools), floats
    finite floats, flags bools."""
    for name, declared in get_type_hints(ScorerConfig).items():
        value = getattr(config, name)
        if declared is float and not (type(value) is float and math.isfinite(value)):
            return False
        if declared in (int, bool) and type(value) is not declared:
            return False
    return True


def read_all(folder: Path, manifest: object) -> None:
    """Every reader on ``manifest`` (written to ``folder``), even those that trust their
    caller to have read the manifest first: each returns or raises CheckpointError, and
    a manifest that ``read_manifest`` accepts has a well-typed config."""
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))
    try:
        read_manifest(folder)
        accepted = True
    except CheckpointError:
        accepted = False
    if accepted:
        assert isinstance(manifest, dict)
        assert well_typed(read_config(folder, manifest)), manifest["model"]
    if isinstance(manifest, dict):
        for read in (lambda: read_config(folder, manifest), lambda: read_arrays(folder, manifest, EXPECTED)):
            with contextlib.suppress(CheckpointError):
                read()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(shutil.copytree(default_checkpoint_path(), tmp_path_factory.mktemp("fuzz") / "ck"))


@FUZZ
@given(JSON)
def test_any_json_as_the_manifest(folder: Path, manifest: object) -> None:
    read_all(folder, manifest)


@FUZZ
@given(st.sampled_from(PLACES), JSON)
def test_any_json_in_any_field_of_a_good_manifest(
    folder: Path, place: tuple[str, ...], value: object
) -> None:
    manifest = json.loads(json.dumps(SHIPPED))
    parent = manifest
    for key in place[:-1]:
        parent = parent[key]
    parent[place[-1]] = value
    read_all(folder, manifest)


@FUZZ
@given(
    st.sampled_from(["model", "weights", "features"]), st.dictionaries(st.text(max_size=12), JSON, max_size=6)
)
def test_any_json_object_as_a_section(folder: Path, section: str, value: dict[str, Any]) -> None:
    """A section replaced by an object whose keys are partly the real ones."""
    manifest = json.loads(json.dumps(SHIPPED))
    manifest[section] = {**{k: v for i, (k, v) in enumerate(SHIPPED[section].items()) if i % 2}, **value}
    read_all(folder, manifest)

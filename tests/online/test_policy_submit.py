"""``rl-scheduler policy submit``: a candidate whose weights do not match its manifest's
SHA-256 is refused in one line and never reaches the trainer's inbox."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scheduler.cli import main
from scheduler.policy.weights import MANIFEST_FILE, WEIGHTS_FILE, default_checkpoint_path, sha256


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # inside the last tensor: the file still parses, its hash does not match
    path.write_bytes(bytes(data))


def _edit_manifest(folder: Path, change: Callable[[dict[str, Any]], None]) -> None:
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    change(manifest)
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))


def _candidate(tmp_path: Path) -> Path:
    folder = tmp_path / "candidate"
    shutil.copytree(default_checkpoint_path(), folder)
    return folder


MISMATCH = "sha256: does not match the manifest: the file is corrupted or was replaced"


@pytest.mark.parametrize(
    ("tamper", "problem"),
    [
        pytest.param(lambda f: _flip_last_byte(f / WEIGHTS_FILE), MISMATCH, id="a weight changed"),
        pytest.param(
            lambda f: _edit_manifest(f, lambda m: m["weights"].update(sha256="0" * 64)),
            MISMATCH,
            id="another hash in the manifest",
        ),
        pytest.param(
            lambda f: _edit_manifest(f, lambda m: m["weights"].pop("sha256")), MISMATCH, id="no hash"
        ),
        pytest.param(lambda f: (f / WEIGHTS_FILE).unlink(), "file: missing", id="no weights"),
    ],
)
def test_a_candidate_that_fails_its_hash_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tamper: Callable[[Path], None], problem: str
) -> None:
    folder = _candidate(tmp_path)
    tamper(folder)
    shared = tmp_path / "shared"
    assert main(["policy", "--shared-dir", str(shared), "submit", str(folder)]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [f"rl-scheduler: error: {folder / WEIGHTS_FILE}: {problem}"]
    assert not (shared / "candidates").exists()


def test_a_candidate_that_changes_while_copied_is_not_left_in_the_inbox(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _candidate(tmp_path)
    copy = shutil.copytree

    def copy_then_change(source: Path, target: Path) -> Any:
        done = copy(source, target)
        _flip_last_byte(Path(target) / WEIGHTS_FILE)
        return done

    monkeypatch.setattr("scheduler.online.cli.shutil.copytree", copy_then_change)
    shared = tmp_path / "shared"
    assert main(["policy", "--shared-dir", str(shared), "submit", str(folder)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"rl-scheduler: error: {folder / WEIGHTS_FILE}: sha256: the file changed while it was copied"
    ]
    assert list((shared / "candidates").iterdir()) == []


def test_an_intact_candidate_lands_in_the_inbox_with_the_hash_it_was_checked_against(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _candidate(tmp_path)
    shared = tmp_path / "shared"
    assert main(["policy", "--shared-dir", str(shared), "submit", str(folder)]) == 0
    assert capsys.readouterr().out.startswith("submitted candidate-")
    (submitted,) = (shared / "candidates").iterdir()
    manifest = json.loads((submitted / MANIFEST_FILE).read_text())
    assert sha256(submitted / WEIGHTS_FILE) == manifest["weights"]["sha256"]


def _weights_outside(folder: Path, name: str) -> None:
    """Moves the weights out of the folder and points the manifest at them: the hash
    still matches, but the folder submitted is not the whole checkpoint."""
    outside = folder.parent / "outside.safetensors"
    (folder / WEIGHTS_FILE).rename(outside)
    _edit_manifest(folder, lambda m: m["weights"].update(file=name.format(outside=outside)))


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("{outside}", id="an absolute path"),
        pytest.param("../outside.safetensors", id="a path out of the folder"),
        pytest.param("", id="empty"),
    ],
)
def test_a_candidate_whose_weights_lie_outside_its_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    folder = _candidate(tmp_path)
    _weights_outside(folder, name)
    shared = tmp_path / "shared"
    assert main(["policy", "--shared-dir", str(shared), "submit", str(folder)]) == 2
    written = name.format(outside=tmp_path / "outside.safetensors")
    assert capsys.readouterr().err.splitlines() == [
        f"rl-scheduler: error: {folder / MANIFEST_FILE}: weights.file: "
        f"{written!r} is not a file name in the checkpoint folder"
    ]
    assert not (shared / "candidates").exists()

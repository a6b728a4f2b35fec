"""Published policy versions: atomic publishing, rollback, and no corruption when the
publisher is killed at any moment."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scheduler.online.store import PolicyStore, PolicyStoreError


def write_checkpoint(folder: Path, tag: str, size: int = 200_000) -> None:
    """A stand-in checkpoint: a weights file and a manifest holding its digest."""
    weights = os.urandom(size)
    (folder / "model.safetensors").write_bytes(weights)
    manifest = {"tag": tag, "sha256": hashlib.sha256(weights).hexdigest()}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def intact(folder: Path) -> bool:
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        weights = (folder / "model.safetensors").read_bytes()
    except (OSError, ValueError):
        return False
    return bool(hashlib.sha256(weights).hexdigest() == manifest["sha256"])


def test_publish_points_current_at_the_new_version_and_keeps_old_ones(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path)
    assert store.current() is None
    assert store.publish(lambda f: write_checkpoint(f, "a")) == "v000001"
    assert store.publish(lambda f: write_checkpoint(f, "b")) == "v000002"
    assert store.versions() == ["v000001", "v000002"]
    assert store.current() == "v000002"
    current = store.current_path()
    assert current is not None
    assert intact(current)


def test_rollback_goes_back_one_version(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path)
    for tag in "abc":
        store.publish(lambda f, t=tag: write_checkpoint(f, t))
    assert store.rollback() == "v000002"
    assert store.rollback() == "v000001"
    with pytest.raises(PolicyStoreError, match="no earlier version"):
        store.rollback()
    # a new publication continues the numbering and becomes current
    assert store.publish(lambda f: write_checkpoint(f, "d")) == "v000004"
    assert store.current() == "v000004"


PUBLISHER = """
import hashlib, json, os, sys
from pathlib import Path
from scheduler.online.store import PolicyStore

def write(folder):
    weights = os.urandom(2_000_000)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "manifest.json").write_text(json.dumps({"sha256": hashlib.sha256(weights).hexdigest()}))

store = PolicyStore(Path(sys.argv[1]))
while True:
    print(store.publish(write), flush=True)
"""


def test_kill_9_while_publishing_never_leaves_a_broken_current(tmp_path: Path) -> None:
    rng = random.Random(3)
    for _ in range(8):
        publisher = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(tmp_path)], stdout=subprocess.PIPE)
        time.sleep(0.6 + rng.random())  # lands at a random point of some publication
        os.kill(publisher.pid, signal.SIGKILL)
        publisher.wait()
        store = PolicyStore(tmp_path)
        current = store.current_path()
        assert current is not None
        assert intact(current), current
        for version in store.versions():  # every published version is whole
            assert intact(tmp_path / version), version
    PolicyStore(tmp_path).sweep()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]

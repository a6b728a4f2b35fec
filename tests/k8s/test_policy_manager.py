"""Loading the learned policy: a good checkpoint schedules, a bad one never does (the
heuristic takes over and a metric says why), and a new version is picked up."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from scheduler.k8s.process.settings import load_settings
from scheduler.k8s.scheduling import policy as policy_module
from scheduler.k8s.scheduling.policy import PolicyManager, TypicalWorkload
from scheduler.k8s.serving.metrics import Metrics
from scheduler.online.store import PolicyStore
from scheduler.plugins import profiles
from scheduler.policy.checkpoint import default_checkpoint_path
from scheduler.policy.weights import load_weights, sha256

WORKLOAD = TypicalWorkload("default", 0)


def manager(checkpoint: Path | None, policy_store: Path | None = None) -> tuple[PolicyManager, Metrics]:
    metrics = Metrics()
    settings = load_settings(
        profile="gnn",
        fallback_profile="fgd",
        checkpoint=checkpoint,
        policy_store=policy_store,
        policy_reload_s=0.01,
    )
    return PolicyManager(settings, metrics, WORKLOAD), metrics


def policy_info(metrics: Metrics) -> list[dict[str, str]]:
    """The labels of ``rl_scheduler_policy_info``'s sample (there is one)."""
    return [s.labels for s in metrics.policy_info.collect()[0].samples if s.value == 1]


def publish(store: PolicyStore) -> str:
    return store.publish(
        lambda folder: shutil.copytree(default_checkpoint_path(), folder, dirs_exist_ok=True)
    )


def failures(metrics: Metrics) -> dict[str, float]:
    samples = metrics.policy_load_failures.collect()[0].samples
    return {s.labels["reason"]: s.value for s in samples if s.name.endswith("_total")}


def test_the_shipped_checkpoint_schedules() -> None:
    policy, metrics = manager(None)
    assert (policy.active.source, policy.active.profile.name, policy.active.version) == (
        "policy",
        "gnn",
        "shipped",
    )
    assert failures(metrics) == {}


@pytest.mark.parametrize("profile", ["fgd-reserve", "fgd", "default"])
def test_a_heuristic_profile_schedules_and_says_so_once(
    profile: str, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = Metrics()
    settings = load_settings(profile=profile, fallback_profile="fgd")
    with caplog.at_level(logging.INFO, logger="scheduler.k8s.scheduling.policy"):
        policy = PolicyManager(settings, metrics, WORKLOAD)
        policy.load()  # a reload (new typical pods) does not say it again
    assert (policy.active.source, policy.active.profile.name, policy.active.version) == (
        "policy",
        profile,
        "heuristic",
    )
    assert policy_info(metrics) == [{"profile": profile, "version": "heuristic", "source": "policy"}]
    said = f"scheduling {settings.scheduler_name} with the {profile} profile (a heuristic)"
    assert caplog.messages.count(said) == 1


@pytest.mark.parametrize(
    ("profile", "warned"),
    [("fgd-reserve", True), ("gnn", False)],
)
def test_a_policy_store_without_a_learned_profile_is_said_to_be_unused(
    tmp_path: Path, profile: str, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(profile=profile, fallback_profile="fgd", policy_store=tmp_path / "policies")
    with caplog.at_level(logging.WARNING, logger="scheduler.k8s.scheduling.policy"):
        PolicyManager(settings, Metrics(), WORKLOAD)
    unused = [m for m in caplog.messages if "no profile is learned" in m]
    assert bool(unused) == warned, caplog.messages


def corrupt_weights(folder: Path) -> None:
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))


def other_schema(folder: Path) -> None:
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["feature_schema_version"] = 999
    (folder / "manifest.json").write_text(json.dumps(manifest))


def no_manifest(folder: Path) -> None:
    (folder / "manifest.json").unlink()


def strings_for_sizes(folder: Path) -> None:
    """Before validation: ``heads * hidden`` of two strings raised a TypeError."""
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["model"] |= {"hidden": "32", "heads": "2"}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def nested_too_deep(folder: Path) -> None:
    """Before validation: a RecursionError."""
    (folder / "manifest.json").write_text("[" * 100_000)


def nan_weights(folder: Path) -> None:
    """Before validation: loaded, and every node scored alike."""
    arrays = {name: np.array(array) for name, array in load_weights(folder).arrays.items()}
    arrays["head.2.bias"][0] = np.nan
    save_file(arrays, str(folder / "model.safetensors"))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["weights"]["sha256"] = sha256(folder / "model.safetensors")
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (corrupt_weights, "corrupt"),
        (other_schema, "incompatible"),
        (no_manifest, "missing"),
        (strings_for_sizes, "incompatible"),
        (nested_too_deep, "corrupt"),
        (nan_weights, "corrupt"),
    ],
    ids=[
        "corrupted weights",
        "another feature schema",
        "no manifest",
        "sizes written as strings",
        "JSON nested 100000 deep",
        "a NaN weight",
    ],
)
def test_a_bad_checkpoint_falls_back_to_the_heuristic(tmp_path: Path, damage: object, reason: str) -> None:
    folder = tmp_path / "policy"
    shutil.copytree(default_checkpoint_path(), folder)
    damage(folder)  # type: ignore[operator]
    policy, metrics = manager(folder)
    assert (policy.active.source, policy.active.profile.name, policy.active.version) == (
        "fallback",
        "fgd",
        "none",
    )
    assert failures(metrics) == {reason: 1.0}


def test_a_missing_checkpoint_falls_back(tmp_path: Path) -> None:
    policy, metrics = manager(tmp_path / "absent")
    assert policy.active.source == "fallback"
    assert failures(metrics) == {"missing": 1.0}


def test_an_empty_policy_store_starts_from_the_shipped_policy(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    policy, metrics = manager(tmp_path / "policies")
    assert (policy.active.source, policy.active.version) == ("policy", "shipped")
    assert failures(metrics) == {}


def test_a_newly_published_version_is_loaded_without_a_restart(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "policies")
    store.publish(lambda folder: shutil.copytree(default_checkpoint_path(), folder, dirs_exist_ok=True))
    policy, _ = manager(store.root)
    assert policy.active.version == "v000001"
    store.publish(lambda folder: shutil.copytree(default_checkpoint_path(), folder, dirs_exist_ok=True))

    asyncio.run(reload_until(policy, "v000002"))
    assert (policy.active.source, policy.active.version) == ("policy", "v000002")
    store.rollback()
    asyncio.run(reload_until(policy, "v000001"))
    assert policy.active.version == "v000001"


async def reload_until(policy: PolicyManager, version: str) -> None:
    watcher = asyncio.create_task(policy.watch())
    for _ in range(200):
        await asyncio.sleep(0.02)
        if policy.active.version == version:
            break
    watcher.cancel()


async def wait_for(done: Any) -> bool:
    for _ in range(200):
        if done():
            return True
        await asyncio.sleep(0.02)
    return False


def publish_damaged(store: PolicyStore, damage: Any) -> str:
    def write(folder: Path) -> None:
        shutil.copytree(default_checkpoint_path(), folder, dirs_exist_ok=True)
        damage(folder)

    return store.publish(write)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [(nested_too_deep, "corrupt"), (strings_for_sizes, "incompatible"), (nan_weights, "corrupt")],
    ids=["JSON nested 100000 deep", "sizes written as strings", "a NaN weight"],
)
def test_the_reload_loop_survives_a_bad_candidate_then_loads_a_good_one(
    tmp_path: Path, damage: Any, reason: str
) -> None:
    store = PolicyStore(tmp_path / "policies")
    publish(store)
    policy, metrics = manager(None, policy_store=store.root)

    async def scenario() -> None:
        watcher = asyncio.create_task(policy.watch())
        publish_damaged(store, damage)  # v000002
        assert await wait_for(lambda: policy.active.source == "fallback"), policy.active
        assert not watcher.done()
        publish(store)  # v000003
        assert await wait_for(lambda: policy.active.version == "v000003"), policy.active
        assert not watcher.done()
        watcher.cancel()

    asyncio.run(scenario())
    assert (policy.active.source, policy.active.profile.name) == ("policy", "gnn")
    assert failures(metrics) == {reason: 1.0}


def test_a_bug_while_loading_falls_back_and_is_logged_with_its_traceback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def build(resolved: Any, ctx: Any) -> Any:
        if resolved.learned:
            raise RuntimeError("a bug")
        return profiles.build(resolved, ctx)

    monkeypatch.setattr(policy_module, "build", build)
    with caplog.at_level(logging.ERROR, logger="scheduler.k8s.scheduling.policy"):
        policy, metrics = manager(None)
    assert (policy.active.source, policy.active.profile.name) == ("fallback", "fgd")
    assert "RuntimeError('a bug')" in policy.active.detail
    assert failures(metrics) == {"error": 1.0}
    [record] = [r for r in caplog.records if r.exc_info]
    assert "not loaded, fgd schedules instead" in record.getMessage()


def test_the_reload_loop_survives_a_bug_and_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = PolicyStore(tmp_path / "policies")
    publish(store)
    policy, metrics = manager(None, policy_store=store.root)
    real_choose, calls = policy_module.choose_checkpoint, []

    def choose(*args: Any) -> Any:
        calls.append(args)
        if len(calls) <= 5:
            raise RuntimeError("a bug")
        return real_choose(*args)

    monkeypatch.setattr(policy_module, "choose_checkpoint", choose)
    publish(store)
    with caplog.at_level(logging.ERROR, logger="scheduler.k8s.scheduling.policy"):
        asyncio.run(reload_until(policy, "v000002"))
    assert (policy.active.source, policy.active.version) == ("policy", "v000002")
    assert len([r for r in caplog.records if r.exc_info]) == 1
    assert failures(metrics) == {"error": 1.0}


# ---- policy_store: the versions the trainer publishes -------------------------------

WAITING = "has no version yet: scheduling with the shipped gnn policy until the trainer publishes one"


@pytest.mark.parametrize(
    "prepare",
    [
        pytest.param(lambda _store: None, id="store missing (nothing published, volume fresh)"),
        pytest.param(lambda store: store.mkdir(), id="store empty"),
        pytest.param(
            lambda store: (store.mkdir(), (store / ".v000001.tmp-7").mkdir()),
            id="store with only a crashed publish's leftovers",
        ),
    ],
)
def test_a_policy_store_without_a_version_schedules_with_the_shipped_policy(
    tmp_path: Path, prepare: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "policies"
    prepare(store)
    with caplog.at_level(logging.INFO, logger="scheduler.k8s.scheduling.policy"):
        policy, metrics = manager(None, policy_store=store)
    assert (policy.active.source, policy.active.profile.name, policy.active.version) == (
        "policy",
        "gnn",
        "shipped",
    )
    assert failures(metrics) == {}
    assert policy_info(metrics) == [{"profile": "gnn", "version": "shipped", "source": "policy"}]
    assert f"policy store {store} {WAITING}" in caplog.messages


def test_a_policy_store_with_a_version_schedules_with_its_current_version(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "policies")
    publish(store)
    publish(store)
    store.rollback()
    policy, metrics = manager(None, policy_store=store.root)
    assert (policy.active.source, policy.active.version) == ("policy", "v000001")
    assert policy_info(metrics) == [{"profile": "gnn", "version": "v000001", "source": "policy"}]
    assert metrics.policy_version.collect()[0].samples[0].value == 1


def test_the_first_version_published_into_a_missing_store_is_loaded_without_a_restart(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "policies")
    policy, _ = manager(None, policy_store=store.root)
    assert policy.active.version == "shipped"
    publish(store)  # creates the folder, as the trainer does
    asyncio.run(reload_until(policy, "v000001"))
    assert (policy.active.source, policy.active.version) == ("policy", "v000001")


def test_an_empty_store_with_a_checkpoint_set_schedules_with_that_checkpoint(tmp_path: Path) -> None:
    fixed = tmp_path / "gnn-fixed"
    shutil.copytree(default_checkpoint_path(), fixed)
    policy, _ = manager(fixed, policy_store=tmp_path / "policies")
    assert (policy.active.source, policy.active.version) == ("policy", "gnn-fixed")


def test_a_missing_checkpoint_is_an_error_even_with_a_store_waiting(tmp_path: Path) -> None:
    policy, metrics = manager(tmp_path / "absent", policy_store=tmp_path / "policies")
    assert (policy.active.source, policy.active.profile.name) == ("fallback", "fgd")
    assert "no such checkpoint folder" in policy.active.detail
    assert failures(metrics) == {"missing": 1.0}

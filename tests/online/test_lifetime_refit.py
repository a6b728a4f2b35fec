"""The lifetime refit: fitted on the pods known at a cut, gated on the pods started after
it, published as a version that keeps the policy and adds ``lifetimes/``, rolled back
like a policy."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scheduler.lifetimes.fit import fit_lifetimes
from scheduler.lifetimes.model import LifetimeModel
from scheduler.lifetimes.model_file import load_lifetime_model, read_lifetime_manifest
from scheduler.lifetimes.trace_lifetimes import PodLifetimes
from scheduler.online.experience import ExperienceLog
from scheduler.online.lifetime_refit import (
    LIFETIMES_DIR,
    RefitConfig,
    incumbent_lifetimes,
    judge_lifetimes,
    publish_lifetimes,
)
from scheduler.online.observed_lifetimes import ObservedLifetimes
from scheduler.online.store import PolicyStore
from scheduler.online.trainer import Trainer, TrainerConfig
from scheduler.online.trainer_metrics import TrainerMetrics
from scheduler.policy.checkpoint import load_checkpoint
from scheduler.policy.weights import default_checkpoint_path, load_weights, sha256
from tests.online.test_trainer import Metrics, count, exposition, nodes, scheduler_metrics  # noqa: F401

SPAN_S = 1800.0  # pods start over 30 minutes, observed at 2,000 s
NOW_S = 2000.0
SMALL_MEAN_S, LARGE_MEAN_S = 20.0, 300.0


def cluster_records(pods: int, seed: int, base: float = 0.0) -> list[dict[str, Any]]:
    """A cluster unlike openb: half the pods ask 0.1 CPU and live 20 s on average, half
    ask 4 CPUs and live 5 minutes (exponential); binds and departures as the scheduler
    logs them, in time order, up to ``NOW_S`` (later departures not yet seen)."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(pods):
        start = float(rng.uniform(0.0, SPAN_S))
        large = bool(rng.integers(2))
        life = float(rng.exponential(LARGE_MEAN_S if large else SMALL_MEAN_S))
        requests = {"cpu_milli": 4000 if large else 100, "memory": 2**30, "gpu_count": 0, "gpu_milli": 0}
        records.append(
            {
                "kind": "decision",
                "t": base + start,
                "pod": f"ns/p{i}",
                "node": "n1",
                "gpu_models": [],
                **requests,
            }
        )
        if start + life <= NOW_S:
            records.append({"kind": "departure", "t": base + start + life, "pod": f"ns/p{i}"})
    return sorted(records, key=lambda r: float(r["t"]))


def cluster_pods(pods: int, seed: int) -> PodLifetimes:
    seen = ObservedLifetimes()
    seen.observe(cluster_records(pods, seed))
    return seen.lifetimes(NOW_S)


def fitted_on_the_mix() -> LifetimeModel:
    """An incumbent that already knows the mix: fitted on 5,000 of its pods."""
    pods = cluster_pods(5000, seed=100)
    return fit_lifetimes(pods.features, pods.observed_s, pods.ended, entry_s=pods.entry_s)[0]


@pytest.mark.parametrize(
    ("case", "incumbent", "pods", "promote"),
    [
        # The shipped model (openb: a median pod runs for minutes to hours) against pods
        # that live 20 s or 5 min: about 1.4 to 2 nats a pod worse on the held-out pods.
        ("shipped model, 200 pods of another mix", load_lifetime_model, 200, True),
        ("shipped model, 400 pods of another mix", load_lifetime_model, 400, True),
        # An incumbent fitted on 25x the data of the same mix: a refit on 140 pods is
        # not better by the margin.
        ("an incumbent that knows the mix", fitted_on_the_mix, 200, False),
    ],
)
def test_the_gate_promotes_a_refit_only_when_it_predicts_the_newest_pods_better(
    case: str, incumbent: Any, pods: int, promote: bool
) -> None:
    for seed in range(3):
        judged = judge_lifetimes(cluster_pods(pods, seed), incumbent(), RefitConfig())
        assert judged is not None
        verdict, _ = judged
        assert verdict.promote is promote, (case, seed, verdict.describe())
        assert verdict.holdout_pods == int(pods * 0.3)
        if promote:
            assert verdict.candidate_log_likelihood > verdict.incumbent_log_likelihood + 1.0, (
                verdict.describe()
            )


@pytest.mark.parametrize(
    ("case", "config", "pods"),
    [
        ("too few ended before the cut (30 needed)", RefitConfig(min_train_ended=1000), 200),
        ("too few pods after the cut", RefitConfig(min_holdout=100), 200),
        ("one pod", RefitConfig(), 1),
    ],
)
def test_too_little_data_is_not_judged(case: str, config: RefitConfig, pods: int) -> None:
    assert judge_lifetimes(cluster_pods(pods, 0), load_lifetime_model(), config) is None, case


def test_a_published_refit_keeps_the_policy_and_adds_lifetimes(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "policies")
    assert incumbent_lifetimes(store)[1] == "shipped"
    judged = judge_lifetimes(cluster_pods(200, 0), load_lifetime_model(), RefitConfig())
    assert judged is not None
    verdict, model = judged
    version = publish_lifetimes(store, model, {"pods": verdict.train_pods}, {"gate": verdict.record()})
    folder = tmp_path / "policies" / version
    # the shipped policy, byte for byte, as the scheduler loads it
    load_weights(folder)
    assert sha256(folder / "model.safetensors") == sha256(default_checkpoint_path() / "model.safetensors")
    # the lifetime model as the scheduler loads it, with what it was fitted on and judged by
    loaded, source = incumbent_lifetimes(store)
    assert source == version == "v000001"
    np.testing.assert_allclose(loaded.bias, model.bias, rtol=1e-5, atol=1e-5)
    manifest = read_lifetime_manifest(folder / LIFETIMES_DIR)
    assert manifest["training"] == {"pods": verdict.train_pods}
    gate: Any = manifest["evaluation"]["gate"]
    assert gate["promote"] is True
    assert gate["candidate_log_likelihood"] > gate["incumbent_log_likelihood"]
    # a second refit copies v000001's policy and replaces its lifetimes
    second = publish_lifetimes(store, load_lifetime_model(), {}, {})
    assert sha256(tmp_path / "policies" / second / "model.safetensors") == sha256(
        folder / "model.safetensors"
    )
    # a version whose lifetimes do not load: the scheduler and the gate read the shipped one
    (tmp_path / "policies" / second / LIFETIMES_DIR / "model.safetensors").write_bytes(b"garbage")
    assert incumbent_lifetimes(store)[1] == "shipped"
    store.rollback()
    assert incumbent_lifetimes(store)[1] == "v000001"


def log_records(folder: Path, records: list[dict[str, Any]]) -> None:
    log = ExperienceLog(folder).start()
    seq = 0
    for record in records:
        seq = log.append(record)
    assert log.wait_acknowledged(seq)
    log.close()


def test_the_trainer_refits_publishes_and_a_policy_publish_keeps_the_lifetimes(
    tmp_path: Path,
    scheduler_metrics: str,  # noqa: F811
) -> None:
    config = TrainerConfig(
        shared_dir=tmp_path,
        lifetime_refit_interval_s=1e-9,
        lifetime_min_new_ended=50,
        scheduler_metrics_url=scheduler_metrics,
        rollback_after_s=0,
    )
    base = time.time() - NOW_S
    records = cluster_records(200, seed=0, base=base)
    # a record the log's reader passes on but a lifetime cannot be read from
    records.insert(0, {"kind": "decision", "t": base, "pod": "ns/bad", "node": "n1", "cpu_milli": "x"})
    records.insert(1, {"kind": "departure", "t": "soon", "pod": "ns/p0"})
    log_records(config.experience_dir, records)
    trainer = Trainer(config, nodes, TrainerMetrics())
    Metrics.body = exposition(100, 0, 0.3)
    trainer.check_rollback()  # the counters before
    trainer.read_experience()
    verdict = trainer.refit_lifetimes()
    assert verdict is not None
    assert verdict.promote, verdict.describe()
    store = trainer.store
    assert store.current() == "v000001"
    assert (store.current_path() / LIFETIMES_DIR).is_dir()  # type: ignore[operator]
    assert count(trainer, "rl_scheduler_trainer_lifetime_promotions_total") == 1
    assert count(trainer, "rl_scheduler_trainer_lifetime_skipped_records_total", reason="bad_record") == 2
    candidate = count(trainer, "rl_scheduler_trainer_lifetime_log_likelihood", model="candidate")
    incumbent = count(trainer, "rl_scheduler_trainer_lifetime_log_likelihood", model="incumbent")
    assert candidate == pytest.approx(verdict.candidate_log_likelihood)
    assert candidate > incumbent + 1.0
    assert trainer.refit_lifetimes() is None  # no new pod ended since
    # a policy promotion keeps the refitted lifetimes
    lifetimes = json.loads((store.current_path() / LIFETIMES_DIR / "manifest.json").read_text())  # type: ignore[operator]
    trainer.publish(load_checkpoint().model, {"stage": "test"})
    assert store.current() == "v000002"
    kept = json.loads((store.current_path() / LIFETIMES_DIR / "manifest.json").read_text())  # type: ignore[operator]
    assert kept == lifetimes
    # and a promotion that hurts the live metrics is rolled back, whatever it promoted
    Metrics.body = exposition(150, 50, 0.3)
    assert trainer.check_rollback()
    assert store.current() == "v000001"


@pytest.mark.parametrize(
    ("case", "interval_s", "min_new_ended", "refits"),
    [
        ("interval 0: never refits", 0.0, 50, False),
        ("fewer new ended pods than asked (188 of 200 ended)", 1e-9, 1000, False),
        ("the interval has not passed since the trainer started", 3600.0, 50, False),
        ("due", 1e-9, 50, True),
    ],
)
def test_when_the_trainer_refits(
    tmp_path: Path, case: str, interval_s: float, min_new_ended: int, refits: bool
) -> None:
    config = TrainerConfig(
        shared_dir=tmp_path, lifetime_refit_interval_s=interval_s, lifetime_min_new_ended=min_new_ended
    )
    log_records(config.experience_dir, cluster_records(200, seed=0, base=time.time() - NOW_S))
    trainer = Trainer(config, nodes, TrainerMetrics())
    trainer.read_experience()
    assert (trainer.refit_lifetimes() is not None) is refits, case
    assert count(trainer, "rl_scheduler_trainer_lifetime_refits_total") == (1 if refits else 0)
    ended = count(trainer, "rl_scheduler_trainer_lifetime_pods", state="ended")
    running = count(trainer, "rl_scheduler_trainer_lifetime_pods", state="running")
    assert (ended, running) == (188, 12)


def test_the_cli_sets_the_refit() -> None:
    import argparse  # noqa: PLC0415

    from scheduler.online.cli import register  # noqa: PLC0415

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    flags = ["--lifetime-refit-interval", "0", "--lifetime-min-ended", "5", "--lifetime-margin", "0.1"]
    args = parser.parse_args(["trainer", *flags])
    assert (args.lifetime_refit_interval, args.lifetime_min_ended, args.lifetime_margin) == (0.0, 5, 0.1)

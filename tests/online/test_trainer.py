"""The trainer's round, its promotion gate and its rollback, on a small twin."""

from __future__ import annotations

import dataclasses
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.objects.node import Node
from scheduler.online.cli import register
from scheduler.online.experience import ExperienceLog
from scheduler.online.store import PolicyStore
from scheduler.online.trainer import Trainer, TrainerConfig, TrainerMetrics
from scheduler.online.tuning import TuningArgs
from scheduler.policy.checkpoint import default_checkpoint_path, load_checkpoint, save_checkpoint
from scheduler.policy.model import NodeScorer
from scheduler.sim.catalog import node_list_path, pod_list_path
from scheduler.sim.node_sample import sample_nodes
from scheduler.sim.trace import load_nodes, load_pods

NODES = sample_nodes(load_nodes(node_list_path()), 0.03, 3)


def nodes() -> list[Node]:
    return list(NODES)


def log_arrivals(folder: Path, trace: str = "default", count: int = 300) -> None:
    """What the scheduler's runtime appends after each bind."""
    log = ExperienceLog(folder).start()
    seq = 0
    for pod in load_pods(pod_list_path(trace))[:count]:
        seq = log.append(
            {
                "kind": "arrival",
                "t": 1.0,
                "pod": pod.key,
                "cpu_milli": pod.cpu_milli,
                "memory": pod.memory,
                "gpu_count": pod.gpu.count,
                "gpu_milli": pod.gpu.milli_per_gpu,
                "gpu_models": list(pod.gpu.models),
            }
        )
    assert log.wait_acknowledged(seq)
    log.close()


def anti_fgd(model: NodeScorer) -> NodeScorer:
    """A deliberately worse policy: the same weights with FGD's prior turned upside
    down, so it prefers the placements that fragment most."""
    worse = NodeScorer(dataclasses.replace(model.config, prior_weight=-model.config.prior_weight))
    worse.load_state_dict(model.state_dict())
    return worse.eval()


@pytest.fixture
def trainer(tmp_path: Path) -> Trainer:
    # A weak fallback, so these tests are about the gate, not about how good FGD is.
    config = TrainerConfig(
        shared_dir=tmp_path, min_new_arrivals=50, holdout_episodes=2, margin=0.1, fallback_profile="random"
    )
    log_arrivals(config.experience_dir)
    return Trainer(config, nodes, TrainerMetrics())


def count(trainer: Trainer, name: str, **labels: str) -> float:
    value = trainer.metrics.registry.get_sample_value(name, labels or None)
    return float(value or 0.0)


def test_it_reads_the_arrivals_the_scheduler_logged(trainer: Trainer) -> None:
    assert trainer.read_experience() == 300
    assert len(trainer.window) == 300
    assert count(trainer, "rl_scheduler_trainer_records_read_total") == 300
    assert trainer.read_experience() == 0  # nothing new


def test_a_deliberately_worse_candidate_is_rejected(trainer: Trainer, tmp_path: Path) -> None:
    worse = save_checkpoint(anti_fgd(load_checkpoint().model), tmp_path / "worse")
    inbox = trainer.config.candidates_dir
    inbox.mkdir()
    shutil.copytree(worse, inbox / "worse")
    trainer.read_experience()
    verdict = trainer.gate_submitted(inbox / "worse", seed=1)
    assert verdict is not None
    assert not verdict.promote
    assert verdict.candidate < verdict.incumbent
    assert PolicyStore(trainer.config.policies_dir).versions() == []
    assert (
        count(trainer, "rl_scheduler_trainer_rejections_total", reason="not_better_than_the_incumbent") == 1
    )
    assert not (inbox / "worse").exists()


def test_a_better_candidate_is_published(trainer: Trainer, tmp_path: Path) -> None:
    store = PolicyStore(trainer.config.policies_dir)
    store.publish(lambda folder: save_checkpoint(anti_fgd(load_checkpoint().model), folder))
    inbox = trainer.config.candidates_dir
    shutil.copytree(default_checkpoint_path(), inbox / "shipped")
    trainer.read_experience()
    verdict = trainer.gate_submitted(inbox / "shipped", seed=1)
    assert verdict is not None
    assert verdict.promote, verdict.describe()
    assert store.current() == "v000002"
    assert count(trainer, "rl_scheduler_trainer_promotions_total") == 1


class Metrics(http.server.BaseHTTPRequestHandler):
    """The scheduler's /metrics, as a test controls it."""

    body = ""

    def do_GET(self) -> None:
        data = Metrics.body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def exposition(scheduled: int, failed: int, fragmentation: float) -> str:
    return (
        f'scheduler_schedule_attempts_total{{profile="rl-scheduler",result="scheduled"}} {scheduled}\n'
        f'scheduler_schedule_attempts_total{{profile="rl-scheduler",result="unschedulable"}} {failed}\n'
        f"rl_scheduler_cluster_gpu_fragmentation_ratio {fragmentation}\n"
    )


@pytest.fixture
def scheduler_metrics() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/metrics"
    server.shutdown()


@pytest.mark.parametrize(
    ("after", "rolled_back"),
    [
        pytest.param((160, 40, 0.30), True, id="failed share 10% -> 20%: roll back"),
        pytest.param((190, 10, 0.45), True, id="fragmentation 0.30 -> 0.45: roll back"),
        pytest.param((190, 10, 0.31), False, id="as before: keep"),
    ],
)
def test_a_promotion_that_hurts_live_metrics_is_rolled_back(
    tmp_path: Path, scheduler_metrics: str, after: tuple[int, int, float], rolled_back: bool
) -> None:
    config = TrainerConfig(shared_dir=tmp_path, scheduler_metrics_url=scheduler_metrics, rollback_after_s=0)
    trainer = Trainer(config, nodes, TrainerMetrics())
    store = PolicyStore(config.policies_dir)
    model = load_checkpoint().model
    store.publish(lambda folder: save_checkpoint(model, folder))
    Metrics.body = exposition(0, 0, 0.30)
    trainer.check_rollback()  # the counters before
    Metrics.body = exposition(90, 10, 0.30)  # under the incumbent: 10% of attempts failed
    trainer.publish(model, {"stage": "test"})
    scheduled, failed, fragmentation = after
    Metrics.body = exposition(90 + scheduled, 10 + failed, fragmentation)
    assert trainer.check_rollback() is rolled_back
    assert store.current() == ("v000001" if rolled_back else "v000002")
    assert count(trainer, "rl_scheduler_trainer_rollbacks_total") == (1 if rolled_back else 0)


def test_the_cli_parses() -> None:
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["trainer", "--shared-dir", "/tmp/x", "--once"])
    assert (args.shared_dir, args.once) == (Path("/tmp/x"), True)


def test_rounds_need_new_arrivals_and_retry_a_window_a_few_times(tmp_path: Path) -> None:
    config = TrainerConfig(
        shared_dir=tmp_path,
        min_new_arrivals=100,
        attempts_per_window=2,
        train_episodes=1,
        holdout_episodes=1,
        margin=100.0,  # nothing passes: every round is a rejected attempt
        tuning=TuningArgs(generations=1, pairs=1),
    )
    log_arrivals(config.experience_dir, count=150)
    trainer = Trainer(config, nodes, TrainerMetrics())
    verdicts = [trainer.round(seed) for seed in range(4)]
    assert [v is not None for v in verdicts] == [True, True, False, False]
    assert count(trainer, "rl_scheduler_trainer_updates_total") == 2

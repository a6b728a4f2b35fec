"""The scheduler process never imports torch: the live ``gnn`` profile reads its
checkpoint with ``safetensors.numpy`` and scores in numpy; commands that need torch
(or matplotlib) say so in one line when it is missing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from scheduler.framework.profile import schedule_pod
from scheduler.learn.evaluate import learned_profile
from scheduler.objects.pod import Pod
from scheduler.online.trainer import Trainer, TrainerConfig, TrainerMetrics
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.policy.checkpoint import load_checkpoint, save_checkpoint
from scheduler.policy.config import ScorerConfig, per_node_shapes
from scheduler.policy.model import NodeScorer
from scheduler.policy.weights import (
    MANIFEST_FILE,
    WEIGHTS_FILE,
    CheckpointError,
    default_checkpoint_path,
    load_weights,
    sha256,
)
from scheduler.state.cluster_state import ClusterState
from scheduler.state.fragmentation import TypicalPods, pod_shape, typical_pods
from tests.builders import make_node, make_pod, make_state

REPO = Path(__file__).resolve().parents[2]


def test_the_arrays_loaded_without_torch_equal_the_torch_state_dict() -> None:
    """The shipped checkpoint, both ways: same names, same order, same bits."""
    arrays = load_weights().arrays
    state = load_checkpoint().model.state_dict()
    assert list(arrays) == list(state)
    for name, tensor in state.items():
        assert arrays[name].dtype == np.float32, name
        assert np.array_equal(arrays[name], tensor.numpy()), name


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(ScorerConfig(), id="gnn, the shipped shape"),
        pytest.param(ScorerConfig(heads=3, hidden=8, head_hidden=16), id="gnn, three heads"),
        pytest.param(ScorerConfig(reserve_term=False, value_head=True), id="gnn, value head, no reserve"),
        pytest.param(ScorerConfig(kind="mlp"), id="mlp"),
        pytest.param(ScorerConfig(kind="mlp", value_head=True, hidden=4), id="mlp with a value head"),
    ],
)
def test_the_expected_shapes_are_the_torch_models(config: ScorerConfig) -> None:
    expected = {name: tuple(t.shape) for name, t in NodeScorer(config).state_dict().items()}
    assert list(per_node_shapes(config).items()) == list(expected.items())


def _rewrite_weights(change: Callable[[dict[str, np.ndarray]], None]) -> Callable[[Path], None]:
    """Rewrite the weights with ``change`` and update the manifest's checksum, so only
    the tensor check can refuse them."""

    def rewrite(folder: Path) -> None:
        arrays = load_weights(folder).arrays
        change(arrays)
        save_file(arrays, str(folder / WEIGHTS_FILE))
        manifest = json.loads((folder / MANIFEST_FILE).read_text())
        manifest["weights"]["sha256"] = sha256(folder / WEIGHTS_FILE)
        (folder / MANIFEST_FILE).write_text(json.dumps(manifest))

    return rewrite


@pytest.mark.parametrize(
    ("damage", "field", "words"),
    [
        pytest.param(
            _rewrite_weights(lambda a: a.pop("conv.att")), "conv.att", "missing", id="a tensor missing"
        ),
        pytest.param(
            _rewrite_weights(lambda a: a.update(extra=np.zeros(3, np.float32))),
            "extra",
            "unexpected",
            id="an extra tensor",
        ),
        pytest.param(
            _rewrite_weights(lambda a: a.update({"head.0.bias": np.zeros(7, np.float32)})),
            "head.0.bias",
            "shape (7,), expected (64,)",
            id="a tensor of another shape",
        ),
    ],
)
def test_the_numpy_loader_refuses_what_the_torch_loader_refuses(
    tmp_path: Path, damage: Callable[[Path], None], field: str, words: str
) -> None:
    folder = save_checkpoint(NodeScorer(ScorerConfig()), tmp_path / "ck")
    damage(folder)
    for load in (load_weights, load_checkpoint):
        with pytest.raises(CheckpointError) as caught:
            load(folder)
        assert caught.value.obj == str(folder / WEIGHTS_FILE)
        assert caught.value.field == field
        assert words in caught.value.problem


def test_the_trainer_refuses_a_candidate_the_scheduler_cannot_serve(tmp_path: Path) -> None:
    config = TrainerConfig(shared_dir=tmp_path)
    trainer = Trainer(config, list, TrainerMetrics())
    candidate = NodeScorer(ScorerConfig(kind="flat-mlp", max_nodes=8))
    folder = save_checkpoint(candidate, config.candidates_dir / "flat")
    assert trainer.gate_submitted(folder, seed=1) is None
    assert not folder.exists()
    refused = trainer.metrics.registry.get_sample_value(
        "rl_scheduler_trainer_rejections_total", {"reason": "unloadable"}
    )
    assert refused == 1


def _small_cluster() -> tuple[ClusterState, Pod, TypicalPods]:
    nodes = [make_node(f"n{i}", cpu="32", memory="128Gi", gpus=4, model="T4") for i in range(6)]
    pods = [make_pod(f"p{i}", cpu="4", memory="8Gi", gpus=1, gpu_milli=500) for i in range(3)]
    state = make_state(nodes, [(pods[0], "n2")])
    return state, pods[1], typical_pods(pod_shape(p) for p in pods)


@pytest.mark.parametrize("kind", ["flat-mlp", "pooled-gnn"])
def test_a_seed_design_is_refused_live_and_scored_in_torch_by_evaluate(tmp_path: Path, kind: str) -> None:
    folder = save_checkpoint(NodeScorer(ScorerConfig(kind=kind, max_nodes=8)), tmp_path / kind)
    with pytest.raises(CheckpointError) as caught:
        build_profile("gnn", ProfileContext(checkpoint=folder))
    assert caught.value.field == "model"
    assert "needs the training extras (torch, torch-geometric)" in caught.value.problem
    state, pod, typical = _small_cluster()
    profile = learned_profile(ProfileContext(typical_pods=typical, checkpoint=folder))
    decision = schedule_pod(state, pod, profile, np.random.default_rng(0))
    assert decision.scheduled


def test_evaluate_builds_a_per_node_checkpoint_as_the_live_scheduler_does() -> None:
    state, pod, typical = _small_cluster()
    ctx = ProfileContext(typical_pods=typical, checkpoint=default_checkpoint_path())
    live, offline = build_profile("gnn", ctx), learned_profile(ctx)
    assert type(offline.scores[0].plugin) is type(live.scores[0].plugin)
    nodes = np.arange(len(state), dtype=np.int64)
    assert np.array_equal(
        live.scores[0].plugin.logits(state, pod, nodes),
        offline.scores[0].plugin.logits(state, pod, nodes),
    )


# ---- in a fresh process -------------------------------------------------------------

BLOCK = """
import sys

class Unimportable:
    '''Makes the named packages unimportable, as in an image without them.'''

    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Unimportable(BLOCKED))
"""

SCORE = """
import sys
import numpy as np
from scheduler.framework.profile import schedule_pod
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.state.fragmentation import pod_shape, typical_pods
from tests.builders import make_node, make_pod, make_state

nodes = [make_node(f"n{i}", cpu="32", memory="128Gi", gpus=4, model="T4") for i in range(6)]
pods = [make_pod(f"p{i}", cpu="4", memory="8Gi", gpus=1, gpu_milli=500) for i in range(3)]
state = make_state(nodes, [(pods[0], "n2")])
profile = build_profile("gnn", ProfileContext(typical_pods=typical_pods(pod_shape(p) for p in pods)))
decision = schedule_pod(state, pods[1], profile, np.random.default_rng(0))
assert decision.scheduled, decision
import scheduler.cli
import scheduler.k8s.process.operator
heavy = sorted(m for m in ("torch", "torch_geometric", "matplotlib", "ray", "optuna") if m in sys.modules)
print("scheduled on", decision.node, "heavy modules:", heavy)
"""


def _python(code: str, blocked: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    prelude = f"import sys\nBLOCKED = {blocked!r}\n" + (BLOCK if blocked else "")
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_gnn_profile_and_the_operator_never_import_torch() -> None:
    done = _python(SCORE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("heavy modules: []"), done.stdout


def test_the_gnn_profile_scores_where_torch_cannot_be_imported() -> None:
    done = _python(SCORE, blocked=("torch", "torch_geometric", "matplotlib", "tensorboard", "gymnasium"))
    assert done.returncode == 0, done.stderr
    assert "scheduled on n" in done.stdout


LEARN_LINE = (
    "needs the training extras (torch, torch-geometric); this installation has only the scheduler's. "
    "Use the trainer image or pip install 'rl-scheduler[learn]'"
)


@pytest.mark.parametrize(
    ("argv", "blocked", "line"),
    [
        pytest.param(["train", "imitation"], ("torch",), f"rl-scheduler train: {LEARN_LINE}", id="train"),
        pytest.param(
            ["evaluate", "--synthetic"], ("torch",), f"rl-scheduler evaluate: {LEARN_LINE}", id="evaluate"
        ),
        pytest.param(["trainer", "--once"], ("torch",), f"rl-scheduler trainer: {LEARN_LINE}", id="trainer"),
        pytest.param(
            ["trainer", "--once"], ("torch_geometric",), f"rl-scheduler trainer: {LEARN_LINE}", id="no PyG"
        ),
        pytest.param(
            ["simulate", "--policy", "fgd"],
            ("matplotlib",),
            "rl-scheduler simulate: needs matplotlib for its plots; pip install 'rl-scheduler[plots]'",
            id="simulate without matplotlib",
        ),
        pytest.param(
            ["timeline", "--policy", "fgd"],
            ("matplotlib",),
            "rl-scheduler timeline: needs matplotlib for its plots; pip install 'rl-scheduler[plots]'",
            id="timeline without matplotlib",
        ),
        pytest.param(
            ["timeline", "--policy", "fgd", "--seeds", "1,2"],
            ("scipy",),
            "rl-scheduler timeline: needs scipy for its paired t-intervals; pip install scipy or "
            "'rl-scheduler[learn]'",
            id="timeline over seeds without scipy",
        ),
        pytest.param(
            ["simulate", "--policy", "fgd", "--ray-address", "auto"],
            ("ray",),
            "rl-scheduler simulate: needs ray for --ray-address; pip install 'rl-scheduler[ray]'",
            id="simulate --ray-address without ray",
        ),
        pytest.param(
            ["train", "es", "--ray-address", "auto"],
            ("ray",),
            "rl-scheduler train: needs ray for --ray-address; pip install 'rl-scheduler[ray]'",
            id="train es --ray-address without ray",
        ),
        pytest.param(
            ["tune"],
            ("optuna",),
            "rl-scheduler tune: needs optuna for its search; pip install 'rl-scheduler[tune]'",
            id="tune without optuna",
        ),
    ],
)
def test_a_command_without_its_extra_says_so_in_one_line(
    tmp_path: Path, argv: list[str], blocked: tuple[str, ...], line: str
) -> None:
    argv = [*argv, "--shared-dir", str(tmp_path)] if argv[0] == "trainer" else argv
    done = _python(f"from scheduler.cli import main\nsys.exit(main({argv!r}))", blocked)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [line]
    assert done.stdout == ""


def test_policy_submit_needs_no_torch(tmp_path: Path) -> None:
    argv = ["policy", "--shared-dir", str(tmp_path), "submit", str(default_checkpoint_path())]
    code = f"from scheduler.cli import main\ncode = main({argv!r})\nassert 'torch' not in sys.modules\n"
    done = _python(code + "sys.exit(code)", ("torch", "torch_geometric"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("submitted gnn-fgd-residual")
    (submitted,) = (tmp_path / "candidates").iterdir()
    assert (submitted / WEIGHTS_FILE).read_bytes() == (default_checkpoint_path() / WEIGHTS_FILE).read_bytes()


def test_a_module_of_an_extra_missing_on_the_way_is_named_in_one_line(tmp_path: Path) -> None:
    """``policy`` has no up-front check; the missing module is caught at the boundary."""
    argv = ["policy", "--shared-dir", str(tmp_path), "submit", str(default_checkpoint_path())]
    done = _python(f"from scheduler.cli import main\nsys.exit(main({argv!r}))", ("safetensors",))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "rl-scheduler policy: needs the scheduler's extras (kopf, kubernetes, safetensors); "
        "pip install 'rl-scheduler[operator]'"
    ]


def test_a_torch_only_candidate_is_not_submitted(tmp_path: Path) -> None:
    folder = save_checkpoint(NodeScorer(ScorerConfig(kind="flat-mlp", max_nodes=8)), tmp_path / "flat")
    argv = ["policy", "--shared-dir", str(tmp_path / "shared"), "submit", str(folder)]
    done = _python(f"from scheduler.cli import main\nsys.exit(main({argv!r}))")
    assert done.returncode == 2
    assert "kind 'flat-mlp' runs in torch" in done.stderr
    assert not (tmp_path / "shared" / "candidates").exists()

"""``rl-scheduler tune``: its search space (file and defaults), the trial's ES settings,
the seeded sampler, and a tiny study on a local Ray cluster that writes what a local
one writes: best.json with the trial table, the best checkpoint, Optuna's journal,
TensorBoard logs per trial and for the study."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.errors import SchedulerInputError
from scheduler.learn import tune
from scheduler.learn.options import EsArgs
from scheduler.learn.trial import HELD_OUT_SEED, es_settings, held_out_specs
from scheduler.learn.tune_space import DEFAULT_SPACE, Choices, Span, parse_space
from scheduler.policy.checkpoint import load_checkpoint

# (the space as a file holds it, the dimensions parsed)
GOOD_SPACES = [
    pytest.param(
        {"sigma": {"low": 0.5, "high": 2, "log": True}},
        (("sigma", Span(0.5, 2.0, log=True)),),
        id="one parameter, log",
    ),
    pytest.param(
        {"head_scale": {"choices": [0, 0.25]}, "pairs": {"low": 2, "high": 6}},
        (("head_scale", Choices((0.0, 0.25))), ("pairs", Span(2, 6))),
        id="choices and an integer range",
    ),
    pytest.param(
        {"reserve_scale_multiplier": {"low": 0, "high": 3}},
        (("reserve_scale_multiplier", Span(0.0, 3.0)),),
        id="a multiplier from 0 (no log)",
    ),
]


@pytest.mark.parametrize(("content", "dimensions"), GOOD_SPACES)
def test_a_space_file_parses_to_its_dimensions(content: object, dimensions: tuple[object, ...]) -> None:
    assert parse_space("space.yaml", content).dimensions == dimensions


# (content, the parameter named, the problem); the file's name comes first in every line
BAD_SPACES = [
    ({"momentum": {"low": 0, "high": 1}}, "momentum", "not a tunable parameter (tunable: head_scale, "),
    (
        {"sigma": {"low": 2, "high": 1}},
        "sigma",
        "low (2) must be below high (1); a fixed value is choices: [2]",
    ),
    ({"sigma": {"low": 0, "high": 1}}, "sigma", "low: must be greater than 0, got 0"),
    ({"head_scale": {"low": 0, "high": 1, "log": True}}, "head_scale", "log needs low above 0, got 0"),
    ({"pairs": {"low": 1.5, "high": 4}}, "pairs", "low: expected an integer, got 1.5"),
    ({"pairs": {"choices": [0, 2]}}, "pairs", "choices: must be at least 1, got 0"),
    ({"sigma": {"choices": []}}, "sigma", "choices: expected a non-empty list, got []"),
    ({"sigma": [1, 2]}, "sigma", "expected {low: A, high: B} or {choices: [A, B, ...]}, got [1, 2]"),
    (
        {"sigma": {"low": 1, "high": 2, "step": 0.1}},
        "sigma",
        "unknown key 'step' (keys: low, high, log, choices)",
    ),
    ({"sigma": {"low": "a", "high": 2}}, "sigma", "low: expected a number, got 'a'"),
    ({"sigma": {"low": True, "high": 2}}, "sigma", "low: expected a number, got True"),
    ({"sigma": {"high": 2}}, "sigma", "expected both low and high (or choices)"),
    ({"sigma": {"low": 1, "high": 2, "log": "yes"}}, "sigma", "log: expected true or false, got 'yes'"),
    ([], "content", "expected a mapping of parameter: {low, high} or {choices}"),
]


@pytest.mark.parametrize(
    ("content", "field", "problem"), BAD_SPACES, ids=[f"{r[1]}: {r[2]}" for r in BAD_SPACES]
)
def test_a_bad_space_names_the_file_and_the_parameter(content: object, field: str, problem: str) -> None:
    with pytest.raises(SchedulerInputError) as caught:
        parse_space("space.yaml", content)
    assert (caught.value.obj, caught.value.field) == ("space.yaml", field)
    assert caught.value.problem.startswith(problem)


@pytest.mark.parametrize(
    ("params", "changed"),
    [
        ({"sigma": 0.5, "learning_rate": 0.1}, {"sigma": 0.5, "learning_rate": 0.1}),
        # the six reserve scales (0.5, 2, 0.5, 0.5, 0.5, 0.25) times 2
        ({"reserve_scale_multiplier": 2.0}, {"reserve_scale": (1.0, 4.0, 1.0, 1.0, 1.0, 0.5)}),
        ({"pairs": 4.0, "head_scale": 0.0}, {"pairs": 4, "head_scale": 0.0}),
        ({}, {}),
    ],
)
def test_a_trials_values_become_its_es_settings(params: dict[str, float], changed: dict[str, object]) -> None:
    base = EsArgs()
    settings = es_settings(params, base)
    assert {k: v for k, v in vars(settings).items() if vars(base)[k] != v} == changed
    assert isinstance(settings.pairs, int)


def test_held_out_seeds_are_ones_es_never_draws() -> None:
    specs = held_out_specs(("default", "cpu300"), 2, 0.1)
    assert [(s.trace, s.seed) for s in specs] == [
        ("default", HELD_OUT_SEED),
        ("default", HELD_OUT_SEED + 1),
        ("cpu300", HELD_OUT_SEED),
        ("cpu300", HELD_OUT_SEED + 1),
    ]
    assert HELD_OUT_SEED >= 1_000_000  # es.main draws with rng.integers(1_000_000)


@pytest.mark.parametrize(("seed", "other", "same"), [(1, 1, True), (1, 2, False)])
def test_the_same_seed_gives_the_same_suggestions(seed: int, other: int, same: bool) -> None:
    suggested = tune.distributions(DEFAULT_SPACE)
    first, second = tune.new_study(seed), tune.new_study(other)
    asked = [[study.ask(suggested).params for _ in range(4)] for study in (first, second)]
    assert (asked[0] == asked[1]) is same


def test_tune_refuses_a_folder_that_holds_a_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "best.json").write_text("{}\n")
    assert main(["tune", "--out", str(tmp_path), "--quiet"]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err.splitlines()) == (
        "",
        [
            f"rl-scheduler tune: error: argument --out: {tmp_path} holds a study already (best.json); "
            "name another folder or remove it"
        ],
    )


def _trial_table(out: Path) -> list[dict[str, object]]:
    best = json.loads((out / "best.json").read_text())
    return [{k: v for k, v in t.items() if k not in ("seconds", "checkpoint")} for t in best["trials"]]


@pytest.mark.slow
def test_tune_on_ray_writes_the_study_a_local_run_writes(
    tmp_path: Path, ray_cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(
        "sigma: {low: 0.25, high: 2, log: true}\nreserve_scale_multiplier: {low: 0.25, high: 4}\n"
    )
    # The openb default trace on 3% of its nodes (43 nodes, 384 pods at seed 1000000): as quick as the
    # 42-pod trace of test_plugin, and there the trials' settings change the held-out scores.
    argv = ["tune", "--traces", "default", "--node-fraction", "0.03", "--generations", "1", "--pairs", "1"]
    argv += ["--held-out-episodes", "2", "--trials", "3", "--parallel", "2", "--space", str(space), "--quiet"]
    on_ray, local = tmp_path / "ray", tmp_path / "local"
    assert main([*argv, "--ray-address", ray_cluster, "--out", str(on_ray)]) == 0
    printed = capsys.readouterr().out
    assert main([*argv, "--out", str(local)]) == 0

    # The same study: the same suggestions and, trial by trial, the same held-out scores.
    assert _trial_table(on_ray) == _trial_table(local)
    best = json.loads((on_ray / "best.json").read_text())
    trials = best["trials"]
    assert [t["trial"] for t in trials] == [0, 1, 2]
    assert len({t["value"] for t in trials}) > 1  # the comparison above compared something
    assert all(set(t["params"]) == {"sigma", "reserve_scale_multiplier"} for t in trials)
    assert best["best"]["value"] == max(t["value"] for t in trials)
    assert best["init"]["value"] > 0
    assert [episode[1] for episode in best["held_out_episodes"]] == [HELD_OUT_SEED, HELD_OUT_SEED + 1]

    # The best checkpoint loads, is the best trial's weights, and says how it was chosen.
    checkpoint = load_checkpoint(on_ray / "checkpoint")
    trial_dir = on_ray / "trials" / f"trial_{best['best']['trial']}" / "checkpoint"
    assert (on_ray / "checkpoint" / "model.safetensors").read_bytes() == (
        trial_dir / "model.safetensors"
    ).read_bytes()
    assert checkpoint.manifest["tune"]["best"] == {k: best["best"][k] for k in ("trial", "params", "value")}
    assert checkpoint.manifest["training"]["sigma"] == best["best"]["params"]["sigma"]

    # Optuna's journal and TensorBoard event files: the study's and each trial's.
    assert (on_ray / "optuna.journal").stat().st_size > 0
    for run in ["study", "trial_0", "trial_1", "trial_2"]:
        assert list((on_ray / "tensorboard" / run).glob("events.out.tfevents.*")), run

    # The table: one row per trial, then the best.
    rows = [line.split() for line in printed.splitlines()]
    assert [row[0] for row in rows[2:5]] == ["0", "1", "2"]
    assert printed.splitlines()[5].startswith(f"best: trial {best['best']['trial']}, held-out allocation")

"""Bad input on ``rl-scheduler``'s command line: every subcommand answers a bad option
with exit status 2 and one line on stderr that names the command and the option, no
usage block, no traceback, nothing on stdout; the checks run before any work starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.cli import main

REPO = Path(__file__).resolve().parents[2]
KNOWN_TRACE = "trace 'nosuch': no such file, and no pod list of that name in "


def _line(command: str, option: str, problem: str) -> str:
    return f"rl-scheduler {command}: error: argument {option}: {problem}"


# (argv, the start of the one line; "{tmp}" is the test's folder). Most rows give the
# whole line; rows whose line lists what exists (profiles, traces) give its start.
ROWS = [
    # seeds: negative, reversed, not a number, on every command that takes them
    (["simulate", "--seeds", "-3"], _line("simulate", "--seeds", "-3: seeds are non-negative integers")),
    (["simulate", "--seeds", "42,-1"], _line("simulate", "--seeds", "-1: seeds are non-negative integers")),
    (
        ["simulate", "--seeds", "5-3"],
        _line("simulate", "--seeds", "'5-3' is a reversed range; write the lower seed first (3-5)"),
    ),
    (["simulate", "--seeds", "4x"], _line("simulate", "--seeds", "'4x': expected e.g. 42-51 or 42,43")),
    (
        ["evaluate", "--seeds", "51-42"],
        _line("evaluate", "--seeds", "'51-42' is a reversed range; write the lower seed first (42-51)"),
    ),
    (["evaluate", "--seeds=-2-4"], _line("evaluate", "--seeds", "-2: seeds are non-negative integers")),
    (
        ["train", "imitation", "--seed", "-1"],
        _line("train imitation", "--seed", "must be at least 0, got -1"),
    ),
    (["train", "es", "--seed", "-7"], _line("train es", "--seed", "must be at least 0, got -7")),
    (["train", "ppo", "--seed", "x"], _line("train ppo", "--seed", "'x' is not an integer")),
    (["train", "pipeline", "--seed", "-1"], _line("train pipeline", "--seed", "must be at least 0, got -1")),
    # unknown kinds, policies, profiles, traces, node lists
    (
        ["train", "ppo", "--kind", "transformer"],
        _line(
            "train ppo",
            "--kind",
            "invalid choice: 'transformer' (choose from 'gnn', 'mlp', 'flat-mlp', 'pooled-gnn')",
        ),
    ),
    (["simulate", "--policy", "nosuch"], _line("simulate", "--policy", "invalid choice: 'nosuch' (choose")),
    (["evaluate", "--policy", "nosuch"], _line("evaluate", "--policy", "invalid choice: 'nosuch' (choose")),
    (
        ["trainer", "--fallback-profile", "nosuch"],
        _line("trainer", "--fallback-profile", "invalid choice: 'nosuch' (choose"),
    ),
    (["simulate", "--trace", "nosuch"], _line("simulate", "--trace", "'nosuch': no such file, and no pod")),
    (["evaluate", "--trace", "nosuch"], _line("evaluate", "--trace", "'nosuch': no such file, and no pod")),
    (
        ["train", "imitation", "--traces", "default,nosuch"],
        _line("train imitation", "--traces", "'nosuch': no such file, and no pod"),
    ),
    (
        ["simulate", "--nodes", "nosuch"],
        _line("simulate", "--nodes", "'nosuch': no such file or node list name"),
    ),
    (
        ["evaluate", "--nodes", "nosuch"],
        _line("evaluate", "--nodes", "'nosuch': no such file or node list name"),
    ),
    # missing files and folders
    (["run", "--kubeconfig", "{tmp}/absent"], _line("run", "--kubeconfig", "{tmp}/absent: no such file")),
    (["run", "--kubeconfig", "{tmp}"], _line("run", "--kubeconfig", "{tmp}: not a file")),
    (["run", "--config", "{tmp}/absent.yaml"], _line("run", "--config", "{tmp}/absent.yaml: no such file")),
    (["run", "--checkpoint", "{tmp}/absent"], _line("run", "--checkpoint", "{tmp}/absent: no such folder")),
    (
        ["trainer", "--kubeconfig", "{tmp}/absent"],
        _line("trainer", "--kubeconfig", "{tmp}/absent: no such file"),
    ),
    (
        ["evaluate", "--checkpoint", "{tmp}/absent"],
        _line("evaluate", "--checkpoint", "{tmp}/absent: no such folder"),
    ),
    (["train", "es", "--init", "{tmp}/absent"], _line("train es", "--init", "{tmp}/absent: no such folder")),
    (
        ["train", "ppo", "--init", "{tmp}/absent"],
        _line("train ppo", "--init", "{tmp}/absent: no such folder"),
    ),
    (
        ["policy", "--shared-dir", "{tmp}", "submit", "{tmp}/absent"],
        _line("policy submit", "checkpoint", "{tmp}/absent: no such folder"),
    ),
    # numbers out of range
    (["simulate", "--workers", "0"], _line("simulate", "--workers", "must be at least 1, got 0")),
    (["evaluate", "--workers", "-1"], _line("evaluate", "--workers", "must be at least 1, got -1")),
    (["simulate", "--tune", "-1"], _line("simulate", "--tune", "must be greater than 0, got -1")),
    (["simulate", "--tune", "nan"], _line("simulate", "--tune", "'nan' is not a finite number")),
    (
        ["simulate", "--synthetic", "--synthetic-pods", "0"],
        _line("simulate", "--synthetic-pods", "must be at least 1, got 0"),
    ),
    (
        ["train", "es", "--node-fraction", "1.5"],
        _line("train es", "--node-fraction", "must be at most 1, got 1.5"),
    ),
    (["train", "ppo", "--gamma", "2"], _line("train ppo", "--gamma", "must be at most 1, got 2")),
    (
        ["train", "ppo", "--total-steps", "-5"],
        _line("train ppo", "--total-steps", "must be at least 1, got -5"),
    ),
    (
        ["train", "es", "--reserve-scale", "a,b"],
        _line("train es", "--reserve-scale", "'a,b': expected float values, A,B,..."),
    ),
    (
        ["train", "pipeline", "--workers", "0"],
        _line("train pipeline", "--workers", "must be at least 1, got 0"),
    ),
    (["run", "--qps", "0"], _line("run", "--qps", "must be greater than 0, got 0")),
    (["run", "--burst", "-1"], _line("run", "--burst", "must be at least 1, got -1")),
    (
        ["trainer", "--metrics-port", "70000"],
        _line("trainer", "--metrics-port", "must be at most 65535, got 70000"),
    ),
    (["trainer", "--window", "0"], _line("trainer", "--window", "must be at least 1, got 0")),
    # no command, no action, unknown stage
    ([], "rl-scheduler: error: the following arguments are required: COMMAND"),
    (["policy"], "rl-scheduler policy: error: the following arguments are required: ACTION"),
    (["train", "dqn2"], "rl-scheduler train: error: argument STAGE: invalid choice: 'dqn2' (choose from"),
]


@pytest.fixture
def no_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No kubeconfig anywhere and no in-cluster credentials."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return tmp_path


def _fill(text: str, tmp: Path) -> str:
    return text.replace("{tmp}", str(tmp))


def _one_line(capsys: pytest.CaptureFixture[str], code: int, start: str) -> None:
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1, captured.err
    assert captured.err.startswith(start), captured.err


@pytest.mark.parametrize(("argv", "start"), ROWS, ids=[" ".join(argv) or "(nothing)" for argv, _ in ROWS])
def test_a_bad_option_is_one_line_naming_it(
    no_cluster: Path, capsys: pytest.CaptureFixture[str], argv: list[str], start: str
) -> None:
    code = main([_fill(a, no_cluster) for a in argv])
    _one_line(capsys, code, _fill(start, no_cluster))


def test_a_trainer_without_any_kubeconfig_says_so_in_one_line(
    no_cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["trainer", "--shared-dir", str(no_cluster), "--once"])
    _one_line(
        capsys,
        code,
        "rl-scheduler: error: trainer: --kubeconfig: Invalid kube-config file. No configuration found. "
        "(outside a cluster, pass --kubeconfig or set KUBECONFIG)",
    )


def test_a_trainer_with_an_unreadable_kubeconfig_names_it(
    no_cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = no_cluster / "empty.yaml"
    kubeconfig.write_text("{}\n")
    code = main(["trainer", "--shared-dir", str(no_cluster), "--kubeconfig", str(kubeconfig), "--once"])
    _one_line(capsys, code, f"rl-scheduler: error: trainer: --kubeconfig: {kubeconfig}: Invalid kube-config")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["simulate", "--seeds", "5-3"],
            _line("simulate", "--seeds", "'5-3' is a reversed range; write the lower seed first (3-5)"),
        ),
        (
            ["train", "ppo", "--kind", "x"],
            _line(
                "train ppo",
                "--kind",
                "invalid choice: 'x' (choose from 'gnn', 'mlp', 'flat-mlp', 'pooled-gnn')",
            ),
        ),
    ],
)
def test_the_installed_command_exits_2_with_the_line(argv: list[str], line: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr.splitlines()) == (2, "", [line])


def test_help_still_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: rl-scheduler simulate")


def test_simulate_warns_about_a_node_of_an_unknown_gpu_model_naming_its_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,T4\nn1,64000,262144,2,H100\n")
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
        + "".join(f"p{i},4000,8192,1,{500 if i % 2 else 1000},\n" for i in range(6))
    )
    argv = ["simulate", "--trace", str(pods), "--nodes", str(nodes), "--policy", "fgd", "--seeds", "42"]
    assert main([*argv, "--workers", "1", "--quiet", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "warning: nodes.csv:3: node n1: model: unknown GPU model 'H100' (known: A10, G2, G3, P100, T4, "
        "V100M16, V100M32); kept, its GPUs count as 16 GiB each and serve only pods that name no model "
        "or H100"
    )

"""Bad input on ``rl-scheduler``'s command line: every subcommand answers a bad option
with exit status 2 and one line on stderr that names the command and the option, no
usage block, no traceback, nothing on stdout; the checks run before any work starts."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.policy.weights import default_checkpoint_path

REPO = Path(__file__).resolve().parents[2]
SHIPPED = default_checkpoint_path()
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
    (["simulate", "--seeds", "1-2-3"], _line("simulate", "--seeds", "'1-2-3': expected e.g. 42-51 or 42,43")),
    (["simulate", "--seeds", "42-"], _line("simulate", "--seeds", "'42-': expected e.g. 42-51 or 42,43")),
    (["simulate", "--seeds", ","], _line("simulate", "--seeds", "',': no seed given")),
    (
        ["simulate", "--seeds", "0-99999999999"],  # refused before a list of 10^11 seeds is built
        _line("simulate", "--seeds", "'0-99999999999' is 100000000000 seeds; at most 10000 in all"),
    ),
    (
        ["evaluate", "--seeds", "42-51,45"],  # a seed replayed twice weighs double in every mean
        _line("evaluate", "--seeds", "'42-51,45' names seed 45 more than once"),
    ),
    (
        ["simulate", "--seeds", "9223372036854775808"],
        _line("simulate", "--seeds", f"{2**63}: seeds are at most {2**63 - 1} (Go's int64)"),
    ),
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
    (["train", "dqn", "--seed", "-3"], _line("train dqn", "--seed", "must be at least 0, got -3")),
    (["train", "rollout", "--seed", "-1"], _line("train rollout", "--seed", "must be at least 0, got -1")),
    (
        ["train", "rollout", "--branches", "0"],
        _line("train rollout", "--branches", "must be at least 1, got 0"),
    ),
    (
        ["train", "dqn", "--exploration-fraction", "2"],
        _line("train dqn", "--exploration-fraction", "must be at most 1, got 2"),
    ),
    # unknown kinds, policies, profiles, traces, node lists
    (
        ["train", "ppo", "--kind", "transformer"],
        _line(
            "train ppo",
            "--kind",
            "invalid choice: 'transformer' (choose from 'gnn', 'mlp', 'flat-mlp', 'pooled-gnn')",
        ),
    ),
    (
        ["train", "dqn", "--kind", "transformer"],
        _line(
            "train dqn",
            "--kind",
            "invalid choice: 'transformer' (choose from 'gnn', 'mlp', 'flat-mlp', 'pooled-gnn')",
        ),
    ),
    (
        ["train", "imitation", "--kind", "mlp"],  # only ppo and dqn start a fresh scorer of a kind
        "rl-scheduler train imitation: error: unrecognized arguments: --kind mlp",
    ),
    (["train", "es", "--kind=gnn"], "rl-scheduler train es: error: unrecognized arguments: --kind=gnn"),
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
        ["train", "rollout", "--init", "{tmp}/absent"],
        _line("train rollout", "--init", "{tmp}/absent: no such folder"),
    ),
    (
        ["train", "ppo", "--init", "{tmp}/absent"],
        _line("train ppo", "--init", "{tmp}/absent: no such folder"),
    ),
    (
        ["policy", "--shared-dir", "{tmp}", "submit", "{tmp}/absent"],
        _line("policy submit", "checkpoint", "{tmp}/absent: no such folder"),
    ),
    (
        ["policy", "--shared-dir", "/proc/no-such-folder", "submit", str(SHIPPED)],
        _line("policy", "--shared-dir", "/proc/no-such-folder: cannot write: No such file or directory"),
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
    (["train", "es", "--reserve-scale", "a,b"], _line("train es", "--reserve-scale", "'a' is not a number")),
    (
        ["train", "es", "--reserve-scale", "1,2"],  # six scales, one per reserve parameter
        _line("train es", "--reserve-scale", "'1,2': expected 6 values A,B,..., got 2"),
    ),
    (
        ["train", "es", "--reserve-scale", "1,1,1,1,1,-1"],
        _line("train es", "--reserve-scale", "must be at least 0, got -1"),
    ),
    (
        ["train", "pipeline", "--workers", "0"],
        _line("train pipeline", "--workers", "must be at least 1, got 0"),
    ),
    (["run", "--qps", "0"], _line("run", "--qps", "must be greater than 0, got 0")),
    # timeline: its own options, and those it shares with simulate
    (["timeline", "--load", "0"], _line("timeline", "--load", "must be greater than 0, got 0")),
    (["timeline", "--load", "nan"], _line("timeline", "--load", "'nan' is not a finite number")),
    (["timeline", "--load", "x"], _line("timeline", "--load", "'x' is not a number")),
    (
        # compressed: more than the default trace can ever offer
        ["timeline", "--load", "5", "--policy", "fgd", "--compress-arrivals"],
        _line(
            "timeline",
            "--load",
            "5 is out of reach: at any compression this trace offers at most 1.805 x the 1553 GPUs of 0.25",
        ),
    ),
    (
        # compressed, on the whole node list
        ["timeline", "--load", "0.5", "--node-fraction", "1", "--policy", "fgd", "--compress-arrivals"],
        _line(
            "timeline", "--load", "0.5 is out of reach: at any compression this trace offers at most 0.451 x"
        ),
    ),
    (
        ["timeline", "--load", "0.001", "--policy", "fgd"],  # one clock: less than the whole node list gets
        _line(
            "timeline",
            "--load",
            "0.001 is out of reach on the trace's clock: the whole node list (6212 GPUs)",
        ),
    ),
    (
        ["timeline", "--load", "0.5", "--node-fraction", "1"],  # one clock: one of the two sizes the cluster
        _line("timeline", "--load", "on the trace's clock --load sizes the cluster; with --node-fraction"),
    ),
    (
        ["timeline", "--node-fraction", "0"],
        _line("timeline", "--node-fraction", "must be greater than 0, got 0"),
    ),
    (
        ["timeline", "--node-fraction", "1.5"],
        _line("timeline", "--node-fraction", "must be at most 1, got 1.5"),
    ),
    (["timeline", "--node-fraction", "x"], _line("timeline", "--node-fraction", "'x' is not a number")),
    (["timeline", "--max-wait", "-1"], _line("timeline", "--max-wait", "must be at least 0, got -1")),
    (["timeline", "--max-wait", "inf"], _line("timeline", "--max-wait", "'inf' is not a finite number")),
    (
        ["timeline", "--seeds", "5-3"],
        _line("timeline", "--seeds", "'5-3' is a reversed range; write the lower seed first (3-5)"),
    ),
    (["timeline", "--workers", "0"], _line("timeline", "--workers", "must be at least 1, got 0")),
    (["timeline", "--policy", "nosuch"], _line("timeline", "--policy", "invalid choice: 'nosuch' (choose")),
    (["timeline", "--trace", "nosuch"], _line("timeline", "--trace", "'nosuch': no such file, and no pod")),
    (
        ["timeline", "--nodes", "nosuch"],
        _line("timeline", "--nodes", "'nosuch': no such file or node list name"),
    ),
    (
        ["timeline", "--checkpoint", "{tmp}/absent"],
        _line("timeline", "--checkpoint", "{tmp}/absent: no such folder"),
    ),
    (
        ["timeline", "--trace", "default", "--trace", "gpushare40"],  # one trace per command
        _line("timeline", "--trace", "given twice ('default', then 'gpushare40'); one trace per command"),
    ),
    (
        ["timeline", "--policy", "fgd-reserve-lifetime", "--lifetime-arg", "weight"],
        _line("timeline", "--lifetime-arg", "expected KEY=VALUE, got 'weight'"),
    ),
    (
        ["timeline", "--policy", "fgd-reserve-lifetime", "--lifetime-arg", "weight=-1"],
        _line(
            "timeline",
            "--lifetime-arg",
            "profile.pluginConfig[0].args.weight: Input should be greater than or equal to 0",
        ),
    ),
    (
        ["timeline", "--policy", "fgd-reserve-lifetime", "--lifetime-arg", "wieght=3"],
        _line(
            "timeline",
            "--lifetime-arg",
            "profile.pluginConfig[0].args.wieght: Extra inputs are not permitted",
        ),
    ),
    (
        ["timeline", "--lifetimes", "model", "--time-scale", "10"],
        _line("timeline", "--lifetimes", "the model forecasts in the trace's seconds; not with --time-scale"),
    ),
    (
        ["timeline", "--lifetimes", "crystal-ball"],
        _line("timeline", "--lifetimes", "invalid choice: 'crystal-ball' (choose from"),
    ),
    (["run", "--burst", "-1"], _line("run", "--burst", "must be at least 1, got -1")),
    (
        ["trainer", "--metrics-port", "70000"],
        _line("trainer", "--metrics-port", "must be at most 65535, got 70000"),
    ),
    (["trainer", "--window", "0"], _line("trainer", "--window", "must be at least 1, got 0")),
    # tune: its budget, its search space file
    (["tune", "--trials", "0"], _line("tune", "--trials", "must be at least 1, got 0")),
    (["tune", "--parallel", "0"], _line("tune", "--parallel", "must be at least 1, got 0")),
    (["tune", "--held-out-episodes", "0"], _line("tune", "--held-out-episodes", "must be at least 1, got 0")),
    (["tune", "--seed", "-1"], _line("tune", "--seed", "must be at least 0, got -1")),
    (
        ["tune", "--space", "{tmp}/absent.yaml"],
        _line("tune", "--space", "{tmp}/absent.yaml: file: cannot read: No such file or directory"),
    ),
    (["tune", "--space", "{tmp}"], _line("tune", "--space", "{tmp}: file: cannot read: Is a directory")),
    # a Ray cluster's address: its shape, and something answering there (ray.init would wait)
    (
        ["simulate", "--ray-address", "nonsense"],
        _line("simulate", "--ray-address", "'nonsense': expected auto, HOST:PORT or ray://HOST:PORT"),
    ),
    (
        ["train", "es", "--ray-address", "head:port"],
        _line("train es", "--ray-address", "'head:port': expected auto, HOST:PORT or ray://HOST:PORT"),
    ),
    (
        ["tune", "--ray-address", "ray://:10001"],
        _line("tune", "--ray-address", "'ray://:10001': expected auto, HOST:PORT or ray://HOST:PORT"),
    ),
    (
        ["evaluate", "--ray-address", "127.0.0.1:1"],
        _line("evaluate", "--ray-address", "127.0.0.1:1: no Ray cluster answers there (Connection refused)"),
    ),
    # no command, no action, unknown stage
    ([], "rl-scheduler: error: the following arguments are required: COMMAND"),
    (["policy"], "rl-scheduler policy: error: the following arguments are required: ACTION"),
    (["policy", "list", "--all"], "rl-scheduler policy list: error: unrecognized arguments: --all"),
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


NO_KUBECONFIG = (
    "not in a cluster, and no kubeconfig (~/.kube/config absent); pass --kubeconfig or set KUBECONFIG"
)
NOT_A_KUBECONFIG = "Invalid kube-config file. Expected key current-context in {tmp}/empty.yaml"

# (command, its arguments, KUBECONFIG or None, settings file text or None, the line).
# The kubeconfig is loaded before the command starts any work; "{tmp}" is the test's folder,
# which holds empty.yaml ("{}": YAML, not a kubeconfig) and is $HOME (no ~/.kube/config).
KUBECONFIG_ROWS = [
    ("trainer", [], None, None, _line("trainer", "--kubeconfig", NO_KUBECONFIG)),
    ("run", [], None, None, _line("run", "--kubeconfig", NO_KUBECONFIG)),
    (
        "trainer",
        [],
        "{tmp}/absent.yaml",
        None,
        _line(
            "trainer",
            "--kubeconfig",
            "not in a cluster, and KUBECONFIG={tmp}/absent.yaml names no file; "
            "pass --kubeconfig or fix KUBECONFIG",
        ),
    ),
    (
        "run",
        [],
        "{tmp}/absent.yaml:{tmp}/gone.yaml",
        None,
        _line(
            "run",
            "--kubeconfig",
            "not in a cluster, and KUBECONFIG={tmp}/absent.yaml:{tmp}/gone.yaml names no file; "
            "pass --kubeconfig or fix KUBECONFIG",
        ),
    ),
    (
        "run",
        [],
        "{tmp}/empty.yaml",
        None,
        _line("run", "--kubeconfig", "KUBECONFIG={tmp}/empty.yaml: " + NOT_A_KUBECONFIG),
    ),
    (
        "trainer",
        ["--kubeconfig", "{tmp}/empty.yaml"],
        None,
        None,
        _line("trainer", "--kubeconfig", "{tmp}/empty.yaml: " + NOT_A_KUBECONFIG),
    ),
    (
        "run",
        ["--kubeconfig", "{tmp}/empty.yaml"],
        "{tmp}/absent.yaml",  # the option wins over the variable
        None,
        _line("run", "--kubeconfig", "{tmp}/empty.yaml: " + NOT_A_KUBECONFIG),
    ),
    (
        "run",
        ["--config", "{tmp}/settings.yaml"],
        None,
        "client: {kubeconfig: {tmp}/absent.yaml}\n",
        "rl-scheduler: error: {tmp}/settings.yaml: client.kubeconfig: {tmp}/absent.yaml: no such file",
    ),
]


@pytest.mark.parametrize(
    ("command", "argv", "variable", "settings", "line"),
    KUBECONFIG_ROWS,
    ids=[f"{c} {' '.join(a)} KUBECONFIG={v} settings={s is not None}" for c, a, v, s, _ in KUBECONFIG_ROWS],
)
def test_a_missing_or_unusable_kubeconfig_is_one_line_naming_the_option(
    no_cluster: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    argv: list[str],
    variable: str | None,
    settings: str | None,
    line: str,
) -> None:
    (no_cluster / "empty.yaml").write_text("{}\n")
    if variable is not None:
        monkeypatch.setenv("KUBECONFIG", _fill(variable, no_cluster))
    if settings is not None:
        (no_cluster / "settings.yaml").write_text(_fill(settings, no_cluster))
    once = ["--shared-dir", str(no_cluster), "--once"] if command == "trainer" else ["--profile", "fgd"]
    code = main([command, *once, *(_fill(a, no_cluster) for a in argv)])
    captured = capsys.readouterr()
    assert (code, captured.out, captured.err.splitlines()) == (2, "", [_fill(line, no_cluster)])


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


# (the search space file's text, the problem after "argument --space: <file>: ")
SPACE_FILES = [
    ("sigma: {low: 2, high: 1}\n", "sigma: low (2) must be below high (1); a fixed value is choices: [2]"),
    (
        "momentum: {low: 0, high: 1}\n",
        "momentum: not a tunable parameter (tunable: head_scale, learning_rate, ",
    ),
    ('{"pairs": {"low": 1.5, "high": 4}}\n', "pairs: low: expected an integer, got 1.5"),
    ("sigma: {low: 1, high: 2\n", "content: not YAML or JSON (line 2)"),
    ("", "content: expected a mapping of parameter: {low, high} or {choices}"),
]


@pytest.mark.parametrize(("text", "problem"), SPACE_FILES, ids=[problem for _, problem in SPACE_FILES])
def test_a_bad_search_space_file_is_one_line_naming_the_file_and_the_parameter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(text)
    code = main(["tune", "--space", str(space), "--out", str(tmp_path / "out")])
    _one_line(capsys, code, _line("tune", "--space", f"{space}: {problem}"))
    assert not (tmp_path / "out").exists()  # refused before any work


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


SOCKS_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", proxy-url: "socks5://127.0.0.1:1080"}
users:
- name: u
  user: {token: abc}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
"""


def test_a_proxy_the_client_does_not_serve_is_one_line_naming_it(
    no_cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The official client would need PySocks for a SOCKS proxy; ours serves HTTP
    proxies only (``scheduler.k8s.client.route``) and says so before anything starts."""
    kubeconfig = no_cluster / "socks.yaml"
    kubeconfig.write_text(SOCKS_KUBECONFIG)
    code = main(["run", "--profile", "fgd", "--no-leader-elect", "--kubeconfig", str(kubeconfig)])
    captured = capsys.readouterr()
    assert (code, captured.out, captured.err.splitlines()) == (
        2,
        "",
        [
            "rl-scheduler: error: the client's kubeconfig: proxy-url: the Configuration's proxy: "
            "only an http:// proxy is served, not 'socks5://127.0.0.1:1080'"
        ],
    )


def test_a_metrics_address_already_taken_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    """``rl-scheduler run`` whose /metrics port another process holds: exit 2 with one
    line naming ``metrics_address``, no traceback (the API server need not answer)."""
    with socket.socket() as refused, socket.socket() as taken:
        refused.bind(("127.0.0.1", 0))  # bound, never listening: the API server refuses
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server, port = refused.getsockname()[1], taken.getsockname()[1]
        kubeconfig = tmp_path / "kubeconfig.yaml"
        cluster = {"server": f"https://127.0.0.1:{server}", "insecure-skip-tls-verify": True}
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "c",
                    "clusters": [{"name": "k", "cluster": cluster}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                }
            )
        )
        argv = ["run", "--kubeconfig", str(kubeconfig), "--profile", "fgd", "--no-leader-elect"]
        done = subprocess.run(
            [sys.executable, "-m", "scheduler.cli", *argv, "--metrics-address", f"127.0.0.1:{port}"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    problem = f"cannot listen on 127.0.0.1:{port}: Address already in use"
    assert done.stderr.splitlines()[-1] == f"rl-scheduler: error: settings: metrics_address: {problem}"

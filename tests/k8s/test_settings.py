from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.k8s.process.settings import SettingsError, load_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "settings.yaml"
    path.write_text(text)
    return path


def test_defaults_follow_kube_scheduler() -> None:
    settings = load_settings()
    assert (settings.client.qps, settings.client.burst) == (50, 100)
    election = settings.leader_election
    assert (election.lease_duration_s, election.renew_deadline_s, election.retry_period_s) == (15, 10, 2)
    assert settings.lease_name == "rl-scheduler"


def test_file_then_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "scheduler_name: gpu-sched\nprofile: best-fit\nclient: {qps: 200, burst: 400}\n")
    monkeypatch.setenv("RL_SCHEDULER_CLIENT__QPS", "5000")
    settings = load_settings(path)
    assert (settings.scheduler_name, settings.profile, settings.client.qps, settings.client.burst) == (
        "gpu-sched",
        "best-fit",
        5000,
        400,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("profile: magic\n", r"settings.yaml: profile: Value error, unknown profile 'magic'"),
        ("client: {qps: 0}\n", r"client.qps: Input should be greater than 0"),
        ("metrics_address: localhost\n", r"metrics_address: Value error, expected host:port"),
        ("leader_election: {renew_deadline_s: 20}\n", r"leader_election: Value error, need retry_period_s"),
        ("bogus: 1\n", r"bogus: unknown field"),
        ("- a\n- b\n", r"file: expected a mapping"),
        ("a: [\n", r"file: not valid YAML"),
        ("fallback_profile: gnn\n", r"fallback_profile must be a heuristic"),
    ],
)
def test_bad_settings_name_the_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="file: cannot read"):
        load_settings(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("kubeconfig", "message"),
    [
        pytest.param(
            None, "run: error: argument --kubeconfig: not in a cluster, and no kubeconfig", id="none anywhere"
        ),
        pytest.param("missing.yaml", "run: error: argument --kubeconfig: ", id="missing file"),
        pytest.param("empty.yaml", "run: error: argument --kubeconfig: ", id="not a kubeconfig"),
    ],
)
def test_run_without_a_usable_kubeconfig_says_so_in_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kubeconfig: str | None,
    message: str,
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    (tmp_path / "empty.yaml").write_text("{}\n")
    args = ["run", "--profile", "fgd"]
    if kubeconfig is not None:
        args += ["--kubeconfig", str(tmp_path / kubeconfig)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("rl-scheduler")]
    assert len(lines) == 1, err
    assert message in lines[0]
    assert kubeconfig is None or kubeconfig in lines[0]

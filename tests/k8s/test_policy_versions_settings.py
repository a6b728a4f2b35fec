"""``policy_versions``: with a namespace, the versions come from the API server and
``policy_store`` is the local cache of the current one."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.k8s.process.settings import SettingsError, load_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "settings.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "policy_store", "namespace", "channel"),
    [
        ("{}", None, None, "rl-scheduler"),  # off: no store at all
        ("policy_store: /store\n", Path("/store"), None, "rl-scheduler"),  # the folder store
        (
            "policy_versions: {namespace: ml}\n",
            Path("/tmp/rl-scheduler/policy-versions"),  # the default cache
            "ml",
            "rl-scheduler",
        ),
        (
            "policy_versions: {namespace: ml, channel: gpu-a, cache_dir: /cache}\n",
            Path("/cache"),
            "ml",
            "gpu-a",
        ),
        # the cache named twice, the same folder: accepted
        (
            "policy_store: /cache\npolicy_versions: {namespace: ml, cache_dir: /cache}\n",
            Path("/cache"),
            "ml",
            "rl-scheduler",
        ),
    ],
)
def test_policy_versions_in_the_api_make_policy_store_their_cache(
    tmp_path: Path, text: str, policy_store: Path | None, namespace: str | None, channel: str
) -> None:
    settings = load_settings(write(tmp_path, text))
    assert settings.policy_store == policy_store
    assert settings.policy_versions.namespace == namespace
    assert settings.policy_versions.channel == channel


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (
            "policy_store: /store\npolicy_versions: {namespace: ml}\n",
            "policy_store",
            "set with policy_versions",
        ),
        (
            "policy_versions: {namespace: ml, channel: Not_A_Name}\n",
            "policy_versions.channel",
            "should match",
        ),
        ("policy_versions: {namespace: ml, shelf: 1}\n", "policy_versions.shelf", "unknown field"),
    ],
)
def test_bad_policy_versions_settings_name_the_field(
    tmp_path: Path, text: str, field: str, problem: str
) -> None:
    with pytest.raises(SettingsError) as error:
        load_settings(write(tmp_path, text))
    assert error.value.field == field
    assert problem in error.value.problem

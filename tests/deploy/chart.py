"""Rendering the Helm chart and reading what it rendered."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "rl-scheduler"


def set_flags(values: dict[str, Any]) -> list[str]:
    """``--set-json key=value`` for each value (JSON keeps types: 2, true, "x")."""
    flags: list[str] = []
    for key, value in values.items():
        flags += ["--set-json", f"{key}={json.dumps(value)}"]
    return flags


def template(
    helm: Path,
    values: dict[str, Any] | None = None,
    *extra: str,
    release: str = "rl-scheduler",
    namespace: str = "rl-scheduler",
) -> subprocess.CompletedProcess[str]:
    command = [str(helm), "template", release, str(CHART), "--namespace", namespace]
    return subprocess.run(
        [*command, *set_flags(values or {}), *extra], capture_output=True, text=True, check=False
    )


def render(
    helm: Path, values: dict[str, Any] | None = None, *extra: str, **kwargs: Any
) -> list[dict[str, Any]]:
    """The chart's objects for ``values``; fails the test with helm's message if it cannot."""
    result = template(helm, values, *extra, **kwargs)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def only(docs: Iterable[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, (
        f"expected one {kind} named *{name_suffix}, got {[d['metadata']['name'] for d in found]}"
    )
    return found[0]


def kinds(docs: Iterable[dict[str, Any]]) -> list[str]:
    return sorted(d["kind"] for d in docs)


def chart_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return values


def settings_of(docs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    configmap = next(d for d in docs if d["kind"] == "ConfigMap" and "settings.yaml" in d.get("data", {}))
    settings: dict[str, Any] = yaml.safe_load(configmap["data"]["settings.yaml"])
    return settings

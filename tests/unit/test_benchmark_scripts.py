"""Every script in benchmarks/ imports. A name moved out of a module they import from
once left three of them failing at their first line, before ``make typecheck`` checked
them too (``mypy benchmarks``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


def test_benchmarks_are_found() -> None:
    assert len(SCRIPTS) > 20


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_benchmark_script_imports(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the scripts import their siblings
    spec = importlib.util.spec_from_file_location(f"benchmark_{script.stem}", script)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    assert module.__doc__, f"{script.name} says what it measures in its docstring"

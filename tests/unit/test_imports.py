"""The package's import graph has no cycle, and importing a module registers nothing:
the plugin table and the presets are data (scheduler.plugins.registry, presets)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "scheduler"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(tree: ast.Module, known: set[str]) -> set[str]:
    """Modules of the package a module imports anywhere: at the top, in a function (a
    deferred import is still a cycle, just one that fails later) or for type checking."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name in known}


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(files)
    return {name: imports(ast.parse(path.read_text()), known) - {name} for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert "scheduler.plugins.registry" in graph
    assert "scheduler.policy.plugin" not in graph["scheduler.plugins.registry"]
    assert cycles(graph) == []


def test_importing_the_training_modules_registers_no_profile() -> None:
    """The teacher's profile is a preset: known before and after its module is imported."""
    script = (
        "from scheduler.plugins.profiles import profile_names\n"
        "before = profile_names()\n"
        "import scheduler.plugins.scores.fgd_reserve, scheduler.policy.plugin\n"
        "assert profile_names() == before, (before, profile_names())\n"
        "print(*before)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert {"fgd-reserve", "gnn", "fgd", "default"} <= set(result.stdout.split())


def test_the_learned_plugins_are_imported_only_when_a_profile_uses_them() -> None:
    script = (
        "import sys\n"
        "from scheduler.plugins.profiles import build_profile\n"
        "build_profile('best-fit')\n"
        "assert 'scheduler.policy.plugin' not in sys.modules\n"
        "assert 'scheduler.plugins.scores.fgd_reserve' not in sys.modules\n"
        "build_profile('fgd-reserve')\n"
        "assert 'scheduler.plugins.scores.fgd_reserve' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr

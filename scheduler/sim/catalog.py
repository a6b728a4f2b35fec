"""Where traces are found: a path, or a name looked up in the trace folders.

Names are the openb suffixes (``default``, ``gpushare40``, ``multigpu20``, ...) or
full file names. Folders searched: ``$RL_SCHEDULER_TRACES`` (``:``-separated), then
the copy of the openb trace shipped in the package.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from scheduler.errors import TraceError

DEFAULT_NODE_LIST = "openb_node_list_gpu_node"
_SUFFIXES = (".csv", ".csv.gz")


def trace_dirs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("RL_SCHEDULER_TRACES", "").split(":") if p]
    return [*extra, Path(str(resources.files("scheduler").joinpath("data", "openb")))]


def _find(stem: str) -> Path | None:
    for folder in trace_dirs():
        for suffix in _SUFFIXES:
            candidate = folder / f"{stem}{suffix}"
            if candidate.is_file():
                return candidate
    return None


def pod_list_path(trace: str) -> Path:
    """``default`` -> ``.../openb_pod_list_default.csv(.gz)``; a path is taken as is."""
    path = Path(trace)
    if path.is_file():
        return path
    for stem in (trace, f"openb_pod_list_{trace}"):
        found = _find(stem.removesuffix(".gz").removesuffix(".csv"))
        if found:
            return found
    folders = ", ".join(map(str, trace_dirs()))
    raise TraceError(
        f"trace {trace!r}",
        "name",
        f"no such file, and no pod list of that name in {folders}; known: {', '.join(known_traces())}",
    )


def node_list_path(nodes: str = DEFAULT_NODE_LIST) -> Path:
    path = Path(nodes)
    if path.is_file():
        return path
    for stem in (nodes, f"openb_node_list_{nodes}"):
        found = _find(stem.removesuffix(".gz").removesuffix(".csv"))
        if found:
            return found
    raise TraceError(f"node list {nodes!r}", "name", "no such file or node list name")


def known_traces() -> list[str]:
    names: set[str] = set()
    for folder in trace_dirs():
        if folder.is_dir():
            for path in folder.iterdir():
                name = path.name.removesuffix(".gz").removesuffix(".csv")
                if name.startswith("openb_pod_list_"):
                    names.add(name.removeprefix("openb_pod_list_"))
    return sorted(names)

"""The openb trace (Alibaba GPU cluster trace 2023, used by the FGD paper): node and
pod lists as CSV, turned into the scheduler's ``Node`` and ``Pod``.

A bad row never stops a replay: it is reported (file, line, column, problem) and
skipped; a pod that names an unknown GPU model or is larger than any node is reported
and kept, so the replay counts it as a pod that failed to schedule. A GPU node whose
model is not one of the trace's is reported and kept.

Trace nodes and pods become HAMi nodes and pod specs (``scheduler.sim.openb_hami``):
``num_gpu`` GPUs as ``nvidia.com/gpu``, a share (``gpu_milli < 1000``) as HAMi's
``nvidia.com/gpucores`` and ``nvidia.com/gpumem-percentage``, ``gpu_spec`` as
``nvidia.com/use-gputype``. Parsing those manifests gives back the same rows (tested),
so a trace pod, a simulated pod and a real pod are one thing.

``load_timed_pods`` reads each pod's ``creation_time`` and ``deletion_time`` as well
(the timeline replay); the other loaders never look at the time columns.
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter
from pathlib import Path
from typing import TextIO, TypeVar

from scheduler.errors import SchedulerInputError, TraceError
from scheduler.objects.node import Node
from scheduler.objects.node_manifest import node_from_manifest
from scheduler.objects.pod import Pod
from scheduler.objects.pod_manifest import pod_from_manifest
from scheduler.resources.gpu import MAX_GPUS_PER_NODE, MILLI_PER_CORE_PERCENT, MILLI_PER_GPU, type_matches
from scheduler.sim.openb_hami import (
    DEFAULT_GPU_MEMORY_MIB,
    OPENB_GPU_MEMORY_MIB,
    TRACE_NAMESPACE,
    trace_model,
    trace_node_manifest,
    trace_pod_manifest,
)
from scheduler.state.fragmentation import PodShape, pod_shape

__all__ = ["TRACE_NAMESPACE", "trace_node_manifest", "trace_pod_manifest"]
T = TypeVar("T")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
TIME_COLUMNS = ("creation_time", "deletion_time")
# What a pod's shape is read from: its name first.
SHAPE_COLUMNS = (*POD_COLUMNS, "gpu_spec")


@dataclass
class TraceIssues:
    """Problems found while loading; the load goes on past each one."""

    messages: list[str] = field(default_factory=list)

    def add(self, error: SchedulerInputError | str) -> None:
        self.messages.append(str(error))


def _rows(path: Path, required: tuple[str, ...], issues: TraceIssues) -> Iterator[tuple[str, dict[str, str]]]:
    """``(where, row)`` per data row; ``where`` is ``file:line`` for messages."""
    with _open(path) as handle:
        reader = csv.DictReader(handle)
        _check_header(path, _header(path, lambda: reader.fieldnames), required)
        # the csv reader's own count: DictReader's moves only past a row it returns
        for row in _readable(reader, path, lambda: reader.reader.line_num, issues):
            yield _where(path, reader.line_num), row


def _header(path: Path, read: Callable[[], Sequence[str] | None]) -> Sequence[str] | None:
    try:
        return read()
    except csv.Error as error:  # a field past the csv module's size limit
        raise TraceError(str(path), "header", str(error)) from None


def _readable(rows: Iterator[T], path: Path, line: Callable[[], int], issues: TraceIssues) -> Iterator[T]:
    """``rows``; a row the csv module refuses (a field past its size limit) is reported
    in ``issues`` with its line and skipped, as any bad row."""
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as error:
            issues.add(TraceError(_where(path, line()), "row", str(error)))
            continue
        yield row


def _open(path: Path) -> TextIO:
    """A trace CSV (gzipped where it ends in .gz) as text, for ``csv``."""
    if not path.is_file():
        raise TraceError(str(path), "path", "no such trace file")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", newline="")
    return open(path, newline="")


def _where(path: Path, line: int) -> str:
    return f"{path.name.removesuffix('.gz')}:{line}"


def _check_header(path: Path, header: Sequence[str] | None, required: tuple[str, ...]) -> None:
    missing = [c for c in required if c not in (header or ())]
    if missing:
        raise TraceError(str(path), "header", f"missing column(s) {', '.join(missing)}")


def _column_rows(
    path: Path, required: tuple[str, ...], columns: tuple[str, ...], issues: TraceIssues
) -> Iterator[tuple[int, tuple[str, ...]]]:
    """``(line, values of columns)`` per data row, as ``_rows`` reads them (a column the
    row is too short for is ""; blank lines skipped) without a dict per row. The
    scheduler reads its typical pods from a trace at start-up: ``load_pod_shapes`` of
    ``default`` (8,152 rows) took a median of 51 ms of CPU through ``csv.DictReader`` and
    takes 22 ms this way (7 interleaved runs each, on a busy 2-core machine)."""
    with _open(path) as handle:
        reader = csv.reader(handle)
        header = _header(path, lambda: next(reader, [])) or []
        _check_header(path, header, required)
        # DictReader keeps a repeated column's last value
        index = {name: i for i, name in enumerate(header)}
        wanted = [index.get(c, -1) for c in columns]  # -1: an optional column the file lacks
        whole = itemgetter(*wanted) if len(wanted) > 1 and -1 not in wanted else None
        width = max(wanted) + 1
        for row in _readable(reader, path, lambda: reader.line_num, issues):
            if whole is not None and len(row) >= width:
                yield reader.line_num, whole(row)
            elif row:  # a column it lacks is ""
                yield reader.line_num, tuple(row[i] if 0 <= i < len(row) else "" for i in wanted)


def _int(where: str, row: dict[str, str], column: str, *, minimum: int = 0) -> int:
    text = (row.get(column) or "").strip()
    try:
        value = int(text)
    except ValueError:
        raise TraceError(where, column, f"{text!r} is not an integer") from None
    if value < minimum:
        raise TraceError(where, column, f"must be at least {minimum}, got {value}")
    return value


def unknown_model(where: str, node: str, model: str) -> str:
    """The warning for a GPU node whose model the openb trace does not name: it is kept
    (its GPUs get the default memory and serve pods that ask for no model or for it)."""
    known = ", ".join(sorted(OPENB_GPU_MEMORY_MIB))
    problem = f"unknown GPU model {model!r}" if model else "no GPU model given"
    served = f"no model or {model}" if model else "no model"
    return (
        f"{where}: node {node}: model: {problem} (known: {known}); kept, its GPUs count as "
        f"{DEFAULT_GPU_MEMORY_MIB // 1024} GiB each and serve only pods that name {served}"
    )


def load_nodes(path: Path, issues: TraceIssues | None = None) -> list[Node]:
    """Nodes of an openb node list (``sn,cpu_milli,memory_mib,gpu,model``)."""
    issues = issues if issues is not None else TraceIssues()
    nodes: list[Node] = []
    for where, row in _rows(path, NODE_COLUMNS, issues):
        try:
            gpus = _int(where, row, "gpu")
            if gpus > MAX_GPUS_PER_NODE:
                raise TraceError(
                    where, "gpu", f"{gpus} GPUs; at most {MAX_GPUS_PER_NODE} per node are supported"
                )
            name = (row.get("sn") or "").strip()
            if not name:
                raise TraceError(where, "sn", "empty node name")
            model = (row.get("model") or "").strip()
            if gpus and model not in OPENB_GPU_MEMORY_MIB:
                issues.add(unknown_model(where, name, model))
            manifest = trace_node_manifest(
                name, _int(where, row, "cpu_milli"), _int(where, row, "memory_mib"), gpus, model
            )
            nodes.append(node_from_manifest(manifest))
        except SchedulerInputError as error:
            issues.add(error)
    return nodes


TraceRow = tuple[int, int, int, int, str]  # cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec


def _pod_row(where: str, row: dict[str, str], issues: TraceIssues) -> Pod:
    name, fields = _pod_fields(where, row, issues)
    return _trace_pod(where, name, fields)


def _trace_pod(where: str, name: str, fields: TraceRow) -> Pod:
    manifest = trace_pod_manifest(name, *fields)
    return replace(pod_from_manifest(manifest), uid=f"{TRACE_NAMESPACE}-{name}", source=where)


def _pod_fields(where: str, row: dict[str, str], issues: TraceIssues) -> tuple[str, TraceRow]:
    """A pod row's name and fields, checked (and capped) as the FGD simulator reads them."""
    name = (row.get("name") or "").strip()
    if not name:
        raise TraceError(where, "name", "empty pod name")
    num_gpu = _int(where, row, "num_gpu")
    gpu_milli = _int(where, row, "gpu_milli")
    if num_gpu and gpu_milli > MILLI_PER_GPU:
        # The FGD simulator's pod_csv_to_yaml caps the share at one GPU.
        issues.add(f"{where}: pod {name}: gpu_milli {gpu_milli} over {MILLI_PER_GPU}, capped at one GPU")
        gpu_milli = MILLI_PER_GPU
    if num_gpu and gpu_milli == 0:
        issues.add(f"{where}: pod {name}: num_gpu {num_gpu} with gpu_milli 0; treated as a CPU-only pod")
        num_gpu = 0
    if num_gpu > 1 and gpu_milli < MILLI_PER_GPU:
        raise TraceError(
            where, "gpu_milli", f"pod {name}: a share ({gpu_milli}) of {num_gpu} GPUs is not supported"
        )
    if num_gpu and gpu_milli % MILLI_PER_CORE_PERCENT:
        # HAMi asks cores and memory in whole percents of a GPU.
        raise TraceError(where, "gpu_milli", f"pod {name}: {gpu_milli} is not a multiple of 10 milli")
    fields = (
        _int(where, row, "cpu_milli"),
        _int(where, row, "memory_mib"),
        num_gpu,
        gpu_milli,
        row.get("gpu_spec") or "",
    )
    return name, fields


def load_pods(path: Path, issues: TraceIssues | None = None) -> list[Pod]:
    """Pods of an openb pod list, in file order."""
    issues = issues if issues is not None else TraceIssues()
    pods: list[Pod] = []
    for where, row in _rows(path, POD_COLUMNS, issues):
        try:
            pods.append(_pod_row(where, row, issues))
        except SchedulerInputError as error:
            issues.add(error)
    return pods


@dataclass(frozen=True, slots=True)
class TimedPod:
    """A trace pod with the times of its row: created at ``creation_s``, deleted at
    ``deletion_s`` (seconds from the trace's start; ``deletion_s >= creation_s``).
    ``row`` is its fields: pods with equal rows differ only by name."""

    pod: Pod
    row: TraceRow
    creation_s: float
    deletion_s: float


def _seconds(where: str, row: dict[str, str], column: str) -> float:
    text = (row.get(column) or "").strip()
    if not text:
        raise TraceError(where, column, "missing time")
    try:
        value = float(text)
    except ValueError:
        raise TraceError(where, column, f"{text!r} is not a time in seconds") from None
    if not math.isfinite(value) or value < 0:
        raise TraceError(where, column, f"must be a finite number of seconds at least 0, got {text}")
    return value


def load_timed_pods(path: Path, issues: TraceIssues | None = None) -> list[TimedPod]:
    """Pods of an openb pod list with their creation and deletion times, in file order.
    A row whose time is missing, not a number, or whose deletion comes before its
    creation is reported (file, line, column) and skipped, like any bad row."""
    issues = issues if issues is not None else TraceIssues()
    pods: list[TimedPod] = []
    for where, row in _rows(path, POD_COLUMNS + TIME_COLUMNS, issues):
        try:
            name, fields = _pod_fields(where, row, issues)
            created = _seconds(where, row, "creation_time")
            deleted = _seconds(where, row, "deletion_time")
            if deleted < created:
                raise TraceError(
                    where,
                    "deletion_time",
                    f"pod {name}: {row['deletion_time'].strip()} is before "
                    f"its creation_time {row['creation_time'].strip()}",
                )
            pods.append(TimedPod(_trace_pod(where, name, fields), fields, created, deleted))
        except SchedulerInputError as error:
            issues.add(error)
    return pods


def load_pod_shapes(path: Path, issues: TraceIssues | None = None) -> list[PodShape]:
    """The fragmentation shapes of an openb pod list's pods, in file order, as
    ``pod_shape`` of ``load_pods`` gives them: each distinct row is checked and built
    into a pod once (the scheduler reads its typical pods from a trace at start-up, and
    8,000 rows are a few hundred shapes; building every pod took over a second). A row
    whose values raised an issue is checked again each time, so that each is reported
    with its own line and name."""
    issues = issues if issues is not None else TraceIssues()
    built: dict[TraceRow, PodShape] = {}
    clean: dict[tuple[str, ...], PodShape] = {}  # values past the name -> shape, for rows without issues
    shapes: list[PodShape] = []
    for line, values in _column_rows(path, POD_COLUMNS, SHAPE_COLUMNS, issues):
        known = clean.get(values[1:])
        if known is not None and values[0].strip():
            shapes.append(known)
            continue
        reported = len(issues.messages)
        try:
            name, fields = _pod_fields(
                _where(path, line), dict(zip(SHAPE_COLUMNS, values, strict=True)), issues
            )
        except SchedulerInputError as error:
            issues.add(error)
            continue
        if fields not in built:
            built[fields] = pod_shape(pod_from_manifest(trace_pod_manifest(name, *fields)))
        if len(issues.messages) == reported:
            clean[values[1:]] = built[fields]
        shapes.append(built[fields])
    return shapes


def check_pods_against_nodes(pods: list[Pod], nodes: list[Node], issues: TraceIssues) -> None:
    """Report pods that no node of the cluster could ever take (they stay in the replay
    and fail there, as they would in a cluster)."""
    types = {n.gpu_model for n in nodes if n.gpu_model}
    largest = {
        "cpu": max((n.allocatable.get("cpu", 0) for n in nodes), default=0),
        "memory": max((n.allocatable.get("memory", 0) for n in nodes), default=0),
    }
    max_gpus = max((n.gpu_count for n in nodes), default=0)
    for pod in pods:
        if pod.gpu.models and not any(type_matches(t, pod.gpu.models) for t in types):
            wanted = "|".join(pod.gpu.models)
            issues.add(
                f"{pod.source}: pod {pod.name}: gpu_spec: unknown GPU model(s) {wanted} "
                f"(the cluster has {', '.join(sorted(trace_model(t) for t in types))})"
            )
        for resource, biggest in largest.items():
            if pod.requests.get(resource, 0) > biggest:
                issues.add(f"{pod.source}: pod {pod.name}: {resource} request larger than any node")
        if pod.gpu.count > max_gpus:
            issues.add(
                f"{pod.source}: pod {pod.name}: num_gpu {pod.gpu.count} more than any node has ({max_gpus})"
            )

"""The openb pod lists as lifetime data: each pod's features, when it was created, how
long it was seen and whether it ended.

Pods come from ``load_timed_pods`` (the replay's loader, its checks and its report of
bad rows); the ``qos`` column, which that loader does not read, is joined back by row.
Lifetimes and censoring are the replay's (``scheduler.sim.timed_workload``):
``deletion_time - creation_time`` (at least 1 s), and a pod deleted at or after the
trace's end (the latest deletion time of the list) was still running when the list
was taken: censored. On ``default`` that is 34 pods. The ``pod_phase`` column is not
the state at the list's end: 5,159 pods in phase Running were deleted days before it
(it is the phase at deletion), so reading Running or Pending as censored would censor
three quarters of the pods at their own deletion.

Left truncation: the lists hold the pods alive at some time of an observation window
(on ``default`` about 200 pods arrive a day from day 115 of 149, and 0.3 a day before:
those are the few old pods still alive when the window opened). A pod created before
the window is in the list only because it outlived the window's start, so it enters
observation at that age (``entry_s``) and the fit conditions on it; the window opens at
the list's earliest deletion time (on ``default`` 9,964,972 s; the 33 pods created
before it all lived past it, by construction).

``before(cut_s)`` is what was known at a time ``cut_s``: the pods created before it,
those still running then censored at the cut. ``created_from(cut_s)`` are the pods
created at or after it, as the trace saw them.
"""

from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from scheduler.errors import TraceError
from scheduler.lifetimes.features import FEATURE_COUNT, feature_matrix
from scheduler.lifetimes.model import FloatArray
from scheduler.sim.catalog import pod_list_path
from scheduler.sim.timed_workload import lifetime_s
from scheduler.sim.trace import TraceIssues, load_timed_pods

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class PodLifetimes:
    """Per pod: ``features`` (pods, ``FEATURE_COUNT``), ``creation_s``, ``observed_s``
    (its lifetime if it ended, else how long it was seen), ``ended``, and ``entry_s``:
    the age at which it was first seen (0 unless created before the list's window)."""

    name: str
    features: FloatArray
    creation_s: FloatArray
    observed_s: FloatArray
    ended: BoolArray
    entry_s: FloatArray

    def __len__(self) -> int:
        return int(self.observed_s.size)

    def subset(self, keep: BoolArray, name: str) -> PodLifetimes:
        return PodLifetimes(
            name,
            self.features[keep],
            self.creation_s[keep],
            self.observed_s[keep],
            self.ended[keep],
            self.entry_s[keep],
        )

    def before(self, cut_s: float) -> PodLifetimes:
        """What was known at ``cut_s``: pods created before it; one still running at the
        cut is censored there."""
        keep = self.creation_s < cut_s
        view = self.subset(keep, f"{self.name} before {cut_s:.0f} s")
        end = view.creation_s + view.observed_s
        running = end > cut_s
        observed = np.where(running, cut_s - view.creation_s, view.observed_s)
        return PodLifetimes(
            view.name, view.features, view.creation_s, observed, view.ended & ~running, view.entry_s
        )

    def created_from(self, cut_s: float) -> PodLifetimes:
        return self.subset(self.creation_s >= cut_s, f"{self.name} from {cut_s:.0f} s")


def _qos_by_line(path: Path) -> dict[int, str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as handle:
        reader = csv.DictReader(handle)
        if "qos" not in (reader.fieldnames or ()):
            raise TraceError(str(path), "header", "missing column qos")
        by_line: dict[int, str] = {}
        for row in reader:
            by_line[reader.line_num] = (row.get("qos") or "").strip()
        return by_line


def load_pod_lifetimes(trace: str, issues: TraceIssues | None = None) -> PodLifetimes:
    """The lifetimes of an openb pod list (a name such as ``default`` or a path)."""
    path = pod_list_path(trace)
    pods = load_timed_pods(path, issues)
    qos = _qos_by_line(path)
    classes = [qos.get(int(p.pod.source.rsplit(":", 1)[1]), "") for p in pods]
    deletion = np.array([p.deletion_s for p in pods], np.float64)
    end = float(deletion.max()) if pods else 0.0
    window_start = float(deletion.min()) if pods else 0.0
    creation = np.array([p.creation_s for p in pods], np.float64)
    features = feature_matrix([p.pod for p in pods], classes) if pods else np.zeros((0, FEATURE_COUNT))
    return PodLifetimes(
        name=trace,
        features=features,
        creation_s=creation,
        observed_s=np.array([lifetime_s(p) for p in pods], np.float64),
        ended=deletion < end,
        entry_s=np.maximum(window_start - creation, 0.0),
    )

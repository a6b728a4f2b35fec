"""Reading pods' lifetimes from the experience log: starts at binds, ends at departures,
censored while running, bounded by start time, bad records skipped and counted."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from scheduler.lifetimes.features import LIFETIME_FEATURES
from scheduler.online.observed_lifetimes import ObservedLifetimes, record_features


def bind(pod: str, t: Any, cpu_milli: int = 500, **extra: Any) -> dict[str, Any]:
    """A decision record as the scheduler's runtime writes it after a bind."""
    return {
        "kind": "decision",
        "t": t,
        "pod": pod,
        "cpu_milli": cpu_milli,
        "memory": 2**30,
        "gpu_count": 0,
        "gpu_milli": 0,
        "gpu_models": [],
        "node": "n1",
        **extra,
    }


def leave(pod: str, t: Any) -> dict[str, Any]:
    return {"kind": "departure", "t": t, "pod": pod}


def listed(t: Any, *pods: str) -> dict[str, Any]:
    """Our pods on nodes after a listing, as the runtime logs them."""
    return {"kind": "residents", "t": t, "pods": list(pods)}


NOW = 200.0


@pytest.mark.parametrize(
    ("case", "records", "expected", "skipped"),
    [
        # (pod start, observed seconds, ended) in start order
        ("ended: lifetime is departure - bind", [bind("a", 100), leave("a", 130)], [(100, 30, True)], {}),
        ("running: censored at now (200 - 100)", [bind("a", 100)], [(100, 100, False)], {}),
        (
            "bound again after a failed bind: the last bind",
            [bind("a", 100), bind("a", 110), leave("a", 140)],
            [(110, 30, True)],
            {},
        ),
        (
            "a second departure changes nothing",
            [bind("a", 100), leave("a", 130), leave("a", 150)],
            [(100, 30, True)],
            {},
        ),
        (
            "departure of a pod never seen bound",
            [leave("x", 130), bind("a", 100)],
            [(100, 100, False)],
            {"unknown_departure": 1},
        ),
        ("departure before the bind", [bind("a", 100), leave("a", 90)], [(100, 100, False)], {"clock": 1}),
        ("no time", [bind("a", None), bind("b", True), bind("c", float("nan"))], [], {"bad_record": 3}),
        ("no pod or node", [bind(7, 100), bind("b", 100, node=None)], [], {"bad_record": 2}),  # type: ignore[arg-type]
        ("requests that are not numbers", [bind("a", 100, cpu_milli="lots")], [], {"bad_record": 1}),  # type: ignore[arg-type]
        (
            "departure without a time",
            [bind("a", 100), {"kind": "departure", "pod": "a"}],
            [(100, 100, False)],
            {"bad_record": 1},
        ),
        # A scheduler restart: b was deleted while none watched. It is censored at the
        # last listing that had it (120 - 100 = 20 s), not running for 100 s.
        (
            "left unseen: censored at the last listing that had it",
            [bind("a", 100), bind("b", 100), listed(120, "a", "b"), listed(150, "a")],
            [(100, 100, False), (100, 20, False)],
            {},
        ),
        (
            "left unseen before any listing: censored at its bind",
            [bind("a", 100), listed(150)],
            [(100, 0, False)],
            {},
        ),
        (
            "a departure after it was lost changes nothing",
            [bind("a", 100), listed(150), leave("a", 160)],
            [(100, 0, False)],
            {},
        ),
        ("an ended pod is not lost", [bind("a", 100), leave("a", 110), listed(150)], [(100, 10, True)], {}),
        ("bound after the listing: not judged by it", [listed(150), bind("a", 160)], [(160, 40, False)], {}),
        (
            "a listing without a pod list",
            [bind("a", 100), {"kind": "residents", "t": 150, "pods": "a"}],
            [(100, 100, False)],
            {"bad_record": 1},
        ),
        ("arrivals and other kinds are not starts", [{"kind": "arrival", "t": 1, "pod": "a"}], [], {}),
    ],
)
def test_lifetimes_from_records(
    case: str,
    records: list[dict[str, Any]],
    expected: list[tuple[float, float, bool]],
    skipped: dict[str, int],
) -> None:
    seen = ObservedLifetimes()
    seen.observe(records)
    pods = seen.lifetimes(NOW)
    got = list(zip(pods.creation_s.tolist(), pods.observed_s.tolist(), pods.ended.tolist(), strict=True))
    assert got == expected, case
    assert dict(seen.skipped) == skipped, case
    assert pods.features.shape == (len(expected), len(LIFETIME_FEATURES))
    assert np.all(pods.entry_s == 0)


def test_censoring_is_at_the_newest_record_when_the_clock_is_behind() -> None:
    seen = ObservedLifetimes()
    seen.observe([bind("a", 100), bind("b", 300)])
    pods = seen.lifetimes(now=250.0)  # the trainer's clock behind the scheduler's
    assert pods.observed_s.tolist() == [200.0, 0.0]


def test_the_earliest_started_pods_go_first_ended_or_not() -> None:
    seen = ObservedLifetimes(max_pods=2)
    seen.observe([bind("a", 1), leave("a", 2), bind("b", 3), bind("c", 4), leave("c", 9)])
    pods = seen.lifetimes(NOW)
    assert pods.creation_s.tolist() == [3.0, 4.0]  # a went, though it had ended
    assert seen.evicted == 1
    seen.observe([leave("a", 10)])  # its departure is unknown now
    assert seen.skipped["unknown_departure"] == 1


@pytest.mark.parametrize(
    ("case", "extra", "qos_be", "share"),
    [
        ("Koordinator's BE class", {"qos": "BE"}, 1.0, 0.0),
        ("a log from before the qos field: no class", {}, 0.0, 0.0),
        ("a share of one GPU: 30%", {"gpu_count": 1, "gpu_milli": 300}, 0.0, 0.3),
    ],
)
def test_features_of_a_record(case: str, extra: dict[str, Any], qos_be: float, share: float) -> None:
    x = record_features(bind("a", 1, **extra))
    names = list(LIFETIME_FEATURES)
    assert x[names.index("qos_be")] == qos_be, case
    assert x[names.index("gpu_share_fraction")] == pytest.approx(share), case
    assert x[names.index("log1p_cpu_cores")] == pytest.approx(np.log1p(0.5)), case


def test_the_refit_modules_do_not_import_torch() -> None:
    code = (
        "import sys\n"
        "import scheduler.online.lifetime_refit, scheduler.online.observed_lifetimes\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

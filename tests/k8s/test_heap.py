"""The cyclic collector around the start: when it is paused and when it runs again."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.k8s.process import heap


@pytest.fixture(autouse=True)
def collector_as_it_was() -> Iterator[None]:
    was = gc.isenabled()
    yield
    heap.end_start_pause()
    if was:
        gc.enable()
    else:
        gc.disable()


def start_then_freeze() -> bool:
    heap.pause_for_start()
    paused = not gc.isenabled()
    heap.freeze_start_heap()
    gc.unfreeze()
    return paused and gc.isenabled()


def start_then_end() -> bool:
    heap.pause_for_start()
    heap.end_start_pause()
    heap.end_start_pause()  # idempotent
    return gc.isenabled()


def collector_off_before_the_start() -> bool:
    gc.disable()
    heap.pause_for_start()
    heap.end_start_pause()
    return not gc.isenabled()  # the start did not turn it off, so it does not turn it on


def start_ends_inside_a_block() -> bool:
    heap.pause_for_start()
    with heap.collector_paused():
        heap.end_start_pause()
        inside = not gc.isenabled()
    return inside and gc.isenabled()


def block_inside_the_start() -> bool:
    heap.pause_for_start()
    with heap.collector_paused():
        pass
    still_paused = not gc.isenabled()
    heap.end_start_pause()
    return still_paused and gc.isenabled()


def start_past_its_limit() -> bool:
    heap.pause_for_start(limit_s=0.05)
    paused = not gc.isenabled()
    deadline = time.monotonic() + 5.0
    while not gc.isenabled() and time.monotonic() < deadline:
        time.sleep(0.01)
    return paused and gc.isenabled()


@pytest.mark.parametrize(
    "case",
    [
        start_then_freeze,
        start_then_end,
        collector_off_before_the_start,
        start_ends_inside_a_block,
        block_inside_the_start,
        start_past_its_limit,
    ],
)
def test_collector_around_the_start(case: Callable[[], bool]) -> None:
    gc.enable()
    assert case(), case.__name__


def test_a_start_that_fails_leaves_the_collector_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("clusters: []\ncontexts: []\nusers: []\n")
    gc.enable()
    assert main(["run", "--kubeconfig", str(kubeconfig), "--no-leader-elect"]) == 2
    assert "--kubeconfig" in capsys.readouterr().err
    assert gc.isenabled()

"""The experience log: acknowledged records survive, torn lines are skipped, the size
cap holds, and a full queue or a full volume drops records instead of blocking."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.online.experience import ExperienceLog, encode, read_records, segment_name, segments


def test_records_come_back_in_order(tmp_path: Path) -> None:
    log = ExperienceLog(tmp_path).start()
    seqs = [log.append({"kind": "decision", "i": i}) for i in range(500)]
    assert log.wait_acknowledged(seqs[-1])
    log.close()
    assert [r["i"] for r in read_records(tmp_path)] == list(range(500))
    assert [r["seq"] for r in read_records(tmp_path, after_seq=498)] == [499, 500]


def test_a_restart_continues_the_numbering(tmp_path: Path) -> None:
    first = ExperienceLog(tmp_path).start()
    first.wait_acknowledged(first.append({"i": 1}))
    first.close()
    second = ExperienceLog(tmp_path).start()
    assert second.append({"i": 2}) == 2
    second.close()


def test_torn_and_corrupted_lines_are_skipped(tmp_path: Path) -> None:
    good = encode({"seq": 1, "i": 1})
    flipped = bytearray(encode({"seq": 2, "i": 2}))
    flipped[-3] ^= 1
    (tmp_path / segment_name(1)).write_bytes(good + bytes(flipped) + encode({"seq": 3, "i": 3})[:-7])
    assert [r["seq"] for r in read_records(tmp_path)] == [1]


def test_segments_rotate_and_the_oldest_go_under_the_cap(tmp_path: Path) -> None:
    log = ExperienceLog(tmp_path, segment_bytes=4096, max_bytes=20_000).start()
    for i in range(3000):
        seq = log.append({"kind": "decision", "payload": "x" * 40, "i": i})
        if i % 100 == 99:
            log.wait_acknowledged(seq)  # several batches, so several segments
    log.wait_acknowledged(seq)
    log.close()
    total = sum(p.stat().st_size for p in segments(tmp_path))
    assert len(segments(tmp_path)) > 1
    assert total <= 20_000 + 4096 + 100 * 80  # the cap, plus the open segment's last batch
    assert log.evicted_segments > 0
    survivors = [r["i"] for r in read_records(tmp_path)]
    assert survivors == list(range(survivors[0], 3000))  # the newest, without gaps


def test_a_full_queue_drops_instead_of_waiting(tmp_path: Path) -> None:
    log = ExperienceLog(tmp_path, queue_size=10)  # no writer started: nothing drains it
    results = [log.append({"i": i}) for i in range(15)]
    assert results[:10] == list(range(1, 11))
    assert results[10:] == [0] * 5
    assert log.dropped["queue_full"] == 5


@contextlib.contextmanager
def full_volume(tmp_path: Path) -> Iterator[Path]:
    """A real full file system: a tiny tmpfs filled to the brim (root can mount one),
    or, where mounting is not allowed, a segment that is /dev/full (ENOSPC from the
    kernel either way)."""
    mount = tmp_path / "volume"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=False, capture_output=True
    )
    try:
        if mounted.returncode == 0:
            with (mount / "filler").open("wb") as filler, contextlib.suppress(OSError):
                filler.write(b"\0" * 1024 * 1024)
        else:
            (mount / segment_name(1)).symlink_to("/dev/full")
        yield mount
    finally:
        if mounted.returncode == 0:
            subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_volume_drops_records_and_counts_them(tmp_path: Path) -> None:
    with full_volume(tmp_path) as volume:
        log = ExperienceLog(volume).start()
        seq = log.append({"kind": "decision", "payload": "x" * 1000})
        assert not log.wait_acknowledged(seq, timeout_s=2)
        log.close()
        assert log.dropped["disk_full"] >= 1
        assert log.acknowledged == 0


WRITER = """
import sys
from pathlib import Path
from scheduler.online.experience import ExperienceLog
log = ExperienceLog(Path(sys.argv[1])).start()
i = 0
while True:
    seq = log.append({"kind": "decision", "i": i, "payload": "y" * 200})
    i += 1
    if i % 50 == 0 and log.wait_acknowledged(seq):
        print(seq, flush=True)
"""


@pytest.mark.parametrize("after_acks", [3, 17, 60])
def test_kill_9_loses_no_acknowledged_record(tmp_path: Path, after_acks: int) -> None:
    folder = tmp_path / f"log-{uuid.uuid4().hex[:6]}"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(folder)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    acknowledged = 0
    for _ in range(after_acks):
        acknowledged = int(writer.stdout.readline())
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    seqs = [r["seq"] for r in read_records(folder)]
    assert seqs[:acknowledged] == list(range(1, acknowledged + 1))

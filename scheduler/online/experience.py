"""The experience log: what the scheduler decided, for the trainer to learn from.

The scheduler appends one record per decision (and per pod departure) without ever
waiting: ``append`` puts the record on a bounded queue and returns; a writer thread
writes batches as JSON lines to segment files on the volume it shares with the
trainer, flushes and fsyncs each batch, and only then *acknowledges* the records
(``acknowledged``). A record that was acknowledged survives ``kill -9`` of either
process; a line cut short by a crash is skipped by readers.

Segments rotate at ``segment_bytes``; the oldest are deleted to keep the log under
``max_bytes``. A full queue (a slow disk) or a full volume drops records and counts
them (``dropped``), and scheduling goes on.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import queue
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
SEGMENT_PREFIX = "experience-"
SEGMENT_SUFFIX = ".jsonl"


def segment_name(first_seq: int) -> str:
    return f"{SEGMENT_PREFIX}{first_seq:012d}{SEGMENT_SUFFIX}"


def segments(folder: Path) -> list[Path]:
    """Segment files, oldest first."""
    if not folder.is_dir():
        return []
    return sorted(
        p for p in folder.iterdir() if p.name.startswith(SEGMENT_PREFIX) and p.name.endswith(SEGMENT_SUFFIX)
    )


def encode(record: dict[str, Any]) -> bytes:
    """One line: the record's JSON with a CRC-32 of it, so a torn write is detected."""
    body = json.dumps(record, separators=(",", ":"), sort_keys=True)
    return f"{zlib.crc32(body.encode()):08x} {body}\n".encode()


def decode(line: bytes) -> dict[str, Any] | None:
    """The record of a line, or None for a torn or corrupted one."""
    try:
        text = line.decode()
        checksum, body = text.rstrip("\n").split(" ", 1)
        if int(checksum, 16) != zlib.crc32(body.encode()) or not line.endswith(b"\n"):
            return None
        record = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def read_records(folder: Path, after_seq: int = 0) -> Iterator[dict[str, Any]]:
    """Every intact record with ``seq > after_seq``, oldest first."""
    for path in segments(folder):
        try:
            data = path.read_bytes()
        except OSError:
            continue  # deleted by rotation while we listed
        for line in data.splitlines(keepends=True):
            record = decode(line)
            if record is not None and int(record.get("seq", 0)) > after_seq:
                yield record


def last_seq(folder: Path) -> int:
    last = 0
    for record in read_records(folder):
        last = max(last, int(record["seq"]))
    return last


@dataclass
class ExperienceLog:
    folder: Path
    segment_bytes: int = 8 * 2**20
    max_bytes: int = 256 * 2**20
    queue_size: int = 10_000
    dropped: Counter[str] = field(default_factory=Counter)
    written: int = 0
    # Old segments deleted to stay under max_bytes (written, maybe already read).
    evicted_segments: int = 0

    def __post_init__(self) -> None:
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(self.queue_size)
        self._lock = threading.Lock()
        self._seq = 0
        self.acknowledged = 0
        self._thread: threading.Thread | None = None
        self._file: Any = None
        self._file_bytes = 0

    # ---- the scheduler's side -------------------------------------------------

    def start(self) -> ExperienceLog:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._seq = self.acknowledged = last_seq(self.folder)
        except OSError as error:
            log.warning("experience log %s unavailable: %s", self.folder, error)
        self._thread = threading.Thread(target=self._write_forever, name="experience-log", daemon=True)
        self._thread.start()
        return self

    def append(self, record: dict[str, Any]) -> int:
        """Queue a record; returns its sequence number (0 if it was dropped)."""
        with self._lock:
            self._seq += 1
            seq = self._seq
        record = {**record, "seq": seq}
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self.dropped["queue_full"] += 1
            return 0
        return seq

    def close(self, timeout_s: float = 5.0) -> None:
        if self._thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout_s)
        self._thread.join(timeout_s)

    def wait_acknowledged(self, seq: int, timeout_s: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.acknowledged < seq and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.acknowledged >= seq

    # ---- the writer thread ----------------------------------------------------

    def _write_forever(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < 1000:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._write(batch)
                    self._close_file()
                    return
                batch.append(item)
            self._write(batch)
        self._close_file()

    def _write(self, batch: list[dict[str, Any]]) -> None:
        data = b"".join(encode(r) for r in batch)
        try:
            if self._file is None or self._file_bytes >= self.segment_bytes:
                self._rotate(int(batch[0]["seq"]))
            self._file.write(data)
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as error:
            reason = "disk_full" if error.errno in (errno.ENOSPC, errno.EDQUOT) else "write_error"
            self.dropped[reason] += len(batch)
            log.warning("experience log: dropped %d records: %s", len(batch), error)
            self._close_file()  # the next batch starts a fresh segment after any torn line
            return
        self._file_bytes += len(data)
        self.written += len(batch)
        self.acknowledged = int(batch[-1]["seq"])

    def _rotate(self, first_seq: int) -> None:
        self._close_file()
        self.folder.mkdir(parents=True, exist_ok=True)
        self._file = (self.folder / segment_name(first_seq)).open("ab")
        self._file_bytes = 0
        self._enforce_cap()

    def _enforce_cap(self) -> None:
        existing = segments(self.folder)
        sizes = {p: p.stat().st_size for p in existing if p.exists()}
        total = sum(sizes.values())
        for path in existing[:-1]:  # never the segment just opened
            if total <= self.max_bytes:
                break
            with contextlib.suppress(OSError):
                path.unlink()
                total -= sizes.get(path, 0)
                self.evicted_segments += 1

    def _close_file(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

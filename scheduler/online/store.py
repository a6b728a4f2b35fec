"""Published policy versions on the volume the trainer and the scheduler share.

    <root>/v000001/           manifest.json + model.safetensors (a checkpoint)
    <root>/v000002/           ... and lifetimes/ (a lifetime model, ``lifetime_refit``)
    <root>/current -> v000002 the version the scheduler loads

Publishing is atomic: the checkpoint is written into a hidden temporary folder,
fsynced, renamed to its version name, and only then does ``current`` switch, by
renaming a new symlink over the old one. A crash at any moment leaves either the old
or the new ``current``, never a half-written checkpoint behind it; leftover
temporary folders are ignored (and swept). Rollback points ``current`` back at the
version before it. Versions are kept.

This folder store is the offline one (and the chart's choice where a volume is kept,
``policyVersions.store: volume``). In a cluster the versions are custom resources
(``scheduler.online.store_crd``): its store is a ``PolicyStore`` whose versions and
``current`` live in the API server, and whose folder is only a local cache of the
versions it has materialised, written by ``install``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from scheduler.errors import SchedulerInputError

CURRENT = "current"
_VERSION = re.compile(r"v(\d{6})")


class PolicyStoreError(SchedulerInputError):
    pass


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(path: Path) -> None:
    for item in path.rglob("*"):
        if item.is_file():
            with item.open("rb") as handle:
                os.fsync(handle.fileno())
    _fsync_dir(path)


class PolicyStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def versions(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if _VERSION.fullmatch(p.name) and p.is_dir())

    def current(self) -> str | None:
        link = self.root / CURRENT
        if link.is_symlink():
            target = os.readlink(link)
            if _VERSION.fullmatch(target) and (self.root / target).is_dir():
                return target
        versions = self.versions()
        return versions[-1] if versions else None

    def current_path(self) -> Path | None:
        version = self.current()
        return self.root / version if version else None

    def publish(self, write: Callable[[Path], object]) -> str:
        """``write(folder)`` fills a fresh folder with a checkpoint; it becomes the next
        version and ``current``. Returns the version name."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.sweep()
        versions = self.versions()
        number = int(versions[-1][1:]) + 1 if versions else 1
        version = f"v{number:06d}"
        self.install(version, write)
        self.point_current(version)
        return version

    def install(self, version: str, write: Callable[[Path], object]) -> Path:
        """The folder of ``version``, written by ``write(folder)`` unless it exists:
        staged, fsynced and renamed into place, so it is whole or absent. Another
        process that installs the same version first wins; this one's copy goes."""
        if not _VERSION.fullmatch(version):
            raise PolicyStoreError(str(self.root), "version", f"{version!r} is not of the form v000001")
        folder = self.root / version
        if folder.is_dir():
            return folder
        self.root.mkdir(parents=True, exist_ok=True)
        staging = self.root / f".{version}.tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            write(staging)
            _fsync_tree(staging)
            os.rename(staging, folder)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if folder.is_dir():  # installed meanwhile by another process
                return folder
            raise
        _fsync_dir(self.root)
        return folder

    def point_current(self, version: str) -> None:
        if version not in self.versions():
            raise PolicyStoreError(str(self.root), "version", f"no published version {version!r}")
        temporary = self.root / f".{CURRENT}.tmp-{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        temporary.symlink_to(version)
        os.rename(temporary, self.root / CURRENT)
        _fsync_dir(self.root)

    def rollback(self) -> str:
        """Point ``current`` at the version published before it."""
        current = self.current()
        versions = self.versions()
        if current is None or versions.index(current) == 0:
            raise PolicyStoreError(str(self.root), CURRENT, "no earlier version to roll back to")
        previous = versions[versions.index(current) - 1]
        self.point_current(previous)
        return previous

    def sweep(self) -> None:
        """Remove temporary folders a crash left behind."""
        if self.root.is_dir():
            for item in self.root.iterdir():
                if item.name.startswith(".") and ".tmp-" in item.name:
                    if item.is_dir() and not item.is_symlink():
                        shutil.rmtree(item, ignore_errors=True)
                    else:
                        with contextlib.suppress(OSError):
                            item.unlink()


def write_files(files: Mapping[str, bytes]) -> Callable[[Path], None]:
    """A ``write`` for ``install``/``publish`` that lays ``files`` (relative POSIX paths,
    checked by the caller) out in the folder."""

    def write(folder: Path) -> None:
        for name, data in files.items():
            path = folder.joinpath(*name.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    return write

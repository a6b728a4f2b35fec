"""Fixtures for the deployment tests: the pinned helm binary (built by ``make
binaries``, or here on first use)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def helm() -> Path:
    from devcluster.binaries import Binaries, ensure_binaries  # noqa: PLC0415 - needs the client only here

    path = Binaries.in_cache().helm
    if not os.access(path, os.X_OK):
        path = ensure_binaries(("helm",)).helm
    return path


@pytest.fixture(scope="session")
def kubectl() -> Path:
    from devcluster.binaries import Binaries, ensure_binaries  # noqa: PLC0415

    path = Binaries.in_cache().kubectl
    if not os.access(path, os.X_OK):
        path = ensure_binaries(("kubernetes",)).kubectl
    return path

"""Images for the real node: built by podman (``hack/images.sh``), moved into the
node's containerd with ``podman save`` and ``ctr import`` (namespace ``k8s.io``, the
kubelet's). An image containerd already holds with the same config digest (podman's
image id) is not moved again: the node's containerd keeps its images between nodes.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from devcluster.binaries import HACK_DIR
from devcluster.errors import DevClusterError

IMAGES_SCRIPT = HACK_DIR / "images.sh"
NAMESPACE = "k8s.io"


class ImageError(DevClusterError):
    """An image could not be built or moved into the node."""

    exit_code = 4


@dataclass(frozen=True)
class Imported:
    name: str
    ref: str
    seconds: float
    skipped: bool


def _script(*args: str) -> str:
    done = subprocess.run(["bash", str(IMAGES_SCRIPT), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ImageError(done.stderr.strip() or f"hack/images.sh {' '.join(args)} exited {done.returncode}")
    return done.stdout.strip()


def build(*names: str) -> None:
    """Build what is missing or stale (podman's layer cache makes a rebuild cheap)."""
    done = subprocess.run(["bash", str(IMAGES_SCRIPT), *names], check=False)
    if done.returncode != 0:
        raise ImageError(f"hack/images.sh {' '.join(names)} exited {done.returncode}")


def ref_of(name: str) -> str:
    return _script("--print-ref", name)


def ctr(socket: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ctr", "--address", str(socket), "-n", NAMESPACE, *args], capture_output=True, text=True, check=False
    )


def config_digest(socket: Path, ref: str) -> str | None:
    """The config digest of ``ref`` in containerd, or None if it has no such image."""
    listed = ctr(socket, "images", "ls", f"name=={ref}").stdout.splitlines()
    if len(listed) < 2:
        return None
    manifest = listed[1].split()[2]  # REF TYPE DIGEST SIZE ...
    content = ctr(socket, "content", "get", manifest)
    if content.returncode != 0:
        return None
    try:
        return str(json.loads(content.stdout)["config"]["digest"])
    except (ValueError, KeyError, TypeError):
        return None


def import_image(socket: Path, name: str) -> Imported:
    """Move the podman image ``name`` (scheduler, trainer, pause) into containerd."""
    start = time.monotonic()
    ref, image_id = ref_of(name), _script("--id", name)
    if config_digest(socket, ref) == f"sha256:{image_id}":
        return Imported(name, ref, time.monotonic() - start, skipped=True)
    with tempfile.TemporaryDirectory(prefix="rl-image-") as tmp:
        archive = Path(tmp) / f"{name}.tar"
        _script("--save", name, str(archive))
        done = ctr(socket, "images", "import", str(archive))
        if done.returncode != 0:
            raise ImageError(f"ctr import of {ref} failed: {done.stderr.strip()}")
    return Imported(name, ref, time.monotonic() - start, skipped=False)

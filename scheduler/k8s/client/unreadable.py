"""One object that cannot be read costs that object, never its listing or its watch.

Listings, watch events and resyncs apply each object inside ``skipping``: whatever
reading it raises (a field we are stricter on than the API server, or a bug of ours)
goes to the runtime's ``Skipped`` handler, which logs the object by name, counts it
(``rl_scheduler_unreadable_objects_total``) and reports it on a pod of ours; the rest
of the listing is applied.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

log = logging.getLogger(__name__)
# (kind, the object as the API sent it, what reading it raised)
Skipped = Callable[[str, Any, Exception], None]


def object_name(manifest: Any) -> str:
    """``namespace/name`` (or ``name``) of a manifest, for log lines; never raises."""
    metadata = manifest.get("metadata") if isinstance(manifest, Mapping) else None
    if not isinstance(metadata, Mapping):
        return "(no metadata)"
    name, namespace = metadata.get("name"), metadata.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


@contextlib.contextmanager
def skipping(kind: str, manifest: Any, skipped: Skipped) -> Iterator[None]:
    """Hands what applying ``manifest`` raises to ``skipped`` instead of the caller."""
    try:
        yield
    except Exception as error:  # any failure costs this object only
        skipped(kind, manifest, error)


def log_unreadable(kind: str, manifest: Any, error: Exception) -> None:
    """A ``Skipped`` handler that only logs (where no runtime counts and reports)."""
    log.warning("%s %s skipped: %s", kind, object_name(manifest), error)

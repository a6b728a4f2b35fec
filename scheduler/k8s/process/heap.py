"""The cyclic garbage collector around the start's large allocations.

A 5,000-node listing is 21 MB of JSON: millions of dicts, lists and strings, none in a
cycle. Parsed with the collector running, each of its passes walked the growing heap
again: ``json.loads`` took 0.40-0.48 s of that listing, 0.16-0.18 s with the collector
paused. Applying the listing to the cache (objects that live as long as the process)
is the same story. Reference counting still frees everything as usual while paused;
only the search for cycles waits.

Once the first listing is applied, ``freeze_start_heap`` moves everything alive into
the collector's permanent generation (``gc.freeze``): the modules, the profiles and
the cached cluster are not walked again by every later full collection.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_pauses = 0  # how many callers are inside ``collector_paused``, across threads
_resume = False  # whether the collector ran when the first of them came in


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block (for allocations that make no cycles).
    Nested and concurrent blocks (the listings' worker threads) share one pause: the
    collector runs again when the last one leaves, if it ran before the first came."""
    global _pauses, _resume  # noqa: PLW0603 - one process-wide collector
    with _lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()


def freeze_start_heap() -> None:
    """Keep what the start made out of later collections (see the module's doc)."""
    gc.freeze()

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

The start's imports are the same story: ``rl-scheduler run`` pauses the collector
before it imports anything heavy (``pause_for_start``), and the pause ends when the
start's heap is frozen, when a start that fails returns, or ``START_PAUSE_LIMIT_S``
after it began if the caches have not synced by then (an API server that does not
answer must not leave the collector off). While everything the start imports is
imported, the collector runs 170 times and takes 43-48 ms (timed with
``gc.callbacks``, five runs on an idle 2-core machine).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_pauses = 0  # how many callers are inside ``collector_paused``, across threads
_resume = False  # whether the collector ran when the first of them came in
_start_paused = False  # whether ``pause_for_start`` turned the collector off

# The longest the start keeps the collector off.
START_PAUSE_LIMIT_S = 60.0


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


def pause_for_start(limit_s: float = START_PAUSE_LIMIT_S) -> None:
    """No cyclic collection until the start's heap is frozen, ``end_start_pause`` is
    called, or ``limit_s`` has passed (a daemon timer ends it then)."""
    global _start_paused  # noqa: PLW0603 - one process-wide collector
    with _lock:
        if not gc.isenabled() or _pauses or _start_paused:
            return
        gc.disable()
        _start_paused = True
    limit = threading.Timer(limit_s, end_start_pause)
    limit.daemon = True
    limit.start()


def end_start_pause() -> None:
    """The collector runs again if ``pause_for_start`` stopped it; idempotent."""
    global _start_paused, _resume  # noqa: PLW0603 - one process-wide collector
    with _lock:
        if _start_paused:
            _start_paused = False
            if _pauses == 0:
                gc.enable()
            else:  # a ``collector_paused`` block is open: it resumes the collector as it leaves
                _resume = True


def freeze_start_heap() -> None:
    """Keep what the start made out of later collections (see the module's doc), and
    end the start's pause."""
    gc.freeze()
    end_start_pause()

"""How many connections the serving port keeps, and which one gives way.

At most ``limit`` connections are open. A connection is idle while it waits for its
TLS handshake or its next request, busy while a request is answered. Past the limit,
a new connection takes the place of the one idle longest (a kubelet's probe and a
scrape open fresh connections and are answered at once, so a crowd of idle
connections cannot lock them out); when every connection is busy, the new one is
refused. Busy connections end within the read and write timeouts.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

C = TypeVar("C", bound=Hashable)


class ConnectionTable(Generic[C]):
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self.idle_connections: OrderedDict[C, None] = OrderedDict()  # longest idle first
        self.busy_connections: set[C] = set()

    def __len__(self) -> int:
        return len(self.idle_connections) + len(self.busy_connections)

    def admit(self, connection: C) -> tuple[bool, C | None]:
        """Whether ``connection`` is admitted (as idle), and the connection that gives
        way to it, for the caller to close."""
        evicted = None
        if len(self) >= self.limit:
            if not self.idle_connections:
                return False, None
            evicted, _ = self.idle_connections.popitem(last=False)
        self.idle_connections[connection] = None
        return True, evicted

    def idle(self, connection: C) -> None:
        """``connection`` waits for its next request: the newest idle one."""
        self.busy_connections.discard(connection)
        self.idle_connections.pop(connection, None)
        self.idle_connections[connection] = None

    def busy(self, connection: C) -> bool:
        """``connection`` has a request to answer; False when it was evicted meanwhile."""
        if connection in self.idle_connections:
            del self.idle_connections[connection]
            self.busy_connections.add(connection)
        return connection in self.busy_connections

    def remove(self, connection: C) -> None:
        self.idle_connections.pop(connection, None)
        self.busy_connections.discard(connection)

    def __contains__(self, connection: object) -> bool:
        return connection in self.idle_connections or connection in self.busy_connections

"""Gang scheduling: a PodGroup's members placed together, or none of them.

scheduler-plugins' Coscheduling reaches all-or-nothing one pod per cycle: members
wait at Permit holding their places until ``minMember`` of them have one, or until
``scheduleTimeoutSeconds`` ends and the places go back. Two gangs that each hold part
of what both need then wait for a timeout. Here a gang is decided in one cycle
instead, as Volcano's gang plugin does within a session: its pending members are
placed one after another on the cache (each sees the ones before it), and if fewer
than the group still needs could be placed, every place is given back before the
cycle ends. No place is held between cycles, so gangs cannot deadlock each other.

For GPU gangs each member goes, among the nodes its own filters and preferences
leave, to a node that already holds a member of the gang if one can take it, else to
one in the same rack, and the profile's scores choose among those: the fewest nodes,
one rack when it can, the profile's least fragmentation within them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler.framework.profile import Decision, NodeNarrowing
from scheduler.objects.pod import Pod
from scheduler.objects.pod_group import PodGroup
from scheduler.objects.topology import RACK_LABEL
from scheduler.state.cluster_state import ClusterState, IntArray

# What places one member: the pod and the narrowing of its nodes to the gang's (None
# for gangs without GPUs, which the profile's scores place as any pod).
DecideMember = Callable[[Pod, NodeNarrowing | None], Decision]


@dataclass
class GangOutcome:
    """What a gang cycle decided. ``placed`` stays placed (the gang reached its quorum);
    otherwise it is empty and every member is in ``failed`` or ``given_back``."""

    group: PodGroup
    # How many members this cycle had to place: minMember less those placed before.
    needed: int
    placed: list[Decision] = field(default_factory=list)
    failed: list[Decision] = field(default_factory=list)
    # Members that found a place but gave it back because the gang fell short.
    given_back: list[Decision] = field(default_factory=list)

    @property
    def quorum(self) -> bool:
        return len(self.placed) >= self.needed

    def rejection(self) -> str:
        """The FailedScheduling message of every member of a gang that fell short."""
        fit = len(self.given_back)
        first = self.failed[0] if self.failed else None
        why = f" Pod {first.pod.name}: {first.message}" if first is not None else ""
        return (
            f"PodGroup {self.group.key} gets rejected: {fit} of the {self.needed} pods it needs "
            f"could be placed at once (minMember {self.group.min_member}); none is bound.{why}"
        )


def quorum_shortfall(pod: Pod, group: PodGroup, members: int) -> str:
    """Coscheduling's PreFilter: a member waits while its group has fewer pods than
    ``minMember`` (its wording); "" when there are enough."""
    if members >= group.min_member:
        return ""
    return (
        f"pre-filter pod {pod.name} cannot find enough sibling pods, "
        f"current pods number: {members}, minMember of group: {group.min_member}"
    )


def gang_locality(state: ClusterState, gang_rows: Sequence[int]) -> NodeNarrowing:
    """Nodes that hold a member of the gang, else nodes in their racks, else all."""
    held = np.unique(np.asarray(gang_rows, np.int64))
    racks = {state.nodes[int(row)].labels.get(RACK_LABEL) for row in held} - {None}

    def narrow(nodes: IntArray) -> IntArray:
        on_gang_nodes = nodes[np.isin(nodes, held)]
        if on_gang_nodes.size:
            return on_gang_nodes
        if racks:
            in_racks = np.fromiter(
                (state.nodes[int(row)].labels.get(RACK_LABEL) in racks for row in nodes), np.bool_, nodes.size
            )
            if in_racks.any():
                return nodes[in_racks]
        return nodes

    return narrow


def place_gang(
    state: ClusterState,
    group: PodGroup,
    members: Sequence[Pod],
    placed_before: Sequence[int],
    decide: DecideMember,
    assume: Callable[[Decision], None],
    forget: Callable[[Decision], None],
) -> GangOutcome:
    """Place ``members`` (pending, in order) of ``group``, whose members already placed
    are on the rows ``placed_before``: each placed member is assumed at once so the next
    sees it; when fewer than the group still needs were placed, they are all forgotten."""
    outcome = GangOutcome(group, max(0, group.min_member - len(placed_before)))
    rows = list(placed_before)
    for pod in members:
        narrowing = gang_locality(state, rows) if pod.gpu.count and rows else None
        decision = decide(pod, narrowing)
        if not decision.scheduled:
            outcome.failed.append(decision)
            continue
        assume(decision)
        outcome.placed.append(decision)
        rows.append(decision.node_index)
    if not outcome.quorum:
        for decision in reversed(outcome.placed):
            forget(decision)
        outcome.given_back, outcome.placed = outcome.placed, []
    return outcome

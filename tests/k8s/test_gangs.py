"""The PodGroup index: groups from their events, members from their pods' events
(any scheduler's; finished, deleted and terminating pods are not members)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.k8s.scheduling.gangs import GangIndex
from scheduler.objects.pod_group import CORE_GROUP, POD_GROUP_LABEL, PodGroup
from tests.builders import pod_manifest


def member(name: str, group: str = "job", **changes: Any) -> dict[str, Any]:
    manifest = pod_manifest(name, namespace="team", labels={POD_GROUP_LABEL: group} if group else {})
    for path, value in changes.items():
        where, _, field = path.partition("_")
        manifest.setdefault(where, {})[field] = value
    return manifest


@pytest.mark.parametrize(
    ("events", "members"),
    [
        ([("ADDED", member("a")), ("ADDED", member("b"))], {"team/job": {"team/a", "team/b"}}),
        # Bound pods are members (they count towards minMember), whoever bound them.
        ([("ADDED", member("a", spec_nodeName="n1", spec_schedulerName="other"))], {"team/job": {"team/a"}}),
        ([("ADDED", member("a")), ("MODIFIED", member("a", status_phase="Succeeded"))], {}),
        ([("ADDED", member("a")), ("MODIFIED", member("a", status_phase="Failed"))], {}),
        ([("ADDED", member("a")), ("DELETED", member("a"))], {}),
        (
            [
                ("ADDED", member("a")),
                ("MODIFIED", member("a", metadata_deletionTimestamp="2026-01-01T00:00:00Z")),
            ],
            {},
        ),
        # Relabelled into another group, or out of any.
        ([("ADDED", member("a")), ("MODIFIED", member("a", group="other"))], {"team/other": {"team/a"}}),
        ([("ADDED", member("a")), ("MODIFIED", member("a", group=""))], {}),
        ([("ADDED", member("a", group=""))], {}),
        # The Workload API's PodGroup named in spec.schedulingGroup.
        (
            [("ADDED", member("a", group="", spec_schedulingGroup={"podGroupName": "job"}))],
            {"scheduling.k8s.io:team/job": {"team/a"}},
        ),
        ([("ADDED", member("a", group="", spec_schedulingGroup="job"))], {}),  # not an object: none
    ],
)
def test_members_follow_their_pods(
    events: list[tuple[str, dict[str, Any]]], members: dict[str, set[str]]
) -> None:
    index = GangIndex()
    for event_type, manifest in events:
        index.on_pod(event_type, manifest)
    assert index.members == members


def group(name: str, spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "team", "name": name}, "spec": spec}


def test_pod_groups_follow_their_events_and_a_bad_one_is_left_out() -> None:
    index = GangIndex()
    assert index.on_pod_group("ADDED", group("job", {"minMember": 8})) == "team/job"
    assert index.groups == {"team/job": PodGroup("team", "job", 8)}
    index.on_pod_group("MODIFIED", group("job", {"minMember": 0}))  # logged, and no longer used
    assert index.groups == {}
    index.on_pod_group("MODIFIED", group("job", {"minMember": 2}))
    index.on_pod_group("DELETED", group("job", {}))
    assert index.groups == {}


def test_resync_drops_groups_a_listing_no_longer_has() -> None:
    now = [10.0]
    index = GangIndex(clock=lambda: now[0])
    index.on_pod_group("ADDED", group("kept", {"minMember": 1}))
    index.on_pod_group("ADDED", group("gone", {"minMember": 1}))
    now[0] = 20.0
    index.on_pod_group("ADDED", group("new", {"minMember": 1}))  # seen after the listing began
    index.resync({"team/kept"}, listed_at=15.0)
    assert sorted(index.groups) == ["team/kept", "team/new"]


def test_forget_pod_drops_a_member_a_watch_never_reported_deleted() -> None:
    index = GangIndex()
    index.on_pod("ADDED", member("a"))
    index.on_pod("ADDED", member("b"))
    index.forget_pod("team/a")
    index.forget_pod("team/unknown")
    assert index.members == {"team/job": {"team/b"}}


def test_the_two_apis_pod_groups_of_one_name_stay_apart_and_resync_apart() -> None:
    index = GangIndex(clock=lambda: 10.0)
    index.on_pod_group("ADDED", group("job", {"minMember": 8}))
    core = index.on_pod_group(
        "ADDED", group("job", {"schedulingPolicy": {"gang": {"minCount": 3}}}), CORE_GROUP
    )
    assert core == "scheduling.k8s.io:team/job"
    assert index.groups == {
        "team/job": PodGroup("team", "job", 8),
        core: PodGroup("team", "job", 3, api=CORE_GROUP),
    }
    index.resync(set(), listed_at=15.0, api=CORE_GROUP)  # the core listing is empty
    assert list(index.groups) == ["team/job"]

"""DynamicResources' words in a FailedScheduling message (kube v1.36.4
``dynamicresources.go``): PreFilter's for a missing device class, and PostFilter's,
which come before DefaultPreemption's."""

from __future__ import annotations

import pytest

from scheduler.dra.node_filter import post_filter_message, pre_filter
from scheduler.dra.objects import ResourceClaim
from scheduler.framework.preemption import PreemptionFailure
from scheduler.framework.status import Code
from scheduler.k8s.scheduling.preemptor import failed_scheduling_message
from tests.dra.builders import DRIVER_A, driver_class, exactly, first_available, make_claim

POST = "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."


@pytest.mark.parametrize(
    ("has_claims", "words"),
    [
        pytest.param(False, "no new claims to deallocate", id="a pod without claims: the fast path"),
        pytest.param(True, "still not schedulable", id="a pod with claims, none to deallocate"),
    ],
)
def test_post_filter_message(has_claims: bool, words: str) -> None:
    assert post_filter_message(has_claims) == words
    failure = PreemptionFailure(f"0/2 nodes are available: 2 cannot allocate all claims. {POST}", POST, True)
    assert failed_scheduling_message(failure, has_claims=has_claims) == (
        f"0/2 nodes are available: 2 cannot allocate all claims. {words}, {POST}"
    )


CLASSES = {"class-a": driver_class("class-a", DRIVER_A)}


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        pytest.param([make_claim("c", exactly("gpu"))], "", id="the class exists"),
        pytest.param(
            [make_claim("c", exactly("gpu", "nope"))],
            "request gpu: device class nope does not exist",
            id="exactly",
        ),
        pytest.param(
            [make_claim("c", first_available("gpu", exactly("big"), exactly("small", "nope")))],
            "request gpu/small: device class nope does not exist",
            id="a subrequest",
        ),
        pytest.param(
            [make_claim("c", exactly("gpu"), exactly("more", "gone")), make_claim("d", exactly("x", "nope"))],
            "request more: device class gone does not exist",
            id="the first missing class in the pod's order",
        ),
    ],
)
def test_pre_filter_refuses_a_missing_class(claims: list[ResourceClaim], message: str) -> None:
    """kube's PreFilter (``validateDeviceClass``): a claim to allocate whose class does not
    exist is unresolvable on every node until a DeviceClass event."""
    status = pre_filter(claims, "pod-uid", CLASSES)
    assert (status.message if not status.ok else "") == message
    if message:
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE

"""DynamicResources' Score (kube v1.36.4 ``computeScore``): ``8 - i`` for the i-th
``firstAvailable`` alternative a node's allocation uses, summed over the pod's claims;
the plugin normalises so the best node scores 100."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scheduler.dra.allocator import ClaimAllocation
from scheduler.dra.objects import DeviceResult
from scheduler.dra.scoring import first_available_score
from scheduler.framework.plugin import CycleContext
from scheduler.plugins.filters.dynamic_resources import ALLOCATIONS, PLUGIN
from scheduler.plugins.scores.dynamic_resources import DynamicResourcesScore
from tests.dra.builders import DRIVER_A, exactly, first_available, make_claim

ALTERNATIVES = first_available("gpu", exactly("big"), exactly("mid"), exactly("small"))
PLAIN = make_claim("plain", exactly("gpu"))


def _allocation(*requests: str) -> ClaimAllocation:
    return ClaimAllocation(
        "c", tuple(DeviceResult(r, DRIVER_A, "pool", f"dev-{i}") for i, r in enumerate(requests))
    )


# (case, claims, Filter's allocations for the unallocated ones, raw score)
CASES = [
    ("the first alternative: 8", [make_claim("c", ALTERNATIVES)], [_allocation("gpu/big")], 8),
    ("the third: 6", [make_claim("c", ALTERNATIVES)], [_allocation("gpu/small")], 6),
    ("exactly adds nothing", [PLAIN], [_allocation("gpu")], 0),
    (
        "two claims add up",
        [make_claim("c", ALTERNATIVES), make_claim("d", ALTERNATIVES)],
        [_allocation("gpu/big"), _allocation("gpu/mid")],
        15,
    ),
    (
        "an allocated claim counts with its allocation",
        [
            make_claim(
                "c",
                ALTERNATIVES,
                status={
                    "allocation": {
                        "devices": {
                            "results": [
                                {"request": "gpu/mid", "driver": DRIVER_A, "pool": "p", "device": "d"}
                            ]
                        }
                    }
                },
            ),
            make_claim("d", ALTERNATIVES),
        ],
        [_allocation("gpu/small")],
        13,
    ),
    ("no allocation from Filter: 0", [make_claim("c", ALTERNATIVES)], [], 0),
]


@pytest.mark.parametrize(
    ("claims", "allocations", "score"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_first_available_score(claims: list[Any], allocations: list[ClaimAllocation], score: int) -> None:
    assert first_available_score(claims, allocations) == score


def test_the_plugin_ranks_the_earlier_alternative_first() -> None:
    ctx = CycleContext(state=None, pod=None)  # type: ignore[arg-type]  # the plugin reads ctx.data only
    ctx.data[PLUGIN] = [make_claim("c", ALTERNATIVES)]
    ctx.data[ALLOCATIONS] = {
        0: (_allocation("gpu/small"),),
        1: (_allocation("gpu/big"),),
        2: (_allocation("gpu/mid"),),
    }
    scores = DynamicResourcesScore().score(ctx, np.array([0, 1, 2, 3]))
    # 6, 8, 7, and 0 for a node Filter left no allocation for: * 100 // 8.
    assert scores.tolist() == [75, 100, 87, 0]


def test_without_first_available_every_node_scores_zero() -> None:
    ctx = CycleContext(state=None, pod=None)  # type: ignore[arg-type]
    ctx.data[PLUGIN] = [PLAIN]
    ctx.data[ALLOCATIONS] = {0: (_allocation("gpu"),)}
    assert DynamicResourcesScore().score(ctx, np.array([0, 1])).tolist() == [0, 0]
    del ctx.data[PLUGIN]  # a pod without claims: PreFilter skipped
    assert DynamicResourcesScore().score(ctx, np.array([0, 1])).tolist() == [0, 0]

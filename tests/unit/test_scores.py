"""Table tests for the score plugins: each row a pod, nodes (with pods on them) and the
expected normalised score per node, with the arithmetic in the comment."""

from typing import Any

import numpy as np
import pytest

from scheduler.plugins.scores.best_fit import BestFitScore
from scheduler.plugins.scores.dot_prod import DotProdScore
from scheduler.plugins.scores.fgd import FgdScore
from scheduler.plugins.scores.gpu_clustering import GpuClusteringScore
from scheduler.plugins.scores.gpu_packing import GpuPackingScore
from scheduler.plugins.scores.node_preferences import NodeAffinityScore, TaintTolerationScore
from scheduler.plugins.scores.resource_allocation import BalancedAllocation, LeastAllocated, MostAllocated
from scheduler.state.fragmentation import PodShape, TypicalPods
from tests.builders import all_nodes, context, make_node, make_pod, make_state

BIG = {"cpu": "128", "memory": "512Gi"}
SHARE_500 = TypicalPods((PodShape(1000, 500, 1),), (1.0,))


def preferred(*terms: tuple[int, str, str]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": w,
                    "preference": {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]},
                }
                for w, k, v in terms
            ]
        }
    }


def gpu_node(name: str, gpus: int, cpu: str = "128") -> Any:
    return make_node(name, cpu=cpu, memory="512Gi", gpus=gpus, model="V100")


CASES = [
    pytest.param(
        LeastAllocated(),
        make_pod(cpu="1", memory="2Gi"),
        [make_node("n1", cpu="4", memory="8Gi"), make_node("n2", cpu="2", memory="8Gi")],
        [(make_pod("old", cpu="1", memory="2Gi"), "n1")],
        [50, 62],
        id="least: n1 cpu (4000-2000)/4000=50 mem (8-4)/8=50; n2 cpu 50, mem 75 -> (50+75)//2=62",
    ),
    pytest.param(
        LeastAllocated(),
        make_pod(),
        [make_node("n1", cpu="1", memory="1Gi")],
        [],
        [85],
        id="least: a pod without requests counts 100m/200Mi: cpu 90, mem (1024-200)*100//1024=80 -> 85",
    ),
    pytest.param(
        MostAllocated(),
        make_pod(cpu="1", memory="2Gi"),
        [make_node("n1", cpu="4", memory="8Gi"), make_node("n2", cpu="2", memory="8Gi")],
        [(make_pod("old", cpu="1", memory="2Gi"), "n1")],
        [50, 37],
        id="most: n1 2000/4000=50, 4/8=50; n2 50 and 25 -> 37",
    ),
    pytest.param(
        BalancedAllocation(),
        make_pod(cpu="1", memory="2Gi"),
        [make_node("n1", cpu="4", memory="8Gi"), make_node("n2", cpu="2", memory="8Gi")],
        [(make_pod("old", cpu="1", memory="2Gi"), "n1")],
        # the change in balance, 50 + (50 + with - without) // 2
        [75, 68],
        id="balanced: n1 100 before and after -> 75; n2 100 -> 87 (cpu .5 mem .25) -> 50 + 37 // 2",
    ),
    pytest.param(
        BalancedAllocation(),
        make_pod(memory="4Gi"),
        [make_node("n1", cpu="4", memory="8Gi")],
        [(make_pod("cpu-heavy", cpu="2"), "n1")],
        [87],
        id="balanced: a pod that evens the node out: 75 (cpu .5 mem 0) -> 100 (.5/.5) -> 50 + 75 // 2",
    ),
    pytest.param(
        BalancedAllocation(),
        make_pod(),
        [make_node("n1"), make_node("n2", cpu="1")],
        [],
        [0, 0],
        id="balanced: a best-effort pod gets no balance score",
    ),
    pytest.param(
        TaintTolerationScore(),
        make_pod(tolerations=[{"key": "ok", "operator": "Exists", "effect": "PreferNoSchedule"}]),
        [
            make_node("n1"),
            make_node("n2", taints=[{"key": "a", "effect": "PreferNoSchedule"}]),
            make_node(
                "n3",
                taints=[
                    {"key": "a", "effect": "PreferNoSchedule"},
                    {"key": "b", "effect": "PreferNoSchedule"},
                    {"key": "ok", "effect": "PreferNoSchedule"},
                ],
            ),
        ],
        [],
        [100, 50, 0],
        id="taints: 0, 1, 2 intolerable (ok is tolerated) -> reversed 100, 100-50, 0",
    ),
    pytest.param(
        NodeAffinityScore(),
        make_pod(affinity=preferred((2, "zone", "a"), (5, "disk", "ssd"))),
        [
            make_node("n1", labels={"zone": "a"}),
            make_node("n2", labels={"disk": "ssd"}),
            make_node("n3", labels={"zone": "a", "disk": "ssd"}),
            make_node("n4"),
        ],
        [],
        [28, 71, 100, 0],
        id="preferences: weights 2, 5, 7, 0 -> *100//7",
    ),
    pytest.param(
        DotProdScore(),
        make_pod(cpu="8", gpus=1),
        [gpu_node("a", 8, cpu="64"), gpu_node("b", 2, cpu="32")],
        [],
        [92, 97],
        id="dotprod: a n=(.5,1) p=(.0625,.125) dot .15625 -> 92; b n=(.25,.25) dot .046875 -> 97",
    ),
    pytest.param(
        BestFitScore(),
        make_pod(cpu="8", gpus=1),
        [gpu_node("a", 8, cpu="64"), gpu_node("b", 2, cpu="32"), gpu_node("c", 4, cpu="48")],
        [],
        [0, 100, 62],
        id="bestfit: raw a 34 (spare .21875+.4375), b 84, c 65 (spare .15625+.1875) -> (65-34)*100//50=62",
    ),
    pytest.param(
        GpuPackingScore(),
        make_pod(cpu="1", gpus=1, gpu_milli=500),
        [gpu_node("a", 8), gpu_node("b", 2), gpu_node("c", 2)],
        [
            (make_pod("on-b", cpu="1", gpus=1, gpu_milli=400), "b"),
            (make_pod("on-c", cpu="1", gpus=1, gpu_milli=700), "c"),
        ],
        [25, 94, 49],
        id="packing: a all free max(33-8,8)=25; b on the 600-free GPU 100-60//10=94; c on a free GPU 50-1",
    ),
    pytest.param(
        GpuPackingScore(),
        make_pod(cpu="1"),
        [gpu_node("a", 8), gpu_node("b", 2)],
        [],
        [0, 0],
        id="packing: CPU-only pods tie at 0",
    ),
    pytest.param(
        GpuClusteringScore(),
        make_pod(cpu="1", gpus=1, gpu_milli=500),
        [gpu_node("a", 8), gpu_node("b", 2), gpu_node("c", 4), gpu_node("d", 4)],
        [
            (make_pod("share-b", cpu="1", gpus=1, gpu_milli=400), "b"),
            (make_pod("share-c", cpu="1", gpus=1, gpu_milli=600), "c"),
            (make_pod("whole-c", cpu="1", gpus=1), "c"),
            (make_pod("pair-d", cpu="1", gpus=2), "d"),
        ],
        [25, 95, 67, 18],
        id="clustering: a empty 0+25; b only shares 25*6400//8000+75; c mixed 17+50; d only 2-gpu 18+0",
    ),
    pytest.param(
        FgdScore(SHARE_500),
        make_pod(cpu="1", gpus=1, gpu_milli=600),
        [gpu_node("a", 1), gpu_node("b", 2)],
        [(make_pod("on-b", cpu="1", gpus=1, gpu_milli=300), "b")],
        [40, 47],
        id="fgd: a 1000->400 strands 400 for 500-milli pods: sigmoid(-.4)=40; b 700->100 strands 100: 47",
    ),
    pytest.param(
        FgdScore(SHARE_500),
        make_pod(cpu="1", gpus=1, gpu_milli=300),
        [gpu_node("a", 1)],
        [],
        [50],
        id="fgd: 1000->700 still fits a 500 share: no change, sigmoid(0)=50",
    ),
    pytest.param(
        FgdScore(SHARE_500),
        make_pod(cpu="100"),
        [gpu_node("a", 1, cpu="100500m"), gpu_node("b", 1, cpu="128")],
        [],
        [26, 50],
        id="fgd: a CPU pod leaving 500m makes a's idle GPU unusable for 1-core pods (Q4): sigmoid(-1)=26",
    ),
]


@pytest.mark.parametrize(("plugin", "pod", "nodes", "placed", "expected"), CASES)
def test_scores(
    plugin: Any, pod: Any, nodes: list[Any], placed: list[tuple[Any, str]], expected: list[int]
) -> None:
    state = make_state(nodes, placed)
    assert plugin.score(context(state, pod), all_nodes(state)).tolist() == expected


@pytest.mark.parametrize(
    ("pod", "placed", "gpus"),
    [
        pytest.param(
            make_pod(cpu="1", gpus=1, gpu_milli=600),
            [("x", 300)],
            (0,),
            id="share: GPU0 700->100 strands 100 (47) beats a free GPU 1000->400 (40)",
        ),
        pytest.param(
            make_pod(cpu="1", gpus=2), [("x", 300)], (1, 2), id="whole GPUs: lowest-index free ones"
        ),
    ],
)
def test_fgd_picks_gpus(pod: Any, placed: list[tuple[str, int]], gpus: tuple[int, ...]) -> None:
    state = make_state(
        [gpu_node("a", 4)], [(make_pod(n, cpu="1", gpus=1, gpu_milli=m), "a") for n, m in placed]
    )
    plugin = FgdScore(SHARE_500)
    ctx = context(state, pod)
    plugin.score(ctx, all_nodes(state))
    assert plugin.select_gpus(ctx, 0) == gpus


def test_fgd_cache_follows_node_changes() -> None:
    state = make_state([gpu_node("a", 1), gpu_node("b", 1)])
    plugin = FgdScore(SHARE_500)
    pod = make_pod("p", cpu="1", gpus=1, gpu_milli=600)
    assert plugin.score(context(state, pod), all_nodes(state)).tolist() == [40, 40]
    state.place(make_pod("q", cpu="1", gpus=1, gpu_milli=400), "b", (0,))
    # b: 600 free -> 0 left, nothing stranded any more: F goes 0 (600 >= 500) -> 0: 50
    assert plugin.score(context(state, pod), all_nodes(state)).tolist() == [40, 50]
    assert np.array_equal(plugin.score(context(state, pod), all_nodes(state)), [40, 50])

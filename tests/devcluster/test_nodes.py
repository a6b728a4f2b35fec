"""Fake node specs and manifests (no cluster needed)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from devcluster import binaries, names, nodes
from devcluster.errors import BadNodeListError, InvalidArgumentError
from scheduler.objects.node_manifest import node_from_manifest

OPENB_GPU_NODES = binaries.openb_file("openb_node_list_gpu_node")


@pytest.mark.parametrize(
    ("index", "zone", "rack"),
    [
        (0, "zone-a", "zone-a-rack-0"),
        (1, "zone-b", "zone-b-rack-0"),
        (3, "zone-a", "zone-a-rack-1"),  # second round of zones, next rack
        (12, "zone-a", "zone-a-rack-0"),  # 3 zones x 4 racks: wraps after 12
    ],
)
def test_topology_places_nodes_round_robin(index: int, zone: str, rack: str) -> None:
    assert nodes.Topology(zones=3, racks_per_zone=4).place(index) == (zone, rack)


@pytest.mark.parametrize(
    ("text", "taint"),
    [
        ("gpu=true:NoSchedule", nodes.Taint("gpu", "true", "NoSchedule")),
        ("dedicated:NoExecute", nodes.Taint("dedicated", "", "NoExecute")),
        ("a.b/c=d:PreferNoSchedule", nodes.Taint("a.b/c", "d", "PreferNoSchedule")),
    ],
)
def test_taint_parses_kubectl_syntax(text: str, taint: nodes.Taint) -> None:
    assert nodes.Taint.parse(text) == taint


@pytest.mark.parametrize("text", ["gpu=true", "gpu=true:Sometimes", ":NoSchedule", ""])
def test_bad_taint_is_rejected(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="taint"):
        nodes.Taint.parse(text)


def test_mix_interleaves_types_in_proportion() -> None:
    specs = nodes.mix_node_specs(8, nodes.parse_mix("cpu-small=3,gpu-t4=1"))
    kinds = ["g" if s.size.gpu_count else "c" for s in specs]
    # 3:1 -> 6 CPU and 2 GPU nodes, the GPU ones spread out rather than bunched.
    assert Counter(kinds) == {"c": 6, "g": 2}
    assert kinds.index("g") < 4
    assert len({s.name for s in specs}) == 8


@pytest.mark.parametrize(
    ("mix", "message"),
    [
        ("cpu-small=0", "positive weight"),
        ("cpu-small=x", "not an integer"),
        ("cpu-small=-1", "negative"),
        ("tpu=1", "node type 'tpu'"),
    ],
)
def test_bad_mix_is_rejected(mix: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        nodes.parse_mix(mix)


def test_openb_sample_keeps_the_gpu_model_mix() -> None:
    specs = nodes.openb_node_specs(OPENB_GPU_NODES, 100)
    models = Counter(s.size.gpu_model for s in specs)
    # The file is sorted by type; an even sample still sees most models.
    assert len(models) >= 5
    assert all(s.size.gpu_count > 0 for s in specs)
    assert len({s.name for s in specs}) == 100


def test_gpu_node_manifest_has_kwok_conventions_and_gpu() -> None:
    spec = nodes.NodeSpec("n1", nodes.NODE_TYPES["gpu-v100"], "zone-a", "zone-a-rack-0")
    manifest = nodes.node_manifest(spec)
    labels = manifest["metadata"]["labels"]
    assert manifest["metadata"]["annotations"][names.KWOK_NODE_ANNOTATION] == "fake"
    assert labels[names.HOSTNAME_LABEL] == "n1"
    assert labels[names.KWOK_TYPE_LABEL] == "kwok"
    assert manifest["status"]["allocatable"] == {
        "cpu": "96000m",
        "memory": "786432Mi",
        "pods": "110",
        "ephemeral-storage": "1Ti",
        names.GPU_RESOURCE: "80",  # as HAMi's device plugin counts them: 8 GPUs x 10 vGPUs
    }
    assert manifest["spec"]["taints"] == []
    # The GPUs are registered as HAMi's device plugin registers them.
    node = node_from_manifest(manifest)
    assert node.gpu_sharing
    assert [(g.uuid, g.type, g.memory_mib, g.slots) for g in node.gpus] == [
        (f"GPU-n1-{i}", "NVIDIA-V100M32", 32768, 10) for i in range(8)
    ]


def test_a_plain_gpu_node_advertises_whole_gpus_typed_by_their_product_label() -> None:
    spec = nodes.NodeSpec("n1", nodes.NODE_TYPES["gpu-v100"], "zone-a", "zone-a-rack-0", hami=False)
    manifest = nodes.node_manifest(spec)
    assert manifest["status"]["allocatable"][names.GPU_RESOURCE] == "8"
    assert names.REGISTER_ANNOTATION not in manifest["metadata"]["annotations"]
    node = node_from_manifest(manifest)
    assert not node.gpu_sharing
    assert [g.type for g in node.gpus] == ["V100M32"] * 8


def test_cpu_node_manifest_has_no_gpu_and_carries_taints() -> None:
    spec = nodes.NodeSpec("n2", nodes.NODE_TYPES["cpu-small"], "zone-b", "zone-b-rack-0",
                          taints=(nodes.KWOK_TAINT,))  # fmt: skip
    manifest = nodes.node_manifest(spec)
    assert names.GPU_RESOURCE not in manifest["status"]["allocatable"]
    assert names.REGISTER_ANNOTATION not in manifest["metadata"]["annotations"]
    assert manifest["spec"]["taints"] == [
        {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("sn,cpu_milli,memory_mib,gpu\nn,1,1,0\n", "missing columns \\['model'\\]"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn,lots,1,0,\n", "line 2"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn,0,1,0,\n", "sizes must be positive"),
    ],
)
def test_malformed_node_list_names_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text(content)
    with pytest.raises(BadNodeListError, match=message):
        nodes.openb_node_specs(path, 1)

"""HAMi's protocol texts (register annotation, allocation annotations, node lock) and a
node's GPUs read from them. Literal strings are HAMi v2.10.0's own output
(``MarshalNodeDevices``, ``EncodePodSingleDevice``), as HAMi's tests and the
protocol research show them."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.objects.node_manifest import node_from_manifest
from scheduler.resources import hami
from scheduler.resources.hami import (
    ContainerDevice,
    Device,
    DeviceUsage,
    NodeLock,
    ProtocolError,
    decode_pod_devices,
    encode_pod_devices,
    format_register,
    lock_value,
    parse_lock,
    parse_register,
    parse_register_strictly,
    pod_device_usage,
)
from tests.builders import node_manifest

A100 = "NVIDIA A100-SXM4-80GB"
# HAMi v2.10's MarshalNodeDevices: the second GPU on NUMA 1 and unhealthy (omitempty
# leaves out index 0, numa 0 and health false).
JSON_REGISTER = (
    '[{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","count":10,"devmem":81920,"devcore":100,'
    f'"type":"{A100}","mode":"hami-core","health":true}},'
    '{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","index":1,"count":10,"devmem":81920,"devcore":100,'
    f'"type":"{A100}","numa":1,"mode":"hami-core"}}]'
)
FIRST = Device("GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448", 0, 10, 81920, 100, A100, 0, "hami-core", True)
SECOND = Device("GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec", 1, 10, 81920, 100, A100, 1, "hami-core", False)


@pytest.mark.parametrize(
    ("text", "devices"),
    [
        pytest.param(JSON_REGISTER, [FIRST, SECOND], id="JSON (v2.8+)"),
        pytest.param(
            f"GPU-a,10,81920,100,{A100},0,true,0,hami-core:GPU-b,10,81920,100,{A100},1,false,1,mig:",
            [
                Device("GPU-a", 0, 10, 81920, 100, A100, 0, "hami-core", True),
                Device("GPU-b", 1, 10, 81920, 100, A100, 1, "mig", False),
            ],
            id="colon form, 9 fields (v2.5-v2.7)",
        ),
        pytest.param(
            "GPU-a,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:",
            [Device("GPU-a", 0, 10, 32768, 100, "NVIDIA-Tesla V100-PCIE-32GB", 0, "hami-core", True)],
            id="colon form, 7 fields (<= v2.4)",
        ),
        pytest.param("[]", [], id="no device"),
    ],
)
def test_register_annotation_in_every_form(text: str, devices: list[Device]) -> None:
    assert parse_register(text) == devices


def test_register_round_trips_as_the_plugin_writes_it() -> None:
    assert format_register([FIRST, SECOND]) == JSON_REGISTER
    assert parse_register(format_register([FIRST, SECOND])) == [FIRST, SECOND]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("[{", "not JSON", id="broken JSON"),
        pytest.param('{"id": "GPU-a"}', "expected a JSON array", id="an object"),
        pytest.param(
            '[{"id": "GPU-a", "devmem": "lots"}]', "device 0: devmem: expected an integer", id="bad field"
        ),
        pytest.param("GPU-a,10,100:", "device 0: 3 fields", id="short colon device"),
        pytest.param(
            "GPU-a,10,x,100,T,0,true:", "device 0: devmem: 'x' is not a 32-bit integer", id="bad colon number"
        ),
        pytest.param(
            "GPU-a,10," + "9" * 5000 + ",100,T,0,true:", "device 0: devmem: .* not a 32-bit", id="5000 digits"
        ),
        pytest.param(
            "GPU-a,10,4294967296,100,T,0,true:", "devmem: 4294967296 is out of range", id="past int32"
        ),
        pytest.param("GPU-a,10,\u0661\u0662,100,T,0,true:", "devmem: .* not a 32-bit", id="non-ASCII digits"),
        pytest.param(
            '[{"id": "GPU-a", "devmem": 1099511627776}]',
            "devmem: 1099511627776 is out of range",
            id="JSON past int32",
        ),
        pytest.param("GPU-a,10,1,100,T,0,maybe:", "health 'maybe' is not a boolean", id="bad health"),
    ],
)
def test_bad_register_annotations_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem):
        parse_register(text)


def outcome(read: Any, text: str) -> object:
    try:
        return read(text)
    except ProtocolError as error:
        return str(error)


JSON_VALUES = st.one_of(
    st.integers(-(2**31) - 1, 2**31),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
    st.sampled_from(["", "hami-core", "mig", "NVIDIA A100", "GPU-a"]),
    st.lists(st.integers(), max_size=1),
)
JSON_DEVICE = st.dictionaries(
    st.sampled_from(["id", "index", "count", "devmem", "devcore", "type", "numa", "mode", "health", "x"]),
    JSON_VALUES,
)
NUMBER = st.one_of(
    st.integers(-(2**31) - 1, 2**31).map(str), st.sampled_from(["+1", "-0", "x", "", "1.0", "١"])
)
COLON_DEVICE = st.builds(
    lambda uuid, numbers, health, extra: ",".join(
        [uuid, *numbers[:3], "NVIDIA-T4", numbers[3], health, *extra]
    ),
    st.sampled_from(["GPU-a", "GPU-b", ""]),
    st.lists(NUMBER, min_size=4, max_size=4),
    st.sampled_from(["true", "false", "T", "0", "maybe"]),
    st.one_of(st.just([]), st.tuples(NUMBER, st.sampled_from(["", "mig", "hami-core"])).map(list)),
)


@settings(max_examples=300, deadline=None)
@given(devices=st.lists(JSON_DEVICE, max_size=4))
def test_json_fast_path_reads_as_the_strict_reader(devices: list[dict[str, Any]]) -> None:
    text = json.dumps(devices)
    assert outcome(parse_register, text) == outcome(parse_register_strictly, text)


@settings(max_examples=300, deadline=None)
@given(devices=st.lists(COLON_DEVICE, max_size=4))
def test_colon_devices_read_once_read_as_the_strict_reader(devices: list[str]) -> None:
    text = ":".join(devices) + ":"
    # Twice: the second reads what follows each UUID from what the first kept.
    assert outcome(parse_register, text) == outcome(parse_register_strictly, text)
    assert outcome(parse_register, text) == outcome(parse_register_strictly, text)


def test_a_kept_colon_device_takes_each_devices_own_uuid() -> None:
    tail = f"10,81920,100,{A100},1,false,3,mig"
    first, second = parse_register(f"GPU-x,{tail}:GPU-y,{tail}:")
    assert (first.uuid, second.uuid) == ("GPU-x", "GPU-y")
    assert first == Device("GPU-x", 3, 10, 81920, 100, A100, 1, "mig", False)
    assert second == Device("GPU-y", 3, 10, 81920, 100, A100, 1, "mig", False)


def test_kept_colon_tails_are_bounded_in_count_and_length() -> None:
    long_type = "T" * (hami._COLON_TAIL_LONGEST + 1)
    assert parse_register(f"GPU-a,10,1,100,{long_type},0,true:")[0].type == long_type
    assert not any(long_type in tail for tail in hami._colon_tails)
    for memory in range(hami._COLON_TAILS_KEPT + 10):
        assert parse_register(f"GPU-a,10,{memory},100,T,0,true:")[0].memory_mib == memory
    assert len(hami._colon_tails) <= hami._COLON_TAILS_KEPT


# ---- a node's GPUs ---------------------------------------------------------------------


def registered(
    devices: list[Device], allocatable_gpus: int | None = None, **annotations: str
) -> dict[str, object]:
    manifest = node_manifest("n1", devices=devices)
    if allocatable_gpus is not None:
        manifest["status"]["allocatable"]["nvidia.com/gpu"] = str(allocatable_gpus)
    manifest["metadata"]["annotations"].update(annotations)
    return manifest


T4 = Device("GPU-t4", 0, 10, 15360, 100, "NVIDIA-Tesla T4")
REGISTER = "hami.io/node-nvidia-register"


@pytest.mark.parametrize(
    ("manifest", "uuids", "sharing", "problem"),
    [
        pytest.param(registered([T4]), ["GPU-t4"], True, "", id="one HAMi GPU"),
        pytest.param(
            registered([T4, Device("GPU-sick", 1, 10, 15360, 100, "NVIDIA-Tesla T4", health=False)]),
            ["GPU-t4"],
            True,
            "GPU-sick: unhealthy",
            id="unhealthy GPUs are skipped",
        ),
        pytest.param(
            registered([T4, Device("GPU-mig", 1, 7, 40960, 100, "NVIDIA A100", mode="mig")]),
            ["GPU-t4"],
            True,
            "GPU-mig: mode 'mig' (rl-scheduler places on hami-core and mps devices)",
            id="MIG devices are skipped",
        ),
        pytest.param(
            registered([Device("GPU-mps", 0, 10, 15360, 100, "NVIDIA-Tesla T4", mode="mps")]),
            ["GPU-mps"],
            True,
            "",
            id="MPS is hami-core to HAMi v2.10",
        ),
        pytest.param(
            registered([Device("GPU-x2", 0, 10, 15360, 200, "NVIDIA-Tesla T4")]),
            [],
            True,
            "GPU-x2: devcore 200 (core scaling is not supported)",
            id="scaled cores are skipped",
        ),
        pytest.param(
            registered([T4], **{"hami.io/device-cordon": "GPU-t4"}),
            [],
            True,
            "GPU-t4: cordoned (hami.io/device-cordon)",
            id="cordoned GPUs are skipped",
        ),
        pytest.param(
            registered([T4], allocatable_gpus=0),
            [],
            False,
            "hami.io/node-nvidia-register without allocatable nvidia.com/gpu: the device plugin is down",
            id="no allocatable nvidia.com/gpu: HAMi's devices are gone",
        ),
        pytest.param(
            {**node_manifest("n1", gpus=1), "metadata": {"name": "n1", "annotations": {REGISTER: "[{"}}},
            [],
            False,
            "metadata.annotations.hami.io/node-nvidia-register: not JSON",
            id="a register annotation that does not parse",
        ),
        pytest.param(node_manifest("n1", gpus=2, hami=False), ["", ""], False, "", id="no HAMi: whole GPUs"),
        pytest.param(
            node_manifest("n1", gpus=16, hami=False),
            [],
            False,
            "16 whole GPUs; at most 8 are supported",
            id="too many whole GPUs",
        ),
    ],
)
def test_a_nodes_gpus_come_from_hamis_register_annotation(
    manifest: dict[str, object], uuids: list[str], sharing: bool, problem: str
) -> None:
    node = node_from_manifest(manifest)
    assert [g.uuid for g in node.gpus] == uuids
    assert node.gpu_sharing is sharing
    assert node.gpu_problem.startswith(problem)


def test_a_hami_gpu_keeps_its_memory_slots_and_type() -> None:
    [gpu] = node_from_manifest(registered([T4])).gpus
    assert (gpu.memory_mib, gpu.slots, gpu.type, gpu.mode) == (15360, 10, "NVIDIA-Tesla T4", "hami-core")


# ---- the decision ---------------------------------------------------------------------


def test_allocation_annotation_has_one_entry_per_container() -> None:
    # initContainers=[init(no gpu)]; containers=[c0(no gpu), c1(gpu:1), c2(gpu:2, 3000 MiB, 30%), c3(25%)]
    containers = [
        [],
        [],
        [ContainerDevice("GPU-3", 81920, 0)],
        [ContainerDevice("GPU-2", 3000, 30), ContainerDevice("GPU-1", 3000, 30)],
        [ContainerDevice("GPU-0", 20480, 0)],
    ]
    text = ";;GPU-3,NVIDIA,81920,0:;GPU-2,NVIDIA,3000,30:GPU-1,NVIDIA,3000,30:;GPU-0,NVIDIA,20480,0:;"
    assert encode_pod_devices(containers) == text  # HAMi v2.10's EncodePodSingleDevice
    decoded = decode_pod_devices(text)
    assert [list(c) for c in decoded[:5]] == containers
    assert decoded[5:] == ((),)  # the trailing ";" leaves an empty entry, as in HAMi


@pytest.mark.parametrize(
    ("text", "init", "done", "usage"),
    [
        pytest.param("GPU-0,NVIDIA,1000,10:;", 0, False, {"GPU-0": DeviceUsage(1000, 10, 1)}, id="one"),
        pytest.param(
            "GPU-0,NVIDIA,1000,10:;GPU-0,NVIDIA,500,5:GPU-1,NVIDIA,500,5:;",
            0,
            False,
            {"GPU-0": DeviceUsage(1500, 15, 2), "GPU-1": DeviceUsage(500, 5, 1)},
            id="app containers add up",
        ),
        pytest.param(
            "GPU-0,NVIDIA,9000,90:;GPU-0,NVIDIA,2000,5:;GPU-0,NVIDIA,2000,5:;",
            1,
            False,
            {"GPU-0": DeviceUsage(9000, 90, 2)},
            id="an init container's peak against the app sum",
        ),
        pytest.param(
            "GPU-0,NVIDIA,9000,90:;GPU-1,NVIDIA,2000,5:;",
            1,
            True,
            {"GPU-1": DeviceUsage(2000, 5, 1)},
            id="init containers done",
        ),
        pytest.param(";;", 0, False, {}, id="no device"),
    ],
)
def test_pod_usage_as_hami_counts_it(text: str, init: int, done: bool, usage: dict[str, DeviceUsage]) -> None:
    assert pod_device_usage(decode_pod_devices(text), init, done) == usage


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("GPU-0,NVIDIA,1000:;", "expected UUID,type,memory,cores", id="three fields"),
        pytest.param("GPU-0,NVIDIA,lots,30:;", "memory: 'lots' is not a 32-bit integer", id="not a number"),
        pytest.param("GPU-0,NVIDIA,1000," + "9" * 5000 + ":;", "cores: .* not a 32-bit", id="5000 digits"),
        pytest.param("GPU-0,NVIDIA,4294967296,30:;", "memory: 4294967296 is out of range", id="past int32"),
    ],
)
def test_bad_device_entries_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem):
        decode_pod_devices(text)


# ---- the node lock --------------------------------------------------------------------

MOMENT = dt.datetime(2026, 8, 21, 6, 20, 39, 123456, tzinfo=dt.UTC)


def test_lock_value_is_hamis() -> None:
    assert lock_value(MOMENT, "default", "gpu-pod-1") == "2026-08-21T06:20:39Z,default,gpu-pod-1"


@pytest.mark.parametrize(
    ("value", "lock"),
    [
        pytest.param(
            "2026-08-21T06:20:39Z,default,p", NodeLock(MOMENT.replace(microsecond=0), "default", "p")
        ),
        pytest.param("2026-08-21T08:20:39+02:00,ns,p", NodeLock(MOMENT.replace(microsecond=0), "ns", "p")),
        pytest.param(
            "2026-08-21T06:20:39Z", NodeLock(MOMENT.replace(microsecond=0)), id="legacy: a time alone"
        ),
    ],
)
def test_locks_parse(value: str, lock: NodeLock) -> None:
    assert parse_lock(value) == lock


@pytest.mark.parametrize("value", ["yesterday,ns,p", "2026-08-21T06:20:39Z,ns", "2026-08-21T06:20:39,ns,p"])
def test_unreadable_locks_are_refused(value: str) -> None:
    with pytest.raises(ProtocolError):
        parse_lock(value)


def test_a_lock_expires_after_five_minutes() -> None:
    lock = parse_lock("2026-08-21T06:20:39Z,ns,p")
    assert not lock.expired(lock.taken_at + dt.timedelta(minutes=5))
    assert lock.expired(lock.taken_at + dt.timedelta(minutes=5, seconds=1))

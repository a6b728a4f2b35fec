"""Node listings in Kubernetes' protobuf encoding: the fields the scheduler reads, in
the shape JSON gives them, whatever else a node carries; clear errors for what is not
a listing. The messages are written here with a small encoder of the wire format, so
that a test can also write what no API server would (the cluster tier compares with a
real API server's JSON: tests/e2e/test_node_listing.py)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.k8s.client.node_protobuf import MAGIC, ProtobufError, decode_node_list


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, payload: bytes | str | int, wire: int = 2) -> bytes:
    tag = varint(number << 3 | wire)
    if wire == 0:
        assert isinstance(payload, int)
        return tag + varint(payload)
    if wire == 1:
        return tag + bytes(8)
    if wire == 5:
        return tag + bytes(4)
    data = payload.encode() if isinstance(payload, str) else payload
    assert isinstance(data, bytes)
    return tag + varint(len(data)) + data


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return field(number, field(1, key) + field(2, value))


def node(
    name: str,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    unschedulable: bool = False,
) -> bytes:
    fields_v1 = field(1, b'{"f:metadata":{"f:labels":{}}}' * 10)  # FieldsV1's raw JSON
    managed = field(17, field(1, "kubelet") + field(7, fields_v1))  # managedFields: skipped
    meta = field(1, name) + field(5, f"uid-{name}") + field(6, "42") + field(7, 3, wire=0) + managed
    meta += b"".join(entry(11, k, v) for k, v in (labels or {}).items())
    meta += b"".join(entry(12, k, v) for k, v in (annotations or {}).items())
    spec = field(1, "10.0.0.0/24") + field(4, int(unschedulable), wire=0)
    for taint in taints or []:
        body = field(1, taint["key"]) + field(2, taint.get("value", "")) + field(3, taint["effect"])
        if "seconds" in taint:
            body += field(4, field(1, taint["seconds"], wire=0) + field(2, 5, wire=0))
        spec += field(5, body)
    quantities = (allocatable or {}).items()
    status = b"".join(entry(1, k, field(1, v)) for k, v in quantities)  # capacity: not read
    status += b"".join(entry(2, k, field(1, v)) for k, v in quantities)
    status += field(4, field(1, "Ready") + field(2, "True")) + field(3, "Running")
    status += field(99, 0, wire=1) + field(98, 0, wire=5)  # fields this reader does not know
    return field(1, meta) + field(2, spec) + field(3, status)


def listing(*nodes: bytes, version: str = "1234", encoding: str = "") -> bytes:
    node_list = field(1, field(2, version) + field(3, "")) + b"".join(field(2, n) for n in nodes)
    unknown = field(1, field(1, "v1") + field(2, "NodeList")) + field(2, node_list)
    unknown += field(3, encoding) + field(4, "application/vnd.kubernetes.protobuf")
    return MAGIC + unknown


LONG = "x" * 200  # lengths of two bytes: the general path, not the one-byte one
REGISTER = {"hami.io/node-nvidia-register": "GPU-1,10,16384,100,NVIDIA-T4,0,true:"}
CASES = [
    pytest.param(
        node("plain", labels={"kubernetes.io/hostname": "plain"}, allocatable={"cpu": "4", "pods": "110"}),
        {
            "metadata": {
                "name": "plain",
                "uid": "uid-plain",
                "resourceVersion": "42",
                "labels": {"kubernetes.io/hostname": "plain"},
            },
            "spec": {},
            "status": {"allocatable": {"cpu": "4", "pods": "110"}},
        },
        id="labels and allocatable; managed fields, conditions and unknown fields skipped",
    ),
    pytest.param(
        node(
            "gpu",
            labels={"a": LONG},
            annotations={**REGISTER, LONG: "v"},
            allocatable={"nvidia.com/gpu": "10", "memory": "256Gi", LONG: "1"},
        ),
        {
            "metadata": {
                "name": "gpu",
                "uid": "uid-gpu",
                "resourceVersion": "42",
                "labels": {"a": LONG},
                "annotations": {**REGISTER, LONG: "v"},
            },
            "spec": {},
            "status": {"allocatable": {"nvidia.com/gpu": "10", "memory": "256Gi", LONG: "1"}},
        },
        id="annotations; keys and values longer than 127 bytes",
    ),
    pytest.param(
        node(
            "tainted",
            taints=[
                {"key": "gpu", "value": "true", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "seconds": 1767225600},
            ],
            unschedulable=True,
        ),
        {
            "metadata": {"name": "tainted", "uid": "uid-tainted", "resourceVersion": "42"},
            "spec": {
                "unschedulable": True,
                "taints": [
                    {"key": "gpu", "value": "true", "effect": "NoSchedule"},
                    {
                        "key": "node.kubernetes.io/unreachable",
                        "effect": "NoExecute",
                        "timeAdded": "2026-01-01T00:00:00Z",
                    },
                ],
            },
            "status": {},
        },
        id="taints (an empty value and a false unschedulable omitted, as JSON omits them)",
    ),
]


@pytest.mark.parametrize(("encoded", "expected"), CASES)
def test_a_node_reads_as_its_json_would(encoded: bytes, expected: dict[str, Any]) -> None:
    items, version = decode_node_list(listing(encoded))
    assert version == "1234"
    assert items == [expected]


def test_every_item_in_order_and_an_empty_list() -> None:
    items, _ = decode_node_list(listing(*(node(f"n{i}") for i in range(300))))
    assert [item["metadata"]["name"] for item in items] == [f"n{i}" for i in range(300)]
    assert decode_node_list(listing(version="7")) == ([], "7")


CORRUPT = "not a protobuf NodeList"
TIME_TOO_LATE = {"key": "k", "effect": "NoExecute", "seconds": 300_000_000_000}  # year 11476


@pytest.mark.parametrize(
    ("body", "says"),
    [
        pytest.param(b'{"kind": "NodeList"}', "no k8s protobuf prefix", id="JSON"),
        pytest.param(listing(node("a"))[:-40], CORRUPT, id="truncated"),
        pytest.param(listing(node("a"), encoding="gzip"), "content encoding 'gzip'", id="encoded"),
        pytest.param(MAGIC + field(2, field(2, b"\x0f")), CORRUPT, id="an unknown wire type"),
        pytest.param(MAGIC + b"\x12" + b"\xff" * 11, CORRUPT, id="an endless varint"),
        pytest.param(MAGIC + field(2, b"\x12\x05abc"), CORRUPT, id="a length past the end"),
        pytest.param(MAGIC + field(2, field(2, field(1, b"\x0a\x85"))), CORRUPT, id="a truncated varint"),
        pytest.param(listing(node("late", taints=[TIME_TOO_LATE])), "out of range", id="a year past 9999"),
    ],
)
def test_what_is_not_a_listing_is_a_clear_error(body: bytes, says: str) -> None:
    with pytest.raises(ProtobufError, match=says):
        decode_node_list(body)


def test_a_field_with_another_wire_type_reads_as_absent() -> None:
    """Protobuf keeps such a field as an unknown one; the API server never writes it."""
    meta = field(1, 7, wire=0) + field(5, "uid-a") + field(11, field(1, "k") + field(2, "v"))
    body = listing(field(1, meta) + field(2, field(4, b"")) + field(3, b""))
    assert decode_node_list(body) == (
        [{"metadata": {"uid": "uid-a", "labels": {"k": "v"}}, "spec": {}, "status": {}}],
        "1234",
    )


def test_bytes_that_are_not_utf8_read_as_the_api_servers_json_gives_them() -> None:
    """Go's JSON encoder replaces them with U+FFFD; a listing with one is not refused."""
    body = listing(node("zzzz"), node("ok")).replace(b"zzzz", b"z\xffz\xfe")
    items, _ = decode_node_list(body)
    assert [item["metadata"]["name"] for item in items] == ["z\ufffdz\ufffd", "ok"]

"""Node listings in Kubernetes' protobuf encoding, read into the fields the scheduler
uses.

A 5,000-node listing is 39 MB of JSON, which the API server took 1.0-1.8 s to encode
(more under load) before its first byte; as protobuf it is 15 MB, streamed from
0.14 s and done in 0.6-0.7 s. kube-scheduler asks for protobuf too. The bytes are
parsed by the ``protobuf`` package's generated classes (``scheduler.k8s.client.generated``,
from Kubernetes' own ``generated.proto``), and only what the scheduler reads of a node
(``SchedulerCache.on_node``, ``NodeLocks.observe``) is turned into the shape JSON
would give, omitting what JSON omits, so that a node from a listing and the same node
from a watch event compare equal:

    metadata: name, uid, resourceVersion (each when set), labels, annotations
    spec:     unschedulable (when true), taints (key, value when set, effect, timeAdded)
    status:   allocatable (the quantities' strings)

Why the generated classes and not a reader of our own: on a 5,000-node
listing of KWOK nodes (13.1 MB; labels, annotations, a taint, capacity, conditions,
addresses, node info, managed fields), ``PYTHONPATH=.:benchmarks python
benchmarks/node_protobuf_decode.py --rounds 21`` gave CPU medians of 161-214 ms for
the hand-written wire-format reader this module held before and 127-179 ms for the
generated classes (protobuf 7.36, upb) with the conversion below, 15-21% less in each
of five runs (2-core dev machine, busy with other benchmarks; parsing is 12 ms of it,
the rest reading fields out of upb). The price: importing the generated modules with
the protobuf runtime takes 35-42 ms once, at start-up (10 ms of it the modules
themselves), and the parsed listing is held while it is converted (peak growth 55 MB
against 22 MB). A malformed message (truncated, a length past its end, a bad wire
type) is refused by upb's parser; a known field with an unexpected wire type is kept
as an unknown field, as protobuf specifies, and so reads as absent.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from google.protobuf.message import DecodeError

from scheduler.k8s.client.generated import core_v1_pb2, runtime_pb2

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
# What a nodes listing asks for: protobuf, JSON from a server that has no protobuf.
ACCEPT = f"{CONTENT_TYPE}, application/json"
MAGIC = b"k8s\x00"

Listing = tuple[list[dict[str, Any]], str]


class ProtobufError(ValueError):
    """Bytes that are not a protobuf node listing."""


def decode_node_list(body: bytes) -> Listing:
    """A protobuf ``NodeList`` answer's nodes (as ``metadata``/``spec``/``status``
    dicts) and its resourceVersion."""
    if not body.startswith(MAGIC):
        raise ProtobufError("no k8s protobuf prefix")
    try:
        nodes = core_v1_pb2.NodeList.FromString(_raw(body))
        return [_node(node) for node in nodes.items], _text(nodes.metadata.resourceVersion)
    except ProtobufError:
        raise
    except DecodeError as error:
        raise ProtobufError(f"not a protobuf NodeList: {error}") from None
    except (OverflowError, ValueError) as error:  # a timeAdded past the years JSON writes
        raise ProtobufError(f"a node's field out of range: {error}") from None


def _raw(body: bytes) -> bytes:
    """The NodeList's bytes in the runtime.Unknown around them; the Unknown, which holds
    a copy of them (13 MB for 5,000 nodes), is freed before the NodeList is parsed."""
    unknown = runtime_pb2.Unknown.FromString(memoryview(body)[len(MAGIC) :])
    if unknown.contentEncoding:
        raise ProtobufError(f"content encoding {_text(unknown.contentEncoding)!r}")
    raw: bytes = unknown.raw
    return raw


def _text(value: str | bytes) -> str:
    """A string field as the API server's JSON gives it. A protobuf write can store bytes
    that are not UTF-8 (proto2 does not check), which upb hands back as bytes; Go's JSON
    encoder replaces them with U+FFFD, and so does this."""
    return value if isinstance(value, str) else value.decode(errors="replace")


def _strings(pairs: Iterable[tuple[str | bytes, str | bytes]]) -> dict[str, str]:
    return {_text(key): _text(value) for key, value in pairs}


def _node(node: core_v1_pb2.Node) -> dict[str, Any]:
    meta = node.metadata
    metadata: dict[str, Any] = {}
    # JSON omits empty strings and maps (omitempty), and so does this.
    if meta.name:
        metadata["name"] = _text(meta.name)
    if meta.uid:
        metadata["uid"] = _text(meta.uid)
    if meta.resourceVersion:
        metadata["resourceVersion"] = _text(meta.resourceVersion)
    if meta.labels:
        metadata["labels"] = _strings(meta.labels.items())
    if meta.annotations:
        metadata["annotations"] = _strings(meta.annotations.items())
    spec: dict[str, Any] = {}
    if node.spec.unschedulable:
        spec["unschedulable"] = True
    if node.spec.taints:
        spec["taints"] = [_taint(taint) for taint in node.spec.taints]
    status: dict[str, Any] = {}
    if allocatable := node.status.allocatable:
        status["allocatable"] = {_text(key): _text(amount.string) for key, amount in allocatable.items()}
    return {"metadata": metadata, "spec": spec, "status": status}


def _taint(taint: core_v1_pb2.Taint) -> dict[str, str]:
    """key, value (JSON omits it empty), effect, timeAdded (when set)."""
    out = {"key": _text(taint.key), "effect": _text(taint.effect)}
    if taint.value:
        out["value"] = _text(taint.value)
    if taint.HasField("timeAdded"):
        out["timeAdded"] = _time(taint.timeAdded.seconds)
    return out


def _time(seconds: int) -> str:
    """meta/v1 Time as its JSON: RFC 3339 in UTC, to the second."""
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

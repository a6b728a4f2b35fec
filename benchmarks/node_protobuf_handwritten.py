"""The hand-written reader of protobuf node listings that
``scheduler.k8s.client.node_protobuf`` held until the generated classes replaced it
(issue #33), kept here only as the baseline of ``node_protobuf_decode.py``: it walks
the wire format itself and reads only the fields the scheduler uses, skipping the rest
by its length. Not imported by the scheduler.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

MAGIC = b"k8s\x00"

Listing = tuple[list[dict[str, Any]], str]


class ProtobufError(ValueError):
    """Bytes that are not a protobuf node listing as this module reads it."""


def decode_node_list(body: bytes) -> Listing:
    """A protobuf ``NodeList`` answer's nodes (as ``metadata``/``spec``/``status``
    dicts) and its resourceVersion."""
    if not body.startswith(MAGIC):
        raise ProtobufError("no k8s protobuf prefix")
    try:
        raw, encoding = _unknown(body, len(MAGIC), len(body))
        if encoding:
            raise ProtobufError(f"content encoding {encoding!r}")
        return _node_list(body, raw[0], raw[1])
    except IndexError:
        raise ProtobufError("truncated") from None


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint longer than 10 bytes")


def _skip(buf: bytes, pos: int, wire: int, end: int) -> int:
    """The position after a field of ``wire`` type whose tag ended at ``pos``."""
    if wire == 0:
        _, pos = _varint(buf, pos)
    elif wire == 2:
        size, pos = _varint(buf, pos)
        pos += size
    elif wire == 1:
        pos += 8
    elif wire == 5:
        pos += 4
    else:
        raise ProtobufError(f"wire type {wire}")
    if pos > end:
        raise ProtobufError("a field runs past its message")
    return pos


def _bounds(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """A length-delimited field's (start, end), its length read at ``pos``."""
    size, start = _varint(buf, pos)
    stop = start + size
    if stop > end:
        raise ProtobufError("a field runs past its message")
    return start, stop


def _text(buf: bytes, start: int, stop: int) -> str:
    """A string field as the API server's JSON gives it: Go's encoder replaces bytes that
    are not UTF-8 with U+FFFD (a protobuf write can store them), and so does this."""
    return buf[start:stop].decode(errors="replace")


def _unknown(buf: bytes, pos: int, end: int) -> tuple[tuple[int, int], str]:
    """runtime.Unknown: raw (2) and contentEncoding (3)."""
    raw = (pos, pos)
    encoding = ""
    while pos < end:
        tag, pos = _varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 2 and field in (2, 3):
            start, stop = _bounds(buf, pos, end)
            if field == 2:
                raw = (start, stop)
            else:
                encoding = _text(buf, start, stop)
            pos = stop
        else:
            pos = _skip(buf, pos, wire, end)
    return raw, encoding


def _node_list(buf: bytes, pos: int, end: int) -> Listing:
    """NodeList: metadata (1, ListMeta: resourceVersion 2), items (2)."""
    items: list[dict[str, Any]] = []
    version = ""
    while pos < end:
        tag, pos = _varint(buf, pos)
        if tag == 0x12:  # items
            start, pos = _bounds(buf, pos, end)
            items.append(_node(buf, start, pos))
        elif tag == 0x0A:  # metadata
            start, pos = _bounds(buf, pos, end)
            version = _fields_of(buf, start, pos, {2: "resourceVersion"}).get("resourceVersion", "")
        else:
            pos = _skip(buf, pos, tag & 7, end)
    return items, version


def _node(buf: bytes, pos: int, end: int) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    status: dict[str, Any] = {}
    while pos < end:
        tag, pos = _varint(buf, pos)
        if tag & 7 != 2:
            pos = _skip(buf, pos, tag & 7, end)
            continue
        start, pos = _bounds(buf, pos, end)
        if tag == 0x0A:
            metadata = _object_meta(buf, start, pos)
        elif tag == 0x12:
            spec = _node_spec(buf, start, pos)
        elif tag == 0x1A:
            status = _node_status(buf, start, pos)
    return {"metadata": metadata, "spec": spec, "status": status}


OBJECT_META_STRINGS = {1: "name", 5: "uid", 6: "resourceVersion"}


def _object_meta(buf: bytes, pos: int, end: int) -> dict[str, Any]:
    """ObjectMeta: name (1), uid (5), resourceVersion (6), labels (11), annotations (12)."""
    meta: dict[str, Any] = {}
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    while pos < end:
        # Tags and lengths below 128 are one byte: read inline (the hot loop).
        tag = buf[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = _varint(buf, pos - 1)
        if tag & 7 != 2:
            pos = _skip(buf, pos, tag & 7, end)
            continue
        size = buf[pos]
        start = pos + 1
        if size >= 0x80:
            size, start = _varint(buf, pos)
        pos = start + size
        if pos > end:
            raise ProtobufError("a field runs past its message")
        field = tag >> 3
        if field == 11:
            _map_entry(buf, start, pos, labels)
        elif field == 12:
            _map_entry(buf, start, pos, annotations)
        elif field in OBJECT_META_STRINGS:
            meta[OBJECT_META_STRINGS[field]] = _text(buf, start, pos)
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return meta


def _map_entry(buf: bytes, pos: int, end: int, into: dict[str, str]) -> None:
    """A map<string, string> entry: key (1), value (2)."""
    # The usual entry, read at once: 0A len key 12 len value, each length one byte.
    if buf[pos] == 0x0A and buf[pos + 1] < 0x80:
        key_end = pos + 2 + buf[pos + 1]
        if (
            key_end + 2 <= end
            and buf[key_end] == 0x12
            and buf[key_end + 1] < 0x80
            and key_end + 2 + buf[key_end + 1] == end
        ):
            into[_text(buf, pos + 2, key_end)] = _text(buf, key_end + 2, end)
            return
    key = value = ""
    while pos < end:
        tag, pos = _varint(buf, pos)
        if tag in (0x0A, 0x12):
            start, stop = _bounds(buf, pos, end)
            if tag == 0x0A:
                key = _text(buf, start, stop)
            else:
                value = _text(buf, start, stop)
            pos = stop
        else:
            pos = _skip(buf, pos, tag & 7, end)
    into[key] = value


def _node_spec(buf: bytes, pos: int, end: int) -> dict[str, Any]:
    """NodeSpec: unschedulable (4), taints (5); JSON omits a false unschedulable."""
    spec: dict[str, Any] = {}
    taints: list[dict[str, str]] = []
    while pos < end:
        tag, pos = _varint(buf, pos)
        if tag == 0x20:  # unschedulable, varint
            value, pos = _varint(buf, pos)
            if value:
                spec["unschedulable"] = True
        elif tag == 0x2A:
            start, pos = _bounds(buf, pos, end)
            taints.append(_taint(buf, start, pos))
        else:
            pos = _skip(buf, pos, tag & 7, end)
    if taints:
        spec["taints"] = taints
    return spec


def _taint(buf: bytes, pos: int, end: int) -> dict[str, str]:
    """Taint: key (1), value (2; JSON omits it empty), effect (3), timeAdded (4)."""
    taint = {"key": "", "effect": ""}
    while pos < end:
        tag, pos = _varint(buf, pos)
        if tag & 7 != 2:
            pos = _skip(buf, pos, tag & 7, end)
            continue
        start, pos = _bounds(buf, pos, end)
        if tag == 0x0A:
            taint["key"] = _text(buf, start, pos)
        elif tag == 0x12:
            value = _text(buf, start, pos)
            if value:
                taint["value"] = value
        elif tag == 0x1A:
            taint["effect"] = _text(buf, start, pos)
        elif tag == 0x22:
            taint["timeAdded"] = _time(buf, start, pos)
    return taint


def _time(buf: bytes, pos: int, end: int) -> str:
    """meta/v1 Time (seconds 1, nanos 2) as its JSON: RFC 3339 in UTC, to the second."""
    seconds = 0
    while pos < end:
        tag, pos = _varint(buf, pos)
        if tag == 0x08:
            seconds, pos = _varint(buf, pos)
            if seconds >= 1 << 63:  # int64, two's complement
                seconds -= 1 << 64
        else:
            pos = _skip(buf, pos, tag & 7, end)
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _node_status(buf: bytes, pos: int, end: int) -> dict[str, Any]:
    """NodeStatus: allocatable (2), map<string, Quantity>."""
    allocatable: dict[str, str] = {}
    while pos < end:
        tag = buf[pos]  # tags and lengths below 128 are one byte: read inline
        pos += 1
        if tag >= 0x80:
            tag, pos = _varint(buf, pos - 1)
        if tag & 7 != 2:
            pos = _skip(buf, pos, tag & 7, end)
            continue
        size = buf[pos]
        start = pos + 1
        if size >= 0x80:
            size, start = _varint(buf, pos)
        pos = start + size
        if pos > end:
            raise ProtobufError("a field runs past its message")
        if tag == 0x12 and not _short_quantity_entry(buf, start, pos, allocatable):
            _quantity_entry(buf, start, pos, allocatable)
    return {"allocatable": allocatable} if allocatable else {}


def _short_quantity_entry(buf: bytes, start: int, stop: int, into: dict[str, str]) -> bool:
    """The usual entry, read at once: ``0A len key 12 len (0A len string)``, each
    length one byte. False for anything else (``_quantity_entry`` reads it)."""
    if buf[start] != 0x0A or buf[start + 1] >= 0x80:
        return False
    key_end = start + 2 + buf[start + 1]
    if key_end + 4 > stop or buf[key_end] != 0x12 or buf[key_end + 2] != 0x0A:
        return False
    size = buf[key_end + 3]
    if size >= 0x80 or key_end + 4 + size != stop or buf[key_end + 1] != size + 2:
        return False
    into[_text(buf, start + 2, key_end)] = _text(buf, key_end + 4, stop)
    return True


def _quantity_entry(buf: bytes, pos: int, end: int, into: dict[str, str]) -> None:
    """A map<string, Quantity> entry: key (1), value (2: Quantity, its string 1)."""
    key = quantity = ""
    while pos < end:
        tag, pos = _varint(buf, pos)
        if tag == 0x0A:
            start, pos = _bounds(buf, pos, end)
            key = _text(buf, start, pos)
        elif tag == 0x12:
            start, pos = _bounds(buf, pos, end)
            quantity = _fields_of(buf, start, pos, {1: "string"}).get("string", "")
        else:
            pos = _skip(buf, pos, tag & 7, end)
    into[key] = quantity


def _fields_of(buf: bytes, pos: int, end: int, strings: dict[int, str]) -> dict[str, str]:
    """The string fields ``strings`` names (number -> name) of a message."""
    found: dict[str, str] = {}
    while pos < end:
        tag, pos = _varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 2 and field in strings:
            start, pos = _bounds(buf, pos, end)
            found[strings[field]] = _text(buf, start, pos)
        else:
            pos = _skip(buf, pos, wire, end)
    return found

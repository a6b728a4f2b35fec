"""HAMi's NVIDIA device protocol (HAMi v2.10.0), the parts a second scheduler reads
and writes. Pure functions over annotation texts; the API calls live in ``scheduler.k8s``.

- The node: HAMi's device plugin registers each GPU in ``hami.io/node-nvidia-register``,
  a JSON array (v2.8+) or the legacy colon form (``uuid,count,devmem,devcore,type,
  numa,health[,index,mode]:`` per GPU); ``parse_register`` reads both. A node holds
  HAMi devices iff this parses to at least one device and its allocatable
  ``nvidia.com/gpu`` (GPUs x split count) is above 0 (the v2.8+ liveness rule).
- The decision: ``hami.io/vgpu-devices-to-allocate`` and ``-allocated`` hold, per
  container (init containers first, then the others), the devices it gets:
  ``UUID,NVIDIA,<memory MiB>,<cores %>:`` per device, ``;`` after each container
  (``encode_pod_devices``). The device plugin allocates from the first; every
  scheduler counts a GPU's usage from the second (``pod_device_usage``, with HAMi's
  rules for init containers).
- The node lock ``hami.io/mutex.lock``: ``<RFC 3339 time>,<namespace>,<pod>``; the
  device plugin finds the pod to allocate through it and releases it after Allocate.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Node annotations.
REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
NODE_LOCK_ANNOTATION = "hami.io/mutex.lock"
DEVICE_CORDON_ANNOTATION = "hami.io/device-cordon"
# Pod annotations (and the label ``hami.io/vgpu-node``, which HAMi's vGPU monitor lists pods by).
VGPU_NODE = "hami.io/vgpu-node"
VGPU_TIME = "hami.io/vgpu-time"
DEVICES_TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
DEVICES_ALLOCATED = "hami.io/vgpu-devices-allocated"
BIND_PHASE = "hami.io/bind-phase"
BIND_TIME = "hami.io/bind-time"
BIND_PHASE_ALLOCATING = "allocating"
BIND_PHASE_SUCCESS = "success"
BIND_PHASE_FAILED = "failed"
# What the device plugin's Allocate looks for in a device entry, and the type the
# scheduler writes into it (the model is not written: ``Type`` is the vendor).
DEVICE_VENDOR = "NVIDIA"
# HAMi's NodeLockTimeout: an older lock may be taken over.
NODE_LOCK_TIMEOUT = dt.timedelta(minutes=5)
# Operating modes of a device (``mode``). HAMi v2.10 has no MPS path of its own: its
# scheduler and device plugin treat ``mps`` like ``hami-core``.
MODE_HAMI_CORE = "hami-core"
MODE_MPS = "mps"
MODE_MIG = "mig"
SHARED_MODES = (MODE_HAMI_CORE, MODE_MPS)


class ProtocolError(ValueError):
    """An annotation that does not parse as the protocol writes it."""


@dataclass(frozen=True, slots=True)
class Device:
    """One GPU as the device plugin registers it (``DeviceInfo``)."""

    uuid: str
    index: int = 0
    count: int = 10  # vGPU slots: the split count
    memory_mib: int = 0  # devmem, after the plugin's memory scaling
    cores: int = 100  # devcore: 100 x the core scaling
    type: str = ""  # e.g. "NVIDIA A100-SXM4-80GB"
    numa: int = 0
    mode: str = MODE_HAMI_CORE
    health: bool = True


# HAMi keeps these numbers in Go int32 fields (DeviceInfo, ContainerDevice): a value
# out of that range does not decode there, and here it never reaches the int64 arrays.
_INT32 = range(-(2**31), 2**31)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(f"{what}: expected an integer, got {value!r}")
    if value not in _INT32:
        raise ProtocolError(f"{what}: {value} is out of range for a 32-bit integer")
    return value


def _int_text(text: str, what: str) -> int:
    """``strconv.ParseInt(text, 10, 32)``: ASCII digits with an optional sign, int32."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 10:
        raise ProtocolError(f"{what}: {text[:20]!r} is not a 32-bit integer")
    return _int(int(text), what)


# What a register annotation costs to read is paid for every node at each start, and
# again whenever a node's annotation changes: 5,000 nodes of 8 GPUs are 40,000 devices.
# Devices as the plugin writes them take a fast path; anything else takes the strict
# readers below, which give the same result or name the field that is wrong
# (tests/unit/test_hami.py checks that the two agree). CPU to read 5,000 nodes of 8
# devices, each node's UUIDs its own (``benchmarks/hami_register_read.py``, medians of
# 7, two runs on the busy 2-core dev machine): JSON 0.25-0.29 s through the strict
# reader, 0.17-0.19 s with the fast path; colon form 0.24-0.29 s, 0.07-0.08 s reading
# each tail once.
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_JUST_INTS = {int}


def _plain_json_device(raw: Any) -> Device | None:
    """A JSON device whose every field has its exact type and range, else None."""
    if type(raw) is not dict:
        return None
    get = raw.get
    uuid, kind, mode, health = get("id", ""), get("type", ""), get("mode", ""), get("health", False)
    if type(uuid) is not str or type(kind) is not str or type(mode) is not str or type(health) is not bool:
        return None
    ints = (get("index", 0), get("count", 0), get("devmem", 0), get("devcore", 0), get("numa", 0))
    if {*map(type, ints)} != _JUST_INTS or min(ints) < _INT32_MIN or max(ints) > _INT32_MAX:
        return None
    index, count, memory, cores, numa = ints
    return Device(uuid, index, count, memory, cores, kind, numa, mode or MODE_HAMI_CORE, health)


def _json_device(i: int, raw: Any) -> Device:
    if not isinstance(raw, Mapping):
        raise ProtocolError(f"device {i}: expected an object, got {type(raw).__name__}")
    # Every field is ``omitempty``: a missing key is zero, empty or false.
    mode = raw.get("mode") or MODE_HAMI_CORE
    for key in ("id", "type", "mode"):
        if not isinstance(raw.get(key, ""), str):
            raise ProtocolError(f"device {i}: {key}: expected a string, got {raw[key]!r}")
    health = raw.get("health", False)
    if not isinstance(health, bool):
        raise ProtocolError(f"device {i}: health: expected true or false, got {health!r}")
    return Device(
        uuid=str(raw.get("id", "")),
        index=_int(raw.get("index", 0), f"device {i}: index"),
        count=_int(raw.get("count", 0), f"device {i}: count"),
        memory_mib=_int(raw.get("devmem", 0), f"device {i}: devmem"),
        cores=_int(raw.get("devcore", 0), f"device {i}: devcore"),
        type=str(raw.get("type", "")),
        numa=_int(raw.get("numa", 0), f"device {i}: numa"),
        mode=str(mode),
        health=health,
    )


_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


# A colon device's fields after its UUID, once read: devices of one model and node
# type repeat them (about 50 characters). Bounded in count and in length, so that odd
# annotations (up to 256 KiB each) cannot grow it past about 256 KiB.
_COLON_TAILS_KEPT = 1024
_COLON_TAIL_LONGEST = 256
_colon_tails: dict[str, Device] = {}


def _colon_device(i: int, text: str) -> Device:
    """A colon device; what follows its UUID is read once (``_strict_colon_device``)."""
    uuid, _, tail = text.partition(",")
    known = _colon_tails.get(tail)
    if known is None:
        device = _strict_colon_device(i, text)
        if len(_colon_tails) < _COLON_TAILS_KEPT and len(tail) <= _COLON_TAIL_LONGEST:
            _colon_tails[tail] = device
        return device
    return Device(
        uuid,
        known.index,
        known.count,
        known.memory_mib,
        known.cores,
        known.type,
        known.numa,
        known.mode,
        known.health,
    )


def _strict_colon_device(i: int, text: str) -> Device:
    """``DecodeNodeDevices``: 7 fields (<= v2.4) or 9 (v2.5 - v2.7)."""
    items = text.split(",")
    if len(items) not in (7, 9):
        raise ProtocolError(f"device {i}: {len(items)} fields in {text!r}; expected 7 or 9")
    count, memory, cores, numa = (
        _int_text(items[k], f"device {i}: {name}")
        for k, name in ((1, "count"), (2, "devmem"), (3, "devcore"), (5, "numa"))
    )
    index = _int_text(items[7], f"device {i}: index") if len(items) == 9 else 0
    if items[6] not in _GO_TRUE + _GO_FALSE:
        raise ProtocolError(f"device {i}: health {items[6]!r} is not a boolean")
    if index < 0:
        raise ProtocolError(f"device {i}: index must not be negative, got {index}")
    return Device(
        uuid=items[0],
        index=index,
        count=count,
        memory_mib=memory,
        cores=cores,
        type=items[4],
        numa=numa,
        mode=(items[8] if len(items) == 9 else "") or MODE_HAMI_CORE,
        health=items[6] in _GO_TRUE,
    )


def parse_register(text: str) -> list[Device]:
    """The devices of a ``hami.io/node-nvidia-register`` value, JSON or colon form."""
    return _read_register(text, _json_device_fast, _colon_device)


def parse_register_strictly(text: str) -> list[Device]:
    """``parse_register`` through the strict readers alone, with nothing kept: what the
    fast paths are checked against (tests, ``benchmarks/hami_register_read.py``)."""
    return _read_register(text, _json_device, _strict_colon_device)


def _json_device_fast(i: int, raw: Any) -> Device:
    return _plain_json_device(raw) or _json_device(i, raw)


def _read_register(
    text: str, json_device: Callable[[int, Any], Device], colon_device: Callable[[int, str], Device]
) -> list[Device]:
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        try:
            raw = json.loads(stripped)
        except json.JSONDecodeError as error:
            raise ProtocolError(f"not JSON: {error}") from None
        if not isinstance(raw, list):
            raise ProtocolError("expected a JSON array of devices")
        return [json_device(i, item) for i, item in enumerate(raw)]
    if ":" not in stripped:
        raise ProtocolError("neither a JSON array nor devices ending with ':'")
    return [colon_device(i, part) for i, part in enumerate(p for p in stripped.split(":") if p)]


def format_register(devices: Iterable[Device]) -> str:
    """The JSON the v2.8+ device plugin writes (``MarshalNodeDevices``: zero values left out)."""
    out = []
    for device in devices:
        item: dict[str, Any] = {
            "id": device.uuid,
            "index": device.index,
            "count": device.count,
            "devmem": device.memory_mib,
            "devcore": device.cores,
            "type": device.type,
            "numa": device.numa,
            "mode": device.mode,
            "health": device.health,
        }
        out.append({k: v for k, v in item.items() if v})
    return json.dumps(out, separators=(",", ":"))


# ---- the decision -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerDevice:
    """One device of one container: ``UUID,Type,Usedmem,Usedcores``."""

    uuid: str
    memory_mib: int
    cores: int
    type: str = DEVICE_VENDOR


PodDevices = tuple[tuple[ContainerDevice, ...], ...]


def encode_pod_devices(containers: Sequence[Sequence[ContainerDevice]]) -> str:
    """``EncodePodSingleDevice``: one entry per container (init containers first), each
    device followed by ``:``, each container by ``;``; a container without a GPU is an
    empty entry, so the entries line up with the containers."""
    return "".join(
        "".join(f"{d.uuid},{d.type},{d.memory_mib},{d.cores}:" for d in devices) + ";"
        for devices in containers
    )


def decode_pod_devices(text: str) -> PodDevices:
    """``DecodePodDevices``: split on ``;`` then ``:``; pieces without a ``,`` are
    skipped; a device needs at least four fields."""
    containers: list[tuple[ContainerDevice, ...]] = []
    for entry in text.split(";"):
        devices: list[ContainerDevice] = []
        for piece in entry.split(":"):
            if "," not in piece:
                continue
            fields = piece.split(",")
            if len(fields) < 4:
                raise ProtocolError(f"device {piece!r}: expected UUID,type,memory,cores")
            what = f"device {piece[:80]!r}"
            memory, cores = _int_text(fields[2], f"{what}: memory"), _int_text(fields[3], f"{what}: cores")
            devices.append(ContainerDevice(fields[0], memory, cores, fields[1]))
        containers.append(tuple(devices))
    return tuple(containers)


@dataclass(frozen=True, slots=True)
class DeviceUsage:
    """What a pod holds of one GPU: memory (MiB), cores (%) and vGPU slots."""

    memory_mib: int
    cores: int
    slots: int


def pod_device_usage(
    devices: PodDevices, init_containers: int, init_done: bool = False
) -> dict[str, DeviceUsage]:
    """Per GPU UUID, what the pod holds, as HAMi's scheduler counts it
    (``CollapseInitContainerUsage``): init containers run one at a time, so a GPU is
    charged the larger of their peak and the app containers' sum (memory and cores
    each); init containers take one slot, each app container one more. Once every init
    container has exited 0 (``init_done``), only the app containers count
    (``AppContainersOnlyDeviceUsage``)."""
    peak: dict[str, list[int]] = {}
    total: dict[str, list[int]] = {}
    for position, container in enumerate(devices):
        is_init = position < init_containers
        if is_init and init_done:
            continue
        for device in container:
            if is_init:
                memory, cores, _ = peak.setdefault(device.uuid, [0, 0, 1])
                peak[device.uuid] = [max(memory, device.memory_mib), max(cores, device.cores), 1]
            else:
                entry = total.setdefault(device.uuid, [0, 0, 0])
                entry[0] += device.memory_mib
                entry[1] += device.cores
                entry[2] += 1
    usage: dict[str, DeviceUsage] = {}
    for uuid in sorted(set(peak) | set(total)):
        init_use, app_use = peak.get(uuid, [0, 0, 0]), total.get(uuid, [0, 0, 0])
        usage[uuid] = DeviceUsage(
            max(init_use[0], app_use[0]), max(init_use[1], app_use[1]), max(init_use[2], app_use[2], 1)
        )
    return usage


# ---- the node lock ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeLock:
    """A ``hami.io/mutex.lock`` value; ``namespace``/``pod`` empty in the legacy form
    (a bare timestamp)."""

    taken_at: dt.datetime
    namespace: str = ""
    pod: str = ""

    def held_by(self, namespace: str, pod: str) -> bool:
        return (self.namespace, self.pod) == (namespace, pod)

    def expired(self, now: dt.datetime) -> bool:
        return now - self.taken_at > NODE_LOCK_TIMEOUT


def lock_value(now: dt.datetime, namespace: str, pod: str) -> str:
    """``GenerateNodeLockKeyByPod``: ``2026-08-21T06:20:39Z,default,gpu-pod-1``."""
    stamp = now.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return f"{stamp},{namespace},{pod}"


def parse_lock(value: str) -> NodeLock:
    """``ParseNodeLock``: three comma-separated parts, or a bare RFC 3339 time."""
    parts = value.split(",")
    if len(parts) not in (1, 3):
        raise ProtocolError(f"lock {value!r}: expected <time>,<namespace>,<pod>")
    try:
        taken_at = dt.datetime.fromisoformat(parts[0].strip().replace("Z", "+00:00"))
    except ValueError:
        raise ProtocolError(f"lock {value!r}: {parts[0]!r} is not an RFC 3339 time") from None
    if taken_at.tzinfo is None:
        raise ProtocolError(f"lock {value!r}: {parts[0]!r} has no time zone")
    if len(parts) == 1:
        return NodeLock(taken_at)
    return NodeLock(taken_at, parts[1], parts[2])


def unix_seconds(now: dt.datetime) -> str:
    """``hami.io/vgpu-time`` and ``hami.io/bind-time``: Unix seconds."""
    return str(int(now.timestamp()))

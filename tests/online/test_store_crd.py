"""Policy versions as custom resources: the files' encoding and verification, the
refusal of a bad object (naming the object and the field), and the store and the
scheduler's mirror over an in-memory stand-in of the API (the real API server's
behaviour is tests/e2e/test_policy_versions.py's)."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.k8s.scheduling.policy_versions import PolicyVersionMirror
from scheduler.online.store import PolicyStore
from scheduler.online.store_crd import (
    CHANNELS,
    MAX_ENCODED_BYTES,
    VERSIONS,
    CrdPolicyStore,
    GateSummary,
    PolicyVersionError,
    VersionExistsError,
    decode_version,
    encode_version,
    gate_summary,
    materialise,
    pointed_version,
    read_folder,
)

NAMESPACE = "rl"
MANIFEST = json.dumps({"training": {"stage": "online", "gate": {"promote": True, "candidate": 0.61234567}}})
FILES = {
    "manifest.json": MANIFEST.encode(),
    "model.safetensors": bytes(range(256)) * 4,
    "lifetimes/model.json": b'{"weights": []}',
}


class InMemoryObjects:
    """The API calls ``CrdPolicyStore`` makes, on dicts in memory."""

    def __init__(self) -> None:
        self.namespace = NAMESPACE
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.gets = 0

    def get(self, plural: str, name: str) -> dict[str, Any] | None:
        self.gets += 1
        found = self.objects.get((plural, name))
        return copy.deepcopy(found) if found else None

    def list(self, plural: str, label_selector: str) -> list[dict[str, Any]]:
        key, _, value = label_selector.partition("=")
        return [
            copy.deepcopy(body)
            for (kind, _name), body in self.objects.items()
            if kind == plural and body["metadata"].get("labels", {}).get(key) == value
        ]

    def create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if (plural, name) in self.objects:
            raise VersionExistsError(name)
        stored = copy.deepcopy(body)
        stored["metadata"].update(namespace=NAMESPACE, resourceVersion="1", uid=f"uid-{len(self.objects)}")
        self.objects[(plural, name)] = stored
        return copy.deepcopy(stored)

    def merge_patch(
        self, plural: str, name: str, patch: dict[str, Any], subresource: str = ""
    ) -> dict[str, Any] | None:
        body = self.objects.get((plural, name))
        if body is None:
            return None
        assert set(patch) == ({"status"} if subresource == "status" else {"spec"})
        for key, value in patch.items():
            body.setdefault(key, {}).update(value)
        return copy.deepcopy(body)


def encoded(files: dict[str, bytes] = FILES, version: str = "v000001") -> dict[str, Any]:
    body = encode_version(files, "rl-scheduler", version)
    body["metadata"].update(namespace=NAMESPACE, resourceVersion="7")
    return body


def test_a_version_round_trips_and_carries_its_summary() -> None:
    body = encoded()
    assert body["metadata"] == {
        "name": "rl-scheduler-v000001",
        "labels": {"rl-scheduler.io/channel": "rl-scheduler"},
        "namespace": NAMESPACE,
        "resourceVersion": "7",
    }
    spec = body["spec"]
    assert [f["path"] for f in spec["files"]] == sorted(FILES)
    assert spec["files"][0]["sha256"] == hashlib.sha256(FILES[spec["files"][0]["path"]]).hexdigest()
    assert (spec["stage"], spec["verdict"], spec["score"]) == ("online", "promoted", 0.6123)
    assert spec["size"] == sum(len(f["data"]) for f in spec["files"])
    assert decode_version(body, "v000001") == FILES


@pytest.mark.parametrize(
    ("manifest", "summary"),
    [
        ({}, GateSummary()),
        ({"training": {"stage": "shipped"}}, GateSummary("shipped")),
        (
            {"training": {"stage": "online", "gate": {"promote": False, "candidate": 1}}},
            GateSummary("online", "rejected", 1.0),
        ),
        (
            {"training": {"gate": {"promote": "yes", "candidate": True}}},
            GateSummary(),
        ),  # wrong types: nothing shown
        ({"training": "free text"}, GateSummary()),
    ],
)
def test_gate_summary(manifest: dict[str, Any], summary: GateSummary) -> None:
    assert gate_summary(manifest) == summary


def _with_file(field: str, value: Any, index: int = 0) -> dict[str, Any]:
    body = encoded()
    body["spec"]["files"][index][field] = value
    return body


def _without(path: str) -> dict[str, Any]:
    body = encoded()
    body["spec"]["files"] = [f for f in body["spec"]["files"] if f["path"] != path]
    return body


def _spec(**fields: Any) -> dict[str, Any]:
    body = encoded()
    body["spec"].update(fields)
    return body


# Each bad object is refused with its name and the field at fault; index 0 is
# lifetimes/model.json, 1 manifest.json, 2 model.safetensors (sorted paths).
REFUSED = [
    ("bad base64", _with_file("data", "not*base64!", 2), "spec.files[2].data", "not base64"),
    ("digest mismatch", _with_file("sha256", "0" * 64, 2), "spec.files[2].sha256", "the object says 0000"),
    ("digest not hex", _with_file("sha256", "XYZ", 1), "spec.files[1].sha256", "64 lowercase hex"),
    ("data not a string", _with_file("data", 12, 1), "spec.files[1].data", "expected base64"),
    ("missing manifest", _without("manifest.json"), "spec.files", "no manifest.json"),
    ("escaping path", _with_file("path", "../etc/passwd", 0), "spec.files[0].path", "not a relative path"),
    ("absolute path", _with_file("path", "/etc/passwd", 0), "spec.files[0].path", "not a relative path"),
    (
        "twice the same path",
        _with_file("path", "manifest.json", 0),
        "spec.files[1].path",
        "manifest.json twice",
    ),
    ("no files", _spec(files=[]), "spec.files", "expected a list"),
    ("files not a list", _spec(files={"a": 1}), "spec.files", "expected a list"),
    ("bad version", _spec(version="latest"), "spec.version", "not of the form v000001"),
    (
        "another version than the channel's",
        encoded(version="v000002"),
        "spec.version",
        "the channel names v000001",
    ),
    ("entry not a mapping", _spec(files=["manifest.json"]), "spec.files[0]", "expected {path, sha256, data}"),
]


@pytest.mark.parametrize(("case", "body", "field", "problem"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_bad_version_object_is_refused_naming_it_and_the_field(
    case: str, body: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(PolicyVersionError) as error:
        decode_version(body, "v000001")
    assert error.value.obj == f"PolicyVersion rl/{body['metadata']['name']}", case
    assert error.value.field == field, case
    assert problem in error.value.problem, case


def test_a_version_over_the_size_limit_is_refused_when_encoded() -> None:
    big = {"manifest.json": b"{}", "model.safetensors": b"\0" * (MAX_ENCODED_BYTES * 3 // 4 + 3)}
    with pytest.raises(PolicyVersionError) as error:
        encode_version(big, "rl-scheduler", "v000001", "PolicyVersion rl")
    assert error.value.field == "spec.files"
    assert f"over the {MAX_ENCODED_BYTES}" in error.value.problem
    # one under the limit goes
    fits = {"manifest.json": b"{}", "model.safetensors": b"\0" * (MAX_ENCODED_BYTES * 3 // 4 - 3)}
    assert encode_version(fits, "rl-scheduler", "v000001")["spec"]["size"] <= MAX_ENCODED_BYTES


@pytest.mark.parametrize(
    ("channel", "expected"),
    [
        (None, None),
        ({"spec": {}}, None),
        ({"spec": {"currentVersion": "v000003"}}, "v000003"),
    ],
)
def test_the_channel_points_at_a_version(channel: dict[str, Any] | None, expected: str | None) -> None:
    assert pointed_version(channel) == expected


def test_a_channel_naming_no_version_is_refused() -> None:
    channel = {"metadata": {"namespace": NAMESPACE, "name": "rl-scheduler"}, "spec": {"currentVersion": "v1"}}
    with pytest.raises(PolicyVersionError) as error:
        pointed_version(channel)
    assert (error.value.obj, error.value.field) == ("PolicyChannel rl/rl-scheduler", "spec.currentVersion")


def write_version(tag: str) -> Any:
    def write(folder: Path) -> None:
        (folder / "manifest.json").write_text(json.dumps({"tag": tag}))
        (folder / "model.safetensors").write_bytes(tag.encode() * 100)

    return write


def test_the_store_publishes_points_and_rolls_back_through_the_api(tmp_path: Path) -> None:
    objects = InMemoryObjects()
    store = CrdPolicyStore(objects, "rl-scheduler", tmp_path / "cache")
    assert store.current() is None
    assert store.current_path() is None
    assert store.publish(write_version("a")) == "v000001"
    assert store.publish(write_version("b")) == "v000002"
    assert store.versions() == ["v000001", "v000002"]
    assert objects.objects[(CHANNELS, "rl-scheduler")]["spec"] == {"currentVersion": "v000002"}
    current = store.current_path()
    assert current == tmp_path / "cache" / "v000002"
    assert json.loads((current / "manifest.json").read_text()) == {"tag": "b"}
    assert store.rollback() == "v000001"
    assert objects.objects[(CHANNELS, "rl-scheduler")]["spec"] == {"currentVersion": "v000001"}
    with pytest.raises(PolicyVersionError) as error:
        store.point_current("v000009")
    assert (error.value.obj, error.value.field) == ("PolicyChannel rl/rl-scheduler", "spec.currentVersion")


def test_a_publisher_that_loses_the_race_for_a_number_takes_the_next(tmp_path: Path) -> None:
    objects = InMemoryObjects()
    store = CrdPolicyStore(objects, "rl-scheduler", tmp_path / "cache")
    real_list = objects.list
    calls = {"n": 0}

    def stale_list(plural: str, label_selector: str) -> list[dict[str, Any]]:
        calls["n"] += 1
        if calls["n"] == 1:  # another writer created v000001 after this listing
            objects.create(VERSIONS, encode_version(FILES, "rl-scheduler", "v000001"))
            return []
        return real_list(plural, label_selector)

    objects.list = stale_list  # type: ignore[method-assign]
    assert store.publish(write_version("a")) == "v000002"


def test_read_folder_takes_nested_files(tmp_path: Path) -> None:
    (tmp_path / "lifetimes").mkdir()
    (tmp_path / "lifetimes" / "model.json").write_bytes(b"x")
    (tmp_path / "manifest.json").write_bytes(b"{}")
    assert read_folder(tmp_path) == {"lifetimes/model.json": b"x", "manifest.json": b"{}"}


def test_the_mirror_follows_the_channel_and_keeps_its_version_when_a_new_one_is_bad(tmp_path: Path) -> None:
    objects = InMemoryObjects()
    publisher = CrdPolicyStore(objects, "rl-scheduler", tmp_path / "trainer-cache")
    publisher.publish(write_version("a"))
    refused: list[str] = []
    mirror = PolicyVersionMirror(objects, "rl-scheduler", tmp_path / "cache", refused.append)
    mirror.sync()
    folder = PolicyStore(tmp_path / "cache")
    assert folder.current() == "v000001"
    assert json.loads((tmp_path / "cache" / "v000001" / "manifest.json").read_text()) == {"tag": "a"}
    # a second version whose weights do not match their digest: refused, v000001 stays
    bad = encode_version({"manifest.json": b"{}", "model.safetensors": b"good"}, "rl-scheduler", "v000002")
    bad["spec"]["files"][1]["data"] = base64.b64encode(b"evil").decode()
    objects.create(VERSIONS, bad)
    objects.merge_patch(CHANNELS, "rl-scheduler", {"spec": {"currentVersion": "v000002"}})
    mirror.on_version("ADDED", objects.get(VERSIONS, "rl-scheduler-v000002") or {})
    mirror.on_channel(objects.get(CHANNELS, "rl-scheduler"))
    assert folder.current() == "v000001"
    assert refused == ["corrupt"]  # counted once, however many events repeat it
    assert not (tmp_path / "cache" / "v000002").exists()
    # a channel naming a version that does not exist: refused, v000001 stays
    objects.merge_patch(CHANNELS, "rl-scheduler", {"spec": {"currentVersion": "v000007"}})
    mirror.on_channel(objects.get(CHANNELS, "rl-scheduler"))
    assert folder.current() == "v000001"
    assert refused == ["corrupt", "missing"]
    # rolled forward to a good version: followed, and status.current marks it
    publisher.publish(write_version("c"))
    for (kind, _name), body in list(objects.objects.items()):
        if kind == VERSIONS:
            mirror.on_version("MODIFIED", copy.deepcopy(body))
    mirror.on_channel(objects.get(CHANNELS, "rl-scheduler"))
    assert folder.current() == "v000003"
    marks = {
        name: body.get("status", {}).get("current")
        for (kind, name), body in objects.objects.items()
        if kind == VERSIONS
    }
    assert marks == {
        "rl-scheduler-v000001": False,
        "rl-scheduler-v000002": False,
        "rl-scheduler-v000003": True,
    }


def test_a_cached_version_is_reused_and_one_recreated_with_other_files_is_written_again(
    tmp_path: Path,
) -> None:
    cache = PolicyStore(tmp_path / "cache")
    first = materialise(cache, encoded(), "v000001")
    assert read_folder(first) == FILES
    marker = first / "manifest.json"
    mtime = marker.stat().st_mtime_ns
    assert materialise(cache, encoded(), "v000001") == first
    assert marker.stat().st_mtime_ns == mtime  # the same files: not written again
    other = {**FILES, "model.safetensors": b"other weights"}
    assert read_folder(materialise(cache, encoded(other), "v000001")) == other
    # what the cache holds is a version folder and its digests, no leftovers
    assert sorted(p.name for p in cache.root.iterdir()) == [".v000001.sha256.json", "v000001"]


def test_the_mirror_rewrites_its_copy_when_the_current_version_is_created_again_with_other_files(
    tmp_path: Path,
) -> None:
    objects = InMemoryObjects()
    CrdPolicyStore(objects, "rl-scheduler", tmp_path / "trainer-cache").publish(write_version("a"))
    mirror = PolicyVersionMirror(objects, "rl-scheduler", tmp_path / "cache")
    mirror.sync()
    first = objects.get(VERSIONS, "rl-scheduler-v000001")
    assert first is not None
    mirror.on_version("ADDED", first)  # the watch's first listing: the copy is checked, kept
    manifest = tmp_path / "cache" / "v000001" / "manifest.json"
    assert json.loads(manifest.read_text()) == {"tag": "a"}
    # deleted and created again (a new uid) with other files
    mirror.on_version("DELETED", first)
    del objects.objects[(VERSIONS, "rl-scheduler-v000001")]
    again = objects.create(
        VERSIONS, encode_version({"manifest.json": b'{"tag": "b"}'}, "rl-scheduler", "v000001")
    )
    mirror.on_version("ADDED", again)
    assert json.loads(manifest.read_text()) == {"tag": "b"}
    assert PolicyStore(tmp_path / "cache").current() == "v000001"

"""``reads.parse_json`` gives what ``json.loads`` gives, and refuses what it refuses."""

from __future__ import annotations

import json

import pytest

from scheduler.k8s.client.reads import parse_json

DOCUMENTS = [
    b'{"type": "ADDED", "object": {"metadata": {"name": "p", "labels": {"a": "b"}}}}',
    b'{"items": [], "metadata": {"resourceVersion": "42"}}',
    '{"note": "caf\u00e9 \\u2603 \\ud83d\\ude00"}'.encode(),
    b'{"big": 123456789012345678901234567890, "negative": -7, "float": 0.1, "exp": 1e-7}',
    b'[true, false, null, "", {}, []]',
    b'{"same": 1, "same": 2}',
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_documents_parse_as_json_loads_parses_them(document: bytes) -> None:
    assert parse_json(document) == json.loads(document)


@pytest.mark.parametrize("document", [b"", b"{", b'{"a": }', b"not json", b'{"a": 1} trailing'])
def test_what_is_not_json_raises_value_error(document: bytes) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the watch's decoder catches ValueError
        json.loads(document)
    with pytest.raises(ValueError):  # noqa: PT011
        parse_json(document)

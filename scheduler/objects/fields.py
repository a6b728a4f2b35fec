"""Reading typed fields out of Kubernetes manifests (camelCase dicts), with errors
that name the object and the field path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.errors import PodSpecError, SchedulerInputError
from scheduler.objects.selectors import (
    LabelSelector,
    NodeSelector,
    NodeSelectorTerm,
    Requirement,
)

Manifest = Mapping[str, Any]

_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_NODE_OPERATORS = (*_LABEL_OPERATORS, "Gt", "Lt")


class FieldReader:
    """Reads one object's fields; every error names ``obj`` and the dotted path."""

    def __init__(self, obj: str, error: type[SchedulerInputError] = PodSpecError) -> None:
        self.obj = obj
        self.error = error

    def fail(self, path: str, problem: str) -> SchedulerInputError:
        return self.error(self.obj, path, problem)

    # Each check takes the exact type first: JSON gives dicts, lists and strs, and the
    # ABCs' isinstance was a third of the time to read a 5,000-node listing.
    def mapping(self, value: Any, path: str) -> Manifest:
        if type(value) is dict:
            return value
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected an object, got {type(value).__name__}")
        return value

    def sequence(self, value: Any, path: str) -> Sequence[Any]:
        if type(value) is list:
            return value
        if value is None:
            return ()
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            raise self.fail(path, f"expected a list, got {type(value).__name__}")
        return value

    def string(self, value: Any, path: str, default: str = "") -> str:
        if type(value) is str:
            return value
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {value!r}")
        return value

    def integer(self, value: Any, path: str, default: int = 0) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {value!r}")
        return value

    def string_map(self, value: Any, path: str) -> dict[str, str]:
        raw = self.mapping(value, path)
        if all(type(v) is str for v in raw.values()) and all(type(k) is str for k in raw):
            return dict(raw)  # the usual case, without a field path per entry
        return {str(k): self.string(v, f"{path}.{k}") for k, v in raw.items()}

    def requirement(self, raw: Any, path: str, *, node: bool) -> Requirement:
        item = self.mapping(raw, path)
        operator = self.string(item.get("operator"), f"{path}.operator")
        allowed = _NODE_OPERATORS if node else _LABEL_OPERATORS
        if operator not in allowed:
            raise self.fail(
                f"{path}.operator", f"unknown operator {operator!r} (one of {', '.join(allowed)})"
            )
        key = self.string(item.get("key"), f"{path}.key")
        if not key:
            raise self.fail(f"{path}.key", "must not be empty")
        values = tuple(
            self.string(v, f"{path}.values[{i}]")
            for i, v in enumerate(self.sequence(item.get("values"), f"{path}.values"))
        )
        if operator in ("In", "NotIn") and not values:
            raise self.fail(f"{path}.values", f"must be non-empty for operator {operator}")
        if operator in ("Exists", "DoesNotExist") and values:
            raise self.fail(f"{path}.values", f"must be empty for operator {operator}")
        if operator in ("Gt", "Lt"):
            if len(values) != 1:
                raise self.fail(f"{path}.values", f"must hold exactly one integer for {operator}")
            try:
                int(values[0])
            except ValueError:
                raise self.fail(f"{path}.values[0]", f"{values[0]!r} is not an integer") from None
        return Requirement(key, operator, values)  # type: ignore[arg-type]

    def label_selector(self, raw: Any, path: str) -> LabelSelector | None:
        if raw is None:
            return None
        item = self.mapping(raw, path)
        labels = self.string_map(item.get("matchLabels"), f"{path}.matchLabels")
        expressions = tuple(
            self.requirement(r, f"{path}.matchExpressions[{i}]", node=False)
            for i, r in enumerate(self.sequence(item.get("matchExpressions"), f"{path}.matchExpressions"))
        )
        return LabelSelector(tuple(sorted(labels.items())), expressions)

    def node_selector_term(self, raw: Any, path: str) -> NodeSelectorTerm:
        item = self.mapping(raw, path)
        expressions = tuple(
            self.requirement(r, f"{path}.matchExpressions[{i}]", node=True)
            for i, r in enumerate(self.sequence(item.get("matchExpressions"), f"{path}.matchExpressions"))
        )
        fields = tuple(
            self.requirement(r, f"{path}.matchFields[{i}]", node=True)
            for i, r in enumerate(self.sequence(item.get("matchFields"), f"{path}.matchFields"))
        )
        for i, requirement in enumerate(fields):
            if requirement.key != "metadata.name":
                raise self.fail(
                    f"{path}.matchFields[{i}].key",
                    f"only metadata.name is supported, got {requirement.key!r}",
                )
            if requirement.operator not in ("In", "NotIn") or len(requirement.values) != 1:
                raise self.fail(
                    f"{path}.matchFields[{i}]",
                    "metadata.name takes operator In or NotIn with exactly one value",
                )
        return NodeSelectorTerm(expressions, fields)

    def node_selector(self, raw: Any, path: str) -> NodeSelector | None:
        if raw is None:
            return None
        item = self.mapping(raw, path)
        terms = tuple(
            self.node_selector_term(t, f"{path}.nodeSelectorTerms[{i}]")
            for i, t in enumerate(self.sequence(item.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms"))
        )
        if not terms:
            raise self.fail(f"{path}.nodeSelectorTerms", "must have at least one term")
        return NodeSelector(terms)

"""CEL device selectors, evaluated as kube's DRA CEL environment does
(``k8s.io/dynamic-resource-allocation/cel/compile.go``), with Google's cel-cpp through
``cel-expr-python``.

The variable is ``device``: ``driver``, ``allowMultipleAllocations``,
``attributes[domain][id]`` (int, bool, string, or a semver for version attributes) and
``capacity[domain][id]`` (a quantity). A qualified name without a domain is in the
driver's domain. Looking up a domain the device lacks gives an empty map, as kube's
``newStringInterfaceMapWithDefault`` does, for domains written as a literal
(``device.attributes["gpu.example.com"]``): the others are a "no such key" error.

Each expression is compiled once (``compile_selector`` caches). A result that is not a
bool is refused at compile time where the type is known, at run time otherwise.

Cost: kube's API server refuses a selector whose estimated cost exceeds
``CELSelectorExpressionMaxCost`` (10⁶) and its scheduler stops one that runs past it.
cel-expr-python has no cost limit to set. Here: an expression longer than kube's
``CELSelectorExpressionMaxLength`` (10 KiB) is refused; cel-cpp's comprehension budget
stops an evaluation after 10,000 iterations (measured: 9,999 pass, 10,000 fail); and an
expression whose evaluation took more than ``SLOW_EVALUATION_S`` of CPU time is refused
from then on, so one slow selector costs one evaluation, not one per device and node.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from cel_expr_python import cel  # type: ignore[import-untyped]  # ships .pyi, no py.typed
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings  # type: ignore[import-untyped]

from scheduler.dra import cel_library
from scheduler.dra.objects import Device

# resource/v1/types.go: CELSelectorExpressionMaxLength.
MAX_EXPRESSION_LENGTH: Final = 10 * 1024
# CPU time of one evaluation (the thread's, so a busy machine does not count).
SLOW_EVALUATION_S: Final = 0.5
_LITERAL_DOMAIN = re.compile(r"""\b(?:attributes|capacity)\s*\[\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*\]""")


class SelectorError(Exception):
    """A selector that does not compile, or fails on a device; the text is kube's
    wording after its ``CEL compile error: `` or ``CEL runtime error: `` prefix."""


@dataclass(slots=True)
class CompiledSelector:
    expression: str
    program: Any = None
    error: str = ""
    # Domains named by a literal: a device lacking one sees an empty map there.
    domains: frozenset[str] = frozenset()
    too_slow: bool = field(default=False)


@functools.cache
def _environment() -> cel.Env:
    return cel.NewEnv(
        variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
        functions=cel_library.functions(),
        # kube's DRA environment has cel.bind (ext.Bindings); its base environment
        # (apiserver/pkg/cel/environment/base.go) the string extensions and optional
        # types. The rest of the base environment is not here (docs/dra.md).
        extensions=[ext_bindings.ExtBindings(), ext_strings.ExtStrings(), ext_optional.ExtOptional()],
    )


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str) -> CompiledSelector:
    """The compiled expression, or why it does not compile (``error``)."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        return CompiledSelector(
            expression,
            error=f"compilation failed: expression is {len(expression)} characters, "
            f"longer than the limit of {MAX_EXPRESSION_LENGTH}",
        )
    try:
        program = _environment().compile(expression)
    except RuntimeError as exc:
        return CompiledSelector(expression, error=f"compilation failed: {exc}")
    result = program.return_type()
    if result not in (cel.Type.BOOL, cel.Type.DYN):
        return CompiledSelector(
            expression, error=f"must evaluate to bool or the unknown type, not {result.name().lower()}"
        )
    domains = frozenset(a or b for a, b in _LITERAL_DOMAIN.findall(expression))
    return CompiledSelector(expression, program, domains=domains)


def _attribute_value(device: Device, name: str) -> Any:
    attribute = device.attributes[name]
    if attribute.kind == "version":
        try:
            return cel_library.semver_value(str(attribute.value))
        except ValueError as exc:
            raise SelectorError(f"attribute {name}: parse semantic version: {exc}") from None
    if attribute.kind == "unsupported":
        raise SelectorError(f"attribute {name}: unsupported attribute value")
    return attribute.value


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def device_variable(driver: str, device: Device) -> dict[str, Any]:
    """The ``device`` variable kube builds for one device (``DeviceMatches``)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name in device.attributes:
        domain, ident = _split(name, driver)
        attributes.setdefault(domain, {})[ident] = _attribute_value(device, name)
    capacity: dict[str, dict[str, Any]] = {}
    for name, value in device.capacity.items():
        domain, ident = _split(name, driver)
        capacity.setdefault(domain, {})[ident] = cel_library.quantity_value(value)
    return {
        "driver": driver,
        "allowMultipleAllocations": device.allow_multiple_allocations,
        "attributes": attributes,
        "capacity": capacity,
    }


def _with_domains(variable: Mapping[str, Any], domains: frozenset[str]) -> Mapping[str, Any]:
    missing = [d for d in domains if d not in variable["attributes"] or d not in variable["capacity"]]
    if not missing:
        return variable
    attributes = {**{d: {} for d in domains}, **variable["attributes"]}
    capacity = {**{d: {} for d in domains}, **variable["capacity"]}
    return {**variable, "attributes": attributes, "capacity": capacity}


def matches(selector: CompiledSelector, variable: Mapping[str, Any]) -> bool:
    """Whether the device (its ``device_variable``) is selected; ``SelectorError`` when
    the selector did not compile or fails on this device."""
    if selector.error:
        raise SelectorError(selector.error)
    if selector.too_slow:
        raise SelectorError(f"evaluation took longer than {SLOW_EVALUATION_S} s once and is not retried")
    started = time.thread_time()
    try:
        result = selector.program.eval(data={"device": _with_domains(variable, selector.domains)})
    except RuntimeError as exc:  # cel-cpp raises for a spent iteration budget
        raise SelectorError(str(exc)) from None
    finally:
        if time.thread_time() - started > SLOW_EVALUATION_S:
            selector.too_slow = True
    kind = result.type()
    if kind == cel.Type.ERROR:
        raise SelectorError(str(result.plain_value()))
    if kind != cel.Type.BOOL:
        raise SelectorError(f"CEL result of type {kind.name().lower()} could not be converted to bool")
    return bool(result.plain_value())

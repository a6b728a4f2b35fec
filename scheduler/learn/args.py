"""Command-line options from the training scripts' argument dataclasses: one option
per field (``--learning-rate``), its docstring as help, its default shown. A field typed
``Annotated[int, Range(...)]`` (``cli_values.Count``, ``Seed``, ``Fraction``, ...) is
checked against its range when parsed, a ``Literal`` field against its values, so a bad
value is one line naming the option."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import itertools
import textwrap
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from scheduler.cli_values import Check, Range, number

T = TypeVar("T")


def field_docs(cls: type[Any]) -> dict[str, str]:
    """The string literal under each field of a dataclass (CleanRL's convention)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for previous, node in itertools.pairwise(body):
        if (
            isinstance(previous, ast.AnnAssign)
            and isinstance(previous.target, ast.Name)
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            docs[previous.target.id] = " ".join(node.value.value.split())
    return docs


def _tuple_of(kind: Any) -> Any:
    def parse(text: str) -> tuple[Any, ...]:
        try:
            values = tuple(kind(part.strip()) for part in text.split(",") if part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {kind.__name__} values, A,B,...") from None
        if not values:
            raise argparse.ArgumentTypeError("no value given")
        return values

    parse.__name__ = kind.__name__
    return parse


def _value_type(hint: Any) -> tuple[Any, dict[str, Any]]:
    """The argparse ``type`` (and ``choices``) for a field's type hint."""
    if get_origin(hint) is Annotated:
        base, *extras = get_args(hint)
        check = next((e for e in extras if isinstance(e, Check)), None)
        if check is not None:
            each = check.each and get_origin(base) is tuple
            return (_tuple_of(check.parse) if each else check.parse), {}
        bounds = next((e for e in extras if isinstance(e, Range)), Range())
        return number(base, bounds), {}
    if get_origin(hint) is Literal:
        return str, {"choices": get_args(hint)}
    return (Path if hint in (Path, Path | None) else hint), {}


def add_dataclass_arguments(
    parser: argparse.ArgumentParser, cls: type[Any], skip: tuple[str, ...] = ()
) -> None:
    docs = field_docs(cls)
    hints = get_type_hints(cls, include_extras=True)
    for item in dataclasses.fields(cls):
        if item.name in skip:
            continue
        flag = "--" + item.name.replace("_", "-")
        hint = hints[item.name]
        default = item.default
        help_text = docs.get(item.name, "")
        if hint is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=help_text)
            continue
        kind, choices = _value_type(hint)
        if isinstance(default, tuple):
            shown = ",".join(str(v) for v in default)
            if get_origin(hint) is tuple:
                kind = _tuple_of(get_args(hint)[0])
            parser.add_argument(
                flag, type=kind, default=default, metavar="A,B", help=f"{help_text} [{shown}]"
            )
            continue
        parser.add_argument(flag, type=kind, default=default, help=f"{help_text} [{default}]", **choices)


def from_namespace(cls: type[T], namespace: argparse.Namespace, **overrides: Any) -> T:
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    values = {name: getattr(namespace, name) for name in names if hasattr(namespace, name)}
    values.update(overrides)
    return cls(**values)

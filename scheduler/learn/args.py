"""Command-line options from the training scripts' argument dataclasses: one option
per field (``--learning-rate``), its docstring as help, its default shown."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import itertools
import textwrap
from pathlib import Path
from typing import Any, TypeVar, cast, get_type_hints

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


def _tuple_of(kind: type[Any]) -> Any:
    def parse(text: str) -> tuple[Any, ...]:
        return tuple(kind(part.strip()) for part in text.split(",") if part.strip())

    return parse


def add_dataclass_arguments(
    parser: argparse.ArgumentParser, cls: type[Any], skip: tuple[str, ...] = ()
) -> None:
    docs = field_docs(cls)
    hints = get_type_hints(cls)
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
        if getattr(hint, "__origin__", None) is tuple:
            inner = hint.__args__[0]
            shown = ",".join(str(v) for v in cast(tuple[Any, ...], default))
            parser.add_argument(
                flag, type=_tuple_of(inner), default=default, metavar="A,B", help=f"{help_text} [{shown}]"
            )
            continue
        kind = Path if hint in (Path, Path | None) else hint
        parser.add_argument(flag, type=kind, default=default, help=f"{help_text} [{default}]")


def from_namespace(cls: type[T], namespace: argparse.Namespace, **overrides: Any) -> T:
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    values = {name: getattr(namespace, name) for name in names if hasattr(namespace, name)}
    values.update(overrides)
    return cls(**values)

"""Command-line values checked where they are parsed, so bad input is one line.

``rl-scheduler`` parses with ``CommandLineParser``: an option with a bad value, an
unknown choice or a missing argument ends the command with exit status 2 and one line
on stderr naming the command and the option (``rl-scheduler simulate: error: argument
--seeds: ...``), no usage block and no traceback. The value types here
(``number``, ``parse_seeds``, ``existing_file``, ``named_by``, ``ray_address``) turn text
into values or refuse it with the reason; a ``Range`` or a ``Check`` in a dataclass field's
``Annotated`` type gives the training options the same checks (``learn.args``).
"""

from __future__ import annotations

import argparse
import math
import socket
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, NoReturn, TypeVar

from scheduler.errors import SchedulerInputError

Number = TypeVar("Number", int, float)

# Seeds go to Go's math/rand (an int64 in the FGD simulator), numpy and torch.
MAX_SEED = 2**63 - 1
# How long a Ray address is given to answer before the command refuses it.
RAY_PROBE_S = 5.0
# Seeds in one command: ten thousand replays per policy is far past any study's need,
# and a range such as 0-99999999999 would otherwise fill memory before the first one.
MAX_SEEDS = 10_000


class CommandLineParser(argparse.ArgumentParser):
    """``argparse`` with its errors on one line (the usage is one ``--help`` away); an
    option the chosen subcommand does not have is reported by that subcommand
    (``rl-scheduler train imitation: error: unrecognized arguments: --kind gnn``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen_parser(self, parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


def chosen_parser(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost subcommand's parser that ``parsed`` went through."""
    while True:
        subcommands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        chosen = getattr(parsed, subcommands.dest, None) if subcommands is not None else None
        if subcommands is None or chosen not in subcommands.choices:
            return parser
        parser = subcommands.choices[chosen]


@dataclass(frozen=True)
class Range:
    """Bounds of a number; ``low_open`` leaves ``low`` itself out (``> 0``)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False

    def problem(self, value: float) -> str | None:
        """Why ``value`` is out of range, or None."""
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            relation = "greater than" if self.low_open else "at least"
            return f"must be {relation} {_plain(self.low)}, got {_plain(value)}"
        if self.high is not None and value > self.high:
            return f"must be at most {_plain(self.high)}, got {_plain(value)}"
        return None


def _plain(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def number(kind: type[Number], bounds: Range = Range()) -> Callable[[str], Number]:
    """An argparse ``type``: text to ``kind`` within ``bounds``."""
    noun = "an integer" if kind is int else "a number"

    def parse(text: str) -> Number:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        if not math.isfinite(value):  # NaN passes every comparison; inf is no setting
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        problem = bounds.problem(value)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = kind.__name__
    return parse


# The ranges most options need, as types for dataclass fields and for argparse.
COUNT = Range(low=1)
NON_NEGATIVE = Range(low=0)
POSITIVE = Range(low=0, low_open=True)
FRACTION = Range(low=0, high=1, low_open=True)  # a share of something: (0, 1]
PROBABILITY = Range(low=0, high=1)
SEED = Range(low=0, high=MAX_SEED)
PORT = Range(low=1, high=65535)

Count = Annotated[int, COUNT]
Seed = Annotated[int, SEED]
NonNegativeInt = Annotated[int, NON_NEGATIVE]
Positive = Annotated[float, POSITIVE]
NonNegative = Annotated[float, NON_NEGATIVE]
Fraction = Annotated[float, FRACTION]
Probability = Annotated[float, PROBABILITY]


def _seed(text: str, given: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{given!r}: expected e.g. 42-51 or 42,43") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value}: seeds are non-negative integers")
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"{value}: seeds are at most {MAX_SEED} (Go's int64)")
    return value


def parse_seeds(text: str) -> list[int]:
    """``42-51`` (both ends included), ``42,45,50`` or a mix; seeds are non-negative,
    each given once, at most ``MAX_SEEDS`` of them (a replay per seed and policy)."""
    seeds: list[int] = []
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        low, dash, high = part[1:].partition("-")  # a leading '-' is a sign, not a range
        if not dash:
            seeds.append(_seed(part, part))
            continue
        first, last = _seed(part[0] + low, part), _seed(high, part)
        if first > last:
            raise argparse.ArgumentTypeError(
                f"{part!r} is a reversed range; write the lower seed first ({last}-{first})"
            )
        if len(seeds) + last - first + 1 > MAX_SEEDS:  # before the list is built
            raise argparse.ArgumentTypeError(
                f"{part!r} is {last - first + 1} seeds; at most {MAX_SEEDS} in all"
            )
        seeds.extend(range(first, last + 1))
    if not seeds:
        raise argparse.ArgumentTypeError(f"{text!r}: no seed given")
    if len(seeds) > MAX_SEEDS:
        raise argparse.ArgumentTypeError(f"{len(seeds)} seeds given; at most {MAX_SEEDS}")
    repeated = next((seed for seed, times in Counter(seeds).items() if times > 1), None)
    if repeated is not None:  # a seed replayed twice would weigh double in every mean
        raise argparse.ArgumentTypeError(f"{text!r} names seed {repeated} more than once")
    return seeds


def numbers(kind: type[Number], count: int, bounds: Range = Range()) -> Callable[[str], tuple[Number, ...]]:
    """An argparse ``type``: ``A,B,...``, exactly ``count`` values of ``kind`` within
    ``bounds`` (each value has a meaning by its position)."""
    one = number(kind, bounds)

    def parse(text: str) -> tuple[Number, ...]:
        values = tuple(one(part.strip()) for part in text.split(","))
        if len(values) != count:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {count} values A,B,..., got {len(values)}")
        return values

    parse.__name__ = kind.__name__
    return parse


@dataclass(frozen=True)
class Check:
    """An argparse ``type`` for a dataclass field (``Annotated[Path, Check(existing_dir)]``);
    on a tuple field it checks each element, or with ``each=False`` the whole text
    (``Check(numbers(float, 6), each=False)``)."""

    parse: Callable[[str], object]
    each: bool = True


def named_by(lookup: Callable[[str], object]) -> Callable[[str], str]:
    """An argparse ``type`` that keeps the text (a trace name, a node list name) once
    ``lookup`` finds it; ``lookup``'s ``SchedulerInputError`` becomes the reason."""

    def parse(text: str) -> str:
        try:
            lookup(text)
        except SchedulerInputError as error:
            raise argparse.ArgumentTypeError(f"{text!r}: {error.problem}") from None
        return text

    parse.__name__ = "name"
    return parse


def existing_dir(text: str) -> Path:
    """A path that must name a folder (a checkpoint)."""
    path = Path(text).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such folder")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a folder")
    return path


def existing_file(text: str) -> Path:
    """A path that must name a readable file (a kubeconfig, a settings file)."""
    path = Path(text).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: not a file")
    return path


def ray_address(text: str) -> str:
    """A Ray cluster to run on, as ``ray.init(address=...)`` takes it: ``auto`` (the
    cluster RAY_ADDRESS names, or the one ``ray start`` started on this machine),
    ``HOST:PORT`` or ``ray://HOST:PORT`` (Ray Client). A HOST:PORT where nothing answers
    is refused here, since ``ray.init`` would wait for it for minutes."""
    if text == "auto":
        return text
    host, colon, port = text.removeprefix("ray://").rpartition(":")
    if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: expected auto, HOST:PORT or ray://HOST:PORT")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_PROBE_S):
            pass
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise argparse.ArgumentTypeError(f"{text}: no Ray cluster answers there ({reason})") from None
    return text

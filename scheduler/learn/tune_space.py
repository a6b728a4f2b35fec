"""The search space of ``rl-scheduler tune``: which of ES's hyperparameters vary, and
over what. Built in (``DEFAULT_SPACE``), or read from a YAML or JSON file (``--space``),
one entry per parameter, a range or a list of choices:

    sigma: {low: 0.25, high: 2.0, log: true}
    learning_rate: {low: 0.05, high: 1.0, log: true}
    head_scale: {choices: [0.0, 0.25, 0.5]}
    pairs: {low: 2, high: 6}

The file is the whole space: a parameter it does not name keeps tune's setting
(``--pairs``) or ES's default. A bad file is refused in one line naming the file and
the parameter. No optuna here: the option is checked before the command starts."""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from scheduler.cli_values import COUNT, NON_NEGATIVE, POSITIVE, Range
from scheduler.errors import SchedulerInputError


@dataclass(frozen=True)
class Tunable:
    """A hyperparameter tune may vary: its values' bounds, whether it is an integer."""

    bounds: Range
    integer: bool
    meaning: str


TUNABLE: dict[str, Tunable] = {
    "sigma": Tunable(POSITIVE, False, "ES perturbation size (train es --sigma)"),
    "learning_rate": Tunable(POSITIVE, False, "ES Adam step (train es --learning-rate)"),
    "head_scale": Tunable(NON_NEGATIVE, False, "scale of the head's last layer (train es --head-scale)"),
    "reserve_scale_multiplier": Tunable(
        NON_NEGATIVE, False, "multiplies the six reserve scales (train es --reserve-scale)"
    ),
    "pairs": Tunable(COUNT, True, "antithetic pairs per generation (train es --pairs)"),
}


@dataclass(frozen=True)
class Span:
    """Values from ``low`` to ``high``, sampled uniformly or (``log``) log-uniformly."""

    low: float
    high: float
    log: bool = False


@dataclass(frozen=True)
class Choices:
    values: tuple[float, ...]


Dimension = Span | Choices


@dataclass(frozen=True)
class SearchSpace:
    dimensions: tuple[tuple[str, Dimension], ...]

    def as_dict(self) -> dict[str, Dimension]:
        return dict(self.dimensions)

    def as_json(self) -> dict[str, object]:
        return {
            name: {"choices": list(d.values)}
            if isinstance(d, Choices)
            else {"low": d.low, "high": d.high, "log": d.log}
            for name, d in self.dimensions
        }


# ES's defaults (sigma 1.0, learning rate 0.3, head scale 0.25, the reserve scales as
# given) sit inside each range, not at an end.
DEFAULT_SPACE = SearchSpace(
    (
        ("sigma", Span(0.25, 2.0, log=True)),
        ("learning_rate", Span(0.05, 1.0, log=True)),
        ("head_scale", Span(0.0, 0.5)),
        ("reserve_scale_multiplier", Span(0.25, 4.0, log=True)),
    )
)


def _number(value: object, integer: bool, what: str) -> float:
    """``value`` as a finite number (an integer where ``integer``), or the problem."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what}: expected a number, got {value!r}")
    if integer and not float(value).is_integer():
        raise ValueError(f"{what}: expected an integer, got {value!r}")
    return value


def _dimension(entry: object, tunable: Tunable) -> Dimension:
    if not isinstance(entry, dict):
        raise ValueError(f"expected {{low: A, high: B}} or {{choices: [A, B, ...]}}, got {entry!r}")
    unknown = sorted(set(map(str, entry)) - {"low", "high", "log", "choices"})
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (keys: low, high, log, choices)")
    if "choices" in entry:
        if set(entry) != {"choices"}:
            raise ValueError("choices takes no low, high or log")
        values = entry["choices"]
        if not isinstance(values, list) or not values:
            raise ValueError(f"choices: expected a non-empty list, got {values!r}")
        numbers = tuple(_number(v, tunable.integer, "choices") for v in values)
        for value in numbers:
            _check_bounds(value, tunable, "choices")
        return Choices(numbers)
    if "low" not in entry or "high" not in entry:
        raise ValueError("expected both low and high (or choices)")
    low = _number(entry["low"], tunable.integer, "low")
    high = _number(entry["high"], tunable.integer, "high")
    log = entry.get("log", False)
    if not isinstance(log, bool):
        raise ValueError(f"log: expected true or false, got {log!r}")
    _check_bounds(low, tunable, "low")
    _check_bounds(high, tunable, "high")
    if low >= high:
        raise ValueError(f"low ({low}) must be below high ({high}); a fixed value is choices: [{low}]")
    if log and low <= 0:
        raise ValueError(f"log needs low above 0, got {low}")
    return Span(low, high, log)


def _check_bounds(value: float, tunable: Tunable, what: str) -> None:
    problem = tunable.bounds.problem(value)
    if problem is not None:
        raise ValueError(f"{what}: {problem}")


def parse_space(where: str, content: object) -> SearchSpace:
    """A search space from a file's parsed content; ``where`` names the file."""
    if not isinstance(content, Mapping) or not content:
        raise SchedulerInputError(
            where, "content", "expected a mapping of parameter: {low, high} or {choices}"
        )
    dimensions: list[tuple[str, Dimension]] = []
    for name, entry in content.items():
        tunable = TUNABLE.get(str(name))
        if tunable is None:
            known = ", ".join(sorted(TUNABLE))
            raise SchedulerInputError(where, str(name), f"not a tunable parameter (tunable: {known})")
        try:
            dimensions.append((str(name), _dimension(entry, tunable)))
        except ValueError as error:
            raise SchedulerInputError(where, str(name), str(error)) from None
    return SearchSpace(tuple(dimensions))


def read_space(path: Path) -> SearchSpace:
    """A search space from a YAML or JSON file (JSON is YAML)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not text"
        raise SchedulerInputError(str(path), "file", f"cannot read: {reason}") from None
    try:
        content = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        place = f" (line {mark.line + 1})" if mark is not None else ""
        raise SchedulerInputError(str(path), "content", f"not YAML or JSON{place}") from None
    return parse_space(str(path), content)


def space_file(text: str) -> SearchSpace:
    """An argparse ``type``: the search space in the file ``text`` names."""
    try:
        return read_space(Path(text).expanduser())
    except SchedulerInputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def describe(space: SearchSpace) -> str:
    """``sigma 0.25-2 (log), head_scale {0, 0.25}``, for help and logs."""
    parts = []
    for name, d in space.dimensions:
        if isinstance(d, Choices):
            parts.append(f"{name} {{{', '.join(f'{v:g}' for v in d.values)}}}")
        else:
            parts.append(f"{name} {d.low:g}-{d.high:g}{' (log)' if d.log else ''}")
    return ", ".join(parts)

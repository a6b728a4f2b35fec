"""``rl-scheduler``: one command, a subcommand per job.

The scheduler's image installs the ``operator`` extra only (no torch, no matplotlib).
A command that needs an extra this installation lacks says so in one line and exits 2,
before it starts work (``needed_extras``), or when a module of an extra turns out to
be missing on the way.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler import __version__
from scheduler.cli_values import CommandLineParser
from scheduler.errors import CommandLineError, SchedulerInputError
from scheduler.k8s.process import cli as run_cli


@dataclass(frozen=True)
class Extra:
    """An optional dependency group of the package (``pyproject.toml``)."""

    name: str
    modules: tuple[str, ...]  # the top-level modules it installs
    needs: str  # what a command that lacks it is told


LEARN = Extra(
    "learn",
    ("torch", "torch_geometric", "tensorboard", "gymnasium", "scipy"),
    "the training extras (torch, torch-geometric); this installation has only the scheduler's. "
    "Use the trainer image or pip install 'rl-scheduler[learn]'",
)
PLOTS = Extra("plots", ("matplotlib",), "matplotlib for its plots; pip install 'rl-scheduler[plots]'")
OPERATOR = Extra(
    "operator",
    ("kopf", "kubernetes", "prometheus_client", "safetensors", "cryptography"),
    "the scheduler's extras (kopf, kubernetes, safetensors); pip install 'rl-scheduler[operator]'",
)
STATS = Extra(
    "learn", ("scipy",), "scipy for its paired t-intervals; pip install scipy or 'rl-scheduler[learn]'"
)
RAY = Extra("ray", ("ray",), "ray for --ray-address; pip install 'rl-scheduler[ray]'")
TUNE = Extra("tune", ("optuna",), "optuna for its search; pip install 'rl-scheduler[tune]'")
EXTRAS = (LEARN, PLOTS, OPERATOR, RAY, TUNE)


def needed_extras(args: argparse.Namespace) -> list[Extra]:
    """The extras a parsed command line needs; plots only where a plot is drawn."""
    plots = [] if getattr(args, "synthetic", False) else [PLOTS]
    learned = []
    if args.command in ("simulate", "timeline"):
        from scheduler.sim import cli as sim_cli  # noqa: PLC0415
        from scheduler.sim import timeline_cli  # noqa: PLC0415

        replayed = sim_cli.chosen_policies if args.command == "simulate" else timeline_cli.chosen_policies
        # The learned policy runs in numpy from safetensors (the operator extra).
        learned = [OPERATOR] if sim_cli.LEARNED in replayed(args) else []
    ray = [RAY] if getattr(args, "ray_address", None) is not None else []
    return {
        "run": [OPERATOR],
        "pending": [OPERATOR],
        "trainer": [LEARN, OPERATOR],
        "train": [LEARN, *ray],
        "evaluate": [LEARN, *plots, *ray],
        "simulate": [*plots, *learned, *ray],
        "timeline": [PLOTS, *learned, *([STATS] if len(getattr(args, "seeds", ())) > 1 else [])],
        "tune": [LEARN, TUNE, *ray],
    }.get(args.command, [])


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_extra(args: argparse.Namespace) -> Extra | None:
    """The first extra the command needs that is not installed."""
    for extra in needed_extras(args):
        if not all(_installed(module) for module in extra.modules):
            return extra
    return None


def extra_of(module: str | None) -> Extra | None:
    """The extra that installs ``module`` (``torch.nn`` -> learn), if any."""
    top = (module or "").partition(".")[0]
    return next((extra for extra in EXTRAS if top in extra.modules), None)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """Every command's parser; only ``run``'s when ``argv`` starts with it. The other
    commands' modules import numpy, the profiles and the trace reader (0.5 s), and the
    scheduler's start asks for its first listing only once its command line is read."""
    parser = CommandLineParser(prog="rl-scheduler", description="A learned second scheduler for Kubernetes.")
    parser.add_argument("--version", action="version", version=f"rl-scheduler {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run_cli.register(commands)
    if list(argv[:1]) == ["run"]:
        return parser
    from scheduler.k8s.scheduling import lifetimes_pending  # noqa: PLC0415
    from scheduler.learn import cli as learn_cli  # noqa: PLC0415
    from scheduler.online import cli as online_cli  # noqa: PLC0415
    from scheduler.sim import cli as sim_cli  # noqa: PLC0415
    from scheduler.sim import timeline_cli  # noqa: PLC0415

    online_cli.register(commands)
    sim_cli.register(commands)
    timeline_cli.register(commands)
    learn_cli.register(commands)
    lifetimes_pending.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # A crash in native code (a signal: SIGSEGV, SIGABRT, ...) prints every thread's
    # Python stack to stderr before the process dies, not only the C library's line.
    if not faulthandler.is_enabled():
        faulthandler.enable()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(argv).parse_args(argv)
    except SystemExit as done:  # --help, --version, or one line on a bad option (status 2)
        return done.code if isinstance(done.code, int) else 2
    lacking = missing_extra(args)
    if lacking is not None:
        print(f"rl-scheduler {args.command}: needs {lacking.needs}", file=sys.stderr)
        return 2
    try:
        code: int = args.handler(args)
    except CommandLineError as error:
        print(error.line, file=sys.stderr)
        return 2
    except SchedulerInputError as error:
        print(f"rl-scheduler: error: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        extra = extra_of(error.name)
        if extra is None:
            raise
        print(f"rl-scheduler {args.command}: needs {extra.needs}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())

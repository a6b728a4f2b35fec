"""``rl-scheduler``: one command, a subcommand per job."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from scheduler import __version__
from scheduler.errors import SchedulerInputError
from scheduler.k8s import cli as run_cli
from scheduler.learn import cli as learn_cli
from scheduler.online import cli as online_cli
from scheduler.sim import cli as sim_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rl-scheduler", description="A learned second scheduler for Kubernetes."
    )
    parser.add_argument("--version", action="version", version=f"rl-scheduler {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run_cli.register(commands)
    online_cli.register(commands)
    sim_cli.register(commands)
    learn_cli.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except SchedulerInputError as error:
        print(f"rl-scheduler: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())

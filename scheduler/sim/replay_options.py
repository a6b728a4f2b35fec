"""The options the replaying commands share (``simulate``, ``evaluate``, ``timeline``):
seeds, the node list, local workers or a Ray cluster, the output folder, progress."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from scheduler.cli_values import COUNT, named_by, number, parse_seeds, ray_address
from scheduler.sim.catalog import DEFAULT_NODE_LIST, node_list_path

DEFAULT_SEEDS = "42-51"


def add_seeds(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seeds",
        type=parse_seeds,
        default=parse_seeds(DEFAULT_SEEDS),
        help="seeds (non-negative), e.g. 42-51 or 42,43",
    )


def add_node_list(parser: argparse.ArgumentParser, help: str = "openb node list name or CSV path") -> None:
    parser.add_argument("--nodes", type=named_by(node_list_path), default=DEFAULT_NODE_LIST, help=help)


def add_ray_address(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--ray-address",
        type=ray_address,
        default=None,
        metavar="ADDRESS",
        help=f"run the {what} on the Ray cluster at ADDRESS (auto, HOST:PORT or ray://HOST:PORT; "
        "its nodes need rl-scheduler and the files named here) instead of --workers local processes",
    )


def add_workers(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workers", type=number(int, COUNT), default=os.cpu_count() or 1, help="parallel processes"
    )


def add_outputs(parser: argparse.ArgumentParser, out: str, help: str) -> None:
    """``--out`` (default ``out``) and ``--quiet``."""
    parser.add_argument("--out", type=Path, default=Path(out), help=help)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")

"""CPU of reading HAMi's register annotation on 5,000 nodes of 8 GPUs: ``parse_register``
(a fast path for devices as the plugin writes them, colon devices' fields after the UUID
read once) against the strict readers alone, which is what ``parse_register`` was
before the fast paths. Each node's devices have UUIDs of their own, as on a cluster.

    PYTHONPATH=. .venv/bin/python benchmarks/hami_register_read.py [--nodes 5000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from scheduler.resources import hami


def register_texts(nodes: int) -> dict[str, list[str]]:
    def devices(node: int) -> list[hami.Device]:
        return [
            hami.Device(f"GPU-{node:05d}-{gpu}", gpu, 10, 32768, 100, "NVIDIA-Tesla V100-SXM2-32GB", gpu // 4)
            for gpu in range(8)
        ]

    def colon(node: int) -> str:
        return "".join(
            f"{d.uuid},{d.count},{d.memory_mib},{d.cores},{d.type},{d.numa},true,{d.index},{d.mode}:"
            for d in devices(node)
        )

    return {
        "JSON (v2.8+)": [hami.format_register(devices(node)) for node in range(nodes)],
        "colon (v2.5-v2.7)": [colon(node) for node in range(nodes)],
    }


def cpu_seconds(read: Callable[[str], object], texts: list[str]) -> float:
    started = time.process_time()
    for text in texts:
        read(text)
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    for form, texts in register_texts(args.nodes).items():
        if list(map(hami.parse_register, texts)) != list(map(hami.parse_register_strictly, texts)):
            raise SystemExit(f"{form}: parse_register and the strict readers disagree")
        rounds: dict[str, list[float]] = {"strict": [], "parse_register": []}
        for _ in range(args.rounds):  # interleaved
            rounds["strict"].append(cpu_seconds(hami.parse_register_strictly, texts))
            rounds["parse_register"].append(cpu_seconds(hami.parse_register, texts))
        medians = {name: statistics.median(values) for name, values in rounds.items()}
        print(
            f"{form:18s} {args.nodes} nodes: strict {medians['strict']:.3f} s, "
            f"parse_register {medians['parse_register']:.3f} s "
            f"({medians['parse_register'] / medians['strict']:.2f}x), CPU medians of {args.rounds}"
        )


if __name__ == "__main__":
    main()

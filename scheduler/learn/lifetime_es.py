"""Evolution strategies over the lifetime head of ``gnn-lifetime`` on the one-clock
replay (``scheduler.sim.timeline``): pods arrive and leave on the trace's clock, and a
candidate head is scored by whole replays, so the objective is the replay's own.

Starts from the hand rule ``fgd-reserve-lifetime`` written as a head
(``LifetimeHead.teacher``: the rule's GPUHours or NodeHours term, ``--start``, exact in
these features), then
antithetic ES (Salimans et al. 2017) with rank-shaped fitness. The loss of a head on a
seed, against ``fgd-reserve`` on the same seed (lower is better):

    (W + F) / (W0 + F0) - whole_free_coef * (N - N0) / 100
        - all_nodes_coef * min(M - M0, all_nodes_cap) / 100 + alloc_coef * max(0, A0 - A - 0.05)

W: GPU-hours waited by pods of 4+ GPUs, F: GPU-hours failed, N: time-average whole free
GPU nodes (%; only the nodes of ``whole_free_gpus`` GPUs, when set), M: the same over
every GPU node (a gain past ``all_nodes_cap`` points earns nothing more, a loss costs in
full), A: GPU allocated (%); 0 marks fgd-reserve's. ``--start-head`` starts from a
trained head instead of the hand rule. The head kept is the one with the lowest mean loss over the
training traces, loads and seeds among every head evaluated (the centre of each
generation included). Train on seeds disjoint from the evaluation's (42-51). Run:
``python -m scheduler.learn.lifetime_es --out runs/lifetime-es``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from scheduler.plugins.scores.fgd_reserve_lifetime import Blocked
from scheduler.policy.lifetime_features import LIFETIME_PAIR_FEATURES
from scheduler.policy.lifetime_head import LifetimeHead, load_head, save_head
from scheduler.policy.weights import CheckpointError
from scheduler.sim.timeline import TimelineSpec
from scheduler.sim.timeline_lifetimes import LifetimeSource
from scheduler.sim.timeline_metrics import TimelineMetrics, run_timeline


@dataclass
class Args:
    traces: tuple[str, ...] = ("default",)
    """the openb traces replayed (each seed and load on each)"""
    seeds: tuple[int, ...] = (0, 1, 2)
    """training seeds (each its own cluster); disjoint from the evaluation's 42-51"""
    loads: tuple[float, ...] = (0.8,)
    """offered GPU loads the cluster is sized for"""
    lifetimes: LifetimeSource = "oracle"
    """what the head is told during training"""
    start_blocked: Blocked = "GPUHours"
    """the hand rule's term the head starts from"""
    generations: int = 6
    """ES generations"""
    pairs: int = 3
    """antithetic pairs per generation"""
    sigma: float = 2.0
    """perturbation scale, points per feature unit"""
    lr: float = 2.0
    """step size on the rank-shaped gradient estimate"""
    whole_free_coef: float = 1.0
    """weight of whole free nodes (per 100 points) in the loss"""
    whole_free_gpus: int | None = None
    """count only the nodes of this many GPUs as whole free (None: every GPU node)"""
    all_nodes_coef: float = 0.0
    """weight of whole free nodes over every GPU node (per 100 points), up to the cap"""
    all_nodes_cap: float = 2.0
    """points of whole free nodes over every GPU node past which nothing more is earned"""
    start_head: Path | None = None
    """a trained head to start from (None: the hand rule's ``start_blocked`` term)"""
    alloc_coef: float = 1.0
    """weight of GPU allocation lost past 0.05 points"""
    workers: int = 2
    """processes running replays"""
    seed: int = 0
    """ES noise seed"""
    out: Path = field(default_factory=lambda: Path("runs/lifetime-es"))
    """where the best head and the log go"""


def _metrics(spec: TimelineSpec) -> TimelineMetrics:
    return run_timeline(spec).metrics


def seed_loss(m: TimelineMetrics, base: TimelineMetrics, args: Args) -> float:
    cost = m.multi_gpu_wait_gpu_hours + m.gpu_hours_failed
    base_cost = max(base.multi_gpu_wait_gpu_hours + base.gpu_hours_failed, 1e-9)
    whole = m.whole_free_pct(args.whole_free_gpus) - base.whole_free_pct(args.whole_free_gpus)
    every = min(m.whole_free_pct() - base.whole_free_pct(), args.all_nodes_cap)
    lost = max(0.0, base.gpu_alloc_mean - m.gpu_alloc_mean - 0.05)
    return (
        cost / base_cost
        - args.whole_free_coef * whole / 100.0
        - args.all_nodes_coef * every / 100.0
        + args.alloc_coef * lost
    )


def _specs(args: Args, policy: str, lifetime_args: tuple[tuple[str, str], ...] = ()) -> list[TimelineSpec]:
    lifetimes: LifetimeSource = args.lifetimes if lifetime_args else "hidden"
    return [
        TimelineSpec(trace, policy, seed, load=load, lifetimes=lifetimes, lifetime_args=lifetime_args)
        for trace in args.traces
        for load in args.loads
        for seed in args.seeds
    ]


def train(args: Args) -> dict[str, object]:
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="heads-", dir=args.out))
    with ProcessPoolExecutor(args.workers) as pool:
        base = list(pool.map(_metrics, _specs(args, "fgd-reserve")))

        def losses(heads: list[np.ndarray]) -> list[float]:
            specs: list[TimelineSpec] = []
            for k, w in enumerate(heads):
                folder = save_head(scratch / f"h{k}", LifetimeHead(w.astype(np.float32)))
                specs += _specs(args, "gnn-lifetime", (("head", str(folder)),))
            ms = list(pool.map(_metrics, specs))
            per = len(base)
            return [
                float(
                    np.mean(
                        [
                            seed_loss(m, b, args)
                            for m, b in zip(ms[k * per : (k + 1) * per], base, strict=True)
                        ]
                    )
                )
                for k in range(len(heads))
            ]

        start = (
            load_head(args.start_head)
            if args.start_head
            else LifetimeHead.teacher(blocked=args.start_blocked)
        )
        center = start.weights.astype(np.float64)
        best_w, best_loss = center.copy(), float("inf")
        log: list[dict[str, object]] = []
        for generation in range(args.generations):
            eps = rng.standard_normal((args.pairs, center.size))
            heads = [center] + [center + s * args.sigma * e for e in eps for s in (1, -1)]
            values = losses(heads)
            for w, v in zip(heads, values, strict=True):
                if v < best_loss:
                    best_w, best_loss = w.copy(), v
            plus, minus = np.array(values[1::2]), np.array(values[2::2])
            ranks = np.argsort(np.argsort(np.concatenate([plus, minus]))) / (2 * args.pairs - 1) - 0.5
            grad = ((ranks[: args.pairs] - ranks[args.pairs :])[:, None] * eps).sum(axis=0) / args.pairs
            center = center - args.lr * grad
            entry: dict[str, object] = {
                "generation": generation,
                "center_loss": values[0],
                "best_loss": best_loss,
                "seconds": round(time.perf_counter() - started, 1),
            }
            log.append(entry)
            print(json.dumps(entry), flush=True)
    training = {
        "stage": "es",
        "start": (
            f"the head in {args.start_head}"
            if args.start_head
            else f"fgd-reserve-lifetime ({args.start_blocked}, weight 10) as a head"
        ),
        **{k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(args).items()},
        "teacher_loss": log[0]["center_loss"] if log else None,
        "best_loss": best_loss,
        "seconds": round(time.perf_counter() - started, 1),
    }
    save_head(args.out / "head", LifetimeHead(best_w.astype(np.float32), training=training))
    result = {"log": log, "best": dict(zip(LIFETIME_PAIR_FEATURES, best_w.tolist(), strict=True)), **training}
    (args.out / "es.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", nargs="+", default=["default"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--loads", type=float, nargs="+", default=[0.8])
    parser.add_argument("--lifetimes", choices=("oracle", "model"), default="oracle")
    parser.add_argument("--start", choices=("GPUHours", "NodeHours"), default="GPUHours")
    parser.add_argument("--whole-free-coef", type=float, default=1.0)
    parser.add_argument("--whole-free-gpus", type=int, default=None)
    parser.add_argument("--all-nodes-coef", type=float, default=0.0)
    parser.add_argument("--all-nodes-cap", type=float, default=2.0)
    parser.add_argument("--start-head", type=Path, default=None)
    parser.add_argument("--alloc-coef", type=float, default=1.0)
    parser.add_argument("--generations", type=int, default=6)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--sigma", type=float, default=2.0)
    parser.add_argument("--lr", type=float, default=2.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/lifetime-es"))
    ns = parser.parse_args(argv)
    if ns.start_head is not None:
        try:
            load_head(ns.start_head)
        except CheckpointError as error:
            parser.error(str(error))
    train(
        Args(
            traces=tuple(ns.traces),
            seeds=tuple(ns.seeds),
            loads=tuple(ns.loads),
            lifetimes=ns.lifetimes,
            start_blocked=ns.start,
            whole_free_coef=ns.whole_free_coef,
            whole_free_gpus=ns.whole_free_gpus,
            all_nodes_coef=ns.all_nodes_coef,
            all_nodes_cap=ns.all_nodes_cap,
            start_head=ns.start_head,
            alloc_coef=ns.alloc_coef,
            generations=ns.generations,
            pairs=ns.pairs,
            sigma=ns.sigma,
            lr=ns.lr,
            workers=ns.workers,
            seed=ns.seed,
            out=ns.out,
        )
    )


if __name__ == "__main__":
    main()

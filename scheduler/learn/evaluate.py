"""Evaluation of a checkpoint against the baselines: the same replays, table,
``summary.json`` and plot as ``rl-scheduler simulate``, with the learned policy
(profile ``gnn``) built from the given checkpoint (``learned_profile``), and the same
checkpoint with its network switched off (``gnn-network-off``, ``ablation``).

Which checkpoint a learned profile reads is per policy name (``checkpoints``): ``gnn``
the evaluated one, ``gnn-network-off`` its ablated copy; both run through
``learned_profile``."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from scheduler.framework.profile import Profile
from scheduler.learn.ablation import NETWORK_OFF
from scheduler.plugins.profiles import register_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.policy.config import PER_NODE_KINDS
from scheduler.policy.plugin import gnn_profile
from scheduler.policy.weights import MANIFEST_FILE, default_checkpoint_path, read_config, read_manifest
from scheduler.sim import report
from scheduler.sim.catalog import DEFAULT_NODE_LIST
from scheduler.sim.replay import ReplaySpec
from scheduler.sim.sweep import RunResult, run_sweep, run_synthetic_spec, run_trace
from scheduler.sim.synthetic import SyntheticResult, SyntheticSpec

LEARNED = "gnn"


def run_policy_trace(spec: ReplaySpec, progress: Callable[[int, int], None] | None = None) -> RunResult:
    """``run_trace`` in a worker that serves every checkpoint kind as ``gnn``."""
    _register_training_profiles()
    return run_trace(spec, progress)


def run_policy_synthetic(
    spec: SyntheticSpec, progress: Callable[[int, int], None] | None = None
) -> SyntheticResult:
    _register_training_profiles()
    return run_synthetic_spec(spec, progress)


def learned_profile(ctx: ProfileContext) -> Profile:
    """The ``gnn`` profile for a checkpoint of any kind: a per-node one (``gnn``,
    ``mlp``) exactly as the live scheduler builds it, in numpy; a fixed-action seed
    design, which the live scheduler refuses, in torch."""
    folder, manifest = read_manifest(ctx.checkpoint or default_checkpoint_path())
    if read_config(folder, manifest).kind in PER_NODE_KINDS:
        return gnn_profile(ctx, folder)
    from scheduler.learn.torch_score import torch_profile  # noqa: PLC0415 - torch for seed designs only

    return torch_profile(ctx, folder)


def _register_training_profiles() -> None:
    register_profile(LEARNED, learned_profile)
    register_profile(NETWORK_OFF, learned_profile)


def _where(checkpoints: Mapping[str, Path], policy: str) -> str | None:
    found = checkpoints.get(policy)
    return None if found is None else str(found)


def trace_specs(
    traces: Sequence[str],
    policies: Sequence[str],
    seeds: Sequence[int],
    checkpoints: Mapping[str, Path],
    nodes: str = DEFAULT_NODE_LIST,
) -> list[ReplaySpec]:
    """Every trace x policy x seed on ``nodes``; a learned policy reads ``checkpoints[policy]``."""
    return [
        ReplaySpec(trace, policy, seed, nodes=nodes, checkpoint=_where(checkpoints, policy))
        for trace in traces
        for policy in policies
        for seed in seeds
    ]


def evaluate_traces(
    traces: Sequence[str],
    policies: Sequence[str],
    seeds: Sequence[int],
    checkpoints: Mapping[str, Path],
    workers: int,
    on_pods: Callable[[int], None] | None = None,
    nodes: str = DEFAULT_NODE_LIST,
    ray_address: str | None = None,
) -> tuple[list[RunResult], dict[str, Any]]:
    specs = trace_specs(traces, policies, seeds, checkpoints, nodes)
    results = run_sweep(specs, run_policy_trace, workers, on_pods, ray_address)
    return results, report.summarise(results)


def evaluate_synthetic(
    policies: Sequence[str],
    seeds: Sequence[int],
    checkpoints: Mapping[str, Path],
    workers: int,
    nodes: int = 40,
    pods: int = 4000,
    load: float = 1.1,
    on_pods: Callable[[int], None] | None = None,
    ray_address: str | None = None,
) -> tuple[list[SyntheticResult], dict[str, Any]]:
    specs = [
        SyntheticSpec(
            policy,
            seed,
            nodes=nodes,
            pods=pods,
            target_load=load,
            checkpoint=_where(checkpoints, policy),
        )
        for policy in policies
        for seed in seeds
    ]
    results = run_sweep(specs, run_policy_synthetic, workers, on_pods, ray_address)
    return results, report.summarise_synthetic(results)


def headline(summary: dict[str, Any], baseline: str = "fgd") -> dict[str, Any]:
    """Per trace: the learned policy's and the baseline's medians and the difference."""
    out: dict[str, Any] = {}
    for trace, policies in summary.get("traces", {}).items():
        mine, theirs = policies.get(LEARNED), policies.get(baseline)
        if not mine or not theirs:
            continue
        row: dict[str, Any] = {}
        for key in ("gpu_alloc_100", "gpu_alloc_130"):
            ours, base = mine.get(key), theirs.get(key)
            row[key] = ours
            row[f"{baseline}_{key}"] = base
            row[f"delta_{key}"] = None if ours is None or base is None else round(ours - base, 2)
        out[trace] = row
    return out


def record_in_manifest(checkpoint: Path, evaluation: dict[str, Any]) -> Path:
    """Store ``evaluation`` in the checkpoint's manifest (the weights are untouched)."""
    folder, manifest = read_manifest(checkpoint)
    manifest["evaluation"] = evaluation
    path = folder / MANIFEST_FILE
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path

"""The training scripts' arguments, one dataclass per script (CleanRL's ``Args``):
each field's docstring is its help text on the command line. They live apart from
the scripts so that ``rl-scheduler`` builds its options without importing torch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from scheduler.cli_values import (
    NON_NEGATIVE,
    Check,
    Count,
    Fraction,
    NonNegative,
    NonNegativeInt,
    Positive,
    Probability,
    Seed,
    existing_dir,
    named_by,
    numbers,
    ray_address,
)
from scheduler.learn.tune_space import SearchSpace, space_file
from scheduler.policy.config import ScorerKind
from scheduler.sim.catalog import pod_list_path

# openb trace names (or CSV paths), each checked when parsed.
Traces = Annotated[tuple[str, ...], Check(named_by(pod_list_path))]
# A checkpoint folder that must exist.
CheckpointDir = Annotated[Path, Check(existing_dir)]
# A Ray cluster's address, or None for local processes.
RayAddress = Annotated[str | None, Check(ray_address)]
# ES perturbation scales of the reserve term's six parameters, in their order.
ReserveScales = Annotated[tuple[float, ...], Check(numbers(float, 6, NON_NEGATIVE), each=False)]


@dataclass
class ImitationArgs:
    traces: Traces = ("default", "cpu300")
    """openb traces whose teacher decisions are imitated"""
    episodes_per_trace: Count = 2
    """episodes (seeds) per trace"""
    node_fraction: Fraction = 0.25
    """share of the cluster's nodes in each episode (stratified sample)"""
    synthetic_episodes: NonNegativeInt = 2
    """synthetic CPU/memory episodes (no GPUs) added to the data"""
    sample_every: Count = 4
    """record one decision in this many"""
    max_candidates: Count = 64
    """candidates recorded per decision: the teacher's best, then random feasible nodes"""
    epochs: Count = 12
    """passes over the recorded decisions"""
    batch_size: Count = 32
    """decisions per gradient step"""
    learning_rate: Positive = 3e-3
    """Adam step size for the whole scorer (phase 2)"""
    reserve_learning_rate: Positive = 0.05
    """Adam step size for the reserve term alone (phase 1)"""
    seed: Seed = 1
    """seeds torch, numpy and the episodes (episode seeds are seed*1000 + i)"""
    hidden: Count = 32
    """node embedding width"""
    head_hidden: Count = 64
    """hidden width of the scoring head"""
    score_step: NonNegative = 0.5
    """logits are rounded to steps of this many FGD points before the argmax"""
    out: Path = Path("runs/imitation")
    """folder for TensorBoard logs and the checkpoint (out/checkpoint)"""
    quiet: bool = False
    """no progress bar"""


@dataclass
class EsArgs:
    init: CheckpointDir = Path("runs/imitation/checkpoint")
    """checkpoint to start from (the imitation stage's output)"""
    traces: Traces = ("default", "cpu300")
    """openb traces the fitness is measured on"""
    node_fraction: Fraction = 0.5
    """share of the cluster's nodes in each training episode (stratified sample)"""
    episodes_per_trace: Count = 1
    """episodes per trace per generation (all members play the same ones)"""
    generations: Count = 30
    """ES iterations"""
    pairs: Count = 6
    """antithetic pairs per generation (population = 2 * pairs)"""
    sigma: Positive = 1.0
    """perturbation size, in units of each parameter group's scale"""
    learning_rate: Positive = 0.3
    """Adam step size, in the same units"""
    reserve_scale: ReserveScales = (0.5, 2.0, 0.5, 0.5, 0.5, 0.25)
    """scales of reserve base, pressure slope, share/whole/CPU-only offsets, price per core"""
    head_scale: NonNegative = 0.25
    """scale of the head's last layer, in points of residual per unit of hidden activation std"""
    seed: Seed = 1
    """seeds numpy and the episodes"""
    workers: Count = 2
    """parallel processes"""
    ray_address: RayAddress = None
    """play the members on the Ray cluster at this address (auto, HOST:PORT or ray://HOST:PORT) instead
    of --workers local processes; the same numbers"""
    time_limit_s: NonNegative = 0.0
    """stop after this many seconds (0: no limit); the checkpoint is saved either way"""
    out: Path = Path("runs/es")
    """folder for TensorBoard logs and the checkpoint (out/checkpoint)"""
    quiet: bool = False
    """no progress bar"""


@dataclass
class RolloutArgs:
    init: Annotated[Path | None, Check(existing_dir)] = None
    """checkpoint to start from; the shipped one if unset"""
    traces: Traces = ("default", "cpu300")
    """openb traces whose episodes are branched"""
    episodes_per_trace: Count = 2
    """teacher episodes per trace (episode seeds are seed*1000 + i)"""
    node_fraction: Fraction = 0.25
    """share of the cluster's nodes in each episode (stratified sample)"""
    decisions_per_episode: Count = 40
    """decisions branched per episode, drawn among the scheduled ones in the window"""
    low: NonNegative = 50.0
    """window of branched decisions: from this % of the capacity arrived"""
    high: NonNegative = 115.0
    """window of branched decisions: up to this % of the capacity arrived"""
    branches: Count = 6
    """the teacher's best nodes each branched decision is played out on"""
    anchors: NonNegativeInt = 16
    """random other feasible nodes whose scores are held where they were"""
    epochs: Count = 30
    """passes over the decisions with a lesson"""
    batch_size: Count = 16
    """decisions per gradient step"""
    learning_rate: Positive = 1e-3
    """Adam step size for the whole scorer"""
    temperature: Positive = 1.0
    """the scores (FGD points) are divided by this in the cross-entropy"""
    anchor_weight: NonNegative = 1.0
    """weight of the squared change of the anchors' scores (points^2)"""
    seed: Seed = 1
    """seeds torch, numpy and the episodes"""
    workers: Count = 2
    """parallel processes for the branches"""
    ray_address: RayAddress = None
    """branch on the Ray cluster at this address (auto, HOST:PORT or ray://HOST:PORT) instead
    of --workers local processes; the same numbers"""
    out: Path = Path("runs/rollout")
    """folder for TensorBoard logs and the checkpoint (out/checkpoint)"""
    quiet: bool = False
    """no progress bar"""


@dataclass
class PpoArgs:
    traces: Traces = ("default",)
    """openb traces the environment cycles through"""
    node_fraction: Fraction = 0.25
    """share of the cluster's nodes in each episode (stratified sample)"""
    frag_coef: NonNegative = 0.0
    """weight of the fragmentation decrease in the reward"""
    init: Annotated[Path | None, Check(existing_dir)] = None
    """checkpoint to start from (e.g. the imitation stage's); a fresh scorer if unset"""
    kind: ScorerKind = "gnn"
    """scorer kind for a fresh scorer: gnn, mlp, flat-mlp, pooled-gnn"""
    total_steps: Count = 4096
    """decisions to collect in all"""
    num_steps: Count = 256
    """decisions per rollout"""
    update_epochs: Count = 4
    """passes over each rollout"""
    minibatch_size: Count = 32
    """decisions per gradient step"""
    learning_rate: Positive = 1e-3
    """Adam step size"""
    gamma: Probability = 0.999
    """discount"""
    gae_lambda: Probability = 0.95
    """GAE lambda"""
    clip_coef: Positive = 0.2
    """PPO clip"""
    ent_coef: NonNegative = 0.0
    """entropy bonus"""
    vf_coef: NonNegative = 0.5
    """value loss weight"""
    max_grad_norm: Positive = 0.5
    """gradient clipping"""
    temperature: Positive = 1.0
    """actor logits (FGD points) are divided by this"""
    seed: Seed = 1
    """seeds torch, numpy and the episodes"""
    out: Path = Path("runs/ppo")
    """folder for TensorBoard logs and the checkpoint (out/checkpoint)"""
    quiet: bool = False
    """no progress bar"""


@dataclass
class DqnArgs:
    traces: Traces = ("default",)
    """openb traces the environment cycles through"""
    node_fraction: Fraction = 0.25
    """share of the cluster's nodes in each episode (stratified sample)"""
    frag_coef: NonNegative = 0.0
    """weight of the fragmentation decrease in the reward"""
    kind: ScorerKind = "gnn"
    """Q-network kind: gnn, mlp, flat-mlp, pooled-gnn"""
    total_steps: Count = 4096
    """decisions to take in all"""
    buffer_size: Count = 4096
    """transitions the replay buffer keeps"""
    learning_rate: Positive = 2.5e-4
    """Adam step size"""
    gamma: Probability = 0.99
    """discount"""
    tau: Probability = 1.0
    """target network update rate (1: copied whole)"""
    target_network_frequency: Count = 250
    """decisions between target network updates"""
    batch_size: Count = 32
    """transitions per gradient step"""
    start_e: Probability = 1.0
    """exploration: epsilon at the start"""
    end_e: Probability = 0.05
    """exploration: epsilon at the end of the decay"""
    exploration_fraction: Probability = 0.5
    """share of the decisions over which epsilon decays"""
    learning_starts: NonNegativeInt = 256
    """decisions before the first update"""
    train_frequency: Count = 4
    """decisions between updates"""
    seed: Seed = 1
    """seeds torch, numpy and the episodes"""
    out: Path = Path("runs/dqn")
    """folder for TensorBoard logs and the checkpoint (out/checkpoint)"""
    quiet: bool = False
    """no progress bar"""


@dataclass
class PipelineArgs:
    traces: Traces = ("default", "cpu300")
    """openb traces to train on (the others stay unseen for evaluation)"""
    imitation_epochs: Count = 10
    """epochs of each imitation phase"""
    imitation_episodes_per_trace: Count = 2
    """teacher episodes per trace for the imitation data"""
    es_generations: Count = 30
    """ES generations"""
    es_pairs: Count = 6
    """antithetic pairs per ES generation"""
    es_node_fraction: Fraction = 0.5
    """share of the nodes in each ES episode"""
    time_limit_s: NonNegative = 6600.0
    """ES stops once the whole run has taken this long (the budget is two hours)"""
    workers: Count = 2
    """parallel processes for ES"""
    ray_address: RayAddress = None
    """play ES's members on the Ray cluster at this address instead of --workers local processes"""
    seed: Seed = 1
    """seeds every stage"""
    out: Path = Path("runs/train")
    """folder for both stages' logs; the final checkpoint goes to out/checkpoint"""
    quiet: bool = False
    """no progress bars"""


@dataclass
class TuneArgs:
    """``rl-scheduler tune``: Optuna searches ES's hyperparameters. Each trial runs ES
    from the initial checkpoint with the trial's values, then scores the checkpoint it
    trained on held-out episodes (seeds ES never draws) by ES's own fitness, the mean GPU
    allocation at saturation; the best trial's checkpoint is kept. Trials run --parallel
    at a time, in local processes or on a Ray cluster (--ray-address). The defaults are
    a small budget for a 2-core machine; more --trials, --generations and --node-fraction
    (and a cluster) search further."""

    init: Annotated[Path | None, Check(existing_dir)] = None
    """checkpoint every trial starts from; the shipped one if unset"""
    traces: Traces = ("default", "cpu300")
    """openb traces of the training and the held-out episodes"""
    node_fraction: Fraction = 0.1
    """share of the cluster's nodes in each episode (stratified sample)"""
    generations: Count = 3
    """ES generations per trial"""
    pairs: Count = 3
    """antithetic pairs per generation, unless the space tunes pairs"""
    episodes_per_trace: Count = 1
    """ES episodes per trace per generation"""
    held_out_episodes: Count = 2
    """held-out episodes per trace the trained checkpoint is scored on (seeds 1000000 and up)"""
    space: Annotated[SearchSpace | None, Check(space_file)] = None
    """YAML or JSON file of the search space, per parameter {low, high, log} or {choices}; tunable: sigma,
    learning_rate, head_scale, reserve_scale_multiplier, pairs. Unset: sigma 0.25-2 (log), learning_rate
    0.05-1 (log), head_scale 0-0.5, reserve_scale_multiplier 0.25-4 (log)"""
    trials: Count = 8
    """trials in all"""
    parallel: Count = 2
    """trials at once (Optuna suggests them in batches of this many)"""
    seed: Seed = 1
    """seeds Optuna's sampler (the same seed, the same suggestions) and every trial's ES"""
    ray_address: RayAddress = None
    """run the trials on the Ray cluster at this address (auto, HOST:PORT or ray://HOST:PORT) instead of
    local processes"""
    out: Path = Path("runs/tune")
    """folder for best.json, the best checkpoint (out/checkpoint), optuna.journal, trials/ and tensorboard/"""
    quiet: bool = False
    """no progress bar"""

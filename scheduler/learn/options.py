"""The training scripts' arguments, one dataclass per script (CleanRL's ``Args``):
each field's docstring is its help text on the command line. They live apart from
the scripts so that ``rl-scheduler`` builds its options without importing torch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class ImitationArgs:
    traces: tuple[str, ...] = ("default", "cpu300")
    """openb traces whose teacher decisions are imitated"""
    episodes_per_trace: int = 2
    """episodes (seeds) per trace"""
    node_fraction: float = 0.25
    """share of the cluster's nodes in each episode (stratified sample)"""
    synthetic_episodes: int = 2
    """synthetic CPU/memory episodes (no GPUs) added to the data"""
    sample_every: int = 4
    """record one decision in this many"""
    max_candidates: int = 64
    """candidates recorded per decision: the teacher's best, then random feasible nodes"""
    epochs: int = 12
    """passes over the recorded decisions"""
    batch_size: int = 32
    """decisions per gradient step"""
    learning_rate: float = 3e-3
    """Adam step size for the whole scorer (phase 2)"""
    reserve_learning_rate: float = 0.05
    """Adam step size for the reserve term alone (phase 1)"""
    seed: int = 1
    """seeds torch, numpy and the episodes (episode seeds are seed*1000 + i)"""
    hidden: int = 32
    """node embedding width"""
    head_hidden: int = 64
    """hidden width of the scoring head"""
    score_step: float = 0.5
    """logits are rounded to steps of this many FGD points before the argmax"""
    out: Path = Path("runs/imitation")
    """folder for TensorBoard logs and the checkpoint (out/checkpoint)"""
    quiet: bool = False
    """no progress bar"""


@dataclass
class EsArgs:
    init: Path = Path("runs/imitation/checkpoint")
    """checkpoint to start from (the imitation stage's output)"""
    traces: tuple[str, ...] = ("default", "cpu300")
    """openb traces the fitness is measured on"""
    node_fraction: float = 0.5
    """share of the cluster's nodes in each training episode (stratified sample)"""
    episodes_per_trace: int = 1
    """episodes per trace per generation (all members play the same ones)"""
    generations: int = 30
    """ES iterations"""
    pairs: int = 6
    """antithetic pairs per generation (population = 2 * pairs)"""
    sigma: float = 1.0
    """perturbation size, in units of each parameter group's scale"""
    learning_rate: float = 0.3
    """Adam step size, in the same units"""
    reserve_scale: tuple[float, ...] = (0.5, 2.0, 0.5, 0.5, 0.5, 0.25)
    """scales of reserve base, pressure slope, share/whole/CPU-only offsets, price per core"""
    head_scale: float = 0.25
    """scale of the head's last layer, in points of residual per unit of hidden activation std"""
    seed: int = 1
    """seeds numpy and the episodes"""
    workers: int = 2
    """parallel processes"""
    time_limit_s: float = 0.0
    """stop after this many seconds (0: no limit); the checkpoint is saved either way"""
    out: Path = Path("runs/es")
    """folder for TensorBoard logs and the checkpoint (out/checkpoint)"""
    quiet: bool = False
    """no progress bar"""


@dataclass
class PpoArgs:
    traces: tuple[str, ...] = ("default",)
    """openb traces the environment cycles through"""
    node_fraction: float = 0.25
    """share of the cluster's nodes in each episode (stratified sample)"""
    frag_coef: float = 0.0
    """weight of the fragmentation decrease in the reward"""
    init: Path | None = None
    """checkpoint to start from (e.g. the imitation stage's); a fresh scorer if unset"""
    kind: str = "gnn"
    """scorer kind for a fresh scorer: gnn, mlp, flat-mlp, pooled-gnn"""
    total_steps: int = 4096
    """decisions to collect in all"""
    num_steps: int = 256
    """decisions per rollout"""
    update_epochs: int = 4
    """passes over each rollout"""
    minibatch_size: int = 32
    """decisions per gradient step"""
    learning_rate: float = 1e-3
    """Adam step size"""
    gamma: float = 0.999
    """discount"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    clip_coef: float = 0.2
    """PPO clip"""
    ent_coef: float = 0.0
    """entropy bonus"""
    vf_coef: float = 0.5
    """value loss weight"""
    max_grad_norm: float = 0.5
    """gradient clipping"""
    temperature: float = 1.0
    """actor logits (FGD points) are divided by this"""
    seed: int = 1
    """seeds torch, numpy and the episodes"""
    out: Path = Path("runs/ppo")
    """folder for TensorBoard logs and the checkpoint (out/checkpoint)"""
    quiet: bool = False
    """no progress bar"""


@dataclass
class PipelineArgs:
    traces: tuple[str, ...] = ("default", "cpu300")
    """openb traces to train on (the others stay unseen for evaluation)"""
    imitation_epochs: int = 10
    """epochs of each imitation phase"""
    imitation_episodes_per_trace: int = 2
    """teacher episodes per trace for the imitation data"""
    es_generations: int = 30
    """ES generations"""
    es_pairs: int = 6
    """antithetic pairs per ES generation"""
    es_node_fraction: float = 0.5
    """share of the nodes in each ES episode"""
    time_limit_s: float = 6600.0
    """ES stops once the whole run has taken this long (the budget is two hours)"""
    workers: int = 2
    """parallel processes for ES"""
    seed: int = 1
    """seeds every stage"""
    out: Path = Path("runs/train")
    """folder for both stages' logs; the final checkpoint goes to out/checkpoint"""
    quiet: bool = False
    """no progress bars"""

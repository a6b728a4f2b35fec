"""How a training script starts and ends: torch and numpy seeded with ``seed``, torch
on one thread (the cores go to worker processes), TensorBoard logs under
``out/tensorboard``; at the end the logs closed and the checkpoint written to
``out/checkpoint`` with what the stage says of its training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter

from scheduler.policy.checkpoint import Manifest, save_checkpoint
from scheduler.policy.model import NodeScorer


def start_training(seed: int, out: Path) -> tuple[np.random.Generator, SummaryWriter]:
    """The script's numpy generator and TensorBoard writer."""
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    return np.random.default_rng(seed), SummaryWriter(str(out / "tensorboard"))


def finish_training(writer: SummaryWriter, model: NodeScorer, out: Path, training: dict[str, Any]) -> Path:
    """Close the logs and write ``out/checkpoint``; returns the checkpoint's folder."""
    writer.close()
    return save_checkpoint(model, out / "checkpoint", Manifest(training=training))

"""How a training script starts: torch and numpy seeded with ``seed``, torch on one
thread (the cores go to worker processes), TensorBoard logs under ``out/tensorboard``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter


def start_training(seed: int, out: Path) -> tuple[np.random.Generator, SummaryWriter]:
    """The script's numpy generator and TensorBoard writer."""
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    return np.random.default_rng(seed), SummaryWriter(str(out / "tensorboard"))

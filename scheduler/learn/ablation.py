"""The learned policy with its network switched off, for an honest comparison.

A per-node checkpoint (``gnn``, ``mlp``) scores a node as

    logit = prior_weight * FGD score + reserve term + head(embedding, pair, pod)

(``policy.model``). The head's last layer (``head.2``) is the only way the network's
encoder, attention layer and hidden layer reach the logit: with its weight and bias at
zero the head adds exactly 0, and what is left is FGD's score and the learned CPU
reserve rule (six numbers). ``write_network_off`` writes that checkpoint beside the
evaluation's outputs (same manifest, new SHA-256, the change recorded under
``ablation``), so the ablation runs through the very code path of the learned policy
and can be inspected or replayed again on its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

NETWORK_OFF = "gnn-network-off"
HEAD_OUTPUT = ("head.2.weight", "head.2.bias")


def write_network_off(checkpoint: Path | None, folder: Path) -> Path:
    """``checkpoint`` (the shipped one when None) with the head's last layer zeroed,
    written to ``folder``; returns ``folder``. Refuses a checkpoint without that layer."""
    from safetensors.numpy import save_file  # noqa: PLC0415 - the command line imports this module

    from scheduler.policy.weights import (  # noqa: PLC0415
        MANIFEST_FILE,
        WEIGHTS_FILE,
        CheckpointError,
        load_weights,
        sha256,
    )

    loaded = load_weights(checkpoint)
    missing = [name for name in HEAD_OUTPUT if name not in loaded.arrays]
    if missing:
        raise CheckpointError(str(loaded.path / WEIGHTS_FILE), missing[0], "no head output layer to zero")
    arrays = {name: np.array(array, dtype=np.float32, order="C") for name, array in loaded.arrays.items()}
    for name in HEAD_OUTPUT:
        arrays[name] = np.zeros_like(arrays[name])
    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / WEIGHTS_FILE
    save_file(arrays, str(weights), metadata={"format": str(loaded.manifest.get("format"))})
    manifest = dict(loaded.manifest)
    manifest["weights"] = {"file": WEIGHTS_FILE, "sha256": sha256(weights)}
    manifest["ablation"] = {
        "of": str(loaded.path),
        "zeroed": list(HEAD_OUTPUT),
        "meaning": "the network's correction switched off: FGD's score plus the learned CPU reserve only",
    }
    manifest.pop("evaluation", None)
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return folder

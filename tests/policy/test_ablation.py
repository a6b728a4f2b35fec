"""The learned policy with its network switched off (``gnn-network-off``): the shipped
checkpoint with the head's last layer zeroed scores exactly FGD's prior plus the
learned reserve, and everything else in the checkpoint is unchanged."""

from pathlib import Path

import numpy as np
import pytest

from scheduler.errors import SchedulerInputError
from scheduler.learn.ablation import HEAD_OUTPUT, write_network_off
from scheduler.policy.features import PAIR_FEATURES, POD_FEATURES
from scheduler.policy.inference import NumpyScorer
from scheduler.policy.weights import load_weights


def test_the_ablated_checkpoint_is_the_shipped_one_with_the_head_output_zeroed(tmp_path: Path) -> None:
    shipped = load_weights()
    ablated = load_weights(write_network_off(None, tmp_path / "off"))  # checks the new SHA-256
    assert ablated.config == shipped.config
    assert set(ablated.arrays) == set(shipped.arrays)
    for name, array in shipped.arrays.items():
        expected = np.zeros_like(array) if name in HEAD_OUTPUT else array
        assert np.array_equal(ablated.arrays[name], expected), name
    assert np.any(shipped.arrays["head.2.weight"])  # the shipped network does say something
    assert ablated.manifest["ablation"]["zeroed"] == list(HEAD_OUTPUT)


def test_with_the_network_off_a_logit_is_fgd_plus_the_reserve(tmp_path: Path) -> None:
    """logit = prior_weight * 100 * fgd_score + reserve penalty, whatever the embedding,
    pair and pod features (random here); with the network on it differs."""
    rng = np.random.default_rng(0)
    ablated = load_weights(write_network_off(None, tmp_path / "off"))
    scorer = NumpyScorer(ablated.config, ablated.arrays)
    embedding = rng.normal(size=(50, ablated.config.hidden)).astype(np.float32)
    pair = rng.uniform(size=(50, len(PAIR_FEATURES))).astype(np.float32)
    pod = rng.uniform(size=len(POD_FEATURES)).astype(np.float32)
    expected = pair[:, 0] * scorer.prior + scorer.reserve_penalty(pair, pod)
    np.testing.assert_allclose(scorer.head(embedding, pair, pod), expected, rtol=0, atol=1e-5)
    shipped = load_weights()
    network_on = NumpyScorer(shipped.config, shipped.arrays).head(embedding, pair, pod)
    assert not np.allclose(network_on, expected, atol=1e-3)


def test_a_missing_checkpoint_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SchedulerInputError, match="no such checkpoint folder"):
        write_network_off(tmp_path / "absent", tmp_path / "off")
    assert not (tmp_path / "off").exists()

"""FGD's fragmentation measure on hand-sized nodes."""

import numpy as np
import pytest

from scheduler.state.fragmentation import MEMO_BATCH, FragmentationModel, PodShape, TypicalPods, typical_pods


def frag(
    typical: TypicalPods,
    cpu_left: int,
    gpu_left: list[int],
    model: int = 0,
    models: tuple[str, ...] = ("T4",),
) -> float:
    left = np.zeros((1, 8), np.int64)
    left[0, : len(gpu_left)] = gpu_left
    return float(
        FragmentationModel(typical).frag_amount(np.array([cpu_left]), left, np.array([model]), models)[0]
    )


ONE = PodShape(4000, 500, 1)


@pytest.mark.parametrize(
    ("typical", "cpu_left", "gpu_left", "expected"),
    [
        pytest.param(
            TypicalPods((ONE,), (1.0,)),
            8000,
            [1000, 300],
            300.0,
            id="fits: only the 300 GPU (< 500) is stranded",
        ),
        pytest.param(
            TypicalPods((ONE,), (1.0,)),
            2000,
            [1000, 300],
            1300.0,
            id="lacks CPU (2000 < 4000): all idle GPU (1300) is stranded",
        ),
        pytest.param(
            TypicalPods((ONE,), (1.0,)), 8000, [400, 300], 700.0, id="no GPU with 500 free: all idle stranded"
        ),
        pytest.param(
            TypicalPods((PodShape(1000, 0, 0),), (1.0,)),
            8000,
            [1000, 1000],
            2000.0,
            id="a CPU-only workload can use no GPU: all idle counts",
        ),
        pytest.param(
            TypicalPods((PodShape(1000, 1000, 2),), (1.0,)),
            8000,
            [1000, 1000, 1000, 200],
            200.0,
            id="2-GPU pods: two free GPUs fit, the 200 left on the fourth is stranded",
        ),
        pytest.param(
            TypicalPods((PodShape(1000, 500, 1, "V100"),), (1.0,)),
            8000,
            [1000],
            1000.0,
            id="the node's model (T4) is not accepted: all idle counts",
        ),
        pytest.param(
            TypicalPods((ONE, PodShape(1000, 0, 0)), (0.75, 0.25)),
            8000,
            [1000, 300],
            0.75 * 300 + 0.25 * 1300,
            id="mixture: 0.75*300 + 0.25*1300",
        ),
    ],
)
def test_frag_amount(typical: TypicalPods, cpu_left: int, gpu_left: list[int], expected: float) -> None:
    assert frag(typical, cpu_left, gpu_left) == pytest.approx(expected)


def test_typical_pods_cover_95_percent_and_renormalise() -> None:
    shapes = (
        [PodShape(1, 0, 0)] * 50
        + [PodShape(2, 0, 0)] * 30
        + [PodShape(3, 0, 0)] * 15
        + [PodShape(4, 0, 0)] * 5
    )
    typical = typical_pods(shapes)
    # counts 50, 30, 15 reach 95 of 100; renormalised over 95
    assert typical.shapes == (PodShape(1, 0, 0), PodShape(2, 0, 0), PodShape(3, 0, 0))
    assert typical.freq == pytest.approx((50 / 95, 30 / 95, 15 / 95))


def test_typical_pods_break_count_ties_by_shape_descending() -> None:
    typical = typical_pods([PodShape(1, 0, 0), PodShape(2, 0, 0)], popularity_percent=100)
    assert typical.shapes == (PodShape(2, 0, 0), PodShape(1, 0, 0))


def test_small_batches_from_the_memo_equal_one_large_batch() -> None:
    """Batches of at most MEMO_BATCH states are answered from a memo: the same floats as
    the states computed in one batch, for repeated states, and after the GPU model list
    changes (model ids then mean other models)."""
    typical = TypicalPods(
        (PodShape(4000, 500, 1, "V100M16"), PodShape(8000, 1000, 2), PodShape(2000, 0, 0)), (0.5, 0.3, 0.2)
    )
    rng = np.random.default_rng(7)
    states = 3 * MEMO_BATCH
    cpu = rng.choice([0, 2000, 6000, 16000], states).astype(np.int64)
    gpus = rng.choice([0, 250, 500, 1000], (states, 4)).astype(np.int64)
    models = rng.integers(-1, 2, states).astype(np.int64)
    memo = FragmentationModel(typical)
    for gpu_models in (["V100M16", "T4"], ["T4", "V100M16"]):
        whole = FragmentationModel(typical).frag_amount(cpu, gpus, models, gpu_models)
        for size in (1, 5, MEMO_BATCH):
            for start in range(0, states, size):
                part = slice(start, start + size)
                small = memo.frag_amount(cpu[part], gpus[part], models[part], gpu_models)
                np.testing.assert_array_equal(small, whole[part])
        assert len(set(whole.tolist())) > 5  # the states differ in F


def test_a_full_memo_emptied_mid_batch_still_answers_the_keys_it_had_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch of found and new states, when the new ones overflow the memo: the memo
    is emptied, and the found ones must still be answered (they were read back from
    the emptied memo: KeyError)."""
    monkeypatch.setattr("scheduler.state.fragmentation.MEMO_SIZE", 4)
    typical = TypicalPods((PodShape(1000, 500, 1), PodShape(2000, 0, 0)), (0.5, 0.5))
    cpu = np.array([1000, 2000, 3000, 4000, 5000], np.int64)
    gpus = np.array([[1000, 0], [500, 500], [250, 0], [0, 0], [1000, 1000]], np.int64)
    models = np.full(5, -1, np.int64)
    gpu_models = ["T4"]
    whole = FragmentationModel(typical).frag_amount(cpu, gpus, models, gpu_models)
    memo = FragmentationModel(typical)
    memo.frag_amount(cpu[:3], gpus[:3], models[:3], gpu_models)  # 3 of 4 entries taken
    # states 1 and 2 are found, states 3 and 4 are new: 3 + 2 > 4 empties the memo
    rows = slice(1, 5)
    found = memo.frag_amount(cpu[rows], gpus[rows], models[rows], gpu_models)
    np.testing.assert_array_equal(found, whole[rows])


@pytest.mark.parametrize(
    ("distinct", "gpu_dtype"),
    [(3, np.int64), (40, np.int64), (3 * MEMO_BATCH, np.int64), (5, np.int32)],
    ids=["three states repeated", "forty states repeated", "every state distinct", "int32 GPU columns"],
)
def test_a_large_batch_computed_once_per_distinct_state_equals_each_state_alone(
    distinct: int, gpu_dtype: type[np.integer]
) -> None:
    """A batch larger than MEMO_BATCH computes each distinct state once: the floats are
    those of every state computed on its own."""
    typical = TypicalPods(
        (PodShape(4000, 500, 1, "V100M16"), PodShape(8000, 1000, 2), PodShape(2000, 0, 0)), (0.5, 0.3, 0.2)
    )
    rng = np.random.default_rng(11)
    cpu_states = rng.choice([0, 2000, 6000, 16000], distinct).astype(np.int64)
    gpu_states = rng.choice([0, 250, 500, 1000], (distinct, 4)).astype(gpu_dtype)
    model_states = rng.integers(-1, 2, distinct).astype(np.int64)
    rows = np.concatenate([np.arange(distinct), rng.integers(0, distinct, 3 * MEMO_BATCH)])
    cpu, gpus, models = cpu_states[rows], gpu_states[rows], model_states[rows]
    gpu_models = ["V100M16", "T4"]
    batch = FragmentationModel(typical).frag_amount(cpu, gpus, models, gpu_models)
    alone = [
        FragmentationModel(typical).frag_amount(
            cpu[i : i + 1], gpus[i : i + 1], models[i : i + 1], gpu_models
        )[0]
        for i in range(len(rows))
    ]
    np.testing.assert_array_equal(batch, np.array(alone))
    assert len(set(batch.tolist())) > 1

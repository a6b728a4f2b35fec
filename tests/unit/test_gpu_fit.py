"""Counting GPUs per node over the scheduler's eight GPU slots a node."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from scheduler.state.gpu_fit import count_per_node


@given(arrays(np.bool_, st.tuples(st.integers(0, 50), st.just(8))))
def test_counting_by_bytes_is_count_nonzero(mask: np.ndarray) -> None:  # type: ignore[type-arg]
    assert count_per_node(mask).tolist() == np.count_nonzero(mask, axis=1).tolist()


def test_a_slice_of_columns_is_counted_too() -> None:
    mask = np.ones((3, 8), np.bool_)[:, :5]
    assert count_per_node(mask).tolist() == [5, 5, 5]

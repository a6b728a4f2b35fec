"""Feature columns by name: the lookups read the column named, and rows are refused
when a name is missing or extra (so a list's order is written in one place)."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.policy import features
from scheduler.policy.features import NODE_FEATURES, PAIR_FEATURES, POD_FEATURES, column, columns


@pytest.mark.parametrize(
    ("constant", "names", "name"),
    [
        ("FGD_SCORE", PAIR_FEATURES, "fgd_score"),
        ("CPU_LEFT_AFTER", PAIR_FEATURES, "cpu_left_after"),
        ("IDLE_GPUS_AFTER", PAIR_FEATURES, "idle_gpus_after"),
        ("IS_SHARE", POD_FEATURES, "is_share"),
        ("IS_CPU_ONLY", POD_FEATURES, "is_cpu_only"),
        ("CPU_PRESSURE", POD_FEATURES, "cpu_pressure"),
    ],
)
def test_a_column_constant_is_the_position_of_its_name(
    constant: str, names: tuple[str, ...], name: str
) -> None:
    assert names[getattr(features, constant)] == name


def test_an_unknown_feature_name_is_refused_naming_it() -> None:
    with pytest.raises(KeyError, match="no feature 'fgd'"):
        column(PAIR_FEATURES, "fgd")


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        pytest.param(
            dict.fromkeys(POD_FEATURES[1:], 0.0), r"missing \['cpu'\], extra \[\]", id="one missing"
        ),
        pytest.param(
            {**dict.fromkeys(POD_FEATURES, 0.0), "gpu_model": 1.0},
            r"missing \[\], extra \['gpu_model'\]",
            id="extra",
        ),
    ],
)
def test_rows_need_every_name_and_no_other(values: dict[str, float], problem: str) -> None:
    with pytest.raises(KeyError, match=problem):
        columns(POD_FEATURES, values)


def test_rows_are_stacked_in_the_lists_order_whatever_the_mappings() -> None:
    values = {name: np.full(2, i, np.float64) for i, name in reversed(list(enumerate(NODE_FEATURES)))}
    rows = columns(NODE_FEATURES, values)
    assert rows.dtype == np.float32
    assert rows.tolist() == [list(range(len(NODE_FEATURES)))] * 2
    scalars = columns(POD_FEATURES, {name: float(i) for i, name in enumerate(POD_FEATURES)})
    assert scalars.tolist() == list(range(len(POD_FEATURES)))

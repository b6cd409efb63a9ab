"""One answer to "is there a value here", whichever spelling the empty cell came in."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from suite.results import Row, rows_to_frame
from suite.values import is_finite_number, is_missing

MISSING = [
    None,
    float("nan"),
    math.nan,
    np.nan,
    np.float32("nan"),
    np.float64("nan"),
    pd.NA,
    pd.NaT,
    "",
    "   ",
    "\t\n",
]
PRESENT = [
    0,
    0.0,
    -1,
    3.5,
    np.float32(2.0),
    np.int64(7),
    float("inf"),
    -math.inf,
    "nan",
    "<NA>",
    "0",
    "GPU0",
    False,
]


@pytest.mark.parametrize("value", MISSING, ids=repr)
def test_missing(value):
    assert is_missing(value)
    assert not is_finite_number(value)


@pytest.mark.parametrize("value", PRESENT, ids=repr)
def test_present(value):
    assert not is_missing(value)


# ids the same in every process
@pytest.mark.parametrize(
    "value, finite",
    [
        (0, True),
        (3.5, True),
        (np.float32(2.0), True),
        (np.int64(7), True),
        ("12.5", True),
        (float("inf"), False),
        (-math.inf, False),
        ("nan", False),
        ("GPU0", False),
        (True, False),
        (object(), False),
    ],
    ids=lambda v: type(v).__name__ if type(v) is object else repr(v),
)
def test_finite_number(value, finite):
    assert is_finite_number(value) is finite


def test_the_empty_cells_of_a_real_frame_are_missing():
    """The spellings a run's results come back in: NaN floats, NA in Int64 and string columns."""
    frame = rows_to_frame(
        [
            Row(stage="s", case="c", metric="m", value=float("nan"), unit="u"),
            Row(stage="s", case="c", metric="m", value=1.0, unit="u", world=2, source="torch"),
        ]
    )
    empty, full = frame.iloc[0], frame.iloc[1]
    assert [is_missing(empty[c]) for c in ("value", "world", "source")] == [True, True, True]
    assert [is_missing(full[c]) for c in ("value", "world", "source")] == [False, False, False]
    assert is_finite_number(full["world"]) and not is_finite_number(empty["world"])

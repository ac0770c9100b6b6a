"""Aggregation across judges and convergence of the plurality, on hand-computed examples."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from promptlottery.metrics.aggregate import (
    aggregate,
    majority,
    mean_score,
    median_score,
    plurality,
    plurality_details,
)
from promptlottery.metrics.convergence import convergence, convergence_summary

NAN = float("nan")

# 6 items x 5 judges (P1..P5), labels on a 1-5 scale; NaN = missing
M = np.array(
    [
        [1, 1, 1, 2, 2],  # plurality 1 (3 votes, majority), unique
        [1, 2, 2, 3, 3],  # tie 2/3 (P1 not tied) -> first tied label in order: P2's 2
        [2, 1, 1, 2, 3],  # tie 1/2, P1 says 2 -> 2
        [4, 5, 5, 5, 4],  # 5 (3 votes)
        [3, NAN, NAN, 4, 4],  # 4 (2 of 3 -> majority)
        [NAN, NAN, NAN, NAN, NAN],  # no verdict
    ]
)


def test_plurality_with_p1_tie_break():
    out = plurality(M)
    assert out[:5].tolist() == [1.0, 2.0, 2.0, 5.0, 4.0]
    assert math.isnan(out[5])
    det = plurality_details(M)
    assert det["unique"].tolist() == [True, False, False, True, True, False]
    assert det["votes"].tolist() == [3, 2, 2, 3, 2, 0]
    assert det["n_judges"].tolist() == [5, 5, 5, 5, 3, 0]


def test_plurality_strings_and_dataframe():
    df = pd.DataFrame({"P1": ["yes", "no", "no"], "P2": ["no", "yes", None], "P3": ["no", "yes", "yes"]})
    assert plurality(df).tolist() == ["no", "yes", "no"]  # row 3: tie no/yes, P1 says no
    assert majority(df).tolist() == ["no", "yes", None]


def test_majority_strict_half():
    out = majority(M)
    # row 2: 2 of 5 is no majority; row 5: 2 of 3 answering judges is
    assert np.allclose(out, [1.0, NAN, NAN, 5.0, 4.0, NAN], equal_nan=True)
    assert np.allclose(majority([[1, 1, 2, 2]]), [NAN], equal_nan=True)  # exactly half is not more


def test_mean_and_median():
    assert np.allclose(mean_score(M), [1.4, 2.2, 1.8, 4.6, 11 / 3, NAN], equal_nan=True)
    assert np.allclose(median_score(M), [1.0, 2.0, 2.0, 5.0, 4.0, NAN], equal_nan=True)
    assert np.allclose(aggregate(M, "median"), median_score(M), equal_nan=True)
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate(M, "vote")


def test_convergence_hand_computed():
    conv = convergence(M)
    # row 1: 1 leads from the first judge on -> 1
    # row 2: final is a tie -> never (strict)
    # row 3: tie -> never
    # row 4: prefixes 4 | 4/5 tie | 5 | 5 | 5 -> 3
    # row 5: 3 | 3 | 3 | 3/4 tie | 4 -> 5
    # row 6: no verdict -> never
    assert np.allclose(conv["converged_at"], [1, NAN, NAN, 3, 5, NAN], equal_nan=True)
    assert conv["first_judge"].tolist()[:5] == [1.0, 1.0, 2.0, 4.0, 3.0]
    loose = convergence(M, strict=False)
    # row 2 with tie-breaks: 1 | 1/2 -> 1 | 2 | 2/3 -> 2 | 2/3 -> 2 => 3
    # row 3: 2 | 2/1 -> 2 | 1 (two votes) | 2/1 -> 2 | 2 => 4
    assert np.allclose(loose["converged_at"], [1, 3, 4, 3, 5, NAN], equal_nan=True)


def test_convergence_summary():
    s = convergence_summary(convergence(M))
    assert s["n_items"] == 5 and s["n_judges"] == 5
    assert s["by_3"] == pytest.approx(2 / 5)  # rows 1, 4
    assert s["by_5"] == pytest.approx(3 / 5)  # + row 5
    assert s["never"] == pytest.approx(2 / 5)  # rows 2, 3
    # P1 matches the plurality in rows 1 and 3 (row 3 via the tie-break)
    assert s["first_judge_matches"] == pytest.approx(2 / 5)
    assert s["first_judge_matches_unique"] == pytest.approx(1 / 3)  # rows 1, 4, 5 unique: only 1
    assert convergence_summary(convergence([[1, 1, 2]]), checkpoints=(3, 5))["by_5"] is None


def test_shape_errors():
    with pytest.raises(ValueError, match="items x judges"):
        plurality([1, 2, 3])

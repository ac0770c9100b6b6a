"""The one-design check of a design sweep's configuration (sparse and adaptive budgets)."""

import pandas as pd
import pytest

from promptlottery.analysis.budget.design_rows import design_items, one_design
from promptlottery.judging.table import AnalysisError

PARAMS = ["design_seed", "design_items"]


def _rows(seeds, items):
    return pd.DataFrame({"item_id": items, "design_seed": seeds, "design_items": [3] * len(items)})


def test_one_design_is_the_rows_one_parameter_row():
    p = one_design("c1", _rows([7, 7, 7], ["a", "b", "a"]), PARAMS, "sparse plans")
    assert (int(p["design_seed"]), int(p["design_items"])) == (7, 3)


def test_two_designs_in_one_configuration_are_refused_in_one_line():
    with pytest.raises(AnalysisError) as e:
        one_design("c1", _rows([7, 8], ["a", "b"]), PARAMS, "adaptive designs")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("c1: its jobs were judged under different adaptive designs: ")
    assert "'design_seed': 7" in msg and "'design_seed': 8" in msg


def test_design_items_sorted_when_all_planned_items_are_there():
    rows = _rows([1] * 4, [2, "10", 2, 1])  # ids compared as text: "1" < "10" < "2"
    rows["design_items"] = 3
    assert design_items("c1", rows, rows.iloc[0], "pairs have no judgment") == ["1", "10", "2"]


def test_design_items_counts_the_items_missing():
    rows = _rows([1, 1], ["a", "b"])  # the design planned 3 items, 2 came back
    with pytest.raises(AnalysisError, match=r"^c1: 1 of 3 pairs have no judgment: re-run$"):
        design_items("c1", rows, rows.iloc[0], "pairs have no judgment: re-run")

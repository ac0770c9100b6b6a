"""The judgment grid: the judgments sliced once into configurations (fixture: tests/test_analysis_fixtures.py).

Config A: 4 items x P1-P3 at T = 1e-5, P1 with 2 more greedy samples and 3 samples at T = 0.7;
config B: 6 binary items x P1-P3; config C: A's items on backbone bb2, every verdict "5".
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promptlottery.judging.grid import JudgmentGrid, describe_verdict
from promptlottery.judging.load import load_judgments
from promptlottery.judging.table import AnalysisError
from tests.test_analysis_fixtures import A_LABELS, config_a, default_judgments, judgments

A = "stsb/semantic_alignment/G12/similarity/bb1"
B = "topical_chat_usr/dialogue_quality/G1/engaging/bb1"
C = "stsb/semantic_alignment/G12/similarity/bb2"


@pytest.fixture(scope="module")
def grid():
    return JudgmentGrid.from_frame(load_judgments(default_judgments()))


def test_configurations_sorted_with_their_settings(grid):
    assert [c.config_id for c in grid] == [A, C, B]  # natural order of the ids
    a = grid[A]
    assert a.order == ["P1", "P2", "P3"] and a.scale.name == "likert_1_5" and not a.binary
    # the paraphrase setting: each variant once at the main temperature (4 items x 3 variants)
    assert len(a.paraphrases) == 12 and a.main_temperature == pytest.approx(1e-5)
    # fixed settings: P1 x3 greedy samples, P1 x3 at T = 0.7
    assert [(f.name, f.rows["sample_index"].nunique()) for f in a.fixed] == [
        ("fixed T=1e-05", 3),
        ("fixed T=0.7", 3),
    ]
    assert grid[C].fixed == [] and grid[B].binary


def test_matrices_are_the_items_x_variants_verdicts(grid):
    a = grid[A]
    lab = a.matrix("label")
    assert list(lab.columns) == ["P1", "P2", "P3"] and list(lab.index) == ["i1", "i2", "i3", "i4"]
    assert {v: lab[v].tolist() for v in lab.columns} == A_LABELS
    assert a.matrix("value").to_numpy().tolist() == [[float(x) for x in r] for r in zip(*A_LABELS.values())]
    assert a.matrix("label") is lab  # computed once, shared by every analysis
    assert a.humans().tolist() == [1.0, 2.0, 3.0, 4.0]
    assert a.systems().tolist() == ["A", "B", "C", "D"]
    fixed = a.fixed_matrix(a.fixed[0], "label")
    assert list(fixed.columns) == [0, 1, 2] and fixed.shape == (4, 3)


def test_the_verdict_kind_is_the_grids(grid):
    assert grid.verdict == "argmax" and set(grid.judgments["verdict_source"].dropna()) <= {
        "argmax",
        "sampled_parsed",
    }
    parsed = grid.paraphrase_grid("parsed")
    assert parsed.verdict == "parsed" and [c.config_id for c in parsed] == [c.config_id for c in grid]
    assert all(c.fixed == [] for c in parsed)  # the paraphrase settings alone
    assert set(parsed.judgments["verdict_source"].dropna()) == {"parsed"}
    with pytest.raises(AnalysisError, match="analysis.verdict must be one of"):
        describe_verdict("mode")


def test_only_is_a_grid_of_some_configurations(grid):
    one = grid.only([grid[B]])
    assert [c.config_id for c in one] == [B] and one.n_judgments == len(grid[B].rows)
    assert one.reference == grid.reference and one.verdict == grid.verdict


def test_pairwise_rows_are_a_verdict_kind_of_their_own():
    rows = judgments(config_a(baselines=False))
    rows["judge_mode"] = "pointwise"
    pair = rows.head(4).copy()
    pair["judge_mode"] = "pairwise"
    pair["prompt_group"] = "G99"
    pair["order"] = ["12", "21", "12", "21"]
    pair["preferred"] = ["1", "2", "tie", "1"]
    g = JudgmentGrid.from_frame(load_judgments(pd.concat([rows, pair], ignore_index=True)))
    assert [c.config_id for c in g] == [A]  # the pointwise analyses never see the pairwise rows
    assert list(g.rows("pairwise")) == ["stsb/semantic_alignment/G99/similarity/bb1"]
    p = g.rows("pairwise")["stsb/semantic_alignment/G99/similarity/bb1"]
    assert p["preferred"].tolist() == ["1", "2", "tie", "1"] and "label" not in p.columns
    assert np.all(g.judgments["judge_mode"] == "pointwise")

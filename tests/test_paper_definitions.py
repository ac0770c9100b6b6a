"""The prompt-lottery paper's plurality cluster, checked on cases worked out by hand from its words.

"Strict plurality is reached in 58.73% of cases = 37.68% (by the third call) + 21.05% (by the fifth
call)", 41.27% "require more than five calls"; the agreement classifier (§F.2) "predicts whether a
judge's score matches at least three of five" judges. So: a cluster is a label with >= 3 of 5 votes,
and an item converges at the first call k where some label has 3 votes among calls 1..k.
"""

import math

import numpy as np
import pytest

from promptlottery.metrics.aggregate import cluster_threshold, plurality, plurality_cluster
from promptlottery.metrics.convergence import cluster_match, convergence_shares, online_convergence

# five judges P1..P5; written out by hand:
#   row           votes            cluster   converges at (3 votes among the first k)
#   [1,2,2,3,3]   2:2 3:2 1:1      none      never
#   [4,4,3,4,1]   4:3              4         k=4 (4,4,3 -> 2 votes; 4,4,3,4 -> 3)
#   [4,3,4,2,1]   4:2              none      never (hindsight would say "2 of 3 by call 3")
#   [5,5,5,1,1]   5:3              5         k=3
#   [2,1,2,1,2]   2:3              2         k=5
ROWS = [[1, 2, 2, 3, 3], [4, 4, 3, 4, 1], [4, 3, 4, 2, 1], [5, 5, 5, 1, 1], [2, 1, 2, 1, 2]]


def test_three_of_five_is_the_threshold():
    assert cluster_threshold(5) == 3
    assert cluster_threshold(3) == 2
    assert cluster_threshold(4) == 3  # 2 of 4 is a tie, not a majority


def test_cluster_is_a_label_with_three_of_five_votes():
    got = plurality_cluster(ROWS)
    assert np.isnan(got[0]) and np.isnan(got[2])
    assert got[[1, 3, 4]].tolist() == [4, 5, 2]


def test_missing_verdicts_do_not_shrink_the_panel():
    # 2 votes of 5 judges (3 missing) is no cluster, although it is "all the verdicts there are"
    assert np.isnan(plurality_cluster([[2, 2, None, None, None]])[0])
    assert plurality_cluster([[2, 2, 2, None, None]])[0] == 2


def test_string_labels():
    assert plurality_cluster([["Yes", "No", "Yes", "No", "Yes"]]).tolist() == ["Yes"]
    assert plurality_cluster([["Yes", "No", "Yes", "No", None]]).tolist() == [None]


def test_online_convergence_uses_only_the_calls_made_so_far():
    at = online_convergence(ROWS)
    assert math.isnan(at[0]) and math.isnan(at[2])
    assert at[[1, 3, 4]].tolist() == [4, 3, 5]


def test_incremental_convergence_shares_sum_to_one():
    # ROWS: converge at 3 (one item), at 4 and 5 (two items), never (two items)
    shares = convergence_shares(online_convergence(ROWS), n_judges=5)
    assert shares == {"converged_by_3": 1 / 5, "converged_by_5": 2 / 5, "never_converged": 2 / 5}
    assert sum(shares.values()) == pytest.approx(1)


def test_p1_matches_only_the_cluster_label():
    # P1 is column 0: matches on rows 1 (4=4) and 3 (5=5); row 4's P1 says 2 = cluster 2 -> match;
    # rows 0 and 2 have no cluster -> no match, whatever P1 says
    p1 = [r[0] for r in ROWS]
    assert cluster_match(p1, plurality_cluster(ROWS)).tolist() == [False, True, False, True, True]


def test_no_cluster_means_no_judge_is_positive():
    cluster = plurality_cluster([[1, 2, 2, 3, 3]])
    assert [cluster_match([v], cluster)[0] for v in [1, 2, 2, 3, 3]] == [False] * 5


def test_the_tie_broken_plurality_is_a_different_named_figure():
    # ties_to_P1: [1,2,2,3,3] -> 2 (first tied label in column order: P2's "2"), [4,3,4,2,1] -> 4
    assert plurality([[1, 2, 2, 3, 3], [4, 3, 4, 2, 1]]).tolist() == [2, 4]

"""The gate's paper definitions on hand-computed cases written from the prompt-lottery paper's words.

Label (§F.2): a judge is positive when its score "matches at least three of five" judges; an item
with no such label has no positive judge. Calls (§4): 37.68% of items converge by the third call,
21.05% by the fifth, 41.27% never, "4.247 calls"; with the gate "5 -> 1.99 calls" on stable items =
1 + (1 - 0.6942) x 3.2464. Polarity: that derivation reads TNR as the share of stable verdicts trusted.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promptlottery.gating.baselines import polarity_rates
from promptlottery.gating.data import instance_split, load_examples
from promptlottery.gating.simulate import adaptive_calls, simulate_paper_policy, stable_item_calls
from tests.test_gate_data import judgments


def test_label_rule_no_cluster_means_no_positive_judge():
    ex = load_examples(judgments({"x": [1, 2, 2, 3, 3]})).sort_values("position")
    assert ex["in_cluster"].tolist() == [0, 0, 0, 0, 0]
    assert ex["no_consensus"].all() and ex["cluster"].isna().all()
    assert ex["converged_at"].isna().all()  # never 3 votes for one label


def test_label_rule_three_of_five_and_online_convergence():
    ex = load_examples(judgments({"y": [4, 4, 3, 4, 1]})).sort_values("position")
    # 4 has three votes (P1, P2, P4): those three judges are positive
    assert ex["in_cluster"].tolist() == [1, 1, 0, 1, 0]
    assert set(ex["cluster"]) == {"4"} and not ex["no_consensus"].any()
    # the third vote for 4 arrives with the fourth call
    assert set(ex["converged_at"]) == {4.0}


def test_three_way_split_is_disjoint_and_stratified_on_a_toy():
    # 20 items: 10 unanimous (5 positives each), 10 without a cluster (5 negatives each)
    mats = {f"u{k}": [5] * 5 for k in range(10)} | {f"n{k}": [1, 2, 2, 3, 3] for k in range(10)}
    ex = load_examples(judgments(mats))
    train, val, test = instance_split(ex, val_size=0.2, test_size=0.2, seed=3)
    assert not (train & val or train & test or val & test) and len(train | val | test) == 20
    # 20% of 20 items = 4 items each, stratified: 2 unanimous and 2 no-cluster items in each
    for part in (val, test):
        assert len(part) == 4 and sum(k.split("/")[1].startswith("u") for k in part) == 2
    assert len(train) == 12


def test_the_papers_call_derivation_from_its_shares():
    adaptive = adaptive_calls({3: 0.3768, 5: 0.2105}, never=0.4127, n_judges=5)
    assert adaptive == pytest.approx(3 * 0.3768 + 5 * 0.2105 + 5 * 0.4127)  # = 4.2464
    assert adaptive == pytest.approx(4.247, abs=1e-3)
    assert adaptive - 1 == pytest.approx(3.2464)
    stable = stable_item_calls(0.6942, adaptive)
    assert stable == pytest.approx(1 + (1 - 0.6942) * 3.2464) and round(stable, 2) == 1.99
    with pytest.raises(ValueError, match="sum to 1"):
        adaptive_calls({3: 0.5}, never=0.1, n_judges=5)


def test_polarity_naming_on_a_2x2_toy():
    # in the cluster: 3 verdicts, 2 trusted; out of it: 2 verdicts, 1 trusted (1 sent to aggregation)
    r = polarity_rates([1, 1, 1, 0, 0], [True, True, False, False, True])
    assert r["tpr_in_cluster"] == pytest.approx(2 / 3) and r["tnr_in_cluster"] == pytest.approx(1 / 2)
    # the paper's positive class is "needs aggregation": its TNR is the share of stable verdicts trusted
    assert r["tnr_needs_aggregation"] == pytest.approx(2 / 3) and r["tpr_needs_aggregation"] == pytest.approx(
        1 / 2
    )


def test_paper_policy_costs_one_call_when_trusted_else_the_adaptive_aggregation():
    labels = np.array(
        [["4", "4", "3", "4", "1"], ["2", "3", "3", "1", "3"], ["1", "2", "2", "3", "3"]], dtype=object
    )
    final = np.array(["4", "3", "2"], dtype=object)
    adaptive = np.array([4, 5, 5])  # 4: third 4 at call 4; 3: third 3 at call 5; no cluster: all five
    scores = np.array([[0.9] * 5, [0.8] * 5, [0.1] * 5])
    calls, dec = simulate_paper_policy(labels, scores, 0.85, final, adaptive)
    # item 1 trusted (1 call, P1's 4); item 2 not (0.8 < 0.85): 5 calls, decision 3; item 3: 5 calls
    assert calls.tolist() == [1, 5, 5] and dec.tolist() == ["4", "3", "2"]
    assert pd.Series(calls).mean() == pytest.approx(11 / 3)


def test_llm_baseline_subset_takes_whole_items_and_never_more_than_exist():
    # 3 items x 12 rows (e.g. 5 judges of 2 backbones plus 2 more): max_rows=24 -> 24 / 12 = 2 whole items;
    # max_rows=1000 or more rows per item than judges never asks for more items than exist
    import pandas as pd

    from promptlottery.gating.baselines import llm_subset as _llm_subset

    val = pd.DataFrame({"item_key": [k for k in "abc" for _ in range(12)]})
    mask = _llm_subset(val, 24, 5, seed=0)
    assert mask.sum() == 24 and val[mask]["item_key"].nunique() == 2
    assert _llm_subset(val, 13, 5, seed=0).sum() == 12  # one whole item
    assert _llm_subset(val, 1000, 5, seed=0).all()

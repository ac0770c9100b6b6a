"""The human-baseline definitions (promptlottery.human.agreement, ours) on a toy worked out by hand.

Toy: 6 items, 3 annotators (A, B, C), 2 wordings (W1 = the judge's P1, W2 = P2), labels yes/no.
Truth T = (y, y, y, n, n, n) for items 1..6. Under W1 every annotator says T. Under W2, A and B
follow a different rule on item 4 (they say y), C says T. The judge: 3 samples of P1 (T, T, and T
with item 1 flipped to n); under P2 (sample 0) it says (y, n, y, y, n, y).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from promptlottery.human.agreement import human_tables
from promptlottery.human.analysis import HumanAnalysisOptions, human_metrics, human_vs_judge

T = ["yes", "yes", "yes", "no", "no", "no"]
ITEMS = [f"i{n}" for n in range(1, 7)]
LABELS = ("yes", "no")


def toy_ratings() -> pd.DataFrame:
    w2_ab = ["yes", "yes", "yes", "yes", "no", "no"]
    rows = []
    for a in "ABC":
        for i, item in enumerate(ITEMS):
            rows.append({"item_id": item, "wording": "P1", "annotator": a, "label": T[i]})
            rows.append(
                {"item_id": item, "wording": "P2", "annotator": a, "label": (w2_ab if a in "AB" else T)[i]}
            )
    return pd.DataFrame(rows).assign(scale="binary_yes_no", prompt_group="G_toy")


def toy_judgments() -> pd.DataFrame:
    """A judgments table with verdicts (the columns the analysis reads)."""
    rows = []
    s2 = ["no", "yes", "yes", "no", "no", "no"]
    p2 = ["yes", "no", "yes", "yes", "no", "yes"]
    for variant, sample, labels in (("P1", 0, T), ("P1", 1, T), ("P1", 2, s2), ("P2", 0, p2)):
        for item, lab in zip(ITEMS, labels):
            rows.append(
                {
                    "item_id": item,
                    "variant": variant,
                    "sample_index": sample,
                    "label": lab,
                    "temperature": 0.7,
                    "seed": 0,
                    "repeat_source": "none",
                    "config_id": "toy/judge",
                    "prompt_group": "G_toy",
                    "dataset": "toy",
                    "backbone": "fake",
                    "scale": "binary_yes_no",
                    "human_raters": None,
                }
            )
    return pd.DataFrame(rows)


# The hand computation (every number from the module's definitions, not from the code):
# HUMAN WITHIN (12 cells x annotators): only cell (W2, item 4) splits (y, y, n).
#   overlap: AB 12/12, AC 11/12, BC 11/12 -> 34/36 = 17/18
#   Cohen: A, B say yes 7 of 12, C 6 of 12. AB identical -> 1; AC: p_o = 11/12,
#     p_e = 7/12*6/12 + 5/12*6/12 = 1/2 -> (11/12 - 1/2)/(1/2) = 5/6; BC = 5/6 -> mean 8/9
#   Fleiss: P_bar = (11*1 + 1/3)/12 = 17/18; yes 20 of 36 -> P_e = (20/36)^2 + (16/36)^2 = 41/81
#     -> (17/18 - 41/81)/(40/81) = 71/80
#   alpha: D_o = 2/36 (the split cell's (2*1 + 1*2)/(3 - 1)); D_e = 2*20*16/(36*35) = 32/63
#     -> 1 - (1/18)/(32/63) = 1 - 63/576 = 513/576
# HUMAN ACROSS ((item, slot) x wordings; slot s pairs W1's rating s with W2's rating s+1 mod 3):
#   units (A_W1, B_W2), (B_W1, C_W2), (C_W1, A_W2); item 4 disagrees in the 1st and 3rd -> 16/18 agree
#   overlap 16/18 = 8/9
#   Cohen: W1 column yes 9 of 18, W2 yes 11 of 18; p_o = 16/18, p_e = 9/18*11/18 + 9/18*7/18 = 1/2 -> 7/9
#   Fleiss: P_bar = 16/18; yes 20 of 36 -> P_e = 41/81 -> (8/9 - 41/81)/(40/81) = 31/40
#   alpha: D_o = 2*2/36 = 1/9; D_e = 32/63 -> 1 - 7/32 = 25/32
# JUDGE WITHIN (6 items x 3 samples of P1): item 1 splits (y, y, n).
#   overlap (6 + 5 + 5)/18 = 8/9; Cohen: s0-s1 1, s0-s2 and s1-s2: p_o = 5/6, p_e = 3/6*2/6 + 3/6*4/6 = 1/2
#     -> 2/3; mean 7/9; Fleiss: P_bar = 16/18, yes 8 of 18 -> P_e = 41/81 -> 31/40
#   alpha: D_o = 2/18, D_e = 2*8*10/(18*17) = 80/153 -> 1 - 153/720 = 0.7875
# JUDGE ACROSS (6 items x P1, P2): disagree on items 2, 4, 6.
#   overlap 1/2; Cohen: p_o = 1/2, p_e = 3/6*4/6 + 3/6*2/6 = 1/2 -> 0
#   Fleiss: P_bar = 1/2, yes 7 of 12 -> P_e = 74/144 -> (72/144 - 74/144)/(70/144) = -1/35
#   alpha: D_o = 6/12, D_e = 2*7*5/(12*11) = 35/66 -> 1 - 33/35 = 2/35
HAND = {
    ("human", "within"): {"overlap": 17 / 18, "cohen": 8 / 9, "fleiss": 71 / 80, "alpha": 513 / 576},
    ("human", "across"): {"overlap": 8 / 9, "cohen": 7 / 9, "fleiss": 31 / 40, "alpha": 25 / 32},
    ("judge", "within"): {"overlap": 8 / 9, "cohen": 7 / 9, "fleiss": 31 / 40, "alpha": 0.7875},
    ("judge", "across"): {"overlap": 1 / 2, "cohen": 0.0, "fleiss": -1 / 35, "alpha": 2 / 35},
}
# degradation (ours) = within - across; ratio = judge drop / human drop:
#   overlap (8/9 - 1/2) / (17/18 - 8/9) = (7/18)/(1/18) = 7
#   cohen (7/9 - 0) / (8/9 - 7/9) = 7
#   fleiss (31/40 + 1/35) / (71/80 - 31/40) = (45/56) / (9/80) = 50/7
#   alpha (0.7875 - 2/35) / (513/576 - 25/32) = (0.7303571...) / (63/576) = 6.6775510...
HAND_RATIO = {"overlap": 7.0, "cohen": 7.0, "fleiss": 50 / 7, "alpha": (0.7875 - 2 / 35) / (63 / 576)}


def _toy_tables():
    opts = HumanAnalysisOptions(n_resamples=200, seed=3)
    return human_vs_judge(toy_ratings(), toy_judgments(), opts)


def test_toy_agreement_matches_the_hand_computation():
    agree = _toy_tables()["human_agreement"]
    for (side, setting), want in HAND.items():
        row = agree[(agree["side"] == side) & (agree["setting"] == setting)].iloc[0]
        for m, v in want.items():
            assert row[m] == pytest.approx(v, abs=1e-12), (side, setting, m)


def test_toy_degradation_ratio_matches_the_hand_computation():
    deg = _toy_tables()["human_degradation"].set_index("measure")
    for m, v in HAND_RATIO.items():
        assert deg.loc[m, "ratio"] == pytest.approx(v, abs=1e-12), m
        assert deg.loc[m, "paper_ratio"] == "6-9x"
    assert deg.loc["cohen", "human_drop"] == pytest.approx(1 / 9)
    assert deg.loc["cohen", "judge_drop"] == pytest.approx(7 / 9)
    # the intervals are over items and hold the estimate's neighbourhood (not a fixed range)
    for m in HAND_RATIO:
        lo, hi = deg.loc[m, "judge_drop_lo"], deg.loc[m, "judge_drop_hi"]
        assert lo <= deg.loc[m, "judge_drop"] <= hi


def test_across_units_pair_different_annotators():
    r = toy_ratings()
    t = human_tables(r, LABELS, ITEMS)["across"]
    assert t.codes.shape == (18, 2)
    assert not t.notes  # every unit's two ratings are by two annotators


def test_resampled_measures_equal_the_point_on_the_identity_draw():
    """The bootstrap's vectorised forms give the public metrics' value when every item is drawn once."""
    from promptlottery.human.agreement import measures, resampled_measures

    h = human_tables(toy_ratings(), LABELS, ITEMS)
    for t in h.values():
        point = measures(t, 2)
        res = resampled_measures(t, np.ones((1, 6)), 2)
        for m in point:
            assert res[m][0] == pytest.approx(point[m], abs=1e-12), m


def test_human_drop_not_positive_gives_no_ratio():
    r = toy_ratings()
    same = r.assign(label=[T[ITEMS.index(i)] for i in r["item_id"]])  # everyone says T everywhere
    deg = human_vs_judge(same, toy_judgments(), HumanAnalysisOptions(n_resamples=50))["human_degradation"]
    row = deg.set_index("measure").loc["overlap"]
    assert np.isnan(row["ratio"]) and "does not drop" in row["notes"]


def test_missing_fixed_prompt_baseline_is_named():
    j = toy_judgments()
    j = j[j["sample_index"] == 0]
    deg = human_vs_judge(toy_ratings(), j, HumanAnalysisOptions(n_resamples=20))["human_degradation"]
    assert deg["ratio"].isna().all()
    assert deg["notes"].str.contains("no fixed-prompt baseline").all()


def test_metrics_are_flat_and_finite():
    m = human_metrics(_toy_tables())
    assert m["human/toy/judge/cohen/ratio"] == pytest.approx(7.0)
    assert m["human/within/overlap"] == pytest.approx(17 / 18)


def test_per_rater_dataset_row_by_hand():
    """Item 4's per-rater agreement: 3 items x 3 rater positions, labels 1..3.

    items: (1, 1, 2), (2, 2, 2), (3, 3, 3). Pairs of positions: (0,1) agree 3/3, (0,2) 2/3, (1,2) 2/3
    -> overlap 7/9. Fleiss: P_i = 1/3, 1, 1 -> P_bar = 7/9; category shares 2/9, 4/9, 3/9
    -> P_e = (4 + 16 + 9)/81 = 29/81 -> (63/81 - 29/81)/(52/81) = 34/52 = 17/26.
    """
    from promptlottery.human.per_rater import raters_agreement

    row = raters_agreement({"x": [1, 1, 2], "y": [2, 2, 2], "z": [3, 3, 3]}, n_resamples=50).iloc[0]
    assert row["overlap"] == pytest.approx(7 / 9)
    assert row["fleiss"] == pytest.approx(17 / 26)


def test_per_rater_table_beside_the_fixed_prompt():
    from promptlottery.human.per_rater import per_rater_table

    j = toy_judgments()
    j["human_raters"] = [json.dumps([1, 1, 2] if i == "i1" else [2, 2, 2]) for i in j["item_id"]]
    j["judge_family"], j["criterion"], j["rubric"] = "toy", "", ""
    out = per_rater_table(j, n_resamples=20)
    assert list(out["side"]) == ["human", "judge"]
    judge = out[out["side"] == "judge"].iloc[0]
    assert judge["overlap"] == pytest.approx(8 / 9)  # the judge-within row of the toy above


def test_judgments_of_another_prompt_group_are_named_not_compared():
    j = toy_judgments().assign(prompt_group="G_other")
    t = human_vs_judge(toy_ratings(), j, HumanAnalysisOptions(n_resamples=20))
    assert t["human_degradation"].empty
    assert t["human_agreement"]["notes"].str.contains("no judged configuration of prompt group G_toy").all()


# Self-agreement toy: 2 items, wordings P1 / P2, annotators A, B, C; B rates item i1 under both wordings.
#   i1: P1 A=yes B=yes; P2 B=yes C=no.   i2: P1 A=no C=no; P2 B=no C=yes.
# Across units (slot s: P1's rating s, P2's from position s+1 on, skipping a used one or an annotator
# already in the unit):
#   i1 s0: (A_P1 yes, C_P2 no); i1 s1: B_P1, then P2's B is in the unit and C is used -> a lone rating:
#     no unit (left out; B's two ratings are in no unit). The greedy match of 7cc7f2a paired B with B.
#   i2 s0: (A_P1 no, C_P2 yes); i2 s1: (C_P1 no, B_P2 no).
# Units: (y, n), (n, y), (n, n).  overlap 1/3.
#   Cohen: P1 yes 1/3, P2 yes 1/3 -> p_e = 1/9 + 4/9 = 5/9 -> (1/3 - 5/9)/(4/9) = -1/2
#   Fleiss: P_i = 0, 0, 1 -> 1/3; yes 2 of 6 -> P_e = 5/9 -> -1/2
#   alpha: D_o = (2 + 2 + 0)/6 = 2/3; D_e = 2*2*4/(6*5) = 8/15 -> 1 - 10/8 = -1/4
# (with B's self-pair (y, y) as a fourth unit: overlap 1/2, Cohen 0)
SELF = [
    ("i1", "P1", "A", "yes"),
    ("i1", "P1", "B", "yes"),
    ("i1", "P2", "B", "yes"),
    ("i1", "P2", "C", "no"),
    ("i2", "P1", "A", "no"),
    ("i2", "P1", "C", "no"),
    ("i2", "P2", "B", "no"),
    ("i2", "P2", "C", "yes"),
]


def test_across_units_hold_distinct_annotators_only():
    from promptlottery.human.agreement import measures

    r = pd.DataFrame(SELF, columns=["item_id", "wording", "annotator", "label"])
    t = human_tables(r, LABELS, ["i1", "i2"])["across"]
    assert t.n_units == 3
    want = {"overlap": 1 / 3, "cohen": -1 / 2, "fleiss": -1 / 2, "alpha": -1 / 4}
    got = measures(t, 2)
    for m, v in want.items():
        assert got[m] == pytest.approx(v, abs=1e-12), m
    assert (
        "1 (item, slot) unit(s) left out (fewer than two distinct annotators); 2 of 8 ratings" in t.notes[0]
    )


def test_drop_difference_beside_the_ratio():
    deg = _toy_tables()["human_degradation"].set_index("measure")
    # judge drop - human drop, from the hand values above
    assert deg.loc["overlap", "drop_difference"] == pytest.approx(7 / 18 - 1 / 18, abs=1e-12)
    assert deg.loc["cohen", "drop_difference"] == pytest.approx(7 / 9 - 1 / 9, abs=1e-12)
    lo, hi = deg.loc["cohen", "drop_difference_lo"], deg.loc["cohen", "drop_difference_hi"]
    assert lo <= 2 / 3 <= hi


def test_ratio_interval_counts_every_resample():
    """On the toy the humans drop only through item i4 (A and B under P2): a resample without i4 has
    no human drop, so no ratio. The interval is over all resamples, those counted against both ends;
    a third of the draws lack i4 ((5/6)^6 = 0.33), far above 2.5%, so both ends are unbounded."""
    from promptlottery.metrics.bootstrap import resample_indices

    deg = _toy_tables()["human_degradation"].set_index("measure")
    no_i4 = int(sum(3 not in set(row) for row in resample_indices(6, 200, seed=3)))
    row = deg.loc["overlap"]
    assert row["n_resamples_no_human_drop"] == no_i4 and 40 < no_i4 < 100
    assert f"ratio CI over all 200 resamples: {no_i4} with no human drop" in row["notes"]
    assert row["ratio_lo"] == -np.inf and row["ratio_hi"] == np.inf
    assert row["ratio"] == pytest.approx(7.0)


def test_ratio_interval_by_hand():
    from promptlottery.human.degradation import ci_all_resamples

    d = np.array([np.nan, 1, 2, 3, 4, 5, 6, 7])
    # level 0.5: 25th percentile of (-inf, 1..7) = 1 + 0.75 = 1.75; 75th of (1..7, +inf) = 6 + 0.25 = 6.25
    assert ci_all_resamples(d, np.isnan(d), 0.5) == (1.75, 6.25)
    # a resample undefined for another reason (not counted) is left out: the 7 defined ones alone
    assert ci_all_resamples(d, np.zeros(8, bool), 0.5) == (2.5, 5.5)

"""The "Pairwise judges" section: the issue's hand-computed toy (4 pairs x 2 orders x 3 wordings),
a judge that always answers "A", bad inputs, and the hook into the lottery stage.

The toy (tests/pairwise_toys.py), verdicts of orders 12 / 21 in the pair's terms (1 = response_a):

    pair cluster human systems  P1        P2        P3
    q1   i1      1     x-y      1 / 1     1 / 2     1 / 1
    q2   i1      2     x-z      1 / 2     2 / 2     2 / 2
    q3   i2      tie   y-z      tie/tie   1 / tie   2 / 2
    q4   i3      1     x-y      1 / 1     2 / 1     1 / 2

Order-resolved (I = inconsistent): P1 1, I, tie, 1; P2 I, 2, I, I; P3 1, 2, 2, I.
Two-order verdict (I = tie):      P1 1, tie, tie, 1; P2 tie, 2, tie, tie; P3 1, 2, 2, tie.
Annotators (PandaLM-like): q1 1,1,2; q2 2,2,2; q3 tie,tie,1; q4 1,tie,1.
P1's probabilities are chosen so that the order-averaged verdict is 1, 2, tie, 1; P2 and P3 put
0.8 on the verdict of each order (tie: 0.8 on the tie).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from promptlottery.analysis.lottery.analyse import analyse
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.lottery.render import write_outputs
from promptlottery.analysis.lottery.sections.pairwise import pair_table, pairwise_metrics, pairwise_tables
from promptlottery.analysis.stage import summary_metrics
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.load import load_judgments
from promptlottery.judging.table import AnalysisError
from tests.pairwise_toys import pairwise_rows, toy_table
from tests.test_analysis_fixtures import default_judgments

CID = "toy/pairwise/G17/fake"
BOOT = dict(n_resamples=60, seed=0, level=0.95)


@pytest.fixture(scope="module")
def toy():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no stray numpy warning on the toy
        return pairwise_tables(toy_table(), **BOOT)


def _row(table: pd.DataFrame, **where) -> pd.Series:
    m = np.ones(len(table), dtype=bool)
    for k, v in where.items():
        m &= (table[k] == v).to_numpy()
    assert m.sum() == 1, where
    return table[m].iloc[0]


def test_order_resolved_and_averaged_verdicts_of_the_toy():
    pt = pair_table(toy_table())
    got = {v: g["resolved"].tolist() for v, g in pt.groupby("variant")}
    assert got == {
        "P1": ["1", "inconsistent", "tie", "1"],
        "P2": ["inconsistent", "2", "inconsistent", "inconsistent"],
        "P3": ["1", "2", "2", "inconsistent"],
    }
    averaged = {v: g["averaged"].tolist() for v, g in pt.groupby("variant")}
    # P1: q1 (0.65, 0.35) -> 1; q2 (0.4, 0.6) -> 2; q3 (0.25, 0.25, 0.5) -> tie; q4 (0.85, 0.15) -> 1
    # P2: q1 (0.5, 0.5) -> tie; q2 2; q3 "1" (0.8, 0.2, 0) with "tie" (0.1, 0.1, 0.8) -> (0.45, 0.15, 0.4) -> 1;
    #     q4 (0.5, 0.5) -> tie.  P3: q1 1, q2 2, q3 2, q4 (0.5, 0.5) -> tie
    assert averaged == {
        "P1": ["1", "2", "tie", "1"],
        "P2": ["tie", "2", "1", "tie"],
        "P3": ["1", "2", "2", "tie"],
    }


def test_position_measures_by_hand(toy):
    w = toy["pairwise_wordings"]
    # position_consistency: P1 q1, q3, q4 agree -> 3/4; P2 only q2 -> 1/4; P3 q1, q2, q3 -> 3/4
    # first_position_rate (first shown = "1" in order 12, "2" in order 21; ties left out):
    #   P1: 12: 1 1 - 1 (3 first of 3), 21: 1 2 - 1 (1 first of 3) -> 4/6
    #   P2: 12: 1 2 1 2 (2 of 4),        21: 2 2 - 1 (2 of 3)       -> 4/7
    #   P3: 12: 1 2 2 1 (2 of 4),        21: 1 2 2 2 (3 of 4)       -> 5/8
    for var, pc, fpr, n in (("P1", 3 / 4, 4 / 6, 6), ("P2", 1 / 4, 4 / 7, 7), ("P3", 3 / 4, 5 / 8, 8)):
        r = _row(w, variant=var)
        assert r["position_consistency"] == pytest.approx(pc)
        assert r["first_position_rate"] == pytest.approx(fpr)
        assert r["first_position_rate_n"] == n
        assert r["position_consistency_lo"] <= pc <= r["position_consistency_hi"]
    # single-order ties: P1 2 of 8, P2 1 of 8, P3 0; inconsistent pairs: P1 1/4, P2 3/4, P3 1/4
    assert w["tie_share"].tolist() == [0.25, 0.125, 0.0]
    assert w["inconsistent_share"].tolist() == [0.25, 0.75, 0.25]


def test_configuration_measures_by_hand(toy):
    c = _row(toy["pairwise_configurations"], config_id=CID)
    # Fleiss over the two-order verdicts, categories (1, 2, tie), 3 raters:
    #   q1 {1: 2, tie: 1}, q2 {tie: 1, 2: 2}, q3 {tie: 2, 2: 1}, q4 {1: 1, tie: 2}
    #   P_i = (2^2 + 1^2 - 3) / (3 * 2) = 1/3 for every pair -> P_bar = 1/3
    #   p_j = (3, 3, 6) / 12 = (0.25, 0.25, 0.5) -> P_e = 0.0625 + 0.0625 + 0.25 = 0.375
    #   kappa = (1/3 - 0.375) / (1 - 0.375) = -1/15
    assert c["pairwise_paraphrase_kappa"] == pytest.approx(-1 / 15)
    assert c["kappa_n"] == 4
    # swap changes: inconsistent (pair, wording) cases 1 + 3 + 1 of 12
    assert c["position_change_share"] == pytest.approx(5 / 12)
    # wording changes, same order, 3 wording pairs x 4 pairs x 2 orders = 24 comparisons:
    #   order 12: P1 1 1 t 1 / P2 1 2 1 2 / P3 1 2 2 1: P1-P2 3, P1-P3 2, P2-P3 2 differ
    #   order 21: P1 1 2 t 1 / P2 2 2 t 1 / P3 1 2 2 2: P1-P2 1, P1-P3 2, P2-P3 3 differ -> 13/24
    assert c["wording_change_share"] == pytest.approx(13 / 24)
    assert c["first_position_rate"] == pytest.approx((4 + 4 + 5) / (6 + 7 + 8))
    # every pair's two-order verdict differs between some wordings
    assert c["changed_by_wording"] == 1.0
    # annotators, FastChat's human-human count: w/o tie 1/3 + 3/3 + 0/0 + 1/1 = 5/7; w/ tie 6/12
    assert c["annotator_agreement"] == pytest.approx(5 / 7)
    assert c["annotator_agreement_with_ties"] == 0.5
    assert (c["n_pairs"], c["n_clusters"], c["n_wordings"]) == (4, 3, 3)


# (judges, verdict) -> (human_agreement, with ties, FastChat w/o tie, coverage), worked out by hand
# against human = 1, 2, tie, 1 (untied human: q1, q2, q4)
HUMAN_BY_HAND = {
    # P1 order 12: 1 1 tie 1 -> q1, q4 right of 3; w/ tie q1, q3, q4 of 4; FastChat q1, q2 (1 vs 2), q4: 2/3
    ("P1", "order_12"): (2 / 3, 3 / 4, 2 / 3, 1.0),
    # P1 order 21: 1 2 tie 1 -> all right
    ("P1", "order_21"): (1.0, 1.0, 1.0, 1.0),
    # both orders pooled: (2 + 3) / (3 + 3); w/ tie (3 + 4) / 8
    ("P1", "single_order"): (5 / 6, 7 / 8, 5 / 6, 1.0),
    # P1 resolved 1 tie tie 1: q1, q4 right of 3; w/ tie + q3: 3/4; FastChat drops q2 (judge tie), q3: 2/2
    ("P1", "resolved"): (2 / 3, 3 / 4, 1.0, 1.0),
    ("P1", "averaged"): (1.0, 1.0, 1.0, 1.0),  # 1 2 tie 1
    # P2 resolved tie 2 tie tie: q2 right; w/ tie q2, q3; FastChat only q2: 1/1
    ("P2", "resolved"): (1 / 3, 2 / 4, 1.0, 1.0),
    # P2 averaged tie 2 1 tie: q2 right; w/ tie q2 only (q3 1 != tie); FastChat q2, q3 dropped -> 1/1
    ("P2", "averaged"): (1 / 3, 1 / 4, 1.0, 1.0),
    # P3 resolved 1 2 2 tie: q1, q2 of 3; w/ tie 2 of 4; FastChat q1, q2 -> 2/2
    ("P3", "resolved"): (2 / 3, 2 / 4, 1.0, 1.0),
    # plurality cluster (2 of 3) of the two-order verdicts: q1 1 t 1 -> 1; q2 t 2 2 -> 2; q3 t t 2 -> tie;
    # q4 1 t t -> tie => 1 2 tie tie: q1, q2 of 3; w/ tie + q3: 3/4; FastChat q1, q2: 2/2
    ("plurality cluster of the wordings", "resolved"): (2 / 3, 3 / 4, 1.0, 1.0),
    # cluster of the averaged verdicts: q1 1 t 1 -> 1; q2 -> 2; q3 t 1 2 -> none (a tie); q4 1 t t -> tie
    ("plurality cluster of the wordings", "averaged"): (2 / 3, 3 / 4, 1.0, 0.75),
    # cluster of the order-12 verdicts: q1 1 1 1; q2 1 2 2 -> 2; q3 t 1 2 -> none; q4 1 2 1 -> 1
    ("plurality cluster of the wordings", "order_12"): (1.0, 1.0, 1.0, 0.75),
    # 4 of the 6 single-order verdicts: q1 five 1s; q2 five 2s; q3 3 ties -> none; q4 four 1s
    ("plurality cluster of the wordings x orders", "single_order"): (1.0, 1.0, 1.0, 0.75),
}


@pytest.mark.parametrize(("judges", "verdict"), list(HUMAN_BY_HAND))
def test_human_agreement_by_hand(toy, judges, verdict):
    r = _row(toy["pairwise_human_agreement"], judges=judges, verdict=verdict)
    ha, ht, fc, cov = HUMAN_BY_HAND[(judges, verdict)]
    assert r["human_agreement"] == pytest.approx(ha)
    assert r["human_agreement_with_ties"] == pytest.approx(ht)
    assert r["human_agreement_fastchat"] == pytest.approx(fc)
    assert r["coverage"] == pytest.approx(cov)


# Auto-J (pairwise_eval.py): right only when both orders give the 3-class gold (1, 2, tie, 1), of all 4 pairs;
# JudgeBench (utils/metrics.py): +1 per order on the gold, -1 per order on the other side, right when > 0, of
# the untied-gold pairs q1, q2, q4
PAPER_RULES_BY_HAND = {
    # P1 1/1 1/2 tie/tie 1/1: Auto-J q1 q3 q4 -> 3/4; JudgeBench q1 +2, q2 -1+1 = 0, q4 +2 -> 2/3
    "P1": (3 / 4, 2 / 3),
    # P2 1/2 2/2 1/tie 2/1: Auto-J q2 -> 1/4; JudgeBench q1 +1-1, q2 +2, q4 -1+1 -> 1/3
    "P2": (1 / 4, 1 / 3),
    # P3 1/1 2/2 2/2 1/2: Auto-J q1 q2 (q3's 2/2 is not the tie) -> 2/4; JudgeBench q1, q2; q4 +1-1 -> 2/3
    "P3": (2 / 4, 2 / 3),
}


@pytest.mark.parametrize("wording", list(PAPER_RULES_BY_HAND))
def test_autoj_and_judgebench_rules_by_hand(toy, wording):
    r = _row(toy["pairwise_human_agreement"], judges=wording, verdict="resolved")
    autoj, judgebench = PAPER_RULES_BY_HAND[wording]
    assert r["human_agreement_autoj"] == pytest.approx(autoj) and r["human_agreement_autoj_n"] == 4
    assert r["human_agreement_judgebench"] == pytest.approx(judgebench)
    assert r["human_agreement_judgebench_n"] == 3
    # the rules that read both orders are not computed on one order or an aggregate
    one = _row(toy["pairwise_human_agreement"], judges=wording, verdict="order_12")
    assert np.isnan(one.get("human_agreement_autoj", np.nan))


def test_judge_against_each_annotator_by_hand(toy):
    r = _row(toy["pairwise_human_agreement"], judges="P1", verdict="resolved")
    # judge 1 tie tie 1; w/o tie: q1 "1" vs 1 1 2 -> 2/3, q2 q3 skipped, q4 vs 1 1 -> 2/2: 4/5
    assert r["judge_rater_agreement"] == pytest.approx(0.8)
    # w/ tie: q1 2/3, q2 tie vs 2 2 2 0/3, q3 tie vs tie tie 1 2/3, q4 "1" vs 1 tie 1 2/3 -> 6/12
    assert r["judge_rater_agreement_with_ties"] == pytest.approx(0.5)


def test_rank_flips_by_hand(toy):
    systems = toy["pairwise_rank_systems"]
    wr = systems[systems["score"] == "win_rate"].pivot(index="system", columns="variant", values="value")
    # P1 (1 tie tie 1): x beats y twice, ties z -> 2.5/3; y 0.5/3; z 1/2
    # P2 (tie 2 tie tie): x 1/3, y 1.5/3, z 1.5/2;  P3 (1 2 2 tie): x 1.5/3, y 0.5/3, z 2/2
    expected = pd.DataFrame(
        {"P1": [2.5 / 3, 0.5 / 3, 0.5], "P2": [1 / 3, 0.5, 0.75], "P3": [0.5, 0.5 / 3, 1.0]},
        index=["x", "y", "z"],
    )
    pd.testing.assert_frame_equal(wr, expected, check_names=False, check_index_type=False)
    s = _row(toy["pairwise_rank_summary"], score="win_rate")
    # tau P1-P2 -1/3, P1-P3 1/3, P2-P3 1/3 -> 1/9; flips 2/3, 1/3, 1/3 -> 4/9; rank changes 3/3, 2/3, 2/3 -> 7/9
    assert (s["kendall_tau"], s["flip_share"], s["rank_change_share"]) == pytest.approx((1 / 9, 4 / 9, 7 / 9))
    assert s["n_systems"] == 3 and s["n_games"] == 4
    assert s["kendall_tau_lo"] <= s["kendall_tau_hi"]
    bt = _row(toy["pairwise_rank_summary"], score="bradley_terry")
    assert np.isfinite(bt["kendall_tau"]) and "point estimates" in bt["note"]


def test_the_fixed_baseline_of_every_game_is_left_out_of_the_ranking():
    # MT-Bench's pairwise-baseline design: a, b, c each play only "base" (FastChat's show_result.py drops the
    # baseline from the table). P1: a wins, b loses, c ties -> win rates a 1, b 0, c 1/2;
    # P2: a loses, b wins, c wins -> a 0, b 1, c 1.
    # a, b, c only: (a, b) and (a, c) opposite, (b, c) tied under P2 -> flip share 2/3; tau-b = (0 - 2) /
    # sqrt(3 x 2) = -2/sqrt(6); ranks P1 a1 c2 b3, P2 b1 c1 a3 -> every system changes rank.
    systems = {"q1": ("a", "base"), "q2": ("base", "b"), "q3": ("c", "base")}
    verdicts = {
        "P1": {"q1": ("1", "1"), "q2": ("1", "1"), "q3": ("tie", "tie")},
        "P2": {"q1": ("2", "2"), "q2": ("2", "2"), "q3": ("1", "1")},
    }
    t = pairwise_tables(pairwise_rows(verdicts, dict.fromkeys(systems, "1"), systems=systems), **BOOT)
    wr = _row(t["pairwise_rank_summary"], score="win_rate")
    assert wr["baseline"] == "base" and wr["n_systems"] == 3 and wr["n_games"] == 3
    assert "baseline base (in every game) not ranked" in wr["note"]
    assert wr["kendall_tau"] == pytest.approx(-2 / np.sqrt(6))
    assert (wr["flip_share"], wr["rank_change_share"]) == pytest.approx((2 / 3, 1.0))
    ranked = t["pairwise_rank_systems"]
    assert set(ranked["system"]) == {"a", "b", "c"}
    got = ranked[ranked["score"] == "win_rate"].pivot(index="system", columns="variant", values="value")
    assert got["P1"].tolist() == [1.0, 0.0, 0.5] and got["P2"].tolist() == [0.0, 1.0, 1.0]
    bt = _row(t["pairwise_rank_summary"], score="bradley_terry")
    assert bt["n_systems"] == 3 and "base" not in set(
        ranked.loc[ranked["score"] == "bradley_terry", "system"]
    )
    # no system in every game (the toy's x, y, z): nothing left out
    assert (
        _row(pairwise_tables(toy_table(), **BOOT)["pairwise_rank_summary"], score="win_rate")["baseline"]
        == ""
    )


def test_always_a_judge():
    """A fake judge whose answer is always "A": response_a in order 12, response_b in order 21."""
    items = {f"q{i}": ("1", "2") for i in range(6)}
    human = {f"q{i}": "1" if i % 2 else "2" for i in range(6)}  # untied
    t = pairwise_tables(pairwise_rows({"P1": items, "P2": items}, human), **BOOT)
    w = t["pairwise_wordings"]
    assert w["position_consistency"].tolist() == [0.0, 0.0]
    assert w["first_position_rate"].tolist() == [1.0, 1.0]
    # every pair inconsistent -> a tie under both wordings: the wordings agree, yet on nothing
    c = t["pairwise_configurations"].iloc[0]
    assert c["position_change_share"] == 1.0 and c["wording_change_share"] == 0.0
    # a judge always inconsistent never matches an untied human preference
    r = _row(t["pairwise_human_agreement"], judges="P1", verdict="resolved")
    assert r["human_agreement"] == 0.0
    assert "the verdict follows the position more than the wording" in t["pairwise_verdict"]["sentence"][0]
    assert "a bias towards the answer shown first" in t["pairwise_verdict"]["sentence"][0]


def test_verdict_sentence_and_metrics(toy):
    sentence = toy["pairwise_verdict"]["sentence"][0]
    assert sentence.startswith(f"{CID} (pairwise):")
    assert "Swapping the two answers changes the verdict on 41.7%" in sentence
    assert "changes it on 54.2%" in sentence
    m = pairwise_metrics(toy)
    assert m[f"pairwise/{CID}/P2/position_consistency"] == 0.25
    assert m[f"pairwise/{CID}/P1/first_position_rate"] == pytest.approx(4 / 6)
    assert m[f"pairwise/{CID}/pairwise_paraphrase_kappa"] == pytest.approx(-1 / 15)
    assert m[f"pairwise/{CID}/P1/human_agreement"] == pytest.approx(2 / 3)
    assert m[f"pairwise/{CID}/P1/human_agreement_with_ties"] == 0.75
    assert m[f"pairwise/{CID}/P1/averaged/human_agreement"] == 1.0
    assert m[f"pairwise/{CID}/plurality_cluster_of_the_wordings/resolved/human_agreement"] == pytest.approx(
        2 / 3
    )
    assert m[f"pairwise/{CID}/win_rate/rank_change_share"] == pytest.approx(7 / 9)
    assert f"pairwise/{CID}/annotator_agreement" in m and f"pairwise/{CID}/P1/position_consistency_lo" in m
    assert all(np.isfinite(v) for v in m.values())


# --------------------------------------------------------------------------- bad inputs


def test_missing_contract_column_names_the_column_and_file():
    df = toy_table(run_dir="outputs/sweep/0_P1").drop(columns="order")
    with pytest.raises(AnalysisError) as err:
        pair_table(df)
    msg = str(err.value)
    assert "\n" not in msg
    assert "['order']" in msg and "outputs/sweep/0_P1/judgments.parquet" in msg


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        ("order", "13", "has order='13'; expected one of ['12', '21']"),
        ("preferred", "A", "has preferred='A'; expected one of ['1', '2', 'tie'] or empty"),
        ("human_preferred", "0.5", "has human_preferred='0.5'"),
    ],
)
def test_bad_values_name_the_row_and_file(column, value, expected):
    df = toy_table(run_dir="runs/j1")
    df.loc[5, column] = value
    with pytest.raises(AnalysisError) as err:
        pair_table(df)
    msg = str(err.value)
    assert expected in msg and "runs/j1/judgments.parquet" in msg
    assert f"item_id={df.loc[5, 'item_id']!r}" in msg and "\n" not in msg


def test_duplicate_and_clashing_rows():
    df = toy_table(run_dir="runs/j1")
    with pytest.raises(AnalysisError, match=r"two judgments of item_id='q1' variant='P1' order='12'"):
        pair_table(pd.concat([df, df.iloc[[0]]], ignore_index=True))
    df.loc[1, "human_preferred"] = "2"  # q1, P1, order 21
    with pytest.raises(
        AnalysisError, match=r"item_id='q1' variant='P1' has human_preferred='1' in order 12 but '2'"
    ):
        pair_table(df)


def test_a_missing_order_leaves_the_pair_out_of_the_two_order_measures():
    df = toy_table()
    df = df[~((df["item_id"] == "q2") & (df["variant"] == "P1") & (df["order"] == "21"))]
    t = pairwise_tables(df, **BOOT)
    r = _row(t["pairwise_wordings"], variant="P1")
    # q1, q3, q4 remain, all consistent
    assert r["position_consistency"] == 1.0 and r["position_consistency_n"] == 3
    assert r["missing_share"] == pytest.approx(1 / 8)
    # q2 has no P1 two-order verdict: Fleiss on the 3 complete pairs
    assert _row(t["pairwise_configurations"], config_id=CID)["kappa_n"] == 3


# --------------------------------------------------------------------------- the lottery stage


def _opts(**kw) -> LotteryOptions:
    return LotteryOptions.from_dict({"runs": "unused", "embeddings": "none", "plots": False, **BOOT, **kw})


def test_a_pairwise_table_alone_gets_the_section_and_metrics(tmp_path):
    opts = _opts()
    grid = JudgmentGrid.from_frame(toy_table())
    assert not len(grid) and list(grid.rows("pairwise")) == [
        CID
    ]  # the pairwise rows: a verdict kind of their own
    result = analyse(grid, opts)
    written = write_outputs(result, grid, opts, tmp_path, [])
    report = written["report"].read_text()
    assert "## Pairwise judges" in report
    assert (
        "n/a: no configuration with paraphrase verdicts" not in report
    )  # the pairwise sentence is the verdict
    assert f"- {CID} (pairwise): " in report
    assert (tmp_path / "tables" / "pairwise_human_agreement.csv").exists()
    metrics = summary_metrics(result["tables"])
    assert metrics[f"pairwise/{CID}/P1/position_consistency"] == 0.75
    json.dumps(metrics)  # results.json-ready


def _report(tmp_path, df: pd.DataFrame) -> str:
    opts = _opts()
    grid = JudgmentGrid.from_frame(df)
    return write_outputs(analyse(grid, opts), grid, opts, tmp_path, [])["report"].read_text()


def _report_row(report: str, *cells: str) -> list[str]:
    """The cells of the first Markdown table row of report.md that starts with ``cells``."""
    for line in report.splitlines():
        parts = [c.strip() for c in line.strip().strip("|").split("|")]
        if parts[: len(cells)] == list(cells):
            return parts
    raise AssertionError(f"no report row {cells}")


def test_every_printed_pairwise_measure_carries_its_own_n(tmp_path):
    # P1 order-resolved 1 I tie 1 against 1 2 tie 1: human_agreement on the 3 untied-human pairs (2/3); FastChat
    # w/o tie drops q2 (a judge tie) and q3 (a human tie): 2/2 on 2 pairs; with ties on all 4 (3/4)
    row = _report_row(_report(tmp_path, toy_table()), CID, "P1", "resolved")
    assert row[3] == "4"  # pairs
    assert row[4].startswith("0.667") and row[4].endswith("(n=3)")
    assert row[5].startswith("0.750") and row[5].endswith("(n=4)")
    assert row[6].startswith("1.000") and row[6].endswith("(n=2)")
    assert row[7].startswith("0.750") and row[7].endswith("(n=4)")  # Auto-J
    assert row[8].startswith("0.667") and row[8].endswith("(n=3)")  # JudgeBench


def test_autoj_prints_its_papers_rule_as_the_comparable_row(tmp_path):
    df = toy_table()
    df["dataset"] = "autoj_pairwise"
    report = _report(tmp_path, df)
    cid = "autoj_pairwise/pairwise/G17/fake"
    marker = "The row comparable to each dataset's own paper"
    row = _report_row(report[report.index(marker) :], cid, "P2")
    assert row[2].startswith("Auto-J (pairwise_eval.py)") and row[3] == "human_agreement_autoj"
    assert row[4].startswith("0.250") and row[4].endswith("(n=4)")
    assert "The row comparable to each dataset's own paper" not in _report(tmp_path / "toy", toy_table())


def test_pairwise_rows_beside_pointwise_ones_leave_sections_1_to_8_alone(tmp_path):
    opts = _opts()
    point = load_judgments(default_judgments())
    pair = toy_table()
    alone = analyse(JudgmentGrid.from_frame(point), opts)["tables"]
    both = analyse(JudgmentGrid.from_frame(pd.concat([point, pair], ignore_index=True)), opts)["tables"]
    pd.testing.assert_frame_equal(alone["agreement_collapse"], both["agreement_collapse"])
    assert len(both["verdict"]) == len(alone["verdict"]) + 1
    assert both["verdict"]["sentence"].iloc[-1].startswith(f"{CID} (pairwise)")
    assert "pairwise_wordings" in both and "pairwise_wordings" not in alone

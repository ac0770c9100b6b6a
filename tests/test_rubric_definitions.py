"""The rubric paper's definitions, each on a small case computed by hand from the paper's words
(issue 12): Bonferroni by block size, the ASAP sets 4/6 human holistic score, the agree vs
disagree strata, and the analytic examples shared by every criterion."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from promptlottery.data import load_items
from promptlottery.data.schema import Item
from promptlottery.metrics import kendall_tau
from promptlottery.rubrics.cells import Cell, Table
from promptlottery.rubrics.ci import block_cells, comparisons_in_block, interval_ranks, paper_marks
from promptlottery.rubrics.claims import ours_separate_vs_batch
from promptlottery.rubrics.paper_reference import paper_value
from promptlottery.rubrics.prompts import PromptBuilder, RubricCondition
from promptlottery.rubrics.strata import compare_strata, ours_agree_disagree, two_strata
from promptlottery.rubrics.tables import Settings, StudyData
from promptlottery.rubrics.tasks import make_task
from tests.conftest import DATA_DIR
from tests.test_rubric_study import make_asap


# ============================================================== Bonferroni only for three conditions
def test_three_conditions_use_the_8th_9th_and_991st_992nd_of_1000_differences():
    # alpha = 0.05 / 3 per block of three: R * alpha / 2 = 8.33 and R * (1 - alpha / 2) = 991.67
    assert interval_ranks(1000, comparisons_in_block(3)) == ((8, 9), (991, 992))
    # two conditions: one comparison, no correction: 25 and 975
    assert interval_ranks(1000, comparisons_in_block(2)) == ((25,), (975,))


def _mean_of_condition(_ref, cond):
    return float(np.mean(cond))


@pytest.mark.parametrize("n_conditions", [2, 3])
def test_a_blocks_paired_interval_depends_on_how_many_conditions_it_compares(n_conditions):
    rng = np.random.default_rng(5)
    n = 12
    ref = np.arange(n, dtype=float)
    values = [rng.normal(size=n) + k for k in range(n_conditions)]
    conds = [
        (RubricCondition(name=f"c{k}", kind="holistic", label=f"c{k}"), f"c{k}", v)
        for k, v in enumerate(values)
    ]
    tests: list[dict] = []
    block_cells("t", "block", "col", _mean_of_condition, ref, conds, Settings(seed=3), tests=tests)
    # the 1000 resamples of the items, as metrics.resample_indices documents them
    idx = np.random.default_rng(3).integers(0, n, size=(1000, n))
    diff = np.sort(values[0][idx].mean(axis=1) - values[1][idx].mean(axis=1))
    first = next(t for t in tests if (t["a"], t["b"]) == ("c0", "c1"))
    if n_conditions == 3:  # means of the 8th/9th and the 991st/992nd sorted values
        assert first["n_comparisons"] == 3 and len(tests) == 3
        assert first["low"] == pytest.approx((diff[7] + diff[8]) / 2, abs=1e-12)
        assert first["high"] == pytest.approx((diff[990] + diff[991]) / 2, abs=1e-12)
        assert first["interval_ranks"] == "8th/9th and 991st/992nd"
    else:  # the 25th and the 975th
        assert first["n_comparisons"] == 1 and len(tests) == 1
        assert first["low"] == pytest.approx(diff[24], abs=1e-12)
        assert first["high"] == pytest.approx(diff[974], abs=1e-12)
        assert first["interval_ranks"] == "25th and 975th"


# ====================================================== intervals contain their estimate (§4.3)
def _one_dominating_pair() -> tuple[np.ndarray, np.ndarray]:
    """12 essays with distinct human scores 0..11 and analytic scores where only essay 0 dominates
    essay 1 (and is ranked below it by the human): every other pair trades one criterion for another."""
    human = np.arange(12, dtype=float)
    analytic = np.array([[12.0 - k, float(k)] for k in range(12)])  # each pair incomparable ...
    analytic[0], analytic[1] = [11.5, 0.5], [11.4, 0.4]  # ... except 0 > 1 on both criteria
    return human, analytic


def test_a_pareto_tau_on_one_dominating_pair_prints_no_interval_that_excludes_it():
    from promptlottery.metrics import pareto_dominance_tau

    human, analytic = _one_dominating_pair()
    # by hand (§4.3 and tau-b): 66 human-untied pairs, 1 dominance pair, discordant: S = -1
    by_hand = -1 / math.sqrt(66 * 1)
    cond = RubricCondition(name="sep", kind="analytic", label="Sep.")
    (cell,) = block_cells(
        "t", "b", "col", pareto_dominance_tau, human, [(cond, "Sep.", analytic)], Settings()
    )
    assert cell.estimate == pytest.approx(by_hand, abs=1e-12)
    # a resample is defined only when it holds both essays 0 and 1 (the only dominating pair)
    idx = np.random.default_rng(0).integers(0, 12, size=(1000, 12))
    n_defined = int(((idx == 0).any(axis=1) & (idx == 1).any(axis=1)).sum())
    # every defined resample counts the pair w0 * w1 >= 1 times against at most 65 distinct pairs
    # (66 only for a permutation of the 12 essays, which seed 0's 1000 draws do not hold):
    # |tau*| >= 1 / sqrt(65) > |tau|, so the percentile interval cannot hold the estimate
    assert cell.low is None and cell.high is None
    assert cell.note.startswith("no CI: the percentile interval")
    assert f"the {n_defined} of 1000 resamples where tau is defined" in cell.note
    assert cell.text() == "-0.123 (no CI)"


def test_an_interval_over_the_defined_resamples_says_how_many_it_rests_on():
    from promptlottery.metrics import BootstrapResult
    from promptlottery.rubrics.cells import Cell
    from promptlottery.rubrics.ci import set_interval

    dist = np.array([np.nan, 0.1, 0.2, 0.3, np.nan, 0.4])
    cell = Cell("t", "b", "r", "c")
    set_interval(cell, BootstrapResult(0.25, 0.1, 0.4, 0.95, 6, dist))
    assert (cell.estimate, cell.low, cell.high) == (0.25, 0.1, 0.4)
    assert cell.note == "CI over the 4 of 6 resamples where tau is defined (2 undefined)"
    assert cell.text() == "0.250 [0.100, 0.400] (CI on 4/6 resamples)"
    full = Cell("t", "b", "r", "c")
    set_interval(full, BootstrapResult(0.25, 0.1, 0.4, 0.95, 3, np.array([0.1, 0.25, 0.4])))
    assert full.note == "" and full.text() == "0.250 [0.100, 0.400]"


def test_every_interval_of_the_fake_study_holds_its_estimate(tmp_path):
    """End to end on the set-1 fixture with the hash fake on both backbones: no printed interval
    excludes its estimate, and every paired test counts its undefined resamples."""
    from promptlottery.stages import run_stage
    from tests.test_rubric_study import RecordingFake, compose_rubric

    data = make_asap(tmp_path / "data")
    cfg = compose_rubric("rubric_asap_set1", data, tmp_path, ["dataset.limit=12"])
    job = tmp_path / "job"
    run_stage(
        cfg, job, backends={"smollm2": RecordingFake(model="a"), "gemma3_270m": RecordingFake(model="b")}
    )
    df = pd.read_csv(job / "cells.csv")
    ours = df[(df.source == "ours") & df.low.notna()]
    assert len(ours) > 20
    assert ((ours.low <= ours.estimate + 1e-12) & (ours.estimate <= ours.high + 1e-12)).all()
    tests = pd.read_csv(job / "significance.csv")
    assert tests.loc[tests.error.isna() if "error" in tests else slice(None), "n_undefined"].notna().all()


# ================================================================ ASAP sets 4 and 6: one score
def _asap_set6(root: Path, essays: list[tuple[int, int, int]]) -> Path:
    """ASAP set 6 files for ``essays`` = (rater 1, rater 2, resolved domain1_score)."""
    base = root / "asap"
    (base / "asap_original_by_prompt").mkdir(parents=True)
    (base / "rubrics" / "asapplusplus_trait_scores").mkdir(parents=True)
    with open(base / "asap_original_by_prompt" / "essay_set_6.tsv", "w", newline="") as f:
        w = csv.writer(f, delimiter="\t")
        w.writerow(["essay_id", "essay_set", "essay", "rater1_domain1", "rater2_domain1", "domain1_score"])
        for k, (r1, r2, final) in enumerate(essays):
            w.writerow([600 + k, 6, f"essay {k} about the mast", r1, r2, final])
    with open(base / "rubrics" / "asapplusplus_trait_scores" / "Prompt-6.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Essay ID", "Content", "Prompt Adherence", "Language", "Narrativity"])
        for k in range(len(essays)):
            w.writerow([600 + k, 2, 2, 2, 2])
    (base / "rubrics" / "set6_holistic_rubric.txt").write_text("Score Point 4: strong.\n")
    (base / "rubrics" / "set6_info_and_adjudication.txt").write_text("Grade level: | 10\n")
    return root


def test_asap_set6_holistic_is_the_resolved_single_score_not_the_raters_mean(tmp_path):
    # essay A: raters 2 and 3 -> the higher, 3 ("the FINAL SCORE was always the higher of the two");
    # B: both 3 -> 3; C: 1 and 3, not adjacent -> the third (expert) reader's 2. Means: 2.5, 3, 2.
    data = _asap_set6(tmp_path / "data", [(2, 3, 3), (3, 3, 3), (1, 3, 2)])
    items = load_items("asap", data_dir=data, essay_set=6)
    paper = make_task("asap", data, {"essay_set": 6}, {})
    assert paper.human_holistic_source == "resolved"
    assert [paper.human_holistic(it) for it in items] == [3.0, 3.0, 2.0]
    old = make_task("asap", data, {"essay_set": 6}, {}, human_holistic="rater_mean")
    assert [old.human_holistic(it) for it in items] == [2.5, 3.0, 2.0]
    # what it does to Delta rater: against model scores 1, 2, 3 (tau-b by hand)
    model = np.array([1.0, 2.0, 3.0])
    study = StudyData(paper, items, _no_scores(), [], [])
    # resolved 3, 3, 2: (A,B) tied in the human, (A,C) and (B,C) discordant: -2 / sqrt(2 * 3)
    assert kendall_tau(study.human_holistic, model) == pytest.approx(-2 / math.sqrt(6), abs=1e-12)
    # mean 2.5, 3, 2: (A,B) concordant, (A,C) and (B,C) discordant: (1 - 2) / 3
    mean = StudyData(old, items, _no_scores(), [], []).human_holistic
    assert kendall_tau(mean, model) == pytest.approx(-1 / 3, abs=1e-12)
    # the strata still read both raters: A and C disagree, B agrees
    assert list(two_strata(study.strata)) == ["disagree", "agree", "disagree"]


def test_human_holistic_option_is_checked(tmp_path):
    data = make_asap(tmp_path / "data")
    # set 1's resolved score is the raters' sum (2-12): the mean is the default and ranks the same
    assert make_task("asap", data, {"essay_set": 1}, {}).human_holistic_source == "rater_mean"
    with pytest.raises(ValueError, match="not the rater scale"):
        make_task("asap", data, {"essay_set": 1}, {}, human_holistic="resolved")
    with pytest.raises(ValueError, match="must be one of"):
        make_task("asap", data, {"essay_set": 1}, {}, human_holistic="median")


def _no_scores():
    return pd.DataFrame(columns=["backbone", "condition", "item_id", "position", "score"])


# ============================================================ agree vs disagree (Table 4)
def test_two_strata_split_equal_rater_scores_from_the_rest():
    assert list(two_strata(["full", "partial", "none", None, "full"])) == [
        "agree",
        "disagree",
        "disagree",
        "",
        "agree",
    ]


def test_agree_vs_disagree_on_four_items():
    # human 1, 2, 3, 4; the raters agree on the first two items. The model ranks the agree pair as
    # the humans do (tau 1) and the disagree pair the other way round (tau -1): difference 2. Every
    # resample of a stratum gives the same tau or none, so the interval is [2, 2]: significant.
    human = np.array([1.0, 2.0, 3.0, 4.0])
    agree = np.array([True, True, False, False])
    res = compare_strata(kendall_tau, human, np.array([1.0, 2.0, 4.0, 3.0]), agree, n_resamples=200)
    assert (res.agree, res.disagree, res.difference) == (1.0, -1.0, 2.0)
    assert (res.low, res.high, res.significant) == (2.0, 2.0, True)
    assert (res.n_agree, res.n_disagree) == (2, 2)
    # both pairs ranked as the humans do: difference 0, interval [0, 0], not significant
    same = compare_strata(kendall_tau, human, np.array([1.0, 2.0, 3.0, 4.0]), agree, n_resamples=200)
    assert (same.difference, same.low, same.high, same.significant) == (0.0, 0.0, 0.0, False)


# ============================================== analytic examples: the same three essays throughout
def _essay(eid: str, raters: tuple[int, int], traits: list[int]) -> Item:
    names = ("content", "organization", "word_choice", "sentence_fluency", "conventions")
    return Item(
        id=eid,
        dataset="asap",
        inputs={"essay": f"text of {eid}", "response": f"text of {eid}", "prompt": "", "source": ""},
        human={"holistic": list(raters), **{n: [v] for n, v in zip(names, traits)}},
        human_kind="per_rater",
        meta={"asap_pp": "ok", "domain1_score": sum(raters)},
    )


def test_set_1_examples_are_the_papers_essays_for_3ex_and_every_edited_criterion(tmp_path):
    # Appendix B.1: "The examples chosen from ASAP++ are essay IDs 449, 1264, 1616, ..."; on set 1 their
    # ASAP++ traits are all 1 (449), all 4 (1264) and all 6 (1616): low, medium, high
    task = make_task("asap", make_asap(tmp_path / "data"), {"essay_set": 1}, {})
    assert task.reserved_ids() == ("asap-1616", "asap-1264", "asap-449")
    pool = [
        _essay("asap-1616", (4, 5), [6, 6, 6, 6, 6]),
        _essay("asap-1264", (4, 5), [4, 4, 4, 4, 4]),
        _essay("asap-449", (1, 1), [1, 1, 1, 1, 1]),
        _essay("other", (6, 6), [6, 5, 6, 6, 6]),  # our old rule would have picked it for "high"
    ]
    builder = PromptBuilder(task, "asap", pool, seed=0)
    holistic = RubricCondition(name="h3", kind="holistic", examples="three")
    # shown with the human holistic label of set 1 (the raters' mean): 4.5, 4.5, 1
    got = [(e.item_id, e.label) for e in builder.examples(holistic, None)]
    assert got == [("asap-1616", "4.5"), ("asap-1264", "4.5"), ("asap-449", "1")]
    edited = RubricCondition(name="edited", kind="analytic", examples="three", context=True)
    for c in task.criteria(None):
        assert [(e.item_id, e.label) for e in builder.examples(edited, c)] == [
            ("asap-1616", "6"),
            ("asap-1264", "4"),
            ("asap-449", "1"),
        ]
    # a paper essay missing from the pool is an error naming it
    with pytest.raises(ValueError, match="asap-449"):
        PromptBuilder(task, "asap", pool[:2], seed=0).examples(holistic, None)


def test_the_sample_never_holds_the_papers_example_essays(tmp_path):
    from promptlottery.rubrics.study import draw_sample

    data = make_asap(tmp_path / "data")
    task = make_task("asap", data, {"essay_set": 1}, {})
    items = load_items("asap", data_dir=data, essay_set=1)
    sample, pool = draw_sample(task, items, None, seed=0)  # every eligible item
    ids = {it.id for it in sample}
    assert not ids & {"asap-1616", "asap-1264", "asap-449"}
    assert {"asap-1616", "asap-1264", "asap-449"} <= {it.id for it in pool}


def test_marks_follow_the_papers_caption_on_toy_blocks():
    # "† ... significantly larger within holistic prompts": Full 0.437 vs 3ex 0.387, significant -> Full †
    assert paper_marks(["holistic", "holistic"], [0.437, 0.387], {(0, 1)}) == ["†", ""]
    assert paper_marks(["holistic", "holistic"], [0.437, 0.387], set()) == ["", ""]  # not significant
    # "⋆ ... significantly larger between separate and batch"; edited vs separate (s) / batch (b):
    # ↑ larger, ↓ smaller. Prompt 1 Or. with Llama: Sep. 0.547, Bat. 0.524, Edited 0.529 -> 0.547⋆ / 0.529 s↓
    assert paper_marks(["separate", "batch", "edited"], [0.547, 0.524, 0.529], {(0, 1), (0, 2)}) == [
        "⋆",
        "",
        "s↓",
    ]
    # GPT-4o: Sep. 0.497, Bat. 0.448, Edited 0.544, all three pairs significant -> 0.497⋆ / 0.544 s,b↑
    assert paper_marks(["separate", "batch", "edited"], [0.497, 0.448, 0.544], {(0, 1), (0, 2), (1, 2)}) == [
        "⋆",
        "",
        "s,b↑",
    ]
    # the batch prompt larger than separate carries the star; edited above b but below s: "b↑ s↓"
    marks = paper_marks(["separate", "batch", "edited"], [0.30, 0.40, 0.35], {(0, 1), (0, 2), (1, 2)})
    assert marks == ["", "⋆", "s↑ b↓"]  # edited 0.35 > separate 0.30 (s↑), < batch 0.40 (b↓)


def test_bonferroni_marks_on_a_toy_p_value_list():
    # three analytic conditions -> three tests at alpha = 0.05 / 3 = 0.0167 each: of the two-sided
    # p-values 0.01, 0.02, 0.04 only the first survives (0.02 and 0.04 would at 0.05 alone), so only
    # Sep. vs Bat. is marked. Two holistic conditions -> one test at 0.05: 0.04 is significant.
    alpha3 = 0.05 / comparisons_in_block(3)
    p = {(0, 1): 0.01, (0, 2): 0.02, (1, 2): 0.04}
    sig = {pair for pair, v in p.items() if v < alpha3}
    assert sig == {(0, 1)}
    assert paper_marks(["separate", "batch", "edited"], [0.5, 0.4, 0.45], sig) == ["⋆", "", ""]
    alpha2 = 0.05 / comparisons_in_block(2)
    assert alpha2 == 0.05 and 0.04 < alpha2
    assert paper_marks(["holistic", "holistic"], [0.6, 0.7], {(0, 1)}) == ["", "†"]


def test_paper_reference_values_are_the_printed_ones():
    # Table 1, prompt 1, Delta rater, H.: "0.437†" (GPT-4o Full), Llama 0.576 / 0.571
    assert paper_value("table1", "1", "Delta rater", "H.", "Full") == {
        "GPT-4o": (0.437, "†"),
        "Llama": (0.576, ""),
    }
    # §5.1: "0.591, 0.656, 0.681 compared to 0.750, 0.817, 0.773 for GPT" (H_H->H_A vs batch, full row)
    for ds, human, batch in (("1", 0.591, 0.750), ("4", 0.656, 0.817), ("6", 0.681, 0.773)):
        assert paper_value("table1", ds, "Delta rubric", "Full", "H_H->H_A")["GPT-4o"] == (human, "")
        assert paper_value("table1", ds, "Delta rubric", "Full", "Bat.")["GPT-4o"][0] == batch
    # §A.1: "H_H -> LLM_A, 0.401, 0.682, and 0.644" (edited) and "LLM_H -> H_A, 0.539, 0.688, and 0.645" (worst)
    for ds, best, worst in (("1", 0.401, 0.539), ("4", 0.682, 0.688), ("6", 0.644, 0.645)):
        row = {c: v for c, v in ((c, paper_value("table4", ds, "Delta rater+rubric", ds, c)) for c in
               ("H_H->LLM_A Edited", "LLM_H->H_A Full", "LLM_H->H_A 3ex"))}  # fmt: skip
        assert row["H_H->LLM_A Edited"]["GPT-4o"][0] == best
        assert min(row["LLM_H->H_A Full"]["GPT-4o"][0], row["LLM_H->H_A 3ex"]["GPT-4o"][0]) == worst


def test_table4_gives_a_large_enough_stratum_its_tau_when_the_other_is_too_small(tmp_path):
    # essays A (2, 3 -> 3), B (3, 3 -> 3), C (1, 3 -> 2): B agrees (1 item), A and C disagree (2).
    # The model scores A 1 and C 3, the resolved human scores 3 and 2: one discordant pair, tau -1
    data = _asap_set6(tmp_path / "data", [(2, 3, 3), (3, 3, 3), (1, 3, 2)])
    items = load_items("asap", data_dir=data, essay_set=6)
    task = make_task("asap", data, {"essay_set": 6}, {})
    cond = RubricCondition(name="h", kind="holistic", label="holistic")
    scores = pd.DataFrame(
        {
            "backbone": "m",
            "condition": "h",
            "item_id": [it.id for it in items],
            "position": 0,
            "score": [1.0, 2.0, 3.0],
        }
    )
    d = StudyData(task, items, scores, [cond], ["m"])
    t = ours_agree_disagree(d, Settings(min_items=2, n_resamples=50), [])
    got = {c.column: c for c in t.cells if c.block.startswith("Delta rater:")}
    assert got["m: disagree"].estimate == pytest.approx(-1.0) and got["m: disagree"].n == 2
    assert got["m: agree"].estimate is None and got["m: agree"].note.startswith("n/a: n=1 agree / 2 disagree")
    assert got["m: agree - disagree"].estimate is None


@pytest.mark.skipif(not (DATA_DIR / "asap").is_dir(), reason="needs ../shared/data/asap")
def test_the_papers_essays_are_in_the_data_with_equal_traits_high_medium_low():
    # Appendix B.1's nine essays: each set's three are eligible (both raters, ASAP++ traits), and their
    # traits are all equal: 6 / 4 / 1 (set 1), 3 / 2 / 0 (set 4), 4 / 2 / 0 (set 6)
    from promptlottery.rubrics.study import draw_sample

    want = {1: (6, 4, 1), 4: (3, 2, 0), 6: (4, 2, 0)}
    for s, levels in want.items():
        task = make_task("asap", DATA_DIR, {"essay_set": s}, {})
        sample, pool = draw_sample(task, load_items("asap", data_dir=DATA_DIR, essay_set=s), 12, seed=0)
        by_id = {it.id: it for it in pool}
        assert not {it.id for it in sample} & set(task.reserved_ids())
        for eid, level in zip(task.reserved_ids(), levels):
            assert {by_id[eid].human_score(c.id) for c in task.criteria(None)} == {level}, (s, eid)
        edited = RubricCondition(name="edited", kind="analytic", examples="three", context=True)
        crit = task.criteria(None)[0]
        got = PromptBuilder(task, "asap", pool, seed=0).examples(edited, crit)
        assert [(e.item_id, e.label) for e in got] == [
            (i, str(v)) for i, v in zip(task.reserved_ids(), levels)
        ]
    # sets 3 and 5 are not in the paper: no reserved essays, our seeded rule
    for s in (3, 5):
        task = make_task("asap", DATA_DIR, {"essay_set": s}, {})
        assert task.reserved_ids() == () and task.examples_source.startswith("ours")


# ====================================================== the paper's claims in words, computed
def test_separate_beats_batch_on_8_of_13_criteria_of_the_papers_table_3():
    """§A.1: "Separate API calls improve alignment for 8 out of 13 sub-criteria in AES". By hand from
    the printed Table 3 (Sep. vs Bat.): set 1 Ide. 0.647 < 0.652, Or. 0.675 > 0.626, WC 0.616 > 0.580,
    SF 0.608 > 0.586, Cv. 0.580 > 0.559 (4 of 5); set 4 Ct. 0.777 < 0.815, PA 0.767 < 0.773, La. 0.755 >
    0.711, Na. 0.767 > 0.747 (2 of 4); set 6 Ct. 0.716 < 0.779, PA 0.712 < 0.746, La. 0.745 > 0.705,
    Na. 0.749 > 0.709 (2 of 4)."""
    from promptlottery.rubrics.claims import separate_wins
    from promptlottery.rubrics.paper_reference import ABBREV

    total_k = total_m = 0
    per_set = {}
    for ds in (1, 4, 6):
        sep, bat = {}, {}
        for row in ABBREV[ds].values():
            for cond, into in (("Sep.", sep), ("Bat.", bat)):
                into[row] = paper_value("table3", str(ds), "GPT-4o vs Llama", row, cond)["GPT-4o vs Llama"][0]
        k, m, wins = separate_wins(sep, bat)
        per_set[ds] = (k, m, wins)
        total_k, total_m = total_k + k, total_m + m
    assert per_set[1] == (4, 5, ["Or.", "WC", "SF", "Cv."])
    assert per_set[4][:2] == (2, 4) and per_set[6][:2] == (2, 4)
    assert (total_k, total_m) == (8, 13)


def test_the_separate_vs_batch_table_counts_table_3s_cells(tmp_path):
    """On the set-1 fixture the count table carries the paper's 4 of 5 beside ours."""
    from tests.test_rubric_study import asap_run, cells

    _, _, job = asap_run(tmp_path)
    df = cells(job)
    t = df[df.table == "ours_separate_vs_batch"]
    paper = t[t.source == "paper"].iloc[0]
    assert float(paper.estimate) == 4 and paper.n == 5 and paper.note == "4 of 5 criteria: Or., WC, SF, Cv."
    ours = t[t.source == "ours"].iloc[0]
    t3 = df[(df.table == "table3") & (df.source == "ours") & (df.row != "H.")]
    sep = t3[t3.column.str.endswith(": Sep.")].set_index("row").estimate.astype(float)
    bat = t3[t3.column.str.endswith(": Bat.")].set_index("row").estimate.astype(float)
    assert float(ours.estimate) == int((sep > bat.reindex(sep.index)).sum()) and ours.n == 5


def test_full_and_partial_agreement_of_three_annotators_analytic_answers():
    """§5.3: analytic ratings "divided into full agreement ... and partial agreement ... using majority
    vote". Four outputs by hand: all three agree everywhere (full); one dissent on one question
    (partial); a question not asked of output 3 does not break its agreement; output 4 splits 2-1 twice."""
    from promptlottery.rubrics.claims import analytic_agreement_levels

    nan = np.nan
    a = np.array(
        [
            [[1, 1, 1], [0, 0, 0], [1, 1, 1]],
            [[1, 1, 1], [0, 1, 0], [1, 1, 1]],
            [[0, 0, 0], [1, 1, 1], [nan, nan, nan]],
            [[1, 0, 1], [0, 1, 1], [0, 0, 0]],
        ]
    )
    levels, majority = analytic_agreement_levels(a)
    assert levels.tolist() == ["full", "partial", "full", "partial"]
    assert np.array_equal(majority, np.array([[1, 0, 1], [1, 0, 1], [0, 1, nan], [1, 1, 0]]), equal_nan=True)
    assert (levels == "full").mean() == 0.5  # the paper's share is 13%
    with pytest.raises(ValueError, match="each of the three raters"):
        analytic_agreement_levels(np.array([[[1, nan, 1]]]))


class _YesData:
    """The parts of StudyData the yes-skew table reads: 6 items, P(yes) per item and condition."""

    def __init__(self):
        from promptlottery.rubrics.study_data import StudyData

        self.task = type("T", (), {"aggregate": "ratio", "reference_name": "GPT-4 (not human)"})()
        self.backbones, self.n, self.has_human = ["m"], 6, False
        self.conds = [RubricCondition(name=n, kind="analytic", label=lab, mode=mode)
                      for n, lab, mode in (("sep", "Sep.", "separate"), ("bat", "Bat.", "batch"))]  # fmt: skip
        # two questions per item; separate P(yes) 0.2 / 0.4, batch 0.9 / 0.7 (argmax: no, no / yes, yes)
        self.p = {"sep": np.array([[0.2, 0.4]] * 6), "bat": np.array([[0.9, 0.7]] * 6)}
        self.reference_analytic = np.array(
            [[1.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
        )
        self.aggregate = lambda m: StudyData.aggregate(self, m)

    def analytic_conditions(self):
        return self.conds

    def analytic(self, _b, c, column="score"):
        p = self.p[c.name]
        return p if column == "score" else (p > 0.5).astype(float)


def test_batch_answers_skew_towards_yes_on_a_toy():
    """§5.1: batch answers "heavily skewed towards 'yes'". By hand: mean P(yes) 0.3 separate, 0.8
    batch; argmax yes share 0 and 1; the reference says yes on 6 of 12 answers (item means 1/2, 1/2,
    0, 1, 1/2, 1/2: 0.5)."""
    from promptlottery.rubrics.claims import ours_if_yes_skew

    t = ours_if_yes_skew(_YesData(), Settings(n_resamples=200), tests := [])
    got = {(c.block, c.row): c.estimate for c in t.cells}
    assert got[("mean P(yes), logprob-weighted", "Sep.")] == pytest.approx(0.3)
    assert got[("mean P(yes), logprob-weighted", "Bat.")] == pytest.approx(0.8)
    assert got[("share of yes, argmax", "Sep.")] == 0.0 and got[("share of yes, argmax", "Bat.")] == 1.0
    assert got[("share of yes, reference", "GPT-4 (not human)")] == pytest.approx(0.5)
    assert len(tests) == 2  # one paired test per block (two conditions)


def test_separate_vs_batch_count_keeps_a_pair_without_taus_and_names_a_missing_pair():
    """§A.1's count: a backbone pair whose taus are all undefined (constant judges) keeps its row with
    the reason, and a run without a pair (one backbone) says so beside the paper's count."""
    d = SimpleNamespace(task=SimpleNamespace(fixed_criteria=True))
    paper = [
        Cell("table3", "Model vs model", "Ide.", f"paper GPT-4o vs Llama: {c}", v, source="paper")
        for c, v in (("Sep.", 0.647), ("Bat.", 0.652))
    ]
    undefined = [
        Cell("table3", "Model vs model", "Ide.", f"a vs b: {c}", note="n/a: undefined")
        for c in ("Sep.", "Bat.")
    ]
    t = ours_separate_vs_batch(Table("table3", "", cells=paper + undefined), d)
    got = {(c.column, c.source): (c.estimate, c.note) for c in t.cells}
    assert got == {
        ("a vs b", "ours"): (None, "n/a: no criterion with both taus"),
        ("paper GPT-4o vs Llama", "paper"): (0, "0 of 1 criteria: none"),
    }
    t = ours_separate_vs_batch(Table("table3", "", cells=paper), d)
    got = {(c.column, c.source): (c.estimate, c.note) for c in t.cells}
    assert got == {
        ("backbones", "ours"): (None, "n/a: table3 has no model pair"),
        ("paper GPT-4o vs Llama", "paper"): (0, "0 of 1 criteria: none"),
    }

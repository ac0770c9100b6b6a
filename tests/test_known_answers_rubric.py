"""The rubric study under judges with known answers, end to end on every rubric experiment config.

Each judge is a behaviour of the fake backend (``backends/fake.py``) put on both backbones of a
``rubric_*`` experiment (``backbone@rubric.backbones.<name>=fake``); the real ``rubric`` stage judges
``LIMIT`` items of the real data on the judge grid and builds every table. A rubric request carries
the condition's name as its variant and the label nearest the item's human value for its criterion
(``rubrics/grid_groups.py:grid_items`` gives the grid's items the task's human values), so:

* ``oracle`` answers the human holistic score (rounded to the scale: ties go to the lower label) and
  each ASAP++ trait; ``inverted`` is the oracle with every answer of the batch condition (or of the
  3ex holistic one) mirrored on its scale (s -> lowest + highest - s);
* ``constant`` answers "1" everywhere and ``always_first`` the scale's lowest label: every tau of
  theirs is undefined (a constant ranking) and named n/a;
* ``random`` answers a seeded uniform label: no value is known, but every interval holds its estimate.

Every expected number is derived here from the rubric paper's definitions (§4.3: Kendall's tau-b as
SciPy computes it; Pareto dominance, "essay A is considered better than essay B if all sub-criteria
scores of A are at least tied to those of B, with at least one sub-criteria score from A being
higher"; the paired bootstrap's Bonferroni decision) and the sample's human values, never read off
the code under test. InFoBench ships no human labels: the oracle is refused in one line, and its
yes-rate (§5.1's yes-skew) is known for a constant "yes" and an always-"no" judge.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import DATA_DIR
from tests.rubric_known import (
    ANALYTIC,
    ASAP,
    B1,
    B2,
    EXPERIMENTS,
    HOLISTIC,
    K1,
    K2,
    LIMIT,
    MIN_ITEMS,
    N_RESAMPLES,
    SEED,
    SETS,
    Humans,
    Run,
    intervals_hold,
    pareto_tau,
    tau_b,
)

pytestmark = pytest.mark.skipif(not (DATA_DIR / "asap").is_dir(), reason=f"no data dir at {DATA_DIR}")

_RUNS: dict[tuple, Run] = {}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    def get(name: str, b1: str, b2: str, extra: tuple[str, ...] = ()) -> Run:
        key = (name, b1, b2, extra)
        if key not in _RUNS:
            _RUNS[key] = Run(name, b1, b2, tmp_path_factory.mktemp(f"{name}_{b1}_{b2}"), extra)
        return _RUNS[key]

    return get


# --------------------------------------------------------------------------- ASAP: oracle and inverted
@pytest.mark.parametrize("name", ASAP)
def test_oracle_and_inverted_batch_give_the_hand_derived_table_1(run, name):
    r = run(name, "oracle", "inverted")
    assert r.error is None, r.error
    hu = Humans(r)
    n = len(r.items)
    assert n == LIMIT and r.record["calls"]["unscored"] == 0
    # the oracle's holistic answers are the human scores rounded onto the scale
    sc = r.scores.set_index(["backbone", "condition", "item_id", "criterion"])["score"]
    ids = [it.id for it in r.items]
    for bb in (B1, B2):
        for cond in ("holistic_all", "holistic_three"):
            np.testing.assert_allclose(
                sc.loc[[(bb, cond, i, "holistic") for i in ids]], hu.oracle_h, atol=1e-12
            )

    # Table 1, Delta rater: human holistic vs model holistic = tau-b(raw, rounded), both backbones
    want_h = tau_b(hu.h, hu.oracle_h)
    for bb in (B1, B2):
        for cond in HOLISTIC:
            assert r.value("table1", "Delta rater", "H.", f"{bb}: {cond}") == pytest.approx(want_h, abs=1e-12)
            assert r.cell("table1", "Delta rater", "H.", f"{bb}: {cond}").marks == ""  # Full = 3ex: no dagger
    # ... each trait: tau-b(t, t) = 1, the inverted batch's tau-b(t, mirrored t) = -1; the paired tests
    # then differ by exactly 2 on every resample where tau is defined, so gemma's Sep. beats Bat. (star)
    # and Edited beats Bat. (b up); Sep. = Edited and every smollm2 condition are equal: no mark
    varied = [j for j in range(len(hu.traits)) if len(set(hu.t[:, j])) > 1]
    for j, row in enumerate(hu.traits.values()):
        for bb in (B1, B2):
            for cond in ANALYTIC:
                got = r.value("table1", "Delta rater", row, f"{bb}: {cond}")
                if j not in varied:
                    assert (
                        got is None
                        and "undefined" in r.cell("table1", "Delta rater", row, f"{bb}: {cond}").note
                    )
                    continue
                assert got == pytest.approx(-1.0 if (bb, cond) == (B2, "Bat.") else 1.0, abs=1e-12)
                marks = {"Sep.": "⋆", "Bat.": "", "Edited": "b↑"}[cond] if bb == B2 else ""
                assert r.cell("table1", "Delta rater", row, f"{bb}: {cond}").marks == marks, (row, bb, cond)

    # Delta rubric: humans' holistic vs their traits by Pareto dominance; the oracle's = the rounded
    # holistic vs the traits; mirroring every trait reverses every dominance (the tau negated)
    human_rubric = pareto_tau(hu.h, hu.t)
    oracle_rubric = pareto_tau(hu.oracle_h, hu.t)
    assert pareto_tau(hu.oracle_h, hu.mirrored_t) == pytest.approx(-oracle_rubric)
    assert r.value("table1", "Delta rubric", "Full", "human: H_H->H_A") == pytest.approx(
        human_rubric, abs=1e-12
    )
    for hol in HOLISTIC:
        for bb in (B1, B2):
            for cond in ANALYTIC:
                want = -oracle_rubric if (bb, cond) == (B2, "Bat.") else oracle_rubric
                assert r.value("table1", "Delta rubric", hol, f"{bb}: {cond}") == pytest.approx(
                    want, abs=1e-12
                )


@pytest.mark.parametrize("name", ASAP)
def test_oracle_and_inverted_batch_between_models_and_by_stratum(run, name):
    """Table 3, §A.1's count, Table 4, the positional-bias table and Table 6 of the same runs."""
    r = run(name, "oracle", "inverted")
    assert r.error is None, r.error
    hu = Humans(r)
    varied = [j for j in range(len(hu.traits)) if len(set(hu.t[:, j])) > 1]
    oracle_rubric = pareto_tau(hu.oracle_h, hu.t)
    # Table 3, model vs model: the same answers (tau 1) but on the inverted batch (tau -1)
    pair = f"{B1} vs {B2}"
    for cond in HOLISTIC:
        assert r.value("table3", "Model vs model", "H.", f"{pair}: {cond}") == pytest.approx(1.0, abs=1e-12)
    for j, row in enumerate(hu.traits.values()):
        for cond in ANALYTIC:
            want = None if j not in varied else -1.0 if cond == "Bat." else 1.0
            got = r.value("table3", "Model vs model", row, f"{pair}: {cond}")
            assert got == (None if want is None else pytest.approx(want, abs=1e-12))
    # §A.1's count read off Table 3: separate beats batch on every trait with a tau
    count = r.cell(
        "ours_separate_vs_batch", "Model vs model (Table 3)", "criteria where Sep. tau > Bat. tau", pair
    )
    assert (float(count.estimate), count.n) == (len(varied), len(varied))

    # Table 4, Delta rater + rubric: model holistic vs human traits, human holistic vs model traits
    ds = str(int(r.cfg.dataset.options.essay_set))
    for bb in (B1, B2):
        for cond in HOLISTIC:
            got = r.value("table4", "Delta rater+rubric", ds, f"{bb}: LLM_H->H_A {cond}")
            assert got == pytest.approx(oracle_rubric, abs=1e-12)
        for cond in ANALYTIC:
            want = pareto_tau(hu.h, hu.mirrored_t if (bb, cond) == (B2, "Bat.") else hu.t)
            assert r.value("table4", "Delta rater+rubric", ds, f"{bb}: H_H->LLM_A {cond}") == pytest.approx(
                want, abs=1e-12
            )

    # positional bias (ours): position k of the batch reply is trait k; the inverted batch's mean shift
    # Bat. - Sep. is the mean of (lo + hi - t) - t over the essays, the oracle's 0
    (tlo, thi) = SETS[int(r.cfg.dataset.options.essay_set)][1]
    for j, trait in enumerate(hu.traits):
        block = f"Position {j + 1} ({trait.replace('_', ' ').title()})"
        for bb, want in ((B1, 0.0), (B2, float(np.mean(tlo + thi - 2 * hu.t[:, j])))):
            assert r.value(
                "ours_positional_bias", block, "mean score shift, Bat. - Sep.", bb
            ) == pytest.approx(want, abs=1e-12)
            if j in varied:
                same = r.value("ours_positional_bias", block, "Bat. vs Sep. (same model)", bb)
                assert same == pytest.approx(-1.0 if bb == B2 else 1.0, abs=1e-12)

    # Table 6: the strata are the raters' agreement; where a stratum is too small the cell says so
    n_agree, n_dis = int(hu.agree.sum()), int((~hu.agree).sum())
    for bb in (B1, B2):
        for cond in HOLISTIC:
            for stratum, mask in (("agree", hu.agree), ("disagree", ~hu.agree)):
                c = r.cell("table6", "raters agree vs disagree", stratum, f"{bb}: {cond}")
                if mask.sum() < MIN_ITEMS:
                    assert c.note.startswith(f"n/a: n={n_agree} agree / {n_dis} disagree items"), c.note
                    continue
                want = tau_b(hu.h[mask], hu.oracle_h[mask])
                assert (None if c.estimate == "" else float(c.estimate)) == (
                    None if want is None else pytest.approx(want, abs=1e-12)
                )
    assert len(r.items) == n_agree + n_dis


def test_an_inverted_holistic_condition_gets_the_dagger(run):
    """The inverted judge mirrors the 3ex holistic answers (set 6: 0-4, s -> 4 - s): its Full tau is 1,
    its 3ex tau -1, the one holistic test differs by 2 on every defined resample (no Bonferroni: two
    conditions), so Full carries the paper's dagger; the analytic answers are the oracle's."""
    extra = (f"rubric.backbones.{K2}.backend.inverted_variant=holistic_three",)
    r = run("rubric_asap_set6", "oracle", "inverted", extra)
    assert r.error is None, r.error
    hu = Humans(r)
    assert tau_b(hu.h, hu.oracle_h) == 1.0  # set 6's resolved scores are on the scale: the oracle is exact
    for bb, (full, three) in ((B1, (1.0, 1.0)), (B2, (1.0, -1.0))):
        for cond, want in (("Full", full), ("3ex", three)):
            c = r.cell("table1", "Delta rater", "H.", f"{bb}: {cond}")
            assert float(c.estimate) == pytest.approx(want, abs=1e-12)
            assert c.marks == ("†" if (bb, cond) == (B2, "Full") else "")
    test = r.tests[(r.tests.table == "table1") & (r.tests.column == B2) & (r.tests.row == "H.")].iloc[0]
    assert (test.a, test.b, int(float(test.n_comparisons))) == ("holistic_all", "holistic_three", 1)
    assert (float(test.difference), float(test.low), float(test.high)) == pytest.approx((2, 2, 2))
    # Delta rubric of the mirrored holistic: every dominance against the traits reversed
    mirrored_h = 4 - hu.oracle_h
    for cond in ANALYTIC:
        got = r.value("table1", "Delta rubric", "3ex", f"{B2}: {cond}")
        assert got == pytest.approx(pareto_tau(mirrored_h, hu.t), abs=1e-12)
        assert got == pytest.approx(-pareto_tau(hu.h, hu.t), abs=1e-12)
    assert r.value("table3", "Model vs model", "H.", f"{B1} vs {B2}: 3ex") == pytest.approx(-1.0, abs=1e-12)
    got = r.value("table4", "Delta rater+rubric", "6", f"{B2}: LLM_H->H_A 3ex")
    assert got == pytest.approx(pareto_tau(mirrored_h, hu.t), abs=1e-12)
    intervals_hold(r)


@pytest.mark.parametrize("name", ASAP)
def test_undefined_resamples_are_counted_and_intervals_hold_their_estimates(run, name):
    """Issue 31 item 8 under the oracle: a trait's tau-b(t, t) is undefined exactly on the resamples
    (``default_rng(seed).integers(0, n, (R, n))``, metrics/bootstrap.py) whose traits are all equal."""
    r = run(name, "oracle", "inverted")
    hu = Humans(r)
    idx = np.random.default_rng(SEED).integers(0, len(r.items), size=(N_RESAMPLES, len(r.items)))
    for j, row in enumerate(hu.traits.values()):
        if len(set(hu.t[:, j])) < 2:
            continue
        undefined = int((hu.t[idx, j] == hu.t[idx, j][:, :1]).all(axis=1).sum())
        for cond in ANALYTIC:
            c = r.cell("table1", "Delta rater", row, f"{B1}: {cond}")
            if undefined:
                assert (
                    c.note
                    == (
                        f"CI over the {N_RESAMPLES - undefined} of {N_RESAMPLES} resamples where tau is defined "
                        f"({undefined} undefined)"
                    )
                    and c.ci_resamples == f"{N_RESAMPLES - undefined}/{N_RESAMPLES}"
                )
            else:
                assert c.note == "" and c.ci_resamples == ""
            assert (float(c.low), float(c.high)) == pytest.approx((1.0, 1.0), abs=1e-12)
        # gemma's paired tests of this trait (significance.csv's row): the difference is undefined
        # exactly where tau is, and Sep. - Bat. = 1 - (-1) on every other resample
        tests = r.tests[(r.tests.table == "table1") & (r.tests.column == B2) & (r.tests.row == row)]
        assert len(tests) == 3, tests
        sep_bat = tests[(tests.a == "analytic_separate") & (tests.b == "analytic_batch")].iloc[0]
        assert int(float(sep_bat.n_undefined)) == undefined
        assert (float(sep_bat.difference), float(sep_bat.low), float(sep_bat.high)) == pytest.approx(
            (2, 2, 2)
        )
        assert str(sep_bat.significant) == "True" and int(float(sep_bat.n_comparisons)) == 3
    intervals_hold(r)


# --------------------------------------------------------------------------- ASAP: constant judges
@pytest.mark.parametrize("name", ASAP)
def test_constant_judges_have_no_tau_and_say_why(run, name):
    r = run(name, "constant", "always_first")
    assert r.error is None, r.error
    hu = Humans(r)
    # constant answers "1" on every scale, always_first the lowest label
    np.testing.assert_allclose(r.scores[r.scores.backbone == B1].score, 1.0, atol=1e-12)
    np.testing.assert_allclose(r.scores[r.scores.backbone == B2].score, hu.lo, atol=1e-12)
    model = r.ours[r.ours.column.str.startswith((B1, B2, f"{B1} vs"))]
    taus = model[~model.row.str.startswith("mean score shift") & (model.table != "ours_separate_vs_batch")]
    # every tau of a constant ranking is undefined: n/a with the reason, never a number
    assert len(taus) > 0 and (taus.estimate == "").all()
    computed = taus[~taus.note.str.startswith("n/a: n=")]  # the rest: too few items, named
    bad = computed[~computed.note.str.contains("undefined")]
    assert bad.empty, bad[["table", "block", "row", "column", "note"]].to_dict("records")
    # ... so no paired test runs and nothing is marked
    assert r.record["n_significant"] == 0 and (r.ours.marks == "").all()
    assert "test" not in r.tests or not (r.tests.test == "paired").any()
    # the humans' own cell does not depend on the judge
    assert r.value("table1", "Delta rubric", "Full", "human: H_H->H_A") == pytest.approx(
        pareto_tau(hu.h, hu.t), abs=1e-12
    )
    # batch - separate of a constant judge: 0, interval [0, 0]
    shifts = r.ours[r.ours.row.str.startswith("mean score shift")]
    assert (
        len(shifts) > 0
        and (shifts.estimate.astype(float) == 0).all()
        and (shifts.low.astype(float) == 0).all()
    )
    count = r.cell(
        "ours_separate_vs_batch",
        "Model vs model (Table 3)",
        "criteria where Sep. tau > Bat. tau",
        f"{B1} vs {B2}",
    )
    assert count.note == "n/a: no criterion with both taus"
    intervals_hold(r)


def test_random_judges_intervals_hold_their_estimates(run):
    r = run("rubric_asap_set1", "random", "random")
    assert r.error is None, r.error
    # uniform over the scale's labels: every score is a label's
    scores = r.scores.score.to_numpy(float)
    assert np.isclose(scores[:, None], np.arange(1, 7)[None, :], atol=1e-12).any(axis=1).all()
    intervals_hold(r)


# --------------------------------------------------------------------------- InFoBench
def test_infobench_refuses_the_oracle_in_one_line(run):
    r = run("rubric_infobench", "oracle", "oracle")
    assert r.error is not None, "the oracle answered InFoBench, which ships no human labels"
    msg = str(r.error)
    assert "\n" not in msg
    assert "cannot answer a request without a human label (variant holistic_none)" in msg
    assert "the data carries no oracle" in msg
    record = json.loads((r.job / "results.json").read_text())
    assert record["status"] == "failed" and "the data carries no oracle" in record["error"]


def test_infobench_yes_rate_of_constant_judges(run):
    """§5.1's yes-skew: a constant "yes" judge's yes-rate is 1, an always-"no" judge's (the lowest
    label) 0, under every analytic condition, with no significant difference between them; the
    reference's is GPT-4's share of yes read from the raw file. The holistic conditions are left out:
    no one label is on both the 1-5 and the yes/no scale."""
    extra = (
        "~rubric.conditions.holistic_none",
        "~rubric.conditions.holistic_three",
        f"rubric.backbones.{K1}.backend.label=yes",
    )
    r = run("rubric_infobench", "constant", "always_first", extra)
    assert r.error is None, r.error
    for bb, rate in ((B1, 1.0), (B2, 0.0)):
        for block in ("mean P(yes), logprob-weighted", "share of yes, argmax"):
            for cond in ANALYTIC:
                c = r.cell("ours_if_yes_skew", block, cond, bb)
                assert (float(c.estimate), float(c.low), float(c.high)) == (rate, rate, rate)
                assert c.marks == ""
    skew = r.tests[r.tests.table == "ours_if_yes_skew"]
    assert len(skew) == 2 * 2 * 3 and (skew.significant.astype(str) == "False").all()
    assert (skew.difference.astype(float) == 0).all()
    # the reference: the mean over the sampled instructions of GPT-4's share of yes answers
    raw = DATA_DIR / "infobench" / "NOT_HUMAN_gpt4_outputs_with_gpt4_decomposed_eval.jsonl"
    answers = {}
    for line in raw.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        answers[row["id"]] = row["eval"]
    ids = r.record["sample"]["item_ids"]
    want = float(np.mean([np.mean([bool(a) for a in answers[i]]) for i in ids]))
    ref = r.cell("ours_if_yes_skew", "share of yes, reference", "GPT-4 (not human)", "GPT-4 (not human)")
    assert float(ref.estimate) == pytest.approx(want, abs=1e-12)
    # the human columns say why they are empty; model vs model of two constant judges is undefined
    delta = r.ours[(r.ours.table == "table2") & (r.ours.block == "Delta rater")]
    assert len(delta) == 2 * 3 and (delta.note == "n/a: InFoBench ships no human (expert) labels here").all()
    gpt4 = r.ours[(r.ours.table == "ours_if_gpt4_reference") & (r.ours.block != "Human vs model")]
    assert (
        len(gpt4) == 2 * 2 * 3 and (gpt4.estimate == "").all() and gpt4.note.str.contains("undefined").all()
    )
    mvm = r.ours[r.ours.table == "table3"]
    assert len(mvm) == 3 and (mvm.estimate == "").all() and mvm.note.str.contains("undefined").all()
    intervals_hold(r)


def test_every_rubric_experiment_is_run_here():
    assert EXPERIMENTS == [*ASAP, "rubric_infobench"]
    assert sorted(int(e.rsplit("set", 1)[1]) for e in ASAP) == sorted(SETS)

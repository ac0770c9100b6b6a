"""The rubric study under judges with known answers, end to end on every rubric experiment config.

Each judge is a behaviour of the fake backend (``backends/fake.py``) put on both backbones of a
``rubric_*`` experiment (``backbone@rubric.backbones.<name>=fake``); the real ``rubric`` stage judges
``LIMIT`` items of the real data and builds every table. A rubric request carries the label nearest
the item's human value for its criterion (``rubrics/rubric_judge.py``), so:

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
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from promptlottery.data import load_items
from promptlottery.stages import run_stage
from tests.conftest import DATA_DIR, REPO, compose

pytestmark = pytest.mark.skipif(not (DATA_DIR / "asap").is_dir(), reason=f"no data dir at {DATA_DIR}")

LIMIT = 8
N_RESAMPLES = 200
SEED = 0  # conf/config.yaml's seed: the bootstrap's
MIN_ITEMS = 5  # rubric.stats.min_items of every rubric experiment
INVERTED = "analytic_batch"
EXPERIMENTS = sorted(p.stem for p in (REPO / "conf" / "experiment").glob("rubric_*.yaml"))
ASAP = [e for e in EXPERIMENTS if e.startswith("rubric_asap_set")]
#: per ASAP set: the holistic scale (the raters' range), the trait scale (ASAP++) and the traits with
#: the paper's row names (Table 1's caption)
SETS = {
    1: ((1, 6), (1, 6), {"content": "Ide.", "organization": "Or.", "word_choice": "WC",
                         "sentence_fluency": "SF", "conventions": "Cv."}),
    4: ((0, 3), (0, 3), {"content": "Ct.", "prompt_adherence": "PA", "language": "La.", "narrativity": "Na."}),
    6: ((0, 4), (0, 4), {"content": "Ct.", "prompt_adherence": "PA", "language": "La.", "narrativity": "Na."}),
}  # fmt: skip
HOLISTIC = ("Full", "3ex")
ANALYTIC = ("Sep.", "Bat.", "Edited")
B1, B2 = "smollm2", "gemma3_270m"


# --------------------------------------------------------------------------- the definitions, by hand
def tau_b(x, y) -> float | None:
    """Kendall's tau-b (the paper: SciPy's tau with ties); None where a side is constant."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(set(x)) < 2 or len(set(y)) < 2:
        return None
    return float(stats.kendalltau(x, y).statistic)


def pareto_tau(h, a) -> float | None:
    """tau-b between ``h`` and the Pareto order of the rows of ``a`` (the paper's §4.3 words): over
    the pairs, sign(h_i - h_j) times +1 / -1 where one row dominates the other, 0 where neither does."""
    h, a = np.asarray(h, float), np.asarray(a, float)
    s = n_h = n_d = 0
    for i in range(len(h)):
        for j in range(i + 1, len(h)):
            d = 1 if (a[i] >= a[j]).all() and (a[i] > a[j]).any() else 0
            d = -1 if (a[j] >= a[i]).all() and (a[j] > a[i]).any() else d
            sh = int(np.sign(h[i] - h[j]))
            s, n_h, n_d = s + sh * d, n_h + (sh != 0), n_d + (d != 0)
    return None if n_h == 0 or n_d == 0 else s / math.sqrt(n_h * n_d)


def nearest(v: float, lo: int) -> int:
    """The label nearest ``v`` on an integer scale, a tie to the lower one (4.5 -> 4)."""
    return max(lo, math.ceil(v - 0.5))


# --------------------------------------------------------------------------- the runs
class Run:
    """One rubric experiment with one known behaviour per backbone, through the real stage."""

    def __init__(self, name: str, b1: str, b2: str, root: Path, extra: tuple[str, ...] = ()):
        self.name = name
        over = [f"+experiment={name}", f"dataset.limit={LIMIT}", f"rubric.stats.n_resamples={N_RESAMPLES}"]
        for bb, behaviour in ((B1, b1), (B2, b2)):
            over += [
                f"backbone@rubric.backbones.{bb}=fake",
                f"rubric.backbones.{bb}.backend.behaviour={behaviour}",
                f"rubric.backbones.{bb}.backend.model=fake-{bb}",  # the two random judges differ
                f"rubric.backbones.{bb}.backend.inverted_variant={INVERTED}",
                f"rubric.backbones.{bb}.backend.label=1",  # constant: on every ASAP scale
            ]
        self.cfg = compose([*over, *extra], tmp_path=root)
        self.job = root / "job"
        self.error: Exception | None = None
        try:
            self.record = run_stage(self.cfg, self.job)
        except Exception as exc:  # noqa: BLE001 - the refusal test reads it
            self.error = exc
            return
        self.cells = pd.read_csv(self.job / "cells.csv", keep_default_na=False)
        self.ours = self.cells[self.cells.source == "ours"]
        tests = self.job / "significance.csv"  # no test ran: an empty file
        self.tests = (
            pd.read_csv(tests, keep_default_na=False) if tests.read_text().strip() else pd.DataFrame()
        )
        self.scores = pd.read_parquet(self.job / "scores.parquet")
        ids = self.record["sample"]["item_ids"]
        loaded = {
            it.id: it
            for it in load_items(self.cfg.dataset.name, data_dir=DATA_DIR, **self.cfg.dataset.options)
        }
        self.items = [loaded[i] for i in ids]

    def cell(self, table: str, block: str, row: str, column: str) -> pd.Series:
        hit = self.ours[
            (self.ours.table == table)
            & (self.ours.block == block)
            & (self.ours.row == row)
            & (self.ours.column == column)
        ]
        assert len(hit) == 1, (table, block, row, column, len(hit))
        return hit.iloc[0]

    def value(self, table: str, block: str, row: str, column: str) -> float | None:
        c = self.cell(table, block, row, column)
        return None if c.estimate == "" else float(c.estimate)


_RUNS: dict[tuple, Run] = {}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    def get(name: str, b1: str, b2: str, extra: tuple[str, ...] = ()) -> Run:
        key = (name, b1, b2, extra)
        if key not in _RUNS:
            _RUNS[key] = Run(name, b1, b2, tmp_path_factory.mktemp(f"{name}_{b1}_{b2}"), extra)
        return _RUNS[key]

    return get


class Humans:
    """One ASAP sample's human values as the paper defines them, and the oracle's answers."""

    def __init__(self, r: Run):
        essay_set = int(r.cfg.dataset.options.essay_set)
        (self.lo, _hi), (tlo, thi), self.traits = SETS[essay_set]
        raters = np.array([it.human["holistic"] for it in r.items], float)
        # the human holistic score: set 1 the two raters' mean (its resolved score is their sum, the
        # same ranking); sets 4 and 6 the resolved score, ASAP's domain1_score
        if essay_set == 1:
            self.h = raters.mean(axis=1)
        else:
            self.h = np.array([it.meta["domain1_score"] for it in r.items], float)
        self.agree = raters[:, 0] == raters[:, 1]
        self.oracle_h = np.array([nearest(v, self.lo) for v in self.h], float)
        self.t = np.array([[it.human[k][0] for k in self.traits] for it in r.items], float)
        self.mirrored_t = tlo + thi - self.t  # the inverted judge's batch answers


# --------------------------------------------------------------------------- ASAP: oracle and inverted
@pytest.mark.parametrize("name", ASAP)
def test_oracle_and_inverted_batch_give_the_hand_derived_tables(run, name):
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
    assert n == n_agree + n_dis


def test_an_inverted_holistic_condition_gets_the_dagger(run):
    """The inverted judge mirrors the 3ex holistic answers (set 6: 0-4, s -> 4 - s): its Full tau is 1,
    its 3ex tau -1, the one holistic test differs by 2 on every defined resample (no Bonferroni: two
    conditions), so Full carries the paper's dagger; the analytic answers are the oracle's."""
    extra = (f"rubric.backbones.{B2}.backend.inverted_variant=holistic_three",)
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
    _intervals_hold(r)


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
    _intervals_hold(r)


def _intervals_hold(r: Run) -> None:
    """Every printed interval contains its estimate; every count of undefined resamples adds up."""
    num = r.ours[(r.ours.estimate != "") & (r.ours.low != "")]
    assert len(num) > 0
    est, low, high = (num[c].astype(float).to_numpy() for c in ("estimate", "low", "high"))
    assert ((low <= est + 1e-12) & (est <= high + 1e-12)).all()
    for note, shown in zip(r.ours.note, r.ours.ci_resamples):
        m = re.fullmatch(
            r"CI over the (\d+) of (\d+) resamples where tau is defined \((\d+) undefined\)", note
        )
        if m:
            k, total, undefined = map(int, m.groups())
            assert k + undefined == total == N_RESAMPLES and shown == f"{k}/{total}"
    ran = r.tests[r.tests["error"] == ""] if "error" in r.tests else r.tests
    for t in ran.itertuples():
        assert 0 <= float(t.n_undefined) < float(t.n_resamples) == N_RESAMPLES
        assert float(t.low) - 1e-12 <= float(t.difference) <= float(t.high) + 1e-12, t


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
    _intervals_hold(r)


def test_random_judges_intervals_hold_their_estimates(run):
    r = run("rubric_asap_set1", "random", "random")
    assert r.error is None, r.error
    # uniform over the scale's labels: every score is a label's
    scores = r.scores.score.to_numpy(float)
    assert np.isclose(scores[:, None], np.arange(1, 7)[None, :], atol=1e-12).any(axis=1).all()
    _intervals_hold(r)


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
        f"rubric.backbones.{B1}.backend.label=yes",
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
    mvm = r.ours[r.ours.table == "table3"]
    assert len(mvm) == 3 and (mvm.estimate == "").all() and mvm.note.str.contains("undefined").all()
    _intervals_hold(r)


def test_every_rubric_experiment_is_run_here():
    assert EXPERIMENTS == [*ASAP, "rubric_infobench"]
    assert sorted(int(e.rsplit("set", 1)[1]) for e in ASAP) == sorted(SETS)


def test_separate_vs_batch_count_keeps_a_pair_without_taus_and_names_a_missing_pair():
    """§A.1's count: a backbone pair whose taus are all undefined (constant judges) keeps its row with
    the reason, and a run without a pair (one backbone) says so beside the paper's count."""
    from types import SimpleNamespace

    from promptlottery.rubrics.cells import Cell, Table
    from promptlottery.rubrics.claims import ours_separate_vs_batch

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

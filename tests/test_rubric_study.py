"""The rubric study on tiny synthetic data with scripted judges: prompts, batch positions, cache,
tables and their numbers (the real-model run is the experiment, not a test)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sstats

from promptlottery.backends.base import Decoding, JudgeRequest, JudgeResponse
from promptlottery.backends.fake import FakeBackend
from promptlottery.data import load_items
from promptlottery.metrics import kendall_tau, pareto_dominance_tau
from promptlottery.prompts.scales import SCALES
from promptlottery.rubrics.prompts import RubricCondition
from promptlottery.rubrics.task_base import TEXTS, last_paragraphs
from promptlottery.rubrics.tasks import make_task
from promptlottery.stages import run_stage as run
from tests.conftest import DATA_DIR, REPO, compose

N_ESSAYS = 40
TRAITS = ("Content", "Organization", "Word Choice", "Sentence Fluency", "Conventions")
#: the paper's set-1 example essays with their real ASAP raters and ASAP++ traits (all traits equal)
PAPER_ESSAYS = {1616: (4, 5, 6), 1264: (4, 5, 4), 449: (1, 1, 1)}


def quality(i: int) -> int:
    return 1 + (i * 5) % 6  # 1, 6, 5, 4, 3, 2, 1, ...: every level, shuffled


def raters(i: int) -> tuple[int, int]:
    q = quality(i)
    second = (q, min(6, q + 1) if q < 6 else q - 1, q + 2 if q <= 4 else q - 2)[i % 3]
    return q, second


def traits(i: int) -> list[int]:
    q = quality(i)
    return [q, 7 - q, q, max(1, q - 1), min(6, q + 1)]


def make_asap(root: Path) -> Path:
    base = root / "asap"
    (base / "asap_original_by_prompt").mkdir(parents=True)
    (base / "rubrics" / "asapplusplus_trait_scores").mkdir(parents=True)
    (base / "rubrics" / "readme_full_text").mkdir(parents=True)
    with open(base / "asap_original_by_prompt" / "essay_set_1.tsv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t")
        w.writerow(["essay_id", "essay_set", "essay", "rater1_domain1", "rater2_domain1", "domain1_score"])
        for i in range(N_ESSAYS):
            r1, r2 = raters(i)
            words = " ".join(f"word{k}" for k in range(20 + 5 * quality(i)))
            w.writerow(
                [1000 + i, 1, f"QUALITY={quality(i)} Dear editor, essay {i}. {words}", r1, r2, r1 + r2]
            )
        for eid, (r1, r2, _trait) in PAPER_ESSAYS.items():  # the paper's examples (Appendix B.1)
            w.writerow([eid, 1, f"QUALITY={_trait} Dear editor, the paper's example {eid}.", r1, r2, r1 + r2])
    with open(base / "rubrics" / "asapplusplus_trait_scores" / "Prompt-1.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["EssayID", *TRAITS])
        for i in range(N_ESSAYS - 1):  # the last essay has no ASAP++ row: not eligible
            w.writerow([1000 + i, *traits(i)])
        for eid, (_r1, _r2, trait) in PAPER_ESSAYS.items():
            w.writerow([eid, *[trait] * len(TRAITS)])
    (base / "rubrics" / "readme_full_text" / "essay_set_1_readme.txt").write_text(
        "Essay Set #1\nPrompt\nBackground paragraph about a topic.\n\nWrite a letter about the topic.\n"
        "Rubric Guidelines\nREADME RUBRIC\nAdjudication Rules\n- sum them\n"
    )
    (base / "rubrics" / "set1_holistic_rubric.txt").write_text(
        "Score Point 1: FIXTURE RUBRIC weak.\nScore Point 6: FIXTURE RUBRIC strong.\n"
    )
    (base / "rubrics" / "set1_info_and_adjudication.txt").write_text(
        "Essay Set #1\nType of essay: | Persuasive\nGrade level: | 8\nRubric range: | 1-6\n"
    )
    return root


def make_infobench(root: Path, n: int = 16) -> Path:
    base = root / "infobench"
    base.mkdir(parents=True)
    rows, outs = [], []
    for i in range(n):
        k = 2 + i % 4  # 2-5 questions: positions 3-5 hold fewer items
        qs = [f"Does the response mention item {j} (instruction {i})?" for j in range(k)]
        rows.append(
            {
                "id": f"inst_{i}",
                "subset": "Easy_set",
                "category": "test",
                "instruction": f"Write about {i}.",
                "input": "",
                "decomposed_questions": qs,
                "question_label": [["Content"]] * k,
            }
        )
        answers = [(i + j) % 3 != 0 for j in range(k)]
        outs.append({"id": f"inst_{i}", "output": f"Response {i} " + "text " * (5 + i), "eval": answers})
    (base / "infobench_instructions_500.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (base / "NOT_HUMAN_gpt4_outputs_with_gpt4_decomposed_eval.jsonl").write_text(
        "\n".join(json.dumps(r) for r in outs) + "\n"
    )
    return root


class RecordingFake(FakeBackend):
    """The hash fake, honouring ``assistant_prefix`` (it enters the hashed text) and recording requests."""

    supports_assistant_prefix = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen: list[JudgeRequest] = []

    def _text(self, r: JudgeRequest) -> str:
        return super()._text(r) + (r.assistant_prefix or "")

    def generate(self, requests, decoding):
        self.seen.extend(requests)
        return super().generate(requests, decoding)


class OracleJudge(RecordingFake):
    """Puts 0.7 of the mass on the judged essay's hidden quality (on a 1-6 scale), 0.06 on each other label."""

    def identity(self) -> dict:
        return {"backend": "oracle", "model": self.model, "revision": "0"}

    def generate(self, requests: list[JudgeRequest], decoding: Decoding) -> list[JudgeResponse]:
        self.seen.extend(requests)
        out = []
        for r in requests:
            text = r.prompt if r.prompt is not None else r.messages[-1]["content"]
            q = int(re.findall(r"QUALITY=(\d)", text.rsplit("Essay:\n", 1)[-1])[0])
            probs = {lab: (0.7 if lab == str(q) else 0.06) for lab in r.labels}
            self.calls += 1
            out.append(JudgeResponse(str(q), probs, len(text.split()), 0, 0.0))
        return out


# ================================================================================== helpers
FAST = ["rubric.stats.n_resamples=120", "dataset.seed=0"]


def compose_rubric(experiment: str, data_dir: Path, tmp_path: Path, extra: list[str] = ()):
    return compose(
        [f"+experiment={experiment}", f"paths.data_dir={data_dir}", *FAST, *extra], tmp_path=tmp_path
    )


def asap_run(tmp_path: Path, out: str = "job", limit: int = 18):
    data = make_asap(tmp_path / "data") if not (tmp_path / "data" / "asap").exists() else tmp_path / "data"
    cfg = compose_rubric("rubric_asap_set1", data, tmp_path, [f"dataset.limit={limit}"])
    backends = {"smollm2": OracleJudge(model="oracle"), "gemma3_270m": RecordingFake(model="hash")}
    record = run(cfg, tmp_path / out, backends=backends)
    return record, backends, tmp_path / out


def cells(job: Path) -> pd.DataFrame:
    return pd.read_csv(job / "cells.csv", keep_default_na=False)


def cell(df: pd.DataFrame, table: str, block: str, row: str, column: str) -> pd.Series:
    hit = df[(df.table == table) & (df.block == block) & (df.row == row) & (df.column == column)]
    assert len(hit) == 1, (table, block, row, column, len(hit))
    return hit.iloc[0]


# ==================================================================================== tests
def test_scales_for_the_asap_rater_ranges():
    assert SCALES["likert_1_6"].labels == ("1", "2", "3", "4", "5", "6")
    assert SCALES["likert_0_3"].scores == (0.0, 1.0, 2.0, 3.0)
    assert SCALES["likert_0_4"].labels[-1] == "4"


def test_rubric_texts_come_from_the_data_dir_and_copyrighted_sources_stay_there(tmp_path):
    data = make_asap(tmp_path / "data")
    task = make_task("asap", data, {"essay_set": 1}, {"prompt_max_words": 10, "response_max_words": 5})
    assert task.holistic_rubric().startswith("Score Point 1: FIXTURE RUBRIC")  # read at run time
    item = task.eligible(load_items("asap", data_dir=data, essay_set=1))[0]
    assert task.task_block(item) == "Writing prompt:\n[...]\n\nWrite a letter about the topic."
    assert task.response(item).endswith(" [...]") and len(task.response(item).split()) == 6
    assert [c.name for c in task.criteria(item)] == list(TRAITS)
    # set 1's edited context is the paper's edited instructions block (Appendix B.1)
    assert task.edited_context(task.criteria(item)[0]) == ""
    assert task.instructions("edited").startswith("Instructions:\n1) The following essay is a first draft")
    assert "Score the essay on a scale from 1 to 6." in task.instructions("holistic")
    assert last_paragraphs("a b\n\nc d e\n\nf g", 5) == "[...]\n\nc d e\n\nf g"
    # the ASAP source texts (copyrighted) are never part of the package data
    ours = " ".join(p.read_text() for p in TEXTS.iterdir())
    for s in (4, 6):
        src = DATA_DIR / "asap" / "rubrics" / f"set{s}_source_text.txt"
        if src.is_file():
            lines = [x for x in src.read_text().splitlines() if len(x.split()) > 12]
            assert lines and all(x.strip()[:60] not in ours for x in lines)


@pytest.mark.skipif(not (DATA_DIR / "asap").is_dir(), reason="needs ../shared/data/asap")
def test_trait_rubrics_match_asap_plus_plus_for_every_set():
    for s, (names, rng) in {1: (TRAITS, "1-6"), 4: (4, "0-3"), 6: (4, "0-4")}.items():
        task = make_task("asap", DATA_DIR, {"essay_set": s}, {})
        crits = task.criteria(None)
        assert len(crits) == (len(names) if isinstance(names, tuple) else names)
        assert f"{crits[0].scale.labels[0]}-{crits[0].scale.labels[-1]}" == rng
        assert task.holistic_rubric().startswith("Score")


def test_batch_positions_are_teacher_forced_with_the_models_greedy_answers(tmp_path):
    record, backends, job = asap_run(tmp_path, limit=6)
    scores = pd.read_parquet(job / "scores.parquet")
    batch = scores[scores.condition == "analytic_batch"].set_index(["backbone", "item_id", "position"])
    for (bb, iid, pos), row in batch.iterrows():
        names = TRAITS[: pos - 1]
        answers = [batch.loc[(bb, iid, k + 1), "greedy_answer"] for k in range(pos - 1)]
        want = "".join(f"{n}: {a}\n" for n, a in zip(names, answers)) + f"{TRAITS[pos - 1]}:"
        assert row["answer_prefix"] == want
        # the greedy answer is the most probable scale label at that position
        probs = json.loads(row["label_probs"])
        assert row["greedy_answer"] == max(probs, key=lambda k: (probs[k], -int(k)))
    # chat (smollm2 slot): one user message for every position, only the assistant prefix grows
    seen = [
        r for r in backends["smollm2"].seen if r.assistant_prefix and "\nOrganization:" in r.assistant_prefix
    ]
    assert seen and all(r.prompt is None for r in seen)
    first = [
        r
        for r in backends["smollm2"].seen
        if r.assistant_prefix == "Content:" and "one line per trait" in r.messages[-1]["content"]
    ]
    assert {json.dumps(r.messages) for r in first} >= {json.dumps(seen[0].messages)}
    # completion (gemma3_270m slot): the prompt ends with the same prefix, no assistant_prefix
    comp = [r for r in backends["gemma3_270m"].seen if "one line per trait" in (r.prompt or "")]
    assert comp and all(r.assistant_prefix is None for r in comp)
    prefixes = set(
        scores[(scores.backbone == "gemma3_270m") & (scores.condition == "analytic_batch")].answer_prefix
    )
    assert {r.prompt.rsplit("\n\n", 1)[-1] for r in comp} == prefixes and len(prefixes) > 5


def test_asap_study_tables_numbers_marks_and_cache(tmp_path):
    record, backends, job = asap_run(tmp_path)
    n = 18
    per_backbone = 2 * n + 3 * n * 5  # the paper's AES conditions: holistic Full and 3ex, three analytic
    assert record["status"] == "ok" and record["sample"]["n"] == n
    assert record["calls"] == {
        "total": 2 * per_backbone,
        "cache_hits": 0,
        "cache_misses": 2 * per_backbone,
        "unscored": 0,
    }
    assert backends["smollm2"].calls == per_backbone == backends["gemma3_270m"].calls
    scores = pd.read_parquet(job / "scores.parquet")
    assert len(scores) == 2 * per_backbone and scores["scoring_mode"].eq("logprob_weighted").all()
    # the paper's example essays are never judged: "excluded from analysis" (§4.1)
    assert not set(scores.item_id) & {f"asap-{e}" for e in PAPER_ESSAYS}
    df = cells(job)
    ours, paper = df[df.source == "ours"], df[df.source == "paper"]

    # Table 1 (the paper's layout): Delta rater rows H. and the traits by the paper's abbreviations,
    # one column per backbone and condition; every cell of ours a number or an explicit n/a
    t1 = ours[(ours.table == "table1") & (ours.block == "Delta rater")]
    assert len(t1) == 2 * (2 + 5 * 3) and set(t1.row) == {"H.", "Ide.", "Or.", "WC", "SF", "Cv."}
    assert all((r.estimate != "") or r.note.startswith("n/a: ") for r in t1.itertuples())
    # the oracle ranks essays by their hidden quality: traits equal to it (or reversed) are exact
    for cond in ("Sep.", "Bat.", "Edited"):
        assert float(cell(df, "table1", "Delta rater", "Ide.", f"smollm2: {cond}").estimate) == pytest.approx(
            1.0
        )
        assert float(cell(df, "table1", "Delta rater", "Or.", f"smollm2: {cond}").estimate) == pytest.approx(
            -1.0
        )
    items = sorted(set(scores.item_id))
    loaded = {it.id: it for it in load_items("asap", data_dir=tmp_path / "data", essay_set=1)}
    human = np.array([loaded[i].human_score("holistic") for i in items])
    for bb in ("smollm2", "gemma3_270m"):
        for cond, label in (("holistic_all", "Full"), ("holistic_three", "3ex")):
            model = (
                scores[(scores.backbone == bb) & (scores.condition == cond)]
                .set_index("item_id")
                .loc[items, "score"]
            )
            want = sstats.kendalltau(human, model.to_numpy()).statistic
            got = cell(df, "table1", "Delta rater", "H.", f"{bb}: {label}")
            assert float(got.estimate) == pytest.approx(want, abs=1e-12)
        # Table 4: human holistic vs the model's analytic scores by Pareto dominance
        sub = scores[(scores.backbone == bb) & (scores.condition == "analytic_edited")]
        mat = sub.pivot(index="item_id", columns="position", values="score").loc[items].to_numpy()
        got = cell(df, "table4", "Delta rater+rubric", "1", f"{bb}: H_H->LLM_A Edited")
        assert float(got.estimate) == pytest.approx(pareto_dominance_tau(human, mat), abs=1e-12)
    # Table 1's Delta rubric human cell: the fixture's organization trait is the reverse of its content
    # trait, so no essay Pareto-dominates another and the cell says why it has no number
    row = cell(df, "table1", "Delta rubric", "Full", "human: H_H->H_A")
    assert row.estimate == "" and row.note.startswith(
        "n/a: pareto_dominance_tau is undefined: no untied pair"
    )
    gem = cell(df, "table1", "Delta rubric", "3ex", "gemma3_270m: Bat.")
    assert gem.low != "" and float(gem.low) <= float(gem.estimate) <= float(gem.high)

    # the paper's numbers and marks beside ours (prompt 1 of Tables 1, 3, 4 and §A.2's Table 6)
    for table, block, r, col, value, marks in (
        ("table1", "Delta rater", "H.", "paper GPT-4o: Full", 0.437, "†"),
        ("table1", "Delta rater", "H.", "paper Llama: 3ex", 0.571, ""),
        ("table1", "Delta rater", "Or.", "paper Llama: Edited", 0.529, "s↓"),
        ("table1", "Delta rater", "Cv.", "paper GPT-4o: Bat.", 0.388, "⋆"),
        ("table1", "Delta rubric", "Full", "paper GPT-4o: H_H->H_A", 0.591, ""),
        ("table1", "Delta rubric", "3ex", "paper GPT-4o: Edited", 0.838, "s,b↑"),
        ("table3", "Model vs model", "Ide.", "paper GPT-4o vs Llama: Edited", 0.660, ""),
        ("table4", "Delta rater+rubric", "1", "paper GPT-4o: LLM_H->H_A Full", 0.574, "†"),
        ("table6", "raters agree vs disagree", "agree", "paper GPT-4o: 3ex", 0.398, ""),
    ):
        got = cell(df, table, block, r, col)
        assert (float(got.estimate), got.marks, got.source) == (value, marks, "paper"), (table, r, col)
    assert len(paper[paper.table == "table1"]) == 2 * 2 + 2 * 5 * 3 + 1 + 2 * 2 * 3

    # marks: the paper's rules over the significant paired tests (characters of its captions only)
    sig = pd.read_csv(job / "significance.csv")
    ran = sig[sig.error.isna()] if "error" in sig else sig
    strata_tests = ran[ran.test == "unpaired strata"]
    ran = ran[ran.test == "paired"]
    # Bonferroni by block size: the two holistic conditions -> 1 comparison; three analytic -> 3
    assert set(ran.n_resamples) == {120} and len(ran) > 40
    holistic = ran.a.str.startswith("holistic") & ran.b.str.startswith("holistic")
    assert set(ran[holistic].n_comparisons) == {1} and set(
        ran[~holistic & (ran.table == "table1")].n_comparisons
    ) == {3}
    assert set("".join(ours.marks)) <= set("†⋆sb,↑↓ §")
    oracle = ran[ran.column == "smollm2"]  # identical oracle scores in every condition: no difference
    assert len(oracle) and not oracle.significant.astype(bool).any()

    # ours, three agreement levels: strata counts of the sample, and n/a below min_items
    t4 = df[df.table == "ours_agreement_levels"]
    strata = record["sample"]["strata"]
    assert strata["full"] + strata["partial"] + strata["none"] == n
    assert strata["agree"] == strata["full"] and strata["disagree"] == n - strata["full"]
    full = cell(
        df, "ours_agreement_levels", "Full agreement (raters equal): Delta rater, holistic", "Full", "smollm2"
    )
    assert int(full.n) == strata["full"]
    assert (t4.note.str.startswith("n/a") | (t4.estimate != "")).all()
    # Table 6 (the paper's): where the raters agree, the human score is the hidden quality the
    # oracle reports, so tau is 1 there; the difference row is ours
    block = "raters agree vs disagree"
    agree = cell(df, "table6", block, "agree", "smollm2: Full")
    assert int(agree.n) == strata["agree"] and float(agree.estimate) == pytest.approx(1.0)
    disagree = cell(df, "table6", block, "disagree", "smollm2: Full")
    diff = cell(df, "table6", block, "agree - disagree (ours)", "smollm2: Full")
    assert float(diff.estimate) == pytest.approx(float(agree.estimate) - float(disagree.estimate))
    (test,) = strata_tests[(strata_tests.table == "table6") & (strata_tests.condition == "holistic_all")
                           & (strata_tests.column == "smollm2: agree - disagree")].itertuples()  # fmt: skip
    assert (test.low, test.high) == (float(diff.low), float(diff.high))
    assert ("†" in agree.marks + disagree.marks) == bool(test.significant)

    # ours, positional bias: one block per batch position, human vs batch and vs separate
    t7 = df[df.table == "ours_positional_bias"]
    assert sorted(set(t7.block)) == sorted(f"Position {k} ({t})" for k, t in enumerate(TRAITS, 1))
    assert float(
        cell(df, "ours_positional_bias", "Position 1 (Content)", "human vs Bat.", "smollm2").estimate
    ) == pytest.approx(1.0)
    shift = cell(
        df, "ours_positional_bias", "Position 2 (Organization)", "mean score shift, Bat. - Sep.", "smollm2"
    )
    assert float(shift.estimate) == 0.0
    md = (job / "rubric_tables.md").read_text()
    assert "### Table 1." in md and "### Table 6." in md and "three conditions -> alpha = 0.0167" in md
    assert "the paper's essays asap-1616, asap-1264, asap-449" in md
    assert (job / "tables" / "table1.csv").is_file() and (job / "tables" / "table6.md").is_file()
    # each condition x backbone a judge job of the grid, its judgments under jobs/<condition>_<backbone>
    conds = ["holistic_all", "holistic_three", "analytic_separate", "analytic_batch", "analytic_edited"]
    assert sorted(p.parent.name for p in (job / "jobs").glob("*/judgments.parquet")) == sorted(
        f"{c}_{b}" for c in conds for b in ("smollm2", "gemma3_270m")
    )

    # a re-run answers everything from the cache and writes the same numbers
    again, fresh, job2 = asap_run(tmp_path, out="job2")
    assert fresh["smollm2"].calls == 0 == fresh["gemma3_270m"].calls
    assert again["calls"]["cache_misses"] == 0 and again["calls"]["cache_hits"] == 2 * per_backbone
    pd.testing.assert_frame_equal(cells(job), cells(job2))


def test_infobench_human_columns_say_so_and_model_only_comparisons_run(tmp_path):
    data = make_infobench(tmp_path / "data")
    cfg = compose_rubric("rubric_infobench", data, tmp_path, ["dataset.limit=12"])
    backends = {"smollm2": RecordingFake(model="a"), "gemma3_270m": RecordingFake(model="b", sharpness=0.5)}
    record = run(cfg, tmp_path / "job", backends=backends)
    df = cells(tmp_path / "job")
    ours = df[df.source == "ours"]
    note = "n/a: InFoBench ships no human (expert) labels here"
    # Table 2 (the paper's IF table): Delta rater one row (0ex, 3ex, Sep., Bat., Edited) per backbone
    t2 = ours[(ours.table == "table2") & (ours.block == "Delta rater")]
    assert len(t2) == 2 * 5 and (t2.note == note).all() and set(t2.row) == {"IF"}
    assert cell(df, "table2", "Delta rater", "IF", "paper GPT-4o: 0ex").estimate == "0.536"
    # model-only: model holistic vs model yes-ratio (Delta rubric), model vs model, the GPT-4 reference
    model_rows = ours[
        (ours.table == "table2") & (ours.block == "Delta rubric") & (ours.column != "human: H_H->H_A")
    ]
    assert len(model_rows) == 2 * 2 * 3 and (model_rows.estimate != "").sum() >= 8
    mvm = ours[ours.table == "table3"]
    assert len(mvm) == 5 and (mvm.estimate != "").all()
    scores = pd.read_parquet(tmp_path / "job" / "scores.parquet")
    items = sorted(set(scores.item_id))
    loaded = {it.id: it for it in load_items("infobench", data_dir=data)}
    gpt4 = np.array([np.mean(loaded[i].meta["gpt4_answers"]) for i in items])
    sub = scores[(scores.backbone == "smollm2") & (scores.condition == "analytic_separate")]
    ratio = sub.groupby("item_id")["score"].mean().loc[items].to_numpy()
    got = cell(
        df,
        "ours_if_gpt4_reference",
        "GPT-4 (not human) yes-ratio vs model yes-ratio (logprob-weighted)",
        "Sep.",
        "smollm2",
    )
    assert float(got.estimate) == pytest.approx(kendall_tau(gpt4, ratio), abs=1e-12)
    # Table 7: the three annotators' labels are missing; the paper's numbers stand alone
    t7 = df[df.table == "table7"]
    assert t7[t7.source == "ours"].note.str.startswith("missing: ").all()
    assert cell(df, "table7", "human agreement", "full", "paper GPT-4o: 0ex").marks == "p,f↑"
    # positional bias (ours): positions 1-5; the fifth question exists for too few instructions
    pb = df[df.table == "ours_positional_bias"]
    assert sorted(set(pb.block)) == [f"Position {k}" for k in range(1, 6)]
    p5 = pb[(pb.block == "Position 5") & (pb.row.str.startswith("GPT-4"))]
    assert p5.note.str.contains("complete items").all()
    n_q = sum(len(loaded[i].meta["decomposed_questions"]) for i in items)
    assert record["calls"]["total"] == 2 * (2 * 12 + 3 * n_q)
    assert (df[df.table == "ours_agree_disagree"].note.str.startswith("n/a")).all()
    assert not (df.table == "table6").any()  # Table 6 is AES's (two raters)


def test_chat_backbone_needs_a_backend_that_honours_the_assistant_prefix(tmp_path):
    data = make_asap(tmp_path / "data")
    cfg = compose_rubric("rubric_asap_set1", data, tmp_path, ["dataset.limit=6"])
    with pytest.raises(ValueError, match="assistant_prefix"):
        run(cfg, tmp_path / "job", backends={"smollm2": FakeBackend(), "gemma3_270m": RecordingFake()})


def test_condition_configs_are_checked():
    with pytest.raises(ValueError, match="batch mode"):
        RubricCondition(name="x", kind="analytic", mode="batch", examples="three")
    with pytest.raises(ValueError, match="unknown keys"):
        RubricCondition.from_config({"name": "x", "kind": "holistic", "example": "three"})


def test_assistant_prefix_extends_the_chat_turn_and_defaults_to_nothing(smollm2):
    msgs = [{"role": "user", "content": "Rate the essay from 1 to 6."}]
    plain = smollm2.encode(JudgeRequest(key="a", labels=("1", "2"), messages=msgs))
    assert plain == smollm2.encode(
        JudgeRequest(key="a", labels=("1", "2"), messages=msgs, assistant_prefix=None)
    )
    prefixed = smollm2.encode(
        JudgeRequest(key="b", labels=("1", "2"), messages=msgs, assistant_prefix="Content: 4\nStyle:")
    )
    assert prefixed == plain + smollm2.tokenizer.encode("Content: 4\nStyle:", add_special_tokens=False)
    assert smollm2.tokenizer.decode(prefixed[len(plain) - 3 :]).endswith("assistant\nContent: 4\nStyle:")
    assert len(smollm2.label_token_ids(SCALES["likert_0_4"].labels)) == 5  # single-token labels


def test_vectorised_bootstrap_forms_match_the_plain_loop():
    from promptlottery.metrics import bootstrap_ci
    from promptlottery.rubrics.tables import _columns_tau, _mean_shift

    rng = np.random.default_rng(0)
    pair = np.column_stack([rng.integers(1, 6, 30), rng.integers(1, 6, 30)]).astype(float)
    holed = pair.copy()
    holed[3, 1] = np.nan  # tau drops the pair (block_cells only ever passes complete items)
    dummy = np.zeros(30)
    for stat, data in ((_columns_tau, holed), (_columns_tau, pair), (_mean_shift, pair)):
        fast = bootstrap_ci(stat, dummy, data, n_resamples=50, seed=1)
        slow = bootstrap_ci(stat, dummy, data, n_resamples=50, seed=1, vectorized=False)
        np.testing.assert_allclose(fast.distribution, slow.distribution, atol=1e-12)


@pytest.mark.parametrize(
    "name", ["rubric_asap_set1", "rubric_asap_set4", "rubric_asap_set6", "rubric_infobench"]
)
def test_rubric_experiments_compose_with_every_condition_and_both_cpu_backbones(name, tmp_path):
    lines = (REPO / "conf" / "experiment" / f"{name}.yaml").read_text().splitlines()
    assert lines[:2] == ["# @package _global_", f"# python -m run +experiment={name}"]
    cfg = compose([f"+experiment={name}"], tmp_path=tmp_path)
    assert cfg.stage == "rubric" and cfg.decoding.max_new_tokens == 0
    assert list(cfg.rubric.backbones) == ["smollm2", "gemma3_270m"]
    assert cfg.rubric.backbones.gemma3_270m.prompt_format == "completion"
    conds = [RubricCondition.from_config({"name": k, **v}) for k, v in cfg.rubric.conditions.items()]
    assert [c.name for c in conds] == list(cfg.rubric.order)
    # the paper's conditions (§3.1): AES holistic Full and 3ex, IF holistic 0ex and 3ex; analytic
    # separate, batch, edited
    first = ("none" if name == "rubric_infobench" else "all", "0ex" if name == "rubric_infobench" else "Full")
    assert [(c.kind, c.mode, c.examples, c.context, c.label) for c in conds] == [
        ("holistic", "separate", first[0], False, first[1]),
        ("holistic", "separate", "three", False, "3ex"),
        ("analytic", "separate", "none", False, "Sep."),
        ("analytic", "batch", "none", False, "Bat."),
        ("analytic", "separate", "three", True, "Edited"),
    ]
    assert [c.role for c in conds] == ["holistic", "holistic", "separate", "batch", "edited"]
    if DATA_DIR.is_dir():  # the rubric texts of the real data dir load (sources stay there)
        opts = dict(cfg.dataset.options)
        task = make_task(cfg.dataset.name, DATA_DIR, opts, dict(cfg.rubric.settings))
        assert task.holistic_rubric() and task.holistic_scale.labels[0] in ("0", "1")

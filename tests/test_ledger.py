"""The paper ledger (docs/paper_ledger.md) cannot drift from the code: it is generated from
``promptlottery.ledger``, every key it names exists in a report produced on the test fixtures, and
every row marked "paper's definition" names a hand-computed test that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from promptlottery.ledger import DOC, LEDGER, MISSING, PAPER, Ref, main, render
from tests.test_analysis_fixtures import fake_encode, write_sweep

REPO = Path(__file__).resolve().parents[1]


def _keys(kind: str) -> list[tuple[str, str]]:
    return [(r.where, k.partition(":")[2]) for r in LEDGER for k in r.keys if k.partition(":")[0] == kind]


def test_the_committed_ledger_is_the_generated_one(tmp_path):
    assert DOC.read_text(encoding="utf-8") == render(), "run: python -m promptlottery.ledger"
    assert main(["--check"]) == 0
    stale = tmp_path / "ledger.md"
    stale.write_text("old\n")
    assert main(["--check", "--out", str(stale)]) == 1
    assert main(["--out", str(stale)]) == 0 and stale.read_text() == render()


def test_every_row_says_whose_definition_it_is_and_the_papers_rows_name_existing_hand_tests():
    for r in LEDGER:
        if r.status == PAPER:
            assert r.tests, r.where
        if r.status == MISSING:
            assert r.how, r.where
        for t in r.tests:
            path, _, name = t.partition("::")
            text = (REPO / path).read_text(encoding="utf-8")
            assert re.search(rf"^def {re.escape(name)}\(", text, re.M), t
    with pytest.raises(ValueError, match="needs its hand-computed test"):
        Ref("lottery", "§x", "words", ("headline:x",), PAPER)
    with pytest.raises(ValueError, match="say how ours differs"):
        Ref("lottery", "§x", "words", (), "ours")
    with pytest.raises(ValueError, match="key 'nowhere:x'"):
        Ref("lottery", "§x", "words", ("nowhere:x",), "ours", "how")


def test_a_row_computed_on_our_runs_is_the_papers_definition_on_our_population():
    """A key names a report of our runs (12 essays, two CPU models, our configurations): such a row
    cannot claim the paper's population (the rule of ``ledger.py``'s docstring)."""
    from promptlottery.ledger import ON_POP, STATUS_TEXT

    assert STATUS_TEXT[ON_POP] == "paper's definition on our population"
    for r in LEDGER:
        assert not (r.status == PAPER and r.keys), r.where
    with pytest.raises(ValueError, match="paper's definition on our population"):
        Ref("rubric", "Table 1", "words", ("rubric:table1",), PAPER, "", ("tests/x.py::t",))
    with pytest.raises(ValueError, match="say what our population is"):
        Ref("rubric", "Table 1", "words", ("rubric:table1",), ON_POP, "", ("tests/x.py::t",))
    on_ours = [r for r in LEDGER if r.status == ON_POP]
    assert {"Table 1", "Table 3, §A.1", "§4.1, §C.3"} <= {r.where for r in on_ours}
    assert "paper's definition on our population" in render()


def test_the_ledger_covers_each_papers_tables_and_figures():
    where = " ".join(r.where for r in LEDGER if r.paper == "lottery")
    for t in ("Table 4", "Table 5", "Table 6", "Table 10", "Table 12", "Table 16", "Figure 2", "Figures 4-5",
              "Appendix E", "§6", "Abstract"):  # fmt: skip
        assert t in where, t
    for s in (
        "§3.1",
        "§3.2",
        "§4.1",
        "§4.2",
        "§4.3",
        "§4.4",
        "§5.1",
        "§5.2",
        "§5.2.1",
        "Appendix B",
        "§F.1",
        "§F.2",
    ):
        assert s in where, s
    where = " ".join(r.where for r in LEDGER if r.paper == "rubric")
    for t in [f"Table {i}" for i in range(1, 8)] + [
        "Figure 1",
        "Figure 2",
        "§4.2",
        "§4.3",
        "§5.1",
        "§5.3",
        "§A.1",
        "§A.2",
    ]:
        assert t in where, t
    assert "Appendix B.1" in where


@pytest.fixture(scope="module")
def lottery_report(tmp_path_factory):
    from promptlottery.analysis.lottery.options import LotteryOptions
    from promptlottery.analysis.stage import run_lottery

    root = tmp_path_factory.mktemp("ledger")
    sweep = write_sweep(root / "grid")
    fast = {"n_resamples": 20, "n_permutations": 20, "plots": False}
    run_lottery(
        LotteryOptions.from_dict({"runs": str(sweep / "*"), **fast}), root / "out", encode=fake_encode
    )
    return root / "out" / "tables"


def test_every_lottery_key_exists_in_a_report_on_the_fixtures(lottery_report):
    headlines = set(pd.read_csv(lottery_report / "headlines.csv")["key"])
    for where, key in _keys("headline"):
        assert key in headlines, (where, key)
    for where, key in _keys("table"):
        name, _, column = key.partition(".")
        path = lottery_report / f"{name}.csv"
        assert path.exists(), (where, key)
        if column:
            assert column in pd.read_csv(path, nrows=0).columns, (where, key)


def test_every_validation_key_exists_in_the_stages_outputs(tmp_path):
    from promptlottery.stages.validation import run_validation
    from tests.conftest import compose
    from tests.test_prompts import _fake_encoder

    over = [
        "+experiment=validate_prompts",
        "validation.groups=[G1,G12]",
        "backbone=fake",
        "validation.equivalence=true",
    ]
    run_validation(compose(over, tmp_path=tmp_path), tmp_path / "v", encoder=_fake_encoder)
    for where, key in _keys("validation"):
        m = re.fullmatch(r"(.+?\.(?:csv|md))(?:\.(\w+))?", key)
        assert m and (tmp_path / "v" / m[1]).exists(), (where, key)
        if m[2]:
            assert m[2] in pd.read_csv(tmp_path / "v" / m[1], nrows=0).columns, (where, key)


def test_every_rubric_key_is_a_table_of_the_study_on_the_fixtures(tmp_path):
    """The rubric study on the ASAP set-1 and the InFoBench fixtures (tests/test_rubric_study.py)."""
    from promptlottery.stages import run_stage as run
    from tests.test_rubric_study import RecordingFake, asap_run, cells, compose_rubric, make_infobench

    _, _, job = asap_run(tmp_path / "asap")
    tables = set(cells(job)["table"])
    data = make_infobench(tmp_path / "if" / "data")
    cfg = compose_rubric("rubric_infobench", data, tmp_path / "if", ["dataset.limit=12"])
    run(
        cfg,
        tmp_path / "if" / "job",
        backends={"smollm2": RecordingFake(model="a"), "gemma3_270m": RecordingFake(model="b")},
    )
    tables |= set(cells(tmp_path / "if" / "job")["table"])
    for where, key in _keys("rubric"):
        assert key in tables, (where, key)


def test_every_human_key_is_a_column_of_the_human_toys_report(tmp_path):
    """The human baseline's toy (docs/human_baseline.md): the recorded export of tests/data/human,
    the fake judge with P1 sampled 3 times and P2 once at T = 0.7, then ``human_analyse``."""
    from promptlottery.stages import run_stage
    from tests.conftest import compose
    from tests.test_human_ratings import EXPORTS, _import

    ratings = tmp_path / "human_ratings.parquet"
    _import(export=EXPORTS).to_parquet(ratings)
    qa = tmp_path / "qa6.jsonl"
    qa.write_text("".join((REPO / "examples/own_judge/qa_answers.jsonl").read_text().splitlines(True)[:6]))
    data = [
        "dataset=table", f"dataset.path={qa}", "dataset.fields.id=id", "dataset.fields.response=answer",
        "dataset.fields.context=question", "dataset.fields.reference=gold", "dataset.fields.human=rating",
        "dataset.human_range=[1,5]", "judge=own", f"judge.group_file={REPO}/examples/own_judge/correctness.yaml",
        "backbone=fake", "decoding.temperature=0.7",
    ]  # fmt: skip
    run_stage(
        compose([*data, "judge.variant=P1", "n_samples=3"], tmp_path=tmp_path), tmp_path / "judge" / "P1"
    )
    run_stage(compose([*data, "judge.variant=P2"], tmp_path=tmp_path), tmp_path / "judge" / "P2")
    over = [
        "+human=analyse",
        f"human.ratings={ratings}",
        f"human.runs={tmp_path / 'judge'}/*",
    ]
    out = tmp_path / "analysis"
    assert run_stage(compose(over, tmp_path=tmp_path), out)["status"] == "ok"
    keys = _keys("human")
    assert keys, "no human: key in the ledger"
    for where, key in keys:
        name, _, column = key.partition(".")
        path = out / "tables" / f"{name}.csv"
        assert path.exists(), (where, key)
        table = pd.read_csv(path)
        assert column in table.columns and table[column].notna().any(), (where, key)


@pytest.mark.slow
def test_every_gate_key_is_a_table_the_gate_writes(tmp_path):
    """The gate stage on the grid of tests/test_gate_stage.py (fake judge, tiny DeBERTa)."""
    from promptlottery.stages import run_stage
    from tests.conftest import compose
    from tests.test_gate_stage import VARIANTS

    g15 = ["dataset=evouna_nq", "dataset.limit=5", "dataset.sample_by=item", "judge.family=qa_correctness", "judge.prompt_group=G15",
           "judge.criterion=correct"]  # fmt: skip
    for v in VARIANTS:
        cfg = compose(["backbone=fake", "dataset.limit=20", f"judge.variant={v}"], tmp_path=tmp_path)
        run_stage(cfg, tmp_path / "grid" / f"stsb_{v}")
        run_stage(
            compose(["backbone=fake", *g15, f"judge.variant={v}"], tmp_path=tmp_path), tmp_path / "g15" / v
        )
    cfg = compose(
        ["+gate=selective", f"gate.runs={tmp_path / 'grid'}/*", f"gate.transfer_runs={tmp_path / 'g15'}/*",
         "gate/classifier=deberta_tiny", "backbone=fake", "gate.llm_baseline.n_shot=1",
         "gate.embedding_baseline.enabled=false"],
        tmp_path=tmp_path,
    )  # fmt: skip
    out = tmp_path / "gate"
    assert run_stage(cfg, out)["status"] == "ok"
    for where, key in _keys("gate"):
        assert (out / f"{key.partition('.')[0]}.csv").exists(), (where, key)

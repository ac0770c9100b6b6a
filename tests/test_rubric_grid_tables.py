"""Rubric set 1's tables computed from the judge grid's judgments are byte-identical to the study's
own (tests/fixtures/rubric_set1): every condition judged by ``judging.runner.judge`` with its group
(``rubrics/grid_groups.py``), the tests' oracle in the chat slot and hash judge in the completion
slot, and the judgments turned into the rows the tables read. The answers are the study's (its
``calls.csv``: the same score and argmax label per backbone, condition, essay and position)."""

from __future__ import annotations

import pandas as pd

from promptlottery.calls.compose import build_calls
from promptlottery.data import load_items
from promptlottery.judging import runner
from promptlottery.rubrics.grid_groups import condition_group, grid_items, scores_from_judgments
from promptlottery.rubrics.grid_stage import grid_condition
from promptlottery.rubrics.prompts import PromptBuilder
from promptlottery.rubrics.study import conditions as study_conditions
from promptlottery.rubrics.study import draw_sample, header, write_tables
from promptlottery.rubrics.tables import Settings, StudyData, build_tables
from promptlottery.rubrics.tasks import make_task
from tests.test_rubric_fixture import FIXTURE
from tests.test_rubric_study import OracleJudge, RecordingFake, compose_rubric, make_asap

#: the fixture's study: rubric set 1, 12 essays (tests/test_rubric_fixture.py's rubric_set1_job)
LIMIT = 12


def test_rubric_set_1_tables_from_the_grids_judgments_are_byte_identical(tmp_path):
    cfg = compose_rubric(
        "rubric_asap_set1", make_asap(tmp_path / "data"), tmp_path, [f"dataset.limit={LIMIT}"]
    )
    rc, options = cfg.rubric, dict(cfg.dataset.options)
    settings = dict(rc.settings)
    task = make_task(
        cfg.dataset.name, cfg.paths.data_dir, options, settings, human_holistic=rc.get("human_holistic")
    )
    items = load_items(cfg.dataset.name, data_dir=cfg.paths.data_dir, **options)
    sample, pool = draw_sample(task, items, cfg.dataset.limit, cfg.dataset.seed)
    builder = PromptBuilder(task, cfg.dataset.name, pool, cfg.dataset.seed)
    conditions = study_conditions(dict(rc))
    cache, decoding = build_calls(cfg)
    backends = {"smollm2": OracleJudge(model="oracle"), "gemma3_270m": RecordingFake(model="hash")}
    scores, answers = [], []
    for name, backend in backends.items():
        fmt = rc.backbones[name].prompt_format
        for cond in conditions:
            shown = grid_items(builder, cond, sample)
            group, mode = condition_group(builder, cond, sample)
            condition = grid_condition(cfg.dataset.name, cond, group, mode, name, fmt)
            df, _ = runner.judge(shown, condition, group, backend, cache, decoding)
            rows = scores_from_judgments(df, cond, group, name, task, shown)
            scores.append(rows)
            answers.append(rows.assign(argmax_label=df["argmax_label"].to_numpy()))
    data = StudyData(task, sample, pd.concat(scores, ignore_index=True), conditions, list(backends))
    tables, tests = build_tables(data, Settings(**{"seed": cfg.seed, **rc.stats}))
    head = header(cfg, task, sample, conditions, rc.backbones, settings)
    write_tables(tmp_path / "grid", tables, tests, header=head)
    pinned = [p for p in sorted(FIXTURE.rglob("*")) if p.is_file() and p.name != "calls.csv"]
    assert len(pinned) == 19  # rubric_tables.md, cells.csv, significance.csv, 8 tables x (csv, md)
    for path in pinned:
        rel = path.relative_to(FIXTURE)
        assert (tmp_path / "grid" / rel).read_bytes() == path.read_bytes(), rel
    # every call answered as the study's engine answered it
    keys = ["backbone", "condition", "item_id", "position"]
    want = pd.read_csv(FIXTURE / "calls.csv", keep_default_na=False, na_values=[""])
    got = pd.concat(answers, ignore_index=True).sort_values(keys).reset_index(drop=True)
    want = want.sort_values(keys).reset_index(drop=True)
    assert len(got) == len(want) == 2 * (2 * LIMIT + 3 * 5 * LIMIT)
    pd.testing.assert_frame_equal(got[keys], want[keys], check_dtype=False)
    assert (got["score"].round(12) == want["score"].round(12)).all()
    assert (got["argmax_label"].astype(str) == want["argmax_label"].astype(str)).all()

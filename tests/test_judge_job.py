"""One judge job built once (issue 48): the preflight's inputs are the stage's, every prompt is
rendered once per job, and the requests of a :class:`JudgeJob` are built once."""

from __future__ import annotations

import pandas as pd
import pytest

from promptlottery.backends.base import Decoding
from promptlottery.backends.fake import FakeBackend
from promptlottery.judging import inputs as judge_inputs_mod
from promptlottery.judging import judge_job
from promptlottery.judging.inputs import check_inputs, judge_inputs
from promptlottery.judging.runner import Condition, JudgeJob, build_requests
from promptlottery.prompts import load_group
from promptlottery.stages import preflight, run_stage
from tests.conftest import REPO, compose

LIMIT = 6
EXAMPLES = REPO / "examples" / "own_judge"


@pytest.fixture
def renders(monkeypatch) -> list[str]:
    """The item id of every prompt the judge path renders."""
    seen: list[str] = []
    real = judge_job.render_chat

    def counted(group, variant_id, item):
        seen.append(item.id)
        return real(group, variant_id, item)

    monkeypatch.setattr(judge_job, "render_chat", counted)
    return seen


def test_a_job_renders_each_prompt_once_through_its_two_preflights_and_the_stage(tmp_path, renders):
    cfg = compose(["backbone=fake", f"dataset.limit={LIMIT}", "judge.variant=P2"], tmp_path=tmp_path)
    preflight(cfg)  # a sweep's preflight; run_stage runs the job's own, then the stage
    rec = run_stage(cfg, tmp_path / "job")
    assert rec["status"] == "ok"
    df = pd.read_parquet(tmp_path / "job" / "judgments.parquet")
    assert len(df) == LIMIT and sorted(renders) == sorted(df["item_id"])  # one render per judged prompt
    # the stage took the preflight's inputs: the next job of this config builds (and renders) anew
    renders.clear()
    assert run_stage(cfg, tmp_path / "again")["status"] == "ok"
    assert sorted(renders) == sorted(df["item_id"])
    again = pd.read_parquet(tmp_path / "again" / "judgments.parquet")
    pd.testing.assert_frame_equal(
        df.drop(columns=["cache_hit", "latency_s"]), again.drop(columns=["cache_hit", "latency_s"])
    )
    assert again["cache_hit"].all()


def test_the_preflight_inputs_are_kept_for_the_config_and_built_anew_when_the_table_changes(tmp_path):
    table = tmp_path / "t.jsonl"
    rows = [
        f'{{"id": "q{i}", "question": "Q{i}?", "gold": "G{i}", "answer": "A{i}", "system": "s", "rating": {i % 5 + 1}}}'
        for i in range(4)
    ]
    table.write_text("\n".join(rows) + "\n")
    over = [
        "+experiment=own_judge", "backbone=fake", f"dataset.path={table}", f"judge.group_file={EXAMPLES / 'correctness.yaml'}",
        *(f"dataset.fields.{k}={v}" for k, v in {"id": "id", "context": "question", "reference": "gold"}.items()),
        *(f"dataset.fields.{k}={v}" for k, v in {"response": "answer", "system": "system", "human": "rating"}.items()),
        "dataset.human_range=[1,5]", "judge.variant=P1",
    ]  # fmt: skip
    cfg = compose(over, tmp_path=tmp_path)
    check_inputs(cfg)
    kept = judge_inputs(cfg)
    assert judge_inputs(cfg, take=True) is kept and judge_inputs(cfg) is not kept  # taken by the stage
    assert [it.id for it in kept.items] == ["q0", "q1", "q2", "q3"] and len(kept.rendered) == 4
    table.write_text("\n".join(rows[:3]) + "\n")  # the same config, another table: built again
    assert [it.id for it in judge_inputs(cfg).items] == ["q0", "q1", "q2"]
    judge_inputs_mod._KEPT.clear()


def test_a_judge_job_builds_its_requests_once_and_a_changed_job_anew():
    from promptlottery.data import load_items
    from tests.conftest import DATA_DIR

    items = load_items("stsb", data_dir=DATA_DIR)[:3]
    cond = Condition("stsb", "semantic_alignment", "G12", "P1", "fake", "similarity")
    job = JudgeJob(items, cond, load_group("G12"), FakeBackend(), Decoding(), n_samples=2)
    pairs = job.requests()
    assert job.requests() is pairs and len(pairs) == 6 and job.keys() == [r.key for _, r in pairs]
    # the loose-parameter builder gives the same requests
    loose = build_requests(items, cond, load_group("G12"), FakeBackend(), Decoding(), n_samples=2)
    assert [r.key for _, r in loose] == job.keys()
    other = job.replace(condition=Condition("stsb", "semantic_alignment", "G12", "P2", "fake", "similarity"))
    assert other.requests() is not pairs and not set(other.keys()) & set(job.keys())
    assert other.keys() == [r.key for _, r in build_requests(items, other.condition, job.group, FakeBackend(), Decoding(), n_samples=2)]  # fmt: skip

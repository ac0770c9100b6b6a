"""The rubric study's five conditions on rubric set 1 as prompt groups of the judge grid: the grid's
requests carry the study's own chat messages and answer prefixes, text for text, for every sampled
essay, criterion and batch position (the study's engine, rubrics/prompts.PromptBuilder, is the
reference: the same texts, rendered by the other path)."""

from __future__ import annotations

import dataclasses

import pytest

from promptlottery.backends.base import Decoding
from promptlottery.backends.fake import FakeBackend
from promptlottery.data import load_items
from promptlottery.judging.runner import Condition, build_requests
from promptlottery.prompts.groups import PromptError
from promptlottery.rubrics.grid_groups import condition_group, grid_items
from promptlottery.rubrics.prompts import PromptBuilder
from promptlottery.rubrics.study import conditions as study_conditions
from promptlottery.rubrics.study import draw_sample
from promptlottery.rubrics.tasks import make_task
from tests.test_rubric_study import compose_rubric, make_asap, make_infobench


def _study(tmp_path, experiment="rubric_asap_set1", make=make_asap, limit=6):
    cfg = compose_rubric(experiment, make(tmp_path / "data"), tmp_path, [f"dataset.limit={limit}"])
    rc, options = cfg.rubric, dict(cfg.dataset.options)
    task = make_task(
        cfg.dataset.name,
        cfg.paths.data_dir,
        options,
        dict(rc.settings),
        human_holistic=rc.get("human_holistic"),
    )
    sample, pool = draw_sample(
        task, load_items(cfg.dataset.name, data_dir=cfg.paths.data_dir, **options), limit, 0
    )
    return PromptBuilder(task, cfg.dataset.name, pool, 0), sample, study_conditions(dict(rc))  # fmt: skip


def _expected(builder: PromptBuilder, cond, item):
    """The study's own renderings of ``item`` under ``cond``, in the grid's order (batch: every
    position after the scale's first label, as the study's dry run counts them)."""
    t = builder.task
    if cond.kind == "holistic":
        return [builder.holistic(item, cond)]
    cs = t.criteria(item)
    if cond.mode == "batch":
        return [builder.batch(item, cs, k, [c.scale.labels[0] for c in cs[:k]], cond) for k in range(len(cs))]
    return [builder.separate(item, c, cond) for c in cs]


def test_every_condition_of_rubric_set_1_renders_the_studys_messages_on_the_grid(tmp_path):
    builder, sample, conditions = _study(tmp_path)
    assert [c.role for c in conditions] == ["holistic", "holistic", "separate", "batch", "edited"]
    for cond in conditions:
        group, mode = condition_group(builder, cond, sample)
        condition = Condition(
            "asap", group.judge_family, group.id, cond.name, "smollm2", "holistic", judge_mode=mode
        )
        reqs = [r for _, r in build_requests(grid_items(builder, cond, sample), condition, group, FakeBackend(), Decoding())]  # fmt: skip
        want = [r for it in sample for r in _expected(builder, cond, it)]
        assert len(reqs) == len(want) == len(sample) * (1 if cond.kind == "holistic" else 5), cond.name
        for got, rendered in zip(reqs, want):
            assert got.messages == [
                {"role": "system", "content": rendered.system},
                {"role": "user", "content": rendered.user},
            ], cond.name
            assert got.assistant_prefix == rendered.prefix, cond.name
        # completion (the study's base-model backbone): the prompt ends with the answer prefix
        completion = dataclasses.replace(condition, prompt_format="completion")
        reqs = [r for _, r in build_requests(grid_items(builder, cond, sample), completion, group, FakeBackend(), Decoding())]  # fmt: skip
        assert [r.prompt for r in reqs] == [f"{w.system}\n\n{w.user}\n\n{w.prefix}" for w in want], cond.name
        assert all(r.messages is None and r.assistant_prefix is None for r in reqs)
    # the edited condition shows each trait's three example essays and the edited instructions
    edited = condition_group(builder, conditions[-1], sample)[0]
    shown = [entry["examples"].count(f"({entry['name']}: ") for entry in edited.criteria_info.values()]
    assert shown == [3] * 5
    assert "first draft" in edited.variants["analytic_edited"].user


def test_infobench_renders_the_studys_messages_with_each_items_own_questions(tmp_path):
    """InFoBench's questions differ per item: its analytic groups read them from the item
    (``criteria: from_item``) and render the study's messages and answer prefixes text for text."""
    builder, sample, conditions = _study(tmp_path, "rubric_infobench", make_infobench, limit=6)
    for cond in conditions:
        group, mode = condition_group(builder, cond, sample)
        assert group.criteria_from_item == (cond.kind == "analytic") and not group.criteria
        condition = Condition("infobench", group.judge_family, group.id, cond.name, "smollm2", "holistic", judge_mode=mode)  # fmt: skip
        reqs = [r for _, r in build_requests(grid_items(builder, cond, sample), condition, group, FakeBackend(), Decoding())]  # fmt: skip
        want = [r for it in sample for r in _expected(builder, cond, it)]
        assert len(reqs) == len(want), cond.name
        for got, rendered in zip(reqs, want):
            assert got.messages == [
                {"role": "system", "content": rendered.system},
                {"role": "user", "content": rendered.user},
            ], cond.name
            assert got.assistant_prefix == rendered.prefix, cond.name
    shown = grid_items(builder, conditions[2], sample)[0]
    item = next(it for it in sample if it.id == shown.id)
    assert list(shown.meta["criteria"]) == [c.id for c in builder.task.criteria(item)]
    with pytest.raises(PromptError, match=r"reads each item's criteria \(criteria: from_item\) but item"):
        build_requests(sample, condition, group, FakeBackend(), Decoding())


def test_a_rubric_group_file_round_trips_and_its_completion_layout_refuses_solved_examples(tmp_path):
    from promptlottery.prompts.group_text import dump_group
    from promptlottery.prompts.groups import PromptError, load_group_file
    from promptlottery.prompts.requests import render_completion

    builder, sample, conditions = _study(tmp_path)
    group = condition_group(builder, conditions[-1], sample)[0]
    again = load_group_file(dump_group(group, tmp_path / "edited.yaml"))
    assert (
        again == group
        and again.completion_answer is None
        and again.assistant_prefix == "{{ criterion_name }}:"
    )
    item = grid_items(builder, conditions[-1], sample)[0]
    with pytest.raises(
        PromptError, match=r"solved examples need an answer line; the group has completion_answer: null$"
    ):
        render_completion(group, "analytic_edited", item, [(item, "3")], answer_prefix=None)

"""The analytic mode's batch condition (``criteria_call: batch``): every criterion in one reply,
criterion k read at its own position after the judge's greedy answers before it, and the
criterion entries' names and contexts. Expected prefixes, keys and rows worked out by hand from
the definition in ``modes/analytic.py``."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from promptlottery.backends.base import Decoding, JudgeResponse
from promptlottery.backends.fake import FakeBackend
from promptlottery.calls.cache import CallCache
from promptlottery.data.schema import Item
from promptlottery.errors import ConfigError
from promptlottery.judging import runner
from promptlottery.modes import get_mode
from promptlottery.prompts.group_text import dump_group
from promptlottery.prompts.groups import PromptError, PromptGroup, Variant, load_group_file
from promptlottery.prompts.requests import render_chat
from promptlottery.prompts.scales import get_scale
from tests.conftest import DATA_DIR, compose

ESSAY = Item(
    id="e1", dataset="toy", inputs={"response": "an essay"}, human={"content": 5.0, "conventions": 2.0}
)
OTHER = Item(
    id="e2", dataset="toy", inputs={"response": "another"}, human={"content": 1.0, "conventions": 6.0}
)


def _batch(call: str = "batch") -> PromptGroup:
    return PromptGroup(
        id="R2",
        judge_family="essay_traits",
        scale=get_scale("likert_1_6"),
        version=1,
        variants={
            "P1": Variant("P1", "Rate each trait:\n{{ criteria }}\n{{ criteria_context }}\n{{ response }}")
        },
        criteria=(("content", "the ideas"), ("conventions", "the spelling")),
        criteria_info={
            "content": {"name": "Content", "context": "count the reasons"},
            "conventions": {"name": "Conventions"},
        },
        criteria_call=call,
    )


def test_a_batch_position_starts_its_answer_with_the_reply_so_far():
    mode, group = get_mode("analytic"), _batch()
    assert mode.rounds(group) == 2 and mode.rounds(_batch("separate")) == 1
    (first,) = mode.round_presentations(ESSAY, group=group, k=0, earlier=())
    assert (first.part, first.prefix) == ("content", "Content:")
    assert first.item.inputs["criteria"] == "Content: the ideas\nConventions: the spelling"
    assert first.item.inputs["criteria_context"] == "Content: count the reasons"
    (second,) = mode.round_presentations(ESSAY, group=group, k=1, earlier=("5",))
    assert (second.part, second.prefix) == ("conventions", "Content: 5\nConventions:")
    assert (
        second.item.inputs["criterion_name"] == "Conventions"
        and second.item.inputs["criterion_position"] == "2"
    )
    # the reply so far is part of the key; a separate criterion keeps its key of the criterion alone
    assert mode.key_parts(second, second.prefix) == {
        "criterion": "conventions",
        "assistant_prefix": "Content: 5\nConventions:",
    }
    # an item whose first answer had no label stops; counting without answers: the first label stands in
    assert mode.round_presentations(ESSAY, group=group, k=1, earlier=()) == []
    (placeholder,) = mode.round_presentations(ESSAY, group=group, k=1, earlier=None)
    assert placeholder.prefix == "Content: 1\nConventions:"
    assert mode.round_presentations(ESSAY, group=group, k=2, earlier=("5", "2")) == []
    cols = mode.columns(second.item, None, group.scale, None, None, None)
    assert cols == {"criterion": "conventions", "human": 2.0, "human_raters": None, "criterion_position": 2}


def _condition():
    return runner.Condition("toy", "essay_traits", "R2", "P1", "fake", "holistic", judge_mode="analytic")


def test_the_runner_asks_position_by_position_after_the_oracles_answers(tmp_path):
    """The oracle answers each trait's human label (5 and 2 for e1; 1 and 6 for e2 on [1, 6]), so
    e1's second call starts "Content: 5\\nConventions:" and e2's "Content: 1\\nConventions:"."""
    backend = FakeBackend(behaviour="oracle", honour_prefix=True)
    df, stats = runner.judge(
        [ESSAY, OTHER], _condition(), _batch(), backend, CallCache(tmp_path / "c.sqlite"), Decoding(),
        human_range=(1.0, 6.0),
    )  # fmt: skip
    assert list(zip(df["item_id"], df["criterion"], df["criterion_position"], df["argmax_label"])) == [
        ("e1", "content", 1, "5"),
        ("e2", "content", 1, "1"),
        ("e1", "conventions", 2, "2"),
        ("e2", "conventions", 2, "6"),
    ]
    assert df["query"][2].endswith("[assistant] Content: 5\nConventions:")
    assert df["query"][3].endswith("[assistant] Content: 1\nConventions:")
    assert stats.total == 4 and df["cache_key"].nunique() == 4 and list(df["human"]) == [5.0, 1.0, 2.0, 6.0]
    # a re-run answers every position from the cache
    again, stats2 = runner.judge(
        [ESSAY, OTHER], _condition(), _batch(), backend, CallCache(tmp_path / "c.sqlite"), Decoding(),
        human_range=(1.0, 6.0),
    )  # fmt: skip
    assert stats2.cache_misses == 0 and backend.calls == 4
    pd.testing.assert_series_equal(df["cache_key"], again["cache_key"])


class Mute(FakeBackend):
    """Answers text with no scale label and no label probabilities: every answer is unscored."""

    def generate(self, requests, decoding):
        self.calls += len(requests)
        return [JudgeResponse("no idea", None, 1, 1, 0.0) for _ in requests]


def test_an_unscored_position_stops_its_item_and_repeats_are_refused(tmp_path):
    df, stats = runner.judge(
        [ESSAY, OTHER], _condition(), _batch(), Mute(honour_prefix=True), CallCache(tmp_path / "c.sqlite"),
        Decoding(),
    )  # fmt: skip
    assert list(df["criterion"]) == ["content", "content"] and df["score"].isna().all()
    assert stats.total == 2 and stats.parse_failures == 2
    with pytest.raises(
        ConfigError, match=r"^prompt group R2 asks its criteria in one reply .* only n_samples=1"
    ):
        runner.judge(
            [ESSAY], _condition(), _batch(), Mute(honour_prefix=True), CallCache(tmp_path / "d.sqlite"),
            Decoding(), n_samples=2,
        )  # fmt: skip
    # a chat backend that would drop the reply so far is refused before any call
    with pytest.raises(
        ConfigError, match=r"^prompt group R2 reads each answer after the reply so far .* Mute does not"
    ):
        runner.judge([ESSAY], _condition(), _batch(), Mute(), CallCache(tmp_path / "e.sqlite"), Decoding())


def test_a_criterion_entry_gives_a_name_context_and_examples_and_a_group_file_round_trips(tmp_path):
    edited = dataclasses.replace(
        _batch("separate"),
        variants={
            "P1": Variant("P1", "{{ criterion_context }}|{{ criterion_examples }}|{{ criterion_name }}")
        },
        criteria_info={
            "content": {"context": "count the reasons", "examples": "Example: essay A\nContent: 6"}
        },
    )
    content, conventions = get_mode("analytic").presentations(ESSAY, group=edited)
    assert (
        render_chat(edited, "P1", content.item)[0]["content"]
        == "count the reasons|Example: essay A\nContent: 6|content"
    )
    assert render_chat(edited, "P1", conventions.item)[0]["content"] == "||conventions"
    path = tmp_path / "g.yaml"
    dump_group(_batch(), path)
    again = load_group_file(path)
    assert (again.criteria, again.criteria_info, again.criteria_call) == (
        (("content", "the ideas"), ("conventions", "the spelling")),
        {
            "content": {"name": "Content", "context": "count the reasons"},
            "conventions": {"name": "Conventions"},
        },
        "batch",
    )
    bad = path.read_text().replace("criteria_call: batch", "criteria_call: batched")
    path.write_text(bad)
    with pytest.raises(
        PromptError, match=r"g.yaml: malformed prompt group .*criteria_call='batched'; valid: separate, batch"
    ):
        load_group_file(path)
    path.write_text(
        bad.replace("criteria_call: batched", "criteria_call: batch").replace("context:", "contxt:")
    )
    with pytest.raises(PromptError, match=r"criterion content: unknown keys \['contxt'\]"):
        load_group_file(path)


@pytest.mark.skipif(not (DATA_DIR / "asap").is_dir(), reason="needs ../shared/data/asap")
def test_batch_judging_of_asap_set_1_through_the_judge_stage_and_its_dry_run(tmp_path):
    """5 traits x 3 essays on the oracle: one call per trait and essay, each trait's human label, the
    trait's position in the reply; the dry run counts the same 15 calls before any is made."""
    from promptlottery.judging.grid import JudgmentGrid
    from promptlottery.judging.load import load_judgments
    from promptlottery.stages import run_stage

    over = ["backbone=fake", "backbone.backend.behaviour=oracle", "dataset=asap_set1", "dataset.limit=3",
            "judge=analytic_batch_asap_set1", "backbone.backend.honour_prefix=true"]  # fmt: skip
    dry = run_stage(compose([*over, "dry_run=true"], tmp_path=tmp_path), tmp_path / "dry")
    assert dry["estimate"]["calls"] == 15 and dry["estimate"]["cached_calls"] == 0
    run_stage(compose(over, tmp_path=tmp_path), tmp_path / "job")
    df = pd.read_parquet(tmp_path / "job" / "judgments.parquet")
    traits = ["content", "organization", "word_choice", "sentence_fluency", "conventions"]
    assert len(df) == 15 and df["cache_key"].nunique() == 15
    assert list(df["criterion"][::3]) == traits and list(df["criterion_position"][::3]) == [1, 2, 3, 4, 5]
    assert (df["argmax_label"] == df["human"].map(lambda h: str(int(h)))).all()
    last = df[df["criterion"] == "conventions"].iloc[0]
    labels = df[df["item_id"] == last["item_id"]].set_index("criterion")["argmax_label"]
    want = "Content: {}\nOrganization: {}\nWord Choice: {}\nSentence Fluency: {}\nConventions:".format(
        *(labels[t] for t in traits[:4])
    )
    assert last["query"].endswith(f"[assistant] {want}")
    grid = JudgmentGrid.from_frame(load_judgments(df))
    assert sorted(c.config_id.split("/")[3] for c in grid) == sorted(traits)


def test_the_fake_judge_honours_the_reply_so_far_only_when_asked():
    from promptlottery.backends.base import JudgeRequest

    msgs = [{"role": "user", "content": "Rate each trait."}]
    reqs = [JudgeRequest(key=k, labels=("1", "2", "3"), messages=msgs, assistant_prefix=p) for k, p in (("a", "Content:"), ("b", "Content: 2\nStyle:"))]  # fmt: skip
    plain, honoured = FakeBackend(), FakeBackend(honour_prefix=True)
    a, b = plain.generate(reqs, Decoding())
    assert a.label_probs == b.label_probs and not plain.supports_assistant_prefix
    a, b = honoured.generate(reqs, Decoding())
    assert a.label_probs != b.label_probs and honoured.supports_assistant_prefix
    assert honoured.identity() == {**plain.identity(), "honour_prefix": True}

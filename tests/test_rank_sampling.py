"""Rank rows sample questions: every dataset config whose systems are ranked (analysis 6) draws whole
groups (a USR context, an EVOUNA or SQuAD v2 question, an article, a story) by default, so each drawn
input is judged for every system and the ranking compares the systems on the same inputs."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from promptlottery.data import load_items
from promptlottery.data.registry import sample_items
from tests.conftest import DATA_DIR, REPO

#: the dataset configs with evaluated systems and a shared input per group
RANKED = [
    "topical_chat_usr", "persona_chat_usr", "evouna_nq", "evouna_tq", "squad_v2", "summeval", "newsroom",
    "hanna", "mt_bench",
]  # fmt: skip


@pytest.mark.parametrize("name", RANKED)
def test_a_ranked_dataset_samples_whole_groups_by_default(name):
    assert yaml.safe_load((REPO / "conf" / "dataset" / f"{name}.yaml").read_text())["sample_by"] == "group"


@pytest.mark.parametrize(
    ("name", "systems"), [("topical_chat_usr", 6), ("persona_chat_usr", 5), ("evouna_nq", 5)]
)
def test_a_group_sample_judges_every_system_on_each_drawn_input(name, systems):
    ds = yaml.safe_load((REPO / "conf" / "dataset" / f"{name}.yaml").read_text())
    items = load_items(ds["name"], data_dir=DATA_DIR, **(ds.get("options") or {}))
    drawn = sample_items(items, limit=3, seed=0, by="group")
    per_group = Counter(it.meta["group"] for it in drawn)
    assert len(per_group) == 3
    assert all(n == len({it.system for it in drawn if it.meta["group"] == g}) for g, n in per_group.items())
    assert max(per_group.values()) == systems  # every system of a drawn input (EVOUNA: where judged)


def test_squad_v2_candidate_answers_are_written_for_the_questions_the_judge_stage_draws():
    """SQuAD v2's questions without predictions are their own groups; the prediction stage draws them as the
    judge stage does, so every judged question has its candidate answers."""
    from types import SimpleNamespace

    from promptlottery.judging.predict import sampled_questions

    items = load_items("squad_v2", data_dir=DATA_DIR)
    by_group = sample_items(items, limit=120, seed=0, by="group")
    predicted = sampled_questions(items, SimpleNamespace(limit=120, seed=0))
    assert len(by_group) == 120
    assert [it.id for it in predicted] == [it.id for it in by_group]


@pytest.mark.parametrize("name", ["topical_chat_usr", "evouna_nq"])
def test_a_larger_group_sample_keeps_every_group_of_a_smaller_one(name):
    """The CPU study judged 5-6 contexts a configuration; grown to 30 it must reuse them (the call cache)."""
    ds = yaml.safe_load((REPO / "conf" / "dataset" / f"{name}.yaml").read_text())
    items = load_items(ds["name"], data_dir=DATA_DIR, **(ds.get("options") or {}))
    groups = lambda limit: {it.meta["group"] for it in sample_items(items, limit=limit, seed=0, by="group")}  # noqa: E731
    small, large = groups(5), groups(30)
    assert len(small) == 5 and len(large) == 30
    assert small <= large


@pytest.mark.parametrize("n_groups", [49, 64, 130])
def test_group_samples_are_prefixes_of_one_permutation(n_groups):
    """Where Python's ``random.sample`` switches algorithm between k = 5 and k = 30 (these sizes), a
    sample of 5 groups was not inside the sample of 30 drawn with the same seed."""
    from promptlottery.data.schema import Item

    items = [
        Item(id=f"{g}-{s}", dataset="toy", inputs={}, system=f"S{s}", meta={"group": g})
        for g in range(n_groups)
        for s in range(2)
    ]
    drawn = {
        k: {it.meta["group"] for it in sample_items(items, limit=k, seed=0, by="group")} for k in (5, 30)
    }
    assert drawn[5] <= drawn[30]

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


def test_squad_v2_questions_sampled_by_group_are_the_items_sampled_one_by_one():
    """SQuAD v2's questions without predictions are their own groups: the same 120 either way."""
    items = load_items("squad_v2", data_dir=DATA_DIR)
    by_group = sample_items(items, limit=120, seed=0, by="group")
    assert [it.id for it in by_group] == [it.id for it in sample_items(items, limit=120, seed=0)]

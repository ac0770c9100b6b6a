"""``gate.split_by=source`` (ours, stricter than the paper's instance-disjoint split): the items of one
source (an article's summaries, a question's answers) are found from their queries and kept in one part,
so no test item's source text was read in training."""

from __future__ import annotations

import random

import pandas as pd

from promptlottery.gating.data import SOURCE_MIN_CHARS, instance_split, source_keys

INSTRUCTIONS = {"c1": "Rate the coherence of the summary of the article below.\n\nArticle:\n",
                "c2": "Is the summary consistent with its article? Answer yes or no.\n\nArticle:\n"}  # fmt: skip


def _article(k: int) -> str:
    return f"Article {k} begins here. " + f"It tells story number {k} at length. " * 6


def _examples(n_sources: int = 10, per_source: int = 4) -> pd.DataFrame:
    rng = random.Random(0)
    rows = []
    for cid in ("c1", "c2"):  # two configurations judging the same items (item keys shared)
        for s in range(n_sources):
            for a in range(per_source):
                item = f"a{s}-s{a}"
                query = f"{INSTRUCTIONS[cid]}{_article(s)}\n\nSummary:\nsummary {a} of article {s}."
                for position, variant in enumerate(["P1", "P2", "P3"]):
                    rows.append({
                        "config_id": cid, "item_id": item, "item_key": f"news/{item}", "variant": variant,
                        "position": position, "query": query if variant == "P1" else f"other wording {item}",
                        "in_cluster": rng.random() < 0.7,
                    })  # fmt: skip
    return pd.DataFrame(rows)


def test_an_articles_summaries_are_one_source_across_configurations():
    ex = _examples()
    keys = source_keys(ex)
    # by hand: 10 articles, each with its 4 summaries, the same in both configurations
    by_item = dict(zip(ex["item_key"], keys))
    assert len(set(keys)) == 10
    for s in range(10):
        assert {by_item[f"news/a{s}-s{a}"] for a in range(4)} == {f"news/a{s}-s0"}


def test_a_chance_opening_shorter_than_the_threshold_is_not_a_source():
    # two items whose texts agree for fewer than SOURCE_MIN_CHARS characters past the instructions
    opening = "x" * (SOURCE_MIN_CHARS - 1)
    ex = pd.DataFrame([
        {"config_id": "c", "item_id": i, "item_key": f"d/{i}", "variant": "P1", "position": 0,
         "query": f"Rate:\n{opening}{i} and then a different text {i}" * 2, "in_cluster": True}
        for i in ("p", "q", "r")
    ])  # fmt: skip
    assert sorted(source_keys(ex)) == ["d/p", "d/q", "d/r"]


def test_the_split_by_source_keeps_each_source_in_one_part():
    ex = _examples(n_sources=20, per_source=3)
    ex["source_key"] = source_keys(ex)
    parts = instance_split(ex, val_size=0.2, test_size=0.2, seed=0, by="source_key")
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert set().union(*parts) == set(ex["source_key"])
    # the instance-disjoint split of the same items puts some article's summaries in two parts
    items = instance_split(ex, val_size=0.2, test_size=0.2, seed=0, by="item_key")
    part_of = {k: i for i, part in enumerate(items) for k in part}
    straddling = [s for s in range(20) if len({part_of[f"news/a{s}-s{a}"] for a in range(3)}) > 1]
    assert straddling

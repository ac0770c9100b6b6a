"""The campaign's assignment keeps each of the paper's constraints (§3.2), checked on the rows."""

from __future__ import annotations

import pytest

from promptlottery.human.assignment import CampaignError, Design, assign, check_assignment

ITEMS = [f"i{n}" for n in range(7)]
WORDINGS = ["P1", "P2"]


def test_every_task_has_k_different_annotators():
    a = assign(ITEMS, WORDINGS, [f"a{n}" for n in range(5)], Design(raters_per_task=3, seed=1))
    assert len(a) == 7 * 2 * 3
    for _, g in a.groupby(["item_id", "wording"]):
        assert len(g) == 3 and g["annotator"].nunique() == 3
    # every item is rated by at least 3 annotators, under both wordings
    for _, g in a.groupby("item_id"):
        assert g["annotator"].nunique() >= 3 and set(g["wording"]) == set(WORDINGS)


def test_load_is_balanced():
    # 42 tasks over 5 annotators: two of them rate 9, three rate 8
    a = assign(ITEMS, WORDINGS, [f"a{n}" for n in range(5)], Design(seed=2))
    assert sorted(a.groupby("annotator").size().tolist()) == [8, 8, 8, 9, 9]


def test_never_the_same_item_back_to_back():
    # 3 annotators, 3 raters per task: each annotator rates every item under both wordings
    a = assign(ITEMS, WORDINGS, ["x", "y", "z"], Design(raters_per_task=3, seed=0))
    for _, g in a.groupby("annotator"):
        seq = g.sort_values("position")["item_id"].tolist()
        assert len(seq) == 14 and len(set(seq)) == 7  # each item twice ...
        assert all(p != q for p, q in zip(seq, seq[1:]))  # ... never in consecutive tasks


def test_same_item_never():
    a = assign(ITEMS, WORDINGS, [f"a{n}" for n in range(6)], Design(raters_per_task=3, same_item="never"))
    for _, g in a.groupby("annotator"):
        assert g["item_id"].is_unique
    with pytest.raises(CampaignError, match="give at least 6 annotators"):
        assign(ITEMS, WORDINGS, [f"a{n}" for n in range(5)], Design(raters_per_task=3, same_item="never"))


def test_seeded_and_reproducible():
    ann = [f"a{n}" for n in range(5)]
    one = assign(ITEMS, WORDINGS, ann, Design(seed=7))
    assert one.equals(assign(ITEMS, WORDINGS, ann, Design(seed=7)))
    assert not one.equals(assign(ITEMS, WORDINGS, ann, Design(seed=8)))


def test_a_subset_of_wordings_per_item_rotates():
    a = assign(ITEMS[:4], ["P1", "P2", "P3", "P4"], [f"a{n}" for n in range(4)], Design(wordings_per_item=2))
    assert (a.groupby("item_id")["wording"].nunique() == 2).all()
    # 4 items x 2 wordings rotating over 4 wordings: each wording on 2 items (x 3 raters)
    assert sorted(a.groupby("wording").size().tolist()) == [6, 6, 6, 6]


def test_the_checker_names_a_broken_constraint():
    a = assign(ITEMS, WORDINGS, ["x", "y", "z"], Design(seed=0))
    assert check_assignment(a, Design(), n_wordings=2) == []
    x = a[a["annotator"] == "x"].sort_values("position")
    later = x[x["item_id"] == x.iloc[0]["item_id"]].index[1]
    second = x.index[1]
    # put the item's second task right after its first
    a.loc[[second, later], "position"] = a.loc[[later, second], "position"].to_numpy()
    assert any("twice in a row" in p for p in check_assignment(a, Design(), n_wordings=2))


@pytest.mark.parametrize(
    "kw, match",
    [({"raters_per_task": 1}, "raters_per_task=1"), ({"same_item": "sometimes"}, "same_item='sometimes'")],
)
def test_bad_design_is_one_line(kw, match):
    with pytest.raises(CampaignError, match=match):
        Design(**kw)


def test_too_few_annotators_for_k():
    with pytest.raises(CampaignError, match="2 annotators cannot rate every item with 3 raters per task"):
        assign(ITEMS, WORDINGS, ["x", "y"], Design())

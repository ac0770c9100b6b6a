"""Gate examples: plurality-cluster labels on a hand-checked fixture, texts, and the split."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from promptlottery.gating.data import (
    GateDataError,
    attach_texts,
    format_answer,
    instance_split,
    label_confidence,
    load_examples,
)

VARIANTS = ["P1", "P2", "P3", "P4", "P5"]


def judgments(
    matrix: dict[str, list], *, backbone: str = "fake", human: dict | None = None, probs: dict | None = None
) -> pd.DataFrame:
    """A judgments table (runner columns) from ``{item_id: [label of P1..P5]}``; None = no verdict."""
    rows = []
    for item, labels in matrix.items():
        for v, lab in zip(VARIANTS, labels):
            lp = (probs or {}).get((item, v))
            rows.append(
                {
                    "dataset": "toy",
                    "judge_family": "semantic_alignment",
                    "prompt_group": "G12",
                    "criterion": "similarity",
                    "backbone": backbone,
                    "scale": "likert_1_5",
                    "variant": v,
                    "item_id": item,
                    "temperature": 1e-5,
                    "sample_index": 0,
                    "seed": 0,
                    "human": (human or {}).get(item, np.nan),
                    "argmax_label": None if lab is None else str(lab),
                    "parsed_label": None if lab is None else str(lab),
                    "weighted_score": np.nan if lab is None else float(lab),
                    "label_probs": json.dumps(lp) if lp else None,
                    "raw_output": "" if lab is None else f"{lab}",
                    "cache_key": f"key-{backbone}-{item}-{v}",
                }
            )
    return pd.DataFrame(rows)


# hand-checked from the paper's label (§F.2: "matches at least three of five" judges): the five-judge
# decision (ties to P1), which judges are in the plurality cluster, and whether there is one
FIXTURE = {
    "a": [4, 4, 4, 2, 1],  # 4 has 3 of 5: cluster 4, P1-P3 positive
    "b": [1, 2, 2, 3, 3],  # no label has 3 votes: no cluster, every judge negative (decision 2: P2 before P4)
    "c": [3, None, 3, 5, 5],  # 3 and 5 have 2 votes each: no cluster, every judge negative (decision 3)
    "d": [5, 5, 5, 5, 5],  # unanimous
}
EXPECTED = {
    "a": ("4", [1, 1, 1, 0, 0], False),
    "b": ("2", [0, 0, 0, 0, 0], True),
    "c": ("3", [0, 0, 0, 0, 0], True),
    "d": ("5", [1, 1, 1, 1, 1], False),
}


def test_plurality_cluster_labels_on_hand_checked_fixture():
    probs = {("a", "P1"): {"1": 0.1, "2": 0.1, "3": 0.2, "4": 0.4, "5": 0.0}}
    ex = load_examples(judgments(FIXTURE, human={"a": 4.5}, probs=probs))
    assert len(ex) == 4 * 5
    for item, (plur, in_cluster, no_consensus) in EXPECTED.items():
        rows = ex[ex["item_id"] == item].sort_values("position")
        assert rows["variant"].tolist() == VARIANTS
        assert set(rows["plurality"]) == {plur}
        assert rows["in_cluster"].tolist() == in_cluster, item
        assert set(rows["no_consensus"]) == {no_consensus}, item
    c = ex[ex["item_id"] == "c"]
    assert c["label"].isna().sum() == 1 and int(c["n_judges"].iloc[0]) == 4 and int(c["votes"].iloc[0]) == 2
    a1 = ex[(ex["item_id"] == "a") & (ex["variant"] == "P1")].iloc[0]
    assert a1["confidence"] == pytest.approx(0.4 / 0.8)  # renormalised over the scale's labels
    assert a1["value"] == 4.0 and a1["plurality_value"] == 4.0
    assert set(ex.loc[ex["item_id"] == "a", "human"]) == {4.5}
    assert np.isnan(ex.loc[(ex["item_id"] == "a") & (ex["variant"] == "P2"), "confidence"]).all()


def test_variant_order_puts_reference_first_and_missing_variant_is_reported():
    df = judgments(FIXTURE)
    ex = load_examples(df, variants=["P2", "P1", "P3"])
    assert ex[ex["item_id"] == "b"].sort_values("position")["variant"].tolist() == ["P2", "P1", "P3"]
    # b over (P2, P1, P3) = (2, 1, 2): plurality 2
    assert set(ex.loc[ex["item_id"] == "b", "plurality"]) == {"2"}
    with pytest.raises(GateDataError):
        load_examples(df, variants=["P1", "P9"])


def test_label_confidence_edge_cases():
    assert np.isnan(label_confidence(None, "3"))
    assert np.isnan(label_confidence('{"1": 0.0}', "1"))
    assert label_confidence({"yes": 0.3, "no": 0.1}, "yes") == pytest.approx(0.75)


def test_texts_come_from_the_query_stored_with_each_judgment():
    df = judgments({"a": FIXTURE["a"]})
    df["query"] = [f"[system] Be fair.\n\n[user] Rate {v}." for v in df["variant"]]
    out = attach_texts(load_examples(df))
    p1 = out[out["variant"] == "P1"].iloc[0]
    assert p1["query"] == "[system] Be fair.\n\n[user] Rate P1."
    assert p1["answer"] == format_answer("4", "4") == "Verdict: 4. Answer: 4"


def test_judgments_without_a_stored_query_name_the_run_and_the_fix():
    df = judgments({"a": FIXTURE["a"]})
    df["run_dir"] = "/runs/stsb_P1"
    ex = load_examples(df)
    with pytest.raises(GateDataError, match=r"5 of 5 .*/runs/stsb_P1/judgments.parquet: re-run"):
        attach_texts(ex)
    out = attach_texts(ex, allow_missing=True)
    assert (out["query"] == "").all() and out["answer"].str.startswith("Verdict: ").all()


def test_the_runner_stores_the_query_the_judge_saw(tmp_path):
    from promptlottery.backends.base import Decoding
    from promptlottery.backends.fake import FakeBackend
    from promptlottery.calls.cache import CallCache
    from promptlottery.data import load_items
    from promptlottery.judging.runner import Condition, judge
    from promptlottery.prompts import load_group
    from promptlottery.prompts.requests import render_chat
    from tests.conftest import compose

    cfg = compose(["backbone=fake", "dataset.limit=3"], tmp_path=tmp_path)
    items = load_items("stsb", data_dir=cfg.paths.data_dir, limit=3, seed=0)
    group = load_group("G12")
    cond = Condition("stsb", "semantic_alignment", "G12", "P2", "fake", "similarity")
    df, _ = judge(items, cond, group, FakeBackend(), CallCache(tmp_path / "c.sqlite"), Decoding())
    turns = render_chat(group, "P2", items[0])
    expected = "\n\n".join(f"[{m['role']}] {m['content']}" for m in turns)  # the gate's text format
    assert df.loc[df["item_id"] == items[0].id, "query"].iloc[0] == expected


def _many_items(n_items: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    mats = {f"i{k}": list(rng.integers(1, 6, size=5)) for k in range(n_items)}
    # the same items judged by two backbones: two configurations sharing item keys
    return pd.concat(
        [load_examples(judgments(mats, backbone=b)) for b in ("fake", "other")], ignore_index=True
    )


def test_split_is_instance_disjoint_and_stratified():
    ex = _many_items(50)
    assert ex["config_id"].nunique() == 2
    train, val, test = instance_split(ex, val_size=0.2, test_size=0.2, seed=0)
    assert train and val and test and not (train & val or train & test or val & test)
    assert train | val | test == set(ex["item_key"])
    for part in (val, test):
        assert 0.12 <= len(part) / 50 <= 0.28
    parts = [ex[ex["item_key"].isin(p)] for p in (train, val, test)]
    # every example of an item (all variants, both backbones) is in one part
    assert sum(len(p) for p in parts) == len(ex)
    rate = ex["in_cluster"].mean()
    assert all(p["in_cluster"].nunique() == 2 and abs(p["in_cluster"].mean() - rate) < 0.15 for p in parts)
    assert instance_split(ex, val_size=0.2, test_size=0.2, seed=0) == (train, val, test)  # seeded


def test_split_needs_enough_items_and_both_classes():
    with pytest.raises(GateDataError, match="distinct items"):
        instance_split(_many_items(5), val_size=0.2)
    with pytest.raises(GateDataError, match="val_size \\+ gate.test_size"):
        instance_split(_many_items(50), val_size=0.5, test_size=0.5)
    ex = load_examples(judgments({f"u{k}": [5] * 5 for k in range(10)}))
    with pytest.raises(
        GateDataError, match="have in_cluster=1, every verdict in its item.s plurality cluster"
    ):
        instance_split(ex)

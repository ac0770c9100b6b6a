"""Careless and hostile input, round two (issue 46): each item of the issue end to end, as the user met
it (a ``python -m run`` subprocess, the fake judge, a stub server on 127.0.0.1 only). Every test is a
row of the fault suite (``scripts/fault_suite.py``: ``ROUND_TWO`` names the row)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.test_user_errors import TABLE, run

pytestmark = [pytest.mark.faults, pytest.mark.fault_subset]

PAIRS = [
    "dataset=table",
    "dataset.path=examples/own_judge/qa_pairs.jsonl",
    "dataset.fields.id=id",
    "dataset.fields.question=question",
    "dataset.fields.response_a=answer_a",
    "dataset.fields.response_b=answer_b",
    "dataset.fields.human=pref",
    "judge=own",
    "judge.mode=pairwise",
]
GROUP = "judge.group_file=examples/own_judge/correctness.yaml"


def judgments(tmp: Path) -> pd.DataFrame:
    files = sorted((tmp / "out").rglob("judgments.parquet"))
    assert files, "no judgments written"
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


# ------------------------------------------------------------------- item 1: text verdicts


def test_a_prose_judge_gives_exactly_its_chosen_labels_pointwise(tmp_path):
    """The hash judge chooses a label per request; in prose (no logprobs: it restates the scale,
    echoes the task's last line, numbers its points, then answers) its parsed labels are exactly the
    labels it chose, which the same judge without prose gives as its argmax."""
    plain, prose = tmp_path / "plain", tmp_path / "prose"
    for where, extra in ((plain, []), (prose, ["backbone.backend.prose=true"])):
        proc = run(where, *TABLE, GROUP, *extra)
        assert proc.returncode == 0, proc.stderr[-2000:]
    a, b = judgments(plain).set_index("item_id"), judgments(prose).set_index("item_id")
    assert len(a) == len(b) == 24
    assert b["label_probs"].isna().all() and (b["scoring_mode"] == "parsed_label").all()
    assert b["parsed_label"].notna().all()
    assert (b.loc[a.index, "parsed_label"] == a["argmax_label"]).all()
    # the old reader took the restated scale's first number: every verdict read as 1
    assert b["raw_output"].str.contains("from 1 to 5").all() and set(a["argmax_label"]) != {"1"}


def test_a_prose_judge_gives_exactly_its_chosen_labels_pairwise(tmp_path):
    """The oracle in prose over the shipped pairs, both orders: each verdict, in the pair's terms,
    is the human preference (the restated format names [[A]], [[B]] and [[C]] first)."""
    proc = run(tmp_path, *PAIRS, "backbone.backend.behaviour=oracle", "backbone.backend.prose=true")
    assert proc.returncode == 0, proc.stderr[-2000:]
    df = judgments(tmp_path)
    assert len(df) == 48 and df["label_probs"].isna().all()
    assert (df["preferred_parsed"] == df["human_preferred"]).all()
    assert (df["preferred"] == df["human_preferred"]).all()

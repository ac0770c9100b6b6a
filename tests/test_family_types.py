"""A judge family's task type (objective / subjective) is declared in its prompt-group YAML."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from promptlottery.judging.table import add_verdicts, family_type
from promptlottery.prompts.groups import (
    GROUPS_DIR,
    PromptError,
    builtin_family_types,
    load_group_file,
)


def test_builtin_groups_declare_the_papers_split():
    # the paper: QA correctness, QA groundedness and semantic alignment are objective tasks; dialogue
    # quality, general (text) quality and domain evaluation are subjective
    for path in GROUPS_DIR.glob("G*.yaml"):
        if (
            path.stem == "G18"
        ):  # the listwise group: not one of the paper's task types (its lottery is its own section)
            continue
        assert "family_type" in yaml.safe_load(path.read_text()), path.name
    assert builtin_family_types() == {
        "dialogue_quality": "subjective",
        "general_quality": "subjective",
        "qa_correctness": "objective",
        "qa_groundedness": "objective",
        "semantic_alignment": "objective",
        "domain_evaluation": "subjective",
        "pairwise_preference": "subjective",  # G17: MT-Bench pair-v2, a general-quality preference
        "dialogue_ranking": "other",  # G18, the listwise group: declares none
    }
    assert family_type("qa_groundedness") == "objective" and family_type("no_such_family") == "other"


def own_group(tmp_path, **top) -> str:
    raw = {"id": "mine", "judge_family": "custom", "scale": "likert_1_5", "version": 1, **top}
    raw["variants"] = {"P1": {"user": "Rate {{ response }}."}}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_own_group_file_declares_its_type(tmp_path):
    path = own_group(tmp_path, family_type="subjective")
    assert load_group_file(path).family_type == "subjective"
    assert family_type("custom", path) == "subjective"
    assert family_type("custom") == "other"
    # a group file that declares nothing: its family name decides
    (tmp_path / "plain").mkdir()
    assert family_type("qa_correctness", own_group(tmp_path / "plain")) == "objective"


def test_bad_family_type_names_the_file_and_choices(tmp_path):
    with pytest.raises(PromptError, match=r"mine.yaml: family_type='factual'; valid: objective, subjective"):
        load_group_file(own_group(tmp_path, family_type="factual"))


def test_one_family_two_types_is_refused(tmp_path):
    for gid, kind in (("G1", "objective"), ("G2", "subjective")):
        raw = {"id": gid, "judge_family": "fam", "family_type": kind, "scale": "binary_yes_no", "version": 1}
        raw["variants"] = {"P1": {"user": "{{ response }}?"}}
        (tmp_path / f"{gid}.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(PromptError, match="G2.yaml: judge_family fam has family_type=subjective"):
        builtin_family_types(str(tmp_path))


def test_old_table_without_group_file_is_typed_by_family():
    df = pd.DataFrame(
        {
            "item_id": ["a", "a"],
            "variant": ["P1", "P1"],
            "backbone": ["b", "b"],
            "dataset": ["d", "d"],
            "judge_family": ["qa_correctness", "dialogue_quality"],
            "prompt_group": ["G10", "G1"],
            "scale": ["likert_1_5", "binary_yes_no"],
            "argmax_label": ["4", "yes"],
            "parsed_label": ["4", "yes"],
            "weighted_score": [4.0, np.nan],
            "temperature": [1e-5, 1e-5],
        }
    )
    for col in ("criterion", "rubric", "sample_index", "human", "seed", "system"):
        df[col] = {"criterion": "", "rubric": ""}.get(col, 0)
    out = add_verdicts(df)
    assert out["family_type"].tolist() == ["objective", "subjective"]
    assert out["task_type"].tolist() == ["likert", "binary"]

"""The judge modes as objects: the registry and its one-line error, each mode's presentations, key
parts, scoring scale and columns, and the grid's rows of a mode (expected values worked out by hand
from the definitions in ``modes/pointwise.py`` and ``modes/pairwise.py``)."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from promptlottery.data.schema import Item
from promptlottery.errors import ConfigError
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.load import load_judgments
from promptlottery.judging.table import AnalysisError
from promptlottery.modes import (
    MODES,
    ModeError,
    check_mode,
    default_group,
    get_mode,
    mode_names,
    mode_of_scale,
)
from promptlottery.prompts import load_group
from promptlottery.prompts.scales import get_scale
from tests.conftest import compose
from tests.test_analysis_fixtures import config_a, judgments

PAIR = Item(
    id="p1",
    dataset="toy",
    inputs={"question": "q", "response_a": "first", "response_b": "second"},
    human={"pref": 0.0},
)
ONE = Item(id="i1", dataset="toy", inputs={"response": "r"}, human={"sim": [2.0, 4.0]})


def test_the_registry_lists_the_modes_in_their_import_order_and_a_typo_is_one_line():
    assert mode_names() == ["pointwise", "pairwise", "analytic", "listwise"] and "pairwise" in MODES
    assert get_mode(None) is get_mode("pointwise")
    with pytest.raises(ConfigError) as exc:
        get_mode("pairwize")
    assert str(exc.value) == "unknown judge.mode 'pairwize' (known: pointwise, pairwise, analytic, listwise)"


def test_the_config_check_names_a_typod_mode_in_one_line(tmp_path):
    from promptlottery.config import check_config

    cfg = compose(["backbone=fake", "judge.mode=pairwize"], tmp_path=tmp_path)
    with pytest.raises(
        ConfigError,
        match=r"^unknown judge.mode 'pairwize' \(known: pointwise, pairwise, analytic, listwise\)$",
    ):
        check_config(cfg)


def test_a_scale_names_its_mode_and_a_mode_its_own_judges_group():
    assert mode_of_scale(get_scale("pairwise_abc")).name == "pairwise"
    assert mode_of_scale(get_scale("likert_1_5")).name == "pointwise"
    assert default_group({"mode": "pairwise"}) == "G17" and default_group({}) is None
    assert default_group({"mode": "pairwize"}) is None  # the config check names the typo


def test_pointwise_shows_an_item_once_with_the_ordinary_key_and_no_columns():
    mode = get_mode("pointwise")
    (p,) = mode.presentations(ONE, position_swap=True)
    assert p.item is ONE and p.order is None
    assert mode.key_parts(p, None) == {} and mode.assistant_prefix(load_group("G1")) is None
    # a pointwise group with an answer prefix (a rubric's "Score:") starts the answer with it, keyed
    assert mode.assistant_prefix(dataclasses.replace(load_group("G1"), assistant_prefix="Score:")) == "Score:"
    assert mode.key_parts(p, "Score:") == {"assistant_prefix": "Score:"}
    scale = get_scale("likert_1_5")
    assert mode.scoring_scale(scale, None) is scale
    # raters' list as JSON; one label: none
    assert mode.human_raters([2.0, 4.0]) == json.dumps([2.0, 4.0]) and mode.human_raters(3.0) is None
    # human 3.0 on [1, 5] onto likert_1_5: the label "3"
    assert (
        mode.known_label(
            Item("k", "toy", {"response": "r"}, human={"sim": 3.0}), "sim", scale, None, (1.0, 5.0)
        )
        == "3"
    )
    assert mode.known_label(ONE, "sim", scale, None, None) is None


def test_pairwise_shows_a_pair_in_both_orders_each_keyed_by_its_order():
    mode = get_mode("pairwise")
    p12, p21 = mode.presentations(PAIR, position_swap=True)
    assert (p12.order, p12.item.inputs["response_a"]) == ("12", "first")
    assert (p21.order, p21.item.inputs["response_a"], p21.item.inputs["response_b"]) == (
        "21",
        "second",
        "first",
    )
    assert [p.order for p in mode.presentations(PAIR, position_swap=False)] == ["12"]
    assert mode.key_parts(p21, "[[") == {"order": "21", "assistant_prefix": "[["}
    ab = get_scale("pairwise_ab")
    # shown in "21", A is response_b: A scores 0 (response_a lost), B scores 1
    assert mode.scoring_scale(ab, "21").scores == (0.0, 1.0)
    # gold 0.0 = response_b better: shown as B in "12", as A in "21"
    assert mode.known_label(PAIR, "pref", ab, p12, None) == "B"
    assert mode.known_label(PAIR, "pref", ab, p21, None) == "A"


def test_each_mode_refuses_the_other_modes_group_in_one_line():
    with pytest.raises(ModeError, match=r"^judge.mode=pairwise but G16 has the rating scale likert_1_10"):
        check_mode("pairwise", get_scale("likert_1_10"), group="G16", items=[PAIR], where="d")
    with pytest.raises(
        ModeError,
        match=r"^G17 is pairwise \(scale pairwise_abc\) but judge.mode=pointwise; set judge.mode=pairwise$",
    ):
        check_mode("pointwise", get_scale("pairwise_abc"), group="G17", items=[ONE], where="d")
    with pytest.raises(ConfigError, match="unknown judge.mode 'rankwise'"):
        check_mode("rankwise", get_scale("likert_1_5"), group="G1", items=[ONE], where="d")


def test_a_pairwise_group_file_naming_criteria_is_one_config_line_naming_the_file(tmp_path):
    from promptlottery.judging.inputs import check_inputs
    from promptlottery.prompts.groups import GROUPS_DIR

    text = (GROUPS_DIR / "G17.yaml").read_text()
    group_file = tmp_path / "pairwise_criteria.yaml"
    group_file.write_text(
        text.replace("scale: pairwise_abc\n", "scale: pairwise_abc\ncriteria:\n  helpfulness: h\n", 1)
    )
    cfg = compose(
        ["backbone=fake", "dataset=llmbar_natural", "dataset.limit=3", "judge=own", "judge.mode=pairwise",
         f"judge.group_file={group_file}"],
        tmp_path=tmp_path,
    )  # fmt: skip
    with pytest.raises(ConfigError) as e:
        check_inputs(cfg)
    assert str(e.value) == (
        f"{group_file} (prompt group G17) names criteria ['helpfulness'] but judge.mode=pairwise judges an "
        "item whole; set judge.mode=analytic"
    )


def _mixed(mode: str) -> pd.DataFrame:
    rows = judgments(config_a(baselines=False))
    rows["judge_mode"] = "pointwise"
    other = rows.head(2).copy()
    other["judge_mode"] = mode
    other["prompt_group"] = "G99"
    return load_judgments(pd.concat([rows, other], ignore_index=True))


def test_the_grid_gives_a_modes_rows_by_configuration():
    g = JudgmentGrid.from_frame(_mixed("pairwise"))
    cid = "stsb/semantic_alignment/G99/similarity/bb1"
    assert list(g.rows("pairwise")) == [cid] and g.mode_frames() == list(g.rows("pairwise").values())
    assert g.rows("pointwise") == {} and len(g.rows("pairwise")[cid]) == 2
    assert g.n_judgments == len(g.judgments) + 2


def test_the_grid_refuses_rows_of_a_mode_no_one_registered():
    with pytest.raises(
        AnalysisError,
        match=r"judge_mode 'rankwise', which no judge mode has \(known: pointwise, pairwise, analytic, listwise\)",
    ):
        JudgmentGrid.from_frame(_mixed("rankwise"))


# ----------------------------------------------------------------------------- analytic

ESSAY = Item(
    id="e1",
    dataset="toy",
    inputs={"response": "an essay"},
    human={"holistic": [3.0, 4.0], "content": [5.0], "conventions": [2.0]},
)


def _rubric():
    from promptlottery.prompts.groups import PromptGroup, Variant

    return PromptGroup(
        id="R1",
        judge_family="essay_traits",
        scale=get_scale("likert_1_6"),
        version=1,
        variants={"P1": Variant("P1", "Rate {{ criterion_description }}: {{ response }}")},
        criteria=(("content", "the ideas"), ("conventions", "the spelling")),
    )


def test_analytic_shows_an_item_once_per_criterion_each_keyed_by_it():
    mode, group = get_mode("analytic"), _rubric()
    content, conventions = mode.presentations(ESSAY, group=group)
    assert (content.part, content.item.inputs["criterion_description"]) == ("content", "the ideas")
    assert conventions.part == "conventions" and conventions.item.inputs["response"] == "an essay"
    assert mode.key_parts(conventions, None) == {"criterion": "conventions"}
    # the criterion's human label (5 on [1, 6] onto likert_1_6: "5"), not the condition's holistic one
    assert mode.known_label(ESSAY, "holistic", group.scale, content, (1.0, 6.0)) == "5"
    cols = mode.columns(conventions.item, None, group.scale, None, None, ESSAY.human["holistic"])
    assert cols == {"criterion": "conventions", "human": 2.0, "human_raters": "[2.0]"}


def test_analytic_and_pointwise_refuse_each_others_groups_in_one_line():
    rubric = _rubric()
    with pytest.raises(
        ModeError, match=r"^G1 names criteria \['content', 'conventions'\] .* set judge.mode=analytic$"
    ):
        check_mode("pointwise", rubric.scale, group="G1", items=[ESSAY], where="d", criteria=rubric.criteria)
    with pytest.raises(ModeError, match=r"^judge.mode=analytic but G1 names no criteria"):
        check_mode("analytic", rubric.scale, group="G1", items=[ESSAY], where="d")
    with pytest.raises(ModeError, match=r"^d: no item has a human label for criterion 'voice' of G1"):
        check_mode("analytic", rubric.scale, group="G1", items=[ESSAY], where="d", criteria=(("voice", ""),))


def test_analytic_judging_of_asap_set_1_by_the_oracle_gives_each_traits_human_label(tmp_path):
    """Through the judge stage on the fake backend: 5 ASAP++ traits x 3 essays, one call each; the
    oracle answers each trait's human label (one ASAP++ value per trait, an integer on 1-6: its own
    label), and the grid holds one configuration per trait."""
    from promptlottery.stages import run_stage

    cfg = compose(
        ["backbone=fake", "backbone.backend.behaviour=oracle", "dataset=asap_set1", "dataset.limit=3",
         "judge=analytic_asap_set1"],
        tmp_path=tmp_path,
    )  # fmt: skip
    run_stage(cfg, tmp_path / "job")
    df = pd.read_parquet(tmp_path / "job" / "judgments.parquet")
    traits = ["content", "organization", "word_choice", "sentence_fluency", "conventions"]
    assert len(df) == 15 and df["cache_key"].nunique() == 15
    assert list(df["criterion"][:5]) == traits and set(df["judge_mode"]) == {"analytic"}
    assert (df["argmax_label"] == df["human"].map(lambda h: str(int(h)))).all()
    grid = JudgmentGrid.from_frame(load_judgments(df))
    assert sorted(c.config_id.split("/")[3] for c in grid) == sorted(traits)

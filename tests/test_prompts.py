"""Prompt groups G1-G17, rendering safety, scale parsing and the paraphrase-validation stage."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from promptlottery.data.schema import Item
from promptlottery.prompts import PromptError, get_scale, list_groups, load_group, render
from promptlottery.prompts.groups import WORDING_DIMENSIONS
from promptlottery.prompts.requests import render_chat, render_completion
from promptlottery.prompts.validation import (
    jaccard,
    length_ratio,
    summarize,
    to_markdown,
    validate_all,
    validate_group,
    variant_texts,
    word_tokens,
)
from promptlottery.stages.validation import run_validation

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
GROUP_IDS = [f"G{i}" for i in range(1, 18)]
#: the listwise group (best of k replies): its own tests are tests/test_listwise.py
LISTWISE_GROUPS = ["G18"]

# the fixed group -> (family, scale) mapping other modules rely on
FAMILY = {
    **{g: "dialogue_quality" for g in ("G1", "G2", "G3", "G4")},
    **{g: "general_quality" for g in ("G5", "G6", "G7", "G8", "G9")},
    "G10": "qa_correctness",
    "G11": "qa_groundedness",
    "G12": "semantic_alignment",
    "G13": "domain_evaluation",
    "G14": "domain_evaluation",
    "G15": "qa_correctness",
    "G16": "general_quality",  # MT-Bench single-answer grading
    "G17": "pairwise_preference",  # MT-Bench pair-v2 (A, B, C = tie)
}
SCALE = {g: "binary_yes_no" for g in ("G1", "G2", "G3", "G4")} | {
    "G16": "likert_1_10",
    "G17": "pairwise_abc",
}  # others: likert_1_5

# the `inputs` keys each family's loaders provide
FAMILY_INPUTS = {
    "dialogue_quality": {
        "context": "A: I just got back from Lisbon.\nB: Oh nice, how was it?\nA: Sunny, and the food was great.",
        "response": "Did you try the custard tarts?",
        "knowledge": "Pasteis de nata are Portuguese custard tarts.",
    },
    "general_quality": {
        "source": "The council approved the new bike lanes on Monday.",
        "response": "Bike lanes were approved.",
    },
    "mt_bench": {
        "question": "Suggest a name for a bakery.",
        "response": "Rise & Shine.",
    },
    "pairwise_preference": {
        "question": "Suggest a name for a bakery.",
        "response_a": "Rise & Shine.",
        "response_b": "Bread Shop 4.",
    },
    "qa_correctness": {
        "question": "What is the capital of France?",
        "reference": "Paris | paris, France",
        "response": "Paris.",
    },
    "qa_groundedness": {
        "evidence": "The Eiffel Tower was completed in 1889.",
        "response": "It was finished in 1889.",
        "context": "When was the Eiffel Tower completed?",
    },
    "semantic_alignment": {
        "reference": "A man is playing a guitar.",
        "prediction": "Someone plays the guitar.",
    },
    "domain_evaluation": {
        "context": "How do I undo my last git commit?",
        "response": "Run `git reset --soft HEAD~1`.",
    },
}

JUDGE_CONFIGS = {
    "mt_bench_quality": ("G16", "quality"),
    "dialogue_engaging": ("G1", "engaging"),
    "dialogue_understandable": ("G2", "understandable"),
    "dialogue_context_specific": ("G3", "maintains_context"),
    "dialogue_relevant": ("G4", "relevant"),
    "quality_coherence": ("G5", "coherence"),
    "quality_consistency": ("G6", "consistency"),
    "quality_fluency": ("G7", "fluency"),
    "quality_relevance": ("G8", "relevance"),
    "quality_overall": ("G9", "overall"),
    "qa_correctness": ("G10", "correct"),
    "qa_groundedness": ("G11", "attributable"),
    "semantic_alignment": ("G12", "similarity"),
    "domain_evaluation": ("G13", "overall"),
    "domain_practical_value": ("G14", "overall"),
    "qa_correctness_heldout": ("G15", "correct"),
}


INPUTS_OF_GROUP = {"G16": "mt_bench"}  # groups whose inputs differ from their family's


def make_item(family: str, **overrides: str) -> Item:
    inputs = {**FAMILY_INPUTS[family], **overrides}
    return Item(id=f"{family}-item-7", dataset="fake", inputs=inputs)


# -- group files -------------------------------------------------------------------------------


def test_all_sixteen_groups_are_listed():
    assert list_groups() == GROUP_IDS + LISTWISE_GROUPS


@pytest.mark.parametrize("gid", GROUP_IDS)
def test_group_loads_with_five_tagged_variants(gid):
    g = load_group(gid)
    assert g.id == gid
    assert g.judge_family == FAMILY[gid]
    assert g.scale.name == SCALE.get(gid, "likert_1_5")
    assert list(g.variants) == ["P1", "P2", "P3", "P4", "P5"]
    assert g.description
    for v in g.variants.values():
        assert set(v.tags) == set(WORDING_DIMENSIONS), (gid, v.id, v.tags)
        assert all(isinstance(x, str) and x for x in v.tags.values()), (gid, v.id)
    assert g.held_out is (gid == "G15")


def test_group_versions_and_distinct_texts():
    for gid in GROUP_IDS:
        g = load_group(gid)
        assert g.version >= 1
        hashes = {g.text_hash(v) for v in g.variants}
        assert len(hashes) == 5, f"{gid}: two variants have the same text"


def test_tag_vocabulary_is_small():
    """Tags are categorical: each dimension uses a handful of values across all groups."""
    values: dict[str, set[str]] = {d: set() for d in WORDING_DIMENSIONS}
    for gid in GROUP_IDS:
        for v in load_group(gid).variants.values():
            for d, x in v.tags.items():
                values[d].add(x)
    for d, vals in values.items():
        assert 2 <= len(vals) <= 8, (d, vals)


def test_judge_configs_match_groups():
    for name, (gid, criterion) in JUDGE_CONFIGS.items():
        cfg = yaml.safe_load((CONF / "judge" / f"{name}.yaml").read_text())
        assert set(cfg) == {"family", "prompt_group", "variant", "criterion"}, name
        assert cfg["prompt_group"] == gid and cfg["criterion"] == criterion and cfg["variant"] == "P1", name
        assert cfg["family"] == load_group(gid).judge_family, name


# -- rendering -----------------------------------------------------------------------------------


@pytest.mark.parametrize("gid", GROUP_IDS)
def test_every_variant_renders_and_asks_for_the_label(gid):
    g = load_group(gid)
    item = make_item(INPUTS_OF_GROUP.get(gid, g.judge_family))
    for vid in g.variants:
        messages = render_chat(g, vid, item)
        user = messages[-1]["content"]
        assert messages[-1]["role"] == "user"
        for value in item.inputs.values():  # every input reaches the prompt
            assert value in user, (gid, vid, value)
        assert "{{" not in user and "{%" not in user
        tail = user.splitlines()[-1].lower()
        if g.scale.preference:  # pair-v2 asks for [[A]] / [[B]] / [[C]] in its system prompt, read after "[["
            fmt = messages[0]["content"]
            assert all(f"[[{lab}]]" in fmt for lab in g.scale.labels), (gid, vid)
            assert g.assistant_prefix == "[["
        elif g.scale.binary:
            assert "yes" in tail and "no" in tail, (gid, vid, tail)
        else:
            assert g.scale.labels[0] in tail and g.scale.labels[-1] in tail, (gid, vid, tail)
        assert render_completion(g, vid, item).endswith("Answer:")


@pytest.mark.parametrize("gid", ["G1", "G2", "G3", "G4"])
def test_dialogue_knowledge_is_optional(gid):
    g = load_group(gid)
    for vid in g.variants:
        with_k = render_chat(g, vid, make_item("dialogue_quality"))[-1]["content"]
        without = render_chat(g, vid, make_item("dialogue_quality", knowledge=""))[-1]["content"]
        assert "Knowledge:" in with_k and "Knowledge:" not in without, (gid, vid)
        assert "\n\n\n" not in without


def test_groundedness_context_is_optional():
    g = load_group("G11")
    for vid in g.variants:
        text = render_chat(g, vid, make_item("qa_groundedness", context=""))[-1]["content"]
        assert "Context:" not in text and "Evidence:" in text


@pytest.mark.parametrize("gid", ["G1", "G5", "G10", "G11", "G12", "G13"])
def test_missing_key_names_item_and_placeholder(gid):
    g = load_group(gid)
    inputs = dict(FAMILY_INPUTS[g.judge_family])
    missing = "prediction" if "prediction" in inputs else "response"
    del inputs[missing]
    item = Item(id="item-without-key", dataset="fake", inputs=inputs)
    with pytest.raises(PromptError) as e:
        render_chat(g, "P1", item)
    assert "item-without-key" in str(e.value) and repr(missing) in str(e.value)
    assert gid in str(e.value)


def test_template_syntax_in_item_text_is_data():
    payload = "{{ 7*7 }} {% for x in y %}"
    g = load_group("G1")
    for vid in g.variants:
        text = render_chat(g, vid, make_item("dialogue_quality", response=payload, context=payload))[-1][
            "content"
        ]
        assert payload in text and "49" not in text
    g = load_group("G12")
    text = render_chat(g, "P1", make_item("semantic_alignment", prediction=payload))[-1]["content"]
    assert payload in text and "49" not in text


def test_sandbox_blocks_unsafe_attribute_access():
    # the sandbox's refusal is a one-line PromptError naming where, never a rendered prompt
    with pytest.raises(
        PromptError, match="sandbox test: the template sandbox refused it: access to attribute"
    ):
        render("{{ x.__class__.__mro__ }}", {"x": "text"}, where="sandbox test")
    with pytest.raises(PromptError, match="sandbox refused"):
        render("{{ cycler.__init__.__globals__ }}", {}, where="sandbox test")


# -- scales ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scale", "text", "label"),
    [
        ("likert_1_5", "4", "4"),
        ("likert_1_5", "Rating: 5.", "5"),
        ("likert_1_5", " 2\n", "2"),
        ("likert_1_5", "3.5", None),  # a decimal is not a label: no 3 or 5 is read out of it
        ("likert_1_5", "7", None),
        ("likert_1_5", "", None),
        ("binary_yes_no", "yes, it is", "yes"),
        ("binary_yes_no", "No.", "no"),
        ("binary_yes_no", "YES", "yes"),
        ("binary_yes_no", "nope", None),
    ],
)
def test_scale_parse(scale, text, label):
    assert get_scale(scale).parse(text) == label


# -- validation metrics ------------------------------------------------------------------------------


def test_token_jaccard_and_length_ratio_by_hand():
    assert word_tokens("Rate it: 1-5, PLEASE.") == ["rate", "it", "1", "5", "please"]
    # {the, cat, sat} vs {the, cat, ran, away}: 2 shared of 5
    assert jaccard("The cat sat", "the cat ran away") == pytest.approx(2 / 5)
    assert jaccard("a a b", "b a") == 1.0  # sets, case-insensitive
    assert jaccard("", "") == 1.0
    assert length_ratio("one two three four", "one two") == 2.0
    assert length_ratio("x", "one, two; three!") == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        length_ratio("x", "...")


def _write_group(tmp_path: Path, variants: dict[str, str], gid: str = "G1") -> Path:
    data = {
        "id": gid,
        "judge_family": "semantic_alignment",
        "scale": "likert_1_5",
        "version": 1,
        "variants": {
            vid: {"user": text, "tags": {d: "x" for d in WORDING_DIMENSIONS}}
            for vid, text in variants.items()
        },
    }
    (tmp_path / f"{gid}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return tmp_path


def test_validate_group_numbers_with_a_fake_encoder(tmp_path):
    """Hand-computed similarities: P1=(1,0), P2=(1,0), P3=(0,1)."""
    gdir = _write_group(
        tmp_path,
        {
            "P1": "alpha beta {{ prediction }}",
            "P2": "alpha gamma {{ prediction }}",
            "P3": "delta {{ prediction }}",
        },
    )
    group = load_group("G1", str(gdir))
    texts = variant_texts(group)
    assert texts["P1"] == "alpha beta [PREDICTION]"
    vectors = {"P1": [1.0, 0.0], "P2": [2.0, 0.0], "P3": [0.0, 1.0]}  # not normalised on purpose

    def encoder(batch):
        inv = {t: v for v, t in texts.items()}
        return np.array([vectors[inv[t]] for t in batch])

    rows = pd.DataFrame(validate_group(group, threshold=0.85, encoder=encoder)).set_index("variant")
    assert rows.loc["P2", "sim_to_p1"] == pytest.approx(1.0)
    assert rows.loc["P3", "sim_to_p1"] == pytest.approx(0.0)
    # tokens: P1 {alpha, beta, prediction}, P2 {alpha, gamma, prediction}, P3 {delta, prediction}
    assert rows.loc["P2", "jaccard_to_p1"] == pytest.approx(2 / 4)
    assert rows.loc["P3", "jaccard_to_p1"] == pytest.approx(1 / 4)
    assert rows.loc["P3", "length_ratio"] == pytest.approx(2 / 3)
    assert not rows.loc["P2", "flagged"] and rows.loc["P3", "flagged"] and not rows.loc["P1", "flagged"]

    summary = summarize(rows.reset_index()).iloc[0]
    assert summary["mean_sim"] == pytest.approx((1 + 0 + 0) / 3)
    assert summary["mean_sim_to_p1"] == pytest.approx(0.5)
    assert summary["mean_jaccard"] == pytest.approx((2 / 4 + 1 / 4 + 1 / 4) / 3)
    assert summary["length_ratio_min"] == pytest.approx(2 / 3) and summary["length_ratio_max"] == 1.0
    assert summary["flagged"] == "P3"
    assert not summary["meets_target"]
    assert "| G1 |" in to_markdown(summarize(rows.reset_index()))


def test_validate_all_flags_a_dissimilar_variant(tmp_path):
    """Real MiniLM embeddings: a paraphrase about a different task falls below 0.85."""
    fields = "\n\nReference: {{ reference }}\nPrediction: {{ prediction }}\n\nAnswer with a single number from 1 to 5."
    gdir = _write_group(
        tmp_path,
        {
            "P1": "Rate how well the prediction conveys the information in the reference, from 1 to 5."
            + fields,
            "P2": "Rate how well the prediction conveys the information in the reference, on a scale from 1 to 5."
            + fields,
            "P3": "Translate the recipe for chocolate cake into French and list the oven temperature."
            + fields,
        },
        gid="G7",
    )
    summary = validate_all([load_group("G7", str(gdir))], threshold=0.85)
    assert list(summary["group"]) == ["G7"]
    assert summary.loc[0, "flagged"] == "P3"
    assert 0.0 <= summary.loc[0, "mean_jaccard"] <= 1.0


# -- the validate_prompts stage ----------------------------------------------------------------------


def test_validate_prompts_experiment_composes_and_runs(tmp_path):
    from hydra import compose, initialize_config_dir

    from promptlottery.stages import get_stage, register_configs, run_stage
    from promptlottery.stages.validation import validate_prompts

    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["+experiment=validate_prompts", "logger=none"])
    assert cfg.stage == "validate_prompts"
    assert cfg.validation.threshold == 0.85 and cfg.validation.groups == "all"
    assert get_stage(cfg.stage) is validate_prompts

    record = run_stage(cfg, tmp_path)
    assert record["status"] == "ok" and record["n_groups"] == len(GROUP_IDS + LISTWISE_GROUPS)
    assert json.loads((tmp_path / "results.json").read_text())["n_groups"] == len(GROUP_IDS + LISTWISE_GROUPS)
    table = (tmp_path / "validation.md").read_text()
    for gid in GROUP_IDS + LISTWISE_GROUPS:
        assert f"| {gid} " in table
    df = pd.read_csv(tmp_path / "validation.csv")
    assert list(df["group"]) == GROUP_IDS + LISTWISE_GROUPS
    assert df["mean_jaccard"].between(0, 1).all() and df["mean_sim"].between(-1, 1).all()
    assert (tmp_path / "validation_variants.csv").exists()


class _Stub:
    """Says Yes to every paraphrase except G12's P3 (one of the eight asked here)."""

    max_concurrency = 4

    def __init__(self):
        self.calls = 0

    def identity(self):
        return {"backend": "stub", "model": "yes-but-one"}

    def generate(self, requests, decoding):
        from promptlottery.backends.base import JudgeResponse

        p3 = variant_texts_of("G12")["P3"]
        out = []
        for r in requests:
            self.calls += 1
            no = p3 in r.messages[0]["content"].split("Instruction B:\n", 1)[1]
            probs = {"Yes": 0.1, "No": 0.7} if no else {"Yes": 0.6, "No": 0.2}
            out.append(JudgeResponse("No" if no else "Yes", probs, 10, 1, 0.0))
        return out

    def is_retryable(self, exc):
        return False

    def count_tokens(self, request):
        return 1


def variant_texts_of(gid):
    from promptlottery.prompts.validation import variant_texts

    return variant_texts(load_group(gid))


def _fake_encoder(texts):
    rng = np.random.default_rng(0)
    return np.array([rng.normal(size=8) + len(t) % 7 for t in texts])


def test_llm_equivalence_rating_is_cached_and_leaves_the_other_outputs_alone(tmp_path):
    from tests.conftest import compose

    over = ["+experiment=validate_prompts", "validation.groups=[G1,G12]", "backbone=fake"]
    plain = tmp_path / "plain"
    run_validation(compose(over, tmp_path=tmp_path), plain, encoder=_fake_encoder)
    assert not (plain / "validation_equivalence.csv").exists()
    # hand count: G1 and G12 have P2-P5 each, 8 paraphrases; the stub refuses G12/P3 only: 7 / 8 accepted
    stub = _Stub()
    rated = tmp_path / "rated"
    cfg = compose([*over, "validation.equivalence=true"], tmp_path=tmp_path)
    rec = run_validation(cfg, rated, backend=stub, encoder=_fake_encoder)
    assert rec["equivalence"]["share_accepted"] == pytest.approx(7 / 8) and stub.calls == 8
    eq = pd.read_csv(rated / "validation_equivalence.csv").set_index(["group", "variant"])
    assert eq.loc[("G12", "P3"), "accepted"] == 0.0 and eq.loc[("G12", "P3"), "p_yes"] == pytest.approx(0.125)
    assert eq.loc[("G1", "P2"), "p_yes"] == pytest.approx(0.75)
    # the other outputs are the same with or without the rating
    for name in ("validation.csv", "validation_variants.csv"):
        assert (plain / name).read_text() == (rated / name).read_text()
    md = (rated / "validation.md").read_text()
    assert "81%, 84% and 79%" in md and "| 87.5% (fake) |" in md and "0.93 (sBERT)" in md
    # a second run reads every verdict from the call cache
    again = _Stub()
    run_validation(cfg, tmp_path / "again", backend=again, encoder=_fake_encoder)
    assert again.calls == 0
    # the fake backend answers through the same path (the label probabilities' argmax)
    fake = run_validation(cfg, tmp_path / "fake", encoder=_fake_encoder)["equivalence"]
    assert fake["n_answered"] == 8 and 0.0 <= fake["share_accepted"] <= 1.0

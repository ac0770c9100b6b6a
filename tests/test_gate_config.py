"""The gate's structured configs: the real conf/gate presets compose into GateConfig, the classifier is
picked by ``_target_``, and bad values fail with one line naming the option and its valid choices."""

from __future__ import annotations

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from promptlottery.errors import ConfigError
from promptlottery.gating.backbones import MiniLM, Pretrained, RandomInit, backbone_class
from promptlottery.gating.config import ClassifierConfig, GateConfig, QueryTruncation, Verdict
from promptlottery.stages import check as check_config
from tests.conftest import compose


def gate(*overrides: str) -> GateConfig:
    cfg = compose(["+gate=selective", "gate.runs=x", *overrides])
    check_config(cfg)
    return GateConfig.from_dict(OmegaConf.to_container(cfg.gate, resolve=True))


@pytest.mark.parametrize(
    ("overrides", "backbone", "name"),
    [
        ([], MiniLM, "minilm"),
        (["gate/classifier=deberta_tiny"], RandomInit, "deberta_tiny"),
        (["gate/classifier=deberta_v3_large"], Pretrained, "deberta_v3_large"),
        (["gate=paper"], Pretrained, "deberta_v3_large"),
    ],
)
def test_presets_compose_and_pick_the_backbone_by_target(overrides, backbone, name):
    g = gate(*overrides)
    assert isinstance(g, GateConfig) and isinstance(g.classifier, ClassifierConfig)
    assert backbone_class(g.classifier._target_) is backbone
    assert g.classifier.name == name
    assert g.verdict == Verdict.argmax and g.classifier.query_truncation == QueryTruncation.middle


def test_enum_values_read_as_their_strings():
    g = gate("gate.verdict=weighted", "gate.classifier.query_truncation=right")
    assert g.verdict == "weighted" and f"{g.verdict}" == "weighted"
    assert g.classifier.query_truncation == "right"


def test_bad_choice_fails_at_compose_time_naming_key_and_choices():
    with pytest.raises(ConfigCompositionException, match="gate.classifier.query_truncation=bogus") as e:
        compose(["+gate=selective", "gate.runs=x", "gate.classifier.query_truncation=bogus"])
    cause = str(e.value.__cause__)
    assert (
        "expected one of [middle, right]" in cause and "full_key: gate.classifier.query_truncation" in cause
    )


@pytest.mark.parametrize(
    ("gate_dict", "message"),
    [
        (
            {"runs": "x", "verdict": "median"},
            "gate.verdict: Invalid value 'median', expected one of [argmax, weighted]",
        ),
        (
            {"runs": "x", "classifier": {"monitor_mode": "up"}},
            "gate.classifier.monitor_mode: Invalid value 'up', expected one of [max, min]",
        ),
        (
            {"runs": "x", "split_by": "article"},
            "gate.split_by: Invalid value 'article', expected one of [item, source]",
        ),
        ({"runs": "x", "threshold": "high"}, "gate.threshold='high': must be 'auto' or a number"),
        (
            {"runs": "x", "classifier": {"lora": {"dropout": 1.5}}},
            "gate.classifier.lora.dropout=1.5: must be in [0, 1)",
        ),
        ({"verdict": "argmax"}, "gate.runs is required"),
        (
            {"runs": "x", "sparse_designs": [{"budget": 1.5}]},
            "gate.sparse_designs[].budget=1.5: must be a share of the calls in (0, 1]",
        ),
        (
            {"runs": "x", "sparse_designs": [{"budget": 0.4, "anchor": "P9"}]},
            "gate.sparse_designs: anchor='P9' is not one of gate.variants=['P1', 'P2', 'P3', 'P4', 'P5']",
        ),
        (
            {"runs": "x", "classifier": {"num_threads": "many"}},
            "gate.classifier.num_threads='many': must be a whole number >= 1, 'all' or 'auto'",
        ),
        (
            {"runs": "x", "classifier": {"_target_": "nope.Nope"}},
            "gate.classifier._target_='nope.Nope': not a ClassifierBackbone; built in: promptlottery.gating.backbones.MiniLM, ",
        ),
    ],
)
def test_bad_values_give_one_line_naming_the_option(gate_dict, message):
    with pytest.raises(ConfigError) as e:
        GateConfig.from_dict(gate_dict)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


def test_cross_field_check_runs_before_any_output():
    cfg = compose(
        [
            "+gate=selective",
            "gate.runs=x",
            "gate/classifier=deberta_v3_large",
            "gate.classifier.model_name=null",
        ]
    )
    with pytest.raises(
        ConfigError,
        match=r"^gate.classifier._target_=promptlottery.gating.backbones.Pretrained needs gate.classifier.model_name$",
    ):
        check_config(cfg)


def test_a_run_without_gate_has_none():
    cfg = compose([])
    assert cfg.gate is None
    check_config(cfg)

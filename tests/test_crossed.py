"""Crossed wordings: every instruction of a group with every answer format of it."""

from __future__ import annotations

import pytest

from promptlottery.prompts.crossed import crossed_group
from promptlottery.prompts.groups import PromptError, PromptGroup, Variant, load_group
from promptlottery.prompts.scales import get_scale


def test_g12_crossed_is_25_wordings_with_the_originals_on_the_diagonal():
    g12 = load_group("G12")
    out, checks = crossed_group(g12)
    assert len(out.variants) == 25
    for vid in ("P1", "P2", "P3", "P4", "P5"):
        assert out.variants[vid].user == g12.variants[vid].user
        assert out.variants[vid].system == g12.variants[vid].system
    # P3's instruction and scale list, P4's answer line "Only the number, 1-5:" in place of P3's
    p3f4 = out.variants["P3F4"]
    assert p3f4.user.startswith(g12.variants["P3"].user.split("Give only")[0])
    assert p3f4.user.rstrip().endswith("Only the number, 1-5:")
    assert p3f4.tags["instruction"] == "P3" and p3f4.tags["format"] == "P4"
    assert p3f4.tags["format_strictness"] == g12.variants["P4"].tags["format_strictness"]
    assert all(c["variables"]["passed"] and c["scale"]["passed"] for c in checks.values())


def test_a_wording_without_an_answer_format_is_named():
    scale = get_scale("likert_1_5")
    g = PromptGroup(
        "T", "t", scale, 1,
        {"P1": Variant("P1", "Read the text below with care. Rate it from 1 to 5.\n\n{{ response }}\n"),
         "P2": Variant("P2", "Judge the text carefully now.\n\n{{ response }}\n")},
    )  # fmt: skip
    with pytest.raises(PromptError, match="variant P2: no answer-format sentence"):
        crossed_group(g)

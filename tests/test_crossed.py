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


def test_roles_add_each_system_prompt_wording_without_its_role_line():
    g12 = load_group("G12")
    with_system = [v for v in g12.variants.values() if v.system]
    assert [v.id for v in with_system] == ["P2"]  # so 25 + 5 (P2's row without its role line) = 30
    out, checks = crossed_group(g12, roles=True)
    assert len(out.variants) == 30 and set(checks) == set(out.variants)
    dropped = [vid for vid, v in out.variants.items() if v.tags["role"] == "dropped"]
    assert dropped == ["P2F1N", "P2F2N", "P2F3N", "P2F4N", "P2F5N"]
    for vid in dropped:
        bare, kept = out.variants[vid], out.variants[vid[:-1] if vid != "P2F2N" else "P2"]
        assert bare.system is None and kept.system == g12.variants["P2"].system
        assert bare.user == kept.user and bare.tags["role_framing"] == "none"
    assert out.variants["P1"].user == g12.variants["P1"].user and out.variants["P1"].tags["role"] == "kept"

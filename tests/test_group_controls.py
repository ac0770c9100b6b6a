"""Control variants in prompt groups: loaded, checked like paraphrases, kept out of the paraphrase sweep."""

import pytest

from promptlottery.config import group_variants
from promptlottery.prompts.groups import GROUPS_DIR, PromptError, load_group, load_group_file


def test_g1_and_g5_controls_leave_the_paraphrases_as_they_were():
    for gid in ("G1", "G5", "G17"):
        g = load_group(gid)
        assert list(g.variants) == ["P1", "P2", "P3", "P4", "P5"]
        assert {c: (v.control, v.base) for c, v in g.controls.items()} == {
            "P1_stricter": ("stricter", "P1"),
            "P1_more_lenient": ("more_lenient", "P1"),
            "P1_reversed": ("reversed", "P1"),
            "P1_criterion_dropped": ("criterion_dropped", "P1"),
        }
        assert g.variant("P1_reversed").control == "reversed" and g.variants["P1"].control is None
    # the paraphrases' text hashes (cache keys) of main before controls were added
    assert load_group("G1").text_hash("P1") == "fe3968c415d8e046"
    assert load_group("G5").text_hash("P1") == "2d20c8a48fcac250"
    assert load_group("G17").text_hash("P1") == "463cae113138dcf3"
    # G17's controls rewrite P1's system prompt and keep its user template
    g17 = load_group("G17")
    assert all(
        c.user == g17.variants["P1"].user and c.system != g17.variants["P1"].system
        for c in g17.controls.values()
    )


def test_group_variants_lists_controls_only_when_asked():
    f = str(GROUPS_DIR / "G1.yaml")
    assert group_variants(f, "pointwise", None) == "P1,P2,P3,P4,P5"
    assert group_variants(f, "pointwise", None, True).endswith(
        "P5,P1_stricter,P1_more_lenient,P1_reversed,P1_criterion_dropped"
    )


def _write(tmp_path, controls: str):
    p = tmp_path / "g.yaml"
    p.write_text(
        "id: GX\njudge_family: custom\nscale: binary_yes_no\nversion: 1\nvariants:\n"
        "  P1: {user: 'Is {{ response }} good? yes or no'}\n  P2: {user: 'Good: {{ response }}? yes/no'}\n"
        + controls
    )
    return p


@pytest.mark.parametrize(
    ("controls", "message"),
    [
        ("controls:\n  C1: {base: P1, direction: looser, user: 'x {{ response }}'}\n", "direction='looser'"),
        (
            "controls:\n  C1: {base: P9, direction: stricter, user: 'x {{ response }}'}\n",
            "base='P9' is not a variant",
        ),
        (
            "controls:\n  P2: {base: P1, direction: stricter, user: 'x {{ response }}'}\n",
            "control P2 has the id of a paraphrase",
        ),
        (
            "controls:\n  C1: {base: P1, direction: stricter, user: 'Is {{ response }} good? yes or no'}\n",
            "have the same text",
        ),
        ("controls:\n  C1: {base: P1, direction: stricter, user: 'x {{ response }'}\n", "variant C1 line 1"),
    ],
)
def test_bad_controls_are_one_line_naming_the_file(tmp_path, controls, message):
    with pytest.raises(PromptError, match=message) as e:
        load_group_file(_write(tmp_path, controls))
    assert "g.yaml" in str(e.value) and "\n" not in str(e.value)

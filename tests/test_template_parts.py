"""Paraphrase generation rewords only a template's instruction text: the split into instruction and
fixed parts, the re-attachment, the parsing of a model's rewording. Templates written here by hand."""

from __future__ import annotations

import pytest

from promptlottery.prompts.generate import generate_group
from promptlottery.prompts.groups import PromptError, group_from_template
from promptlottery.prompts.paraphrase_checks import ParaphraseOptions
from promptlottery.prompts.scales import get_scale
from promptlottery.prompts.template_parts import assemble, parse_rewording, split_template

YES_NO = get_scale("binary_yes_no")
LIKERT = get_scale("likert_1_5")

# the answer-format line stands between two instruction blocks
MIDDLE = """\
Read the question and the answer below.
Reply with Yes if the answer is correct and No otherwise.

Question: {{ context }}
Answer: {{ response }}

Be strict: an answer that is only partly right counts as wrong.
"""
# the JUDGE-BENCH CoLA prompt: the format sentence shares a line with the instruction, before the text
COLA = """\
Given the following sentence, determine if it is grammatically correct or not. Write 'Yes' if it is grammatical, and 'No' if it is not:

{{ response }}
"""
RUBRIC = """\
How correct is the answer? Judge it on this scale:
1 - wrong
3 - partly correct
5 - fully correct

Answer: {{ response }}

Give only the number (1-5).
"""


def kinds(parts):
    return [(p.kind, p.text) for p in parts]


def test_split_marks_the_answer_line_in_the_middle_and_keeps_the_text():
    parts = split_template(MIDDLE, YES_NO, where="middle.j2")
    assert kinds(parts) == [
        ("instruction", "Read the question and the answer below.\n"),
        ("format", "Reply with Yes if the answer is correct and No otherwise."),
        ("layout", "\n"),
        ("layout", "\n"),
        ("placeholder", "Question: {{ context }}\n"),
        ("placeholder", "Answer: {{ response }}\n"),
        ("layout", "\n"),
        ("instruction", "Be strict: an answer that is only partly right counts as wrong.\n"),
    ]
    assert "".join(p.text for p in parts) == MIDDLE


def test_split_cuts_the_format_sentence_out_of_its_line():
    parts = split_template(COLA, YES_NO, where="cola.j2")
    assert kinds(parts)[:2] == [
        ("instruction", "Given the following sentence, determine if it is grammatically correct or not. "),
        ("format", "Write 'Yes' if it is grammatical, and 'No' if it is not:"),
    ]
    assert [p.kind for p in parts[2:]] == ["layout", "layout", "placeholder"]


def test_scale_definition_lines_and_the_last_label_sentence_stay():
    parts = split_template(RUBRIC, LIKERT, where="rubric.j2")
    assert [(p.kind, p.core) for p in parts if p.kind in ("instruction", "format")] == [
        ("instruction", "How correct is the answer? Judge it on this scale:"),
        ("format", "Give only the number (1-5)."),
    ]
    assert [p.core for p in parts if p.kind == "layout" and p.core] == [
        "1 - wrong",
        "3 - partly correct",
        "5 - fully correct",
    ]


def test_assemble_puts_rewordings_back_in_place_with_their_whitespace():
    parts = split_template(COLA, YES_NO, where="cola.j2")
    got = assemble(parts, {0: "  Decide whether the sentence below obeys English grammar. \n"})
    assert got == (
        "Decide whether the sentence below obeys English grammar. Write 'Yes' if it is grammatical, "
        "and 'No' if it is not:\n\n{{ response }}\n"
    )


def test_nothing_to_reword_names_the_template_file():
    with pytest.raises(PromptError, match=r"^only_tags\.j2: nothing to reword"):
        split_template("Text: {{ response }}\n\nAnswer Yes or No.\n", YES_NO, where="only_tags.j2")


@pytest.mark.parametrize(
    ("reply", "text", "problem"),
    [
        ('Reworded: "Check the question and answer that follow."\n\nThis keeps the meaning.',
         "Check the question and answer that follow.", None),
        ("Here is the reworded instruction:\n'Look at the question and the answer.'",
         "Look at the question and the answer.", None),
        ("```\nGo through the question and answer shown.\n```", "Go through the question and answer shown.", None),
        ('""', "", "empty rewording"),
        ("Read the question and the answer below!", "Read the question and the answer below!",
         "the rewording is the source text"),
        ("Read {{ context }} and the answer.", "Read {{ context }} and the answer.",
         "the rewording contains a template tag ({{ }} / {% %})"),
        ("Read both and answer Yes or No.", "Read both and answer Yes or No.",
         "the rewording names the scale labels ['no', 'yes'], the source []"),
    ],
)  # fmt: skip
def test_parse_rewording(reply, text, problem):
    assert parse_rewording(reply, "Read the question and the answer below.", YES_NO) == (text, problem)


def _setup(tmp_path, name: str, text: str, **opts):
    """The one-variant group of a template file written here, and the paraphrase options."""
    tpl = tmp_path / name
    tpl.write_text(text, encoding="utf-8")
    options = ParaphraseOptions(template=str(tpl), scale="binary_yes_no", out="x.yaml", **opts)
    return group_from_template(tpl, "binary_yes_no"), options


def test_generate_group_rewords_each_instruction_block_and_reattaches_the_rest(tmp_path):
    original, opts = _setup(tmp_path, "middle.j2", MIDDLE, n=2, batch=1, max_candidates=2)
    rewordings = {
        "Read the question and the answer below.": "Look over the question and the answer that follow.",
        "Be strict: an answer that is only partly right counts as wrong.": (
            '"Judge harshly: a partially correct answer is a wrong one."'
        ),
    }
    asked = []

    def ask(text, idx):  # a fake generator: one fixed rewording per source block
        asked.append(text)
        return [rewordings[text]] * len(idx)

    passing, rejected, tried = generate_group(
        original, opts, ask=ask, score=None, encode=lambda texts: [[1.0, 0.0]] * len(texts)
    )
    assert asked == [*rewordings, *rewordings] and tried == 2
    (cand,) = passing
    assert rejected[0].checks["rewording"] == {"passed": False, "reason": "the same text as candidate 0"}
    assert cand.text == (
        "Look over the question and the answer that follow.\n"
        "Reply with Yes if the answer is correct and No otherwise.\n\n"
        "Question: {{ context }}\nAnswer: {{ response }}\n\n"
        "Judge harshly: a partially correct answer is a wrong one.\n"
    )
    assert cand.checks["rewording"] == {"passed": True, "parts": 2}
    sim = cand.checks["similarity"]
    assert sim["similarity"] == 1.0  # the constant fake encoder
    # the overlap of (c) is measured on the reworded text only: far below that of the whole template
    assert sim["overlap"] < 0.3 < sim["overlap_full"]


def test_a_bad_rewording_rejects_the_candidate_with_the_reason(tmp_path):
    original, opts = _setup(tmp_path, "cola.j2", COLA, n=1, batch=2, max_candidates=2)
    replies = ["Is this sentence grammatical? Answer Yes or No.", "{{ response }}"]
    passing, rejected, tried = generate_group(
        original, opts, ask=lambda t, idx: [replies[i] for i in idx], score=None,
        encode=lambda texts: [[1.0, 0.0]] * len(texts),
    )  # fmt: skip
    assert passing == [] and tried == 2
    reasons = [c.checks["rewording"]["reason"] for c in rejected]
    assert "names the scale labels ['no', 'yes'], the source []" in reasons[0]
    assert reasons[0].startswith("instruction 1 ('Given the following sentence, determine '...): ")
    assert "contains a template tag" in reasons[1]
    assert all(c.checks["similarity"]["reason"] == "not measured: an earlier check failed" for c in rejected)


def test_generate_group_with_nothing_to_reword_names_the_template(tmp_path):
    original, opts = _setup(tmp_path, "bare.j2", "{{ response }}\n\nAnswer Yes or No.\n", n=1)
    with pytest.raises(PromptError, match=rf"paraphrase.template={tmp_path / 'bare.j2'}: nothing to reword"):
        generate_group(original, opts, ask=lambda t, i: [], score=None, encode=lambda t: [])


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("A hedge between options or no answer is wrong.", set()),  # "no" as an ordinary word
        ("No prior knowledge is needed.", set()),
        ("Answer yes or no.", {"yes", "no"}),
        ('Reply with only "yes" or "no": is it engaging?', {"yes", "no"}),
        ("Engaging (Yes/No):", {"yes", "no"}),
        ("Reply with Yes if the answer is correct and No otherwise.", {"yes", "no"}),
        ("Answer no if any fact is wrong.", {"no"}),
    ],
)
def test_word_labels_count_only_where_they_stand_as_labels(text, named):
    from promptlottery.prompts.template_parts import labels_named

    assert labels_named(text, YES_NO) == named


def test_a_rewording_may_drop_or_add_no_as_an_ordinary_word():
    source = "Read the answer; there is no need to explain."
    assert parse_rewording("Read the answer without explaining it.", source, YES_NO) == (
        "Read the answer without explaining it.",
        None,
    )
    assert parse_rewording("Read the answer and give no explanation.", "Read the answer.", YES_NO)[1] is None
    # a label pair is still a label: dropping it rejects the rewording
    _, problem = parse_rewording("Decide about the answer.", "Decide: yes or no.", YES_NO)
    assert problem == "the rewording names the scale labels [], the source ['no', 'yes']"

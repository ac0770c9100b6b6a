"""Verdicts read from a judge's text where the judge gave them (prompts/verdicts.py): the label at the
answer cue, else the last verdict marker, else the last label; a restated scale, an echoed prompt or
list numbers are never a verdict, a hedge is a parse failure with its reason."""

from __future__ import annotations

import itertools

import pytest

from promptlottery.backends.base import Decoding, JudgeRequest, JudgeResponse
from promptlottery.backends.fake import FakeBackend, prose_answer
from promptlottery.prompts.scales import SCALES, get_scale
from promptlottery.prompts.scoring import PARSED_LABEL, score_response

FIVE, TEN, YN = get_scale("likert_1_5"), get_scale("likert_1_10"), get_scale("binary_yes_no")
ABC, AB, P12 = get_scale("pairwise_abc"), get_scale("pairwise_ab"), get_scale("pairwise_12")


@pytest.mark.parametrize(
    "scale, text, label",
    [
        # the case: the restated scale's first number was read
        (FIVE, "On a scale from 1 to 5, I would rate this answer a 4.", "4"),
        (FIVE, "The scale is 1 (poor) to 5 (excellent). It misses a detail. Score: 4", "4"),
        (FIVE, "1 - poor\n2 - fair\n3 - ok\n4 - good\n5 - excellent\n\nThis one is good: 4", "4"),
        (FIVE, "1. Accurate.\n2. Fluent.\nRating: 4/5", "4"),
        (FIVE, "Answer with 1, 2, 3, 4 or 5. The response has 2 errors, so I give it a 3.", "3"),
        (FIVE, "Rating: 4. If the answer had cited sources it would be a 5.", "4"),
        (FIVE, "I give this answer 4 out of 5.", "4"),
        (FIVE, "On a scale of 1-5 the answer deserves a 2.", "2"),
        (FIVE, "It is better than a 2. Final score: 3", "3"),
        (FIVE, "[[4]]", "4"),
        (TEN, "Out of 10, I'd rate it a 7; a 10 needs sources.\nRating: 7/10", "7"),
        (TEN, "Rating: 10", "10"),
        (YN, "Answer yes or no. The answer has no errors and matches the reference. Answer: yes", "yes"),
        (YN, "Should I say yes or no? The answer is wrong, so no.", "no"),
        (
            ABC,
            'Output "[[A]]" if assistant A is better, "[[B]]" if assistant B is better, and "[[C]]" '
            "for a tie. Assistant A is vague. Assistant B is better.\n\n[[B]]",
            "B",
        ),  # fmt: skip
        (ABC, "A better answer would give the date. Both are weak; it is a tie.", "C"),
        (ABC, "Assistant A is not better than Assistant B. Final verdict: B", "B"),
        (ABC, "Comparing them, [[B]]. Not [[A]].", "B"),
        (P12, "Response 1 is vague; Response 2 gives a more accurate answer. Output (2)", "2"),
        (P12, "Which is better, 1 or 2? Response 1 is better.", "1"),
    ],
)
def test_the_label_at_the_verdict_not_the_first_label(scale, text, label):
    assert scale.parse(text) == label


@pytest.mark.parametrize(
    "scale, text, why",
    [
        (FIVE, "Somewhere between a 3 and a 4.", "ambiguous likert_1_5 verdict: names 3 and 4"),
        (FIVE, "Rating: 3-4", "ambiguous likert_1_5 verdict: names 3 and 4"),
        (FIVE, "I'd rate it 3 or 4.", "ambiguous"),
        (FIVE, "Use the scale from 1 to 5.", "only the restated scale"),
        (YN, "The answer has no errors.", "no binary_yes_no label at a verdict"),
        (ABC, "Either [[A]] or [[C]], I cannot decide.", "ambiguous pairwise_abc verdict: names A and C"),
    ],
)
def test_an_ambiguous_or_restated_only_answer_is_a_parse_failure_with_its_reason(scale, text, why):
    s = score_response(JudgeResponse(text, None, 1, 1, 0.0), scale)
    assert s.parsed_label is None and s.score is None
    assert why in s.parse_failure_reason and s.missing_reason == s.parse_failure_reason


def test_an_echoed_prompt_is_no_verdict():
    prompt = "Rate the answer.\nA rating of 1 is for a wrong answer, 5 for a right one.\nAnswer: Paris"
    text = "A rating of 1 is for a wrong answer, 5 for a right one.\nThe answer is right."
    assert FIVE.parse(text) == "1"  # the echo read as the judge's own words
    assert FIVE.read(text, prompt=prompt).label is None
    assert FIVE.parse(text + " I'd say 5.", prompt=prompt) == "5"


def test_the_label_right_after_the_answer_cue_wins():
    assert FIVE.read(" 4\n\nExplanation: 2 of 3 facts, so not a 5.", cued=True).label == "4"
    assert ABC.read("A]]\n\nExplanation: unlike [[B]], it answers.", cued=True).label == "A"
    assert ABC.read("A better answer would name the city. [[B]]", cued=True).label == "B"


def _requests(scale, order):
    for k in range(12):  # twelve keys: every verdict form of the prose judge
        yield JudgeRequest(
            key=f"{scale.name}-{order}-{k}",
            labels=scale.labels,
            messages=[
                {"role": "user", "content": f"Judge this. Answer with one label of {list(scale.labels)}."}
            ],
            order=order,
        )


@pytest.mark.parametrize("name", sorted(SCALES))
def test_the_prose_judge_gives_exactly_its_chosen_label_on_every_scale(name):
    scale = get_scale(name)
    order = "12" if scale.preference else None
    for req, label in itertools.product(_requests(scale, order), scale.labels):
        text = prose_answer(req, label)
        s = score_response(JudgeResponse(text, None, 1, 1, 0.0), scale, prompt=req.messages[0]["content"])
        assert s.parsed_label == label and s.scoring_mode == PARSED_LABEL, (label, text)


def test_the_prose_fake_has_no_logprobs_and_its_own_cache_identity():
    fake = FakeBackend(prose=True)
    req = next(_requests(FIVE, None))
    out = fake.generate([req], Decoding())[0]
    assert out.label_probs is None and "On a scale from 1 to 5" in out.raw_text
    assert fake.identity()["prose"] is True and "prose" not in FakeBackend().identity()

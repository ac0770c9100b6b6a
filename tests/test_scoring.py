import math

import pytest

from promptlottery.backends.base import JudgeResponse
from promptlottery.prompts.scales import get_scale
from promptlottery.prompts.scoring import LOGPROB_WEIGHTED, PARSED_LABEL, score_response

LIKERT = get_scale("likert_1_5")
BINARY = get_scale("binary_yes_no")


def resp(text, probs):
    return JudgeResponse(
        raw_text=text, label_probs=probs, prompt_tokens=10, completion_tokens=1, latency_s=0.0
    )


def test_weighted_score_renormalises_over_scale_labels():
    # r = sum p_i s_i / sum p_j = (0.1*1 + 0.2*4 + 0.1*5) / 0.4 = 1.4 / 0.4 = 3.5
    s = score_response(resp("4", {"1": 0.1, "2": 0.0, "3": 0.0, "4": 0.2, "5": 0.1}), LIKERT)
    assert s.weighted_score == pytest.approx(3.5)
    assert s.label_mass == pytest.approx(0.4)
    assert s.argmax_label == "4" and s.argmax_score == 4.0
    assert s.parsed_label == "4" and s.scoring_mode == LOGPROB_WEIGHTED and s.score == pytest.approx(3.5)
    assert s.missing_reason is None


def test_binary_yes_is_one_no_is_zero():
    s = score_response(resp("No.", {"yes": 0.3, "no": 0.1}), BINARY)
    assert s.weighted_score == pytest.approx(0.75)
    assert s.parsed_label == "no" and s.parsed_score == 0.0 and s.argmax_label == "yes"


def test_parse_failure_is_missing_not_low_score_without_logprobs():
    s = score_response(resp("I cannot rate this.", None), LIKERT)
    assert s.score is None and s.scoring_mode is None
    assert "no likert_1_5 label" in s.missing_reason and s.parse_failure_reason


def test_parsed_label_mode_when_backend_gives_no_logprobs():
    s = score_response(resp("Rating: 5.", None), LIKERT)
    assert s.scoring_mode == PARSED_LABEL and s.score == 5.0 and s.weighted_score is None


def test_zero_label_mass_falls_back_to_parse_and_records_parse_failure():
    s = score_response(resp("The answer", {"1": 0.0, "2": 0.0, "3": 0.0, "4": 0.0, "5": 0.0}), LIKERT)
    assert s.score is None and "no label probability mass" in s.missing_reason
    assert math.isclose(s.label_mass, 0.0)


@pytest.mark.parametrize(
    "text,label",
    [
        ("4", "4"),
        ("Rating: 5.", "5"),
        ("3.5", None),
        ("1. The prediction", "1"),
        ("10", None),
        ("score 2/5", "2"),
    ],
)
def test_likert_parse(text, label):
    assert LIKERT.parse(text) == label

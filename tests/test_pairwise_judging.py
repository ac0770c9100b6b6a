"""Pairwise judging, the write side: preference labels, the position-swap plan, the judgment columns
of the pairwise contract, and the bad inputs that stop a run with one line.

The toys are written here; expected values are worked out by hand from the definitions in
``modes/pairwise.py`` (order "12" shows response_a as A, "21" shows response_b as A).
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from promptlottery.backends.base import Decoding, JudgeResponse
from promptlottery.calls.cache import CallCache
from promptlottery.data.loaders.table import load_table
from promptlottery.data.schema import DatasetError, Item
from promptlottery.errors import ConfigError
from promptlottery.judging.runner import Condition, judge
from promptlottery.modes import ModeError
from promptlottery.modes.pairwise import PairwiseError, for_order, human_preference, preference_columns
from promptlottery.prompts.groups import load_group
from promptlottery.prompts.scales import get_scale
from promptlottery.prompts.scoring import score_response
from tests.conftest import compose

ABC = get_scale("pairwise_abc")

PAIRS = [
    Item(
        id=f"p{i}",
        dataset="toy",
        inputs={
            "question": f"Question {i}?",
            "response_a": f"first answer {i}",
            "response_b": f"second answer {i}",
        },
        human={"preference": pref},
        human_kind="single",
    )
    for i, pref in enumerate([1.0, 0.0, 1.0, 0.5])
]


class AlwaysA:
    """A fake judge that always answers "A" (label probabilities A=.8, B=.15, C=.05)."""

    max_concurrency = 4

    def __init__(self):
        self.calls = 0
        self.seen: list[str] = []

    def identity(self):
        return {"backend": "always-a", "model": "a"}

    def generate(self, requests, decoding):
        self.calls += len(requests)
        self.seen += [r.messages[-1]["content"] for r in requests]
        return [JudgeResponse("A]]", {"A": 0.8, "B": 0.15, "C": 0.05}, 10, 1, 0.0) for _ in requests]

    def is_retryable(self, exc):
        return False

    def count_tokens(self, request):
        return 1


def _condition(**kw) -> Condition:
    base = dict(
        dataset="toy", judge_family="pairwise_preference", prompt_group="G17", variant="P1",
        backbone="a", criterion="preference", judge_mode="pairwise",
    )  # fmt: skip
    return Condition(**{**base, **kw})


# ------------------------------------------------------------------------------ labels


@pytest.mark.parametrize(
    "text, label",
    [("[[A]]", "A"), ("[[C]]", "C"), ("B", "B"), ("A]]", "A"), ("Assistant B is better. [[B]]", "B"),
     ("[[D]]", None), ("a tie, I think", None), ("", None)],
)  # fmt: skip
def test_preference_labels_parse_from_the_bracket_format_and_a_bare_letter(text, label):
    assert ABC.parse(text) == label


@pytest.mark.parametrize(
    "text, label",
    [
        # the judge continues the "[[" prefix with its verdict and names the other letter later
        ("A]]\n\nExplanation: unlike [[B]], assistant A answers the question.", "A"),
        ("B]] Assistant B is better; [[A]] would need a proof.", "B"),
        ("[[C]]\nBoth are fine, though [[A]] is shorter.", "C"),
        (" c ]] a tie", "C"),
        # no verdict at the start: the first bracketed one
        ("Comparing them, [[B]]. Not [[A]].", "B"),
    ],
)
def test_the_letter_right_after_the_prefix_wins_over_a_later_bracket(text, label):
    # FastChat (common.py, run_judge_pair) reads "[[" + text: "[[A]]" in judgment -> A on the first
    assert ABC.parse(text) == label


def test_a_label_outside_the_scale_is_a_parse_failure_with_its_reason():
    s = score_response(JudgeResponse("[[D]]", None, 1, 1, 0.0), ABC)
    assert s.parsed_label is None and s.score is None
    assert "pairwise_abc" in s.missing_reason and "[[D]]" in s.missing_reason


def test_the_tieless_scale_has_no_tie_label():
    ab = get_scale("pairwise_ab")
    assert ab.parse("[[C]]") is None and ab.tie_label is None


# ------------------------------------------------------------------------------ the columns by hand


def test_columns_of_a_swapped_order_by_hand():
    """Order "21" shows response_b as A. Label probabilities A=.7, B=.3 (mass 1):
    p_pref_2 = p(A) = .7, p_pref_1 = p(B) = .3, the argmax A stands for response_b: preferred "2"."""
    resp = JudgeResponse("A", {"A": 0.7, "B": 0.3}, 1, 1, 0.0)
    ab = get_scale("pairwise_ab")
    s = score_response(resp, for_order(ab, "21"))
    cols = preference_columns(PAIRS[0], "21", ab, s, resp.label_probs)
    assert cols["order"] == "21" and cols["judge_mode"] == "pairwise"
    assert cols["p_pref_1"] == pytest.approx(0.3) and cols["p_pref_2"] == pytest.approx(0.7)
    assert math.isnan(cols["p_pref_tie"])  # no tie label on this scale
    assert cols["preferred"] == "2" and cols["preferred_parsed"] == "2"
    # the weighted score in the pair's terms: p(response_a wins) = .3
    assert s.weighted_score == pytest.approx(0.3)
    assert cols["cluster_id"] == "p0" and cols["system_1"] is None


def test_columns_normalise_over_the_scale_and_map_the_tie():
    """Order "12", A=.2 B=.2 C=.4 (mass .8): p_pref_1 = .25, p_pref_2 = .25, p_pref_tie = .5, argmax C."""
    resp = JudgeResponse("C", {"A": 0.2, "B": 0.2, "C": 0.4}, 1, 1, 0.0)
    s = score_response(resp, for_order(ABC, "12"))
    cols = preference_columns(PAIRS[0], "12", ABC, s, resp.label_probs)
    assert (cols["p_pref_1"], cols["p_pref_2"], cols["p_pref_tie"]) == pytest.approx((0.25, 0.25, 0.5))
    assert cols["preferred"] == "tie"
    # weighted: (.2 * 1 + .2 * 0 + .4 * .5) / .8 = .5
    assert s.weighted_score == pytest.approx(0.5)


def test_human_preference_in_the_pairs_terms_and_the_annotators_majority():
    assert human_preference(1.0) == ("1", None)
    assert human_preference(0.0) == ("2", None)
    assert human_preference(0.5) == ("tie", None)
    # PandaLM codes: 1 = response1, 0 = response2, .5 = tie; two of three say response_a
    assert human_preference([1.0, 1.0, 0.5]) == ("1", json.dumps(["1", "1", "tie"]))
    assert human_preference([1.0, 0.0, 0.5])[0] == "tie"  # no strict majority


# ------------------------------------------------------------------------------ the position-swap plan


def test_always_a_judge_flips_preferred_with_the_order(tmp_path):
    backend, cache = AlwaysA(), CallCache(tmp_path / "calls.sqlite")
    df, stats = judge(PAIRS, _condition(), load_group("G17"), backend, cache, Decoding())
    assert len(df) == 8 and backend.calls == 8 and stats.cache_misses == 8
    assert sorted(df["order"].unique()) == ["12", "21"]
    by = df.pivot(index="item_id", columns="order", values="preferred")
    assert (by["12"] == "1").all() and (by["21"] == "2").all()
    untied = [it.id for it in PAIRS if it.human["preference"] != 0.5]
    consistent = (by.loc[untied, "12"] == by.loc[untied, "21"]).mean()
    assert consistent == 0.0  # position consistency 0 on untied pairs
    # the swapped order really shows response_b first
    shown = [t.index("second answer 0") < t.index("first answer 0") for t in backend.seen if "answer 0" in t]
    assert sorted(shown) == [False, True]
    assert list(df.loc[df.item_id == "p3", "human_preferred"].unique()) == ["tie"]
    for col in ("judge_mode", "order", "preferred", "preferred_parsed", "p_pref_1", "p_pref_2", "p_pref_tie",
                "human_preferred", "human_raters", "system_1", "system_2", "cluster_id"):  # fmt: skip
        assert col in df.columns, col
    assert df["query"].str.endswith("[assistant] [[").all()


def test_each_order_is_a_call_of_its_own_in_the_cache_and_a_rerun_makes_none(tmp_path):
    cache = CallCache(tmp_path / "calls.sqlite")
    first = AlwaysA()
    df, _ = judge(PAIRS, _condition(), load_group("G17"), first, cache, Decoding())
    keys = df.groupby("item_id")["cache_key"].nunique()
    assert (keys == 2).all() and df["cache_key"].nunique() == 8
    again = AlwaysA()
    df2, stats = judge(PAIRS, _condition(), load_group("G17"), again, cache, Decoding())
    assert again.calls == 0 and stats.cache_hits == 8 and df2["cache_hit"].all()
    # one order only: the "12" keys are the same calls
    one = AlwaysA()
    df3, _ = judge(PAIRS, _condition(position_swap=False), load_group("G17"), one, cache, Decoding())
    assert one.calls == 0 and list(df3["order"].unique()) == ["12"]
    assert set(df3["cache_key"]) == set(df.loc[df.order == "12", "cache_key"])


# ------------------------------------------------------------------------------ bad inputs, one line each


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


PAIR_ROWS = [
    {"id": "x1", "q": "Name a fruit.", "a": "Apple", "b": "Chair", "pref": "1"},
    {"id": "x2", "q": "2 + 2?", "a": "5", "b": "4", "pref": "B"},
    {"id": "x3", "q": "Say hi.", "a": "Hi", "b": "Hello", "pref": "tie"},
]
PAIR_FIELDS = {"id": "id", "question": "q", "response_a": "a", "response_b": "b", "human": "pref"}


def test_a_table_of_pairs_reads_preferences_as_the_pair_loaders_code_them(tmp_path):
    items = load_table(tmp_path, path=str(_write(tmp_path / "p.jsonl", PAIR_ROWS)), fields=PAIR_FIELDS)
    assert [it.human["human"] for it in items] == [1.0, 0.0, 0.5]
    assert items[0].inputs["response_b"] == "Chair" and "response" not in items[0].inputs


def test_a_preference_outside_the_scale_names_file_line_and_column(tmp_path):
    rows = [*PAIR_ROWS[:1], {**PAIR_ROWS[1], "pref": "D"}]
    path = _write(tmp_path / "p.jsonl", rows)
    with pytest.raises(
        DatasetError, match=r"p\.jsonl:2: column 'pref': preference 'D' is outside the pairwise scale"
    ):
        load_table(tmp_path, path=str(path), fields=PAIR_FIELDS)


def test_an_empty_response_in_a_table_of_pairs_names_file_line_and_column(tmp_path):
    path = _write(tmp_path / "p.jsonl", [PAIR_ROWS[0], {**PAIR_ROWS[1], "b": "  "}])
    with pytest.raises(DatasetError, match=r"p\.jsonl:2: column 'b' is missing or empty"):
        load_table(tmp_path, path=str(path), fields=PAIR_FIELDS)


def _cfg(tmp_path, overrides):
    return compose(["backbone=fake", *overrides], tmp_path=tmp_path)


def test_a_pair_with_an_empty_response_from_a_loader_stops_naming_the_item(tmp_path):
    from promptlottery.stages import run_stage as run

    cfg = _cfg(tmp_path, ["+experiment=llmbar_natural_pairwise", "dataset=llmbar", "dataset.options.subset=llmeval2",
                          "dataset.limit=null", "stage=judge"])  # fmt: skip
    with pytest.raises(
        PairwiseError, match=r"dataset llmbar: item 'llmbar-llmeval2-169' has an empty response_b"
    ):
        run(cfg, tmp_path / "job", backend=AlwaysA())


def test_a_pairwise_group_on_a_pointwise_table_stops_before_any_call(tmp_path):
    from promptlottery.stages import run_stage as run

    backend = AlwaysA()
    cfg = _cfg(tmp_path, ["dataset=stsb", "dataset.limit=3", "judge=pairwise_preference"])
    with pytest.raises(
        PairwiseError, match=r"dataset stsb: judge.mode=pairwise needs items with response_a and response_b"
    ):
        run(cfg, tmp_path / "job", backend=backend)
    assert backend.calls == 0


def test_a_pairwise_group_in_pointwise_mode_and_a_pointwise_group_on_pairs_stop(tmp_path):
    from promptlottery.stages import run_stage as run

    cfg = _cfg(
        tmp_path,
        ["dataset=llmbar_natural", "dataset.limit=3", "judge=pairwise_preference", "judge.mode=pointwise"],
    )
    with pytest.raises(
        ModeError, match=r"prompt group G17 is pairwise \(scale pairwise_abc\) but judge.mode=pointwise"
    ):
        run(cfg, tmp_path / "job1", backend=AlwaysA())
    cfg = _cfg(
        tmp_path,
        ["dataset=llmbar_natural", "dataset.limit=3", "judge=mt_bench_quality", "judge.mode=pairwise"],
    )
    with pytest.raises(
        ModeError, match=r"judge.mode=pairwise but prompt group G16 has the rating scale likert_1_10"
    ):
        run(cfg, tmp_path / "job2", backend=AlwaysA())
    cfg = _cfg(tmp_path, ["dataset=llmbar_natural", "dataset.limit=3", "judge=mt_bench_quality"])
    with pytest.raises(
        ModeError, match=r"dataset llmbar: prompt group G16 is pointwise .* the items are pairs"
    ):
        run(cfg, tmp_path / "job3", backend=AlwaysA())


def test_judge_mode_outside_its_choices_stops(tmp_path):
    from promptlottery.stages import run_stage as run

    cfg = _cfg(
        tmp_path,
        ["dataset=llmbar_natural", "dataset.limit=3", "judge=pairwise_preference", "judge.mode=pair"],
    )
    # refused by the config check, before the job's directory is claimed
    with pytest.raises(
        ConfigError, match=r"^unknown judge.mode 'pair' \(known: pointwise, pairwise, analytic, listwise\)$"
    ):
        run(cfg, tmp_path / "job", backend=AlwaysA())


# ------------------------------------------------------------------------------ the real configs


def test_llmbar_natural_pairwise_composes_and_judges_both_orders(tmp_path):
    from promptlottery.stages import run_stage as run

    cfg = _cfg(tmp_path, ["+experiment=llmbar_natural_pairwise", "dataset.limit=3", "stage=judge"])
    assert cfg.judge.mode == "pairwise" and cfg.judge.position_swap and cfg.judge.prompt_group == "G17"
    backend = AlwaysA()
    run(cfg, tmp_path / "job", backend=backend)
    df = pd.read_parquet(tmp_path / "job" / "judgments.parquet")
    assert len(df) == 6 and backend.calls == 6
    assert set(df["human_preferred"]) <= {"1", "2"} and df["cluster_id"].notna().all()
    run(cfg, tmp_path / "job2", backend=(again := AlwaysA()))
    assert again.calls == 0


def test_own_judge_in_pairwise_mode_judges_a_table_of_pairs_with_g17(tmp_path):
    from promptlottery.stages import run_stage as run

    path = _write(tmp_path / "pairs.jsonl", PAIR_ROWS)
    cfg = _cfg(
        tmp_path,
        ["+experiment=own_judge", "judge.mode=pairwise", f"dataset.path={path}", "stage=judge",
         *[f"dataset.fields.{k}={v}" for k, v in PAIR_FIELDS.items()]],
    )  # fmt: skip
    run(cfg, tmp_path / "job", backend=AlwaysA())
    df = pd.read_parquet(tmp_path / "job" / "judgments.parquet")
    assert list(df["prompt_group"].unique()) == ["G17"] and len(df) == 6
    assert df.set_index(["item_id", "order"]).loc[("x2", "12"), "human_preferred"] == "2"

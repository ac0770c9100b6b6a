"""The listwise judge mode: presentations, columns and measures by hand; the known-answer judges'
numbers end to end (+experiment=tc_usr_listwise on the fake backend, then the lottery analysis)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from promptlottery.analysis.lottery.analyse import check_read
from promptlottery.analysis.lottery.sections.listwise.measures import listwise_tables, tau_b
from promptlottery.data.schema import Item
from promptlottery.errors import UserError
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.modes import get_mode
from promptlottery.modes.listwise import human_best, rotations
from promptlottery.prompts.scales import get_scale
from promptlottery.prompts.scoring import score_response
from tests.conftest import compose

LIST = Item(
    id="l1",
    dataset="toy",
    inputs={"context": "hi", "response_1": "a", "response_2": "b", "response_3": "c"},
    human={"overall": [2.0, 4.0, 4.0]},
    meta={"systems": ["s1", "s2", "s3"]},
)
SCALE = get_scale("listwise_1_3")


def test_rotations_show_each_response_first_once_and_the_key_names_the_order():
    mode = get_mode("listwise")
    ps = mode.presentations(LIST, group=None)
    assert [p.order for p in ps] == ["123", "231", "312"]
    # order 231: position 1 shows response_2, position 3 shows response_1
    assert [ps[1].item.inputs[f"response_{i}"] for i in (1, 2, 3)] == ["b", "c", "a"]
    assert [p.order for p in mode.presentations(LIST, group=None, position_swap=False)] == ["123"]
    assert mode.key_parts(ps[2], None) == {"order": "312", "assistant_prefix": None}


def test_the_oracle_shows_the_first_shown_of_the_tied_bests():
    mode = get_mode("listwise")
    assert human_best([2.0, 4.0, 4.0]) == {"2", "3"}
    # 123: response 2 at position 2; 231: response 2 at position 1; 312: response 3 at position 1
    labels = [mode.known_label(LIST, "overall", SCALE, p, None) for p in mode.presentations(LIST, group=None)]
    assert labels == ["2", "1", "1"]


def test_columns_map_the_pick_and_the_probabilities_to_response_numbers():
    from promptlottery.backends.base import JudgeResponse

    resp = JudgeResponse("3", {"1": 0.1, "2": 0.1, "3": 0.6}, 10, 1, 0.0)
    s = score_response(resp, SCALE)
    cols = get_mode("listwise").columns(LIST, "231", SCALE, s, resp.label_probs, LIST.human["overall"])
    # shown position 3 in order 231 is response 1; probabilities /0.8: position 1 (response 2) 0.125 ...
    assert cols["picked"] == "1" and cols["picked_position"] == 3
    assert json.loads(cols["p_responses"]) == pytest.approx([0.75, 0.125, 0.125])
    assert json.loads(cols["human_scores"]) == [2.0, 4.0, 4.0] and math.isnan(cols["human"])


def test_a_list_of_the_wrong_length_is_one_line():
    short = Item(
        id="x", dataset="toy", inputs={"response_1": "a", "response_2": "b"}, human={"overall": [1, 2]}
    )
    with pytest.raises(UserError, match=r"^dataset toy: .*item 'x' lists 2 responses"):
        get_mode("listwise").check_items(SCALE, group="G18", items=[short], where="dataset toy")


SYSTEMS3 = ["Original Ground Truth", "Argmax Decoding", "Nucleus Decoding (p = 0.3)"]


def _usr_file(tmp_path, edit=None):
    """A two-context USR Topical-Chat file (three systems each) in ``tmp_path``, ``edit``-ed first;
    its path (the loader reads ``<data_dir>/topical_chat_usr/tc_usr_data.json``)."""
    scores = {"Understandable": [1, 1, 1], "Natural": [3, 2, 3], "Maintains Context": [3, 3, 1],
              "Engaging": [2, 3, 3], "Uses Knowledge": [1, 0, 0], "Overall": [5, 4, 4]}  # fmt: skip
    data = [
        {
            "context": "hello there \n hi , how are you ? \n fine , and you ?",
            "fact": "a fact",
            "annotators": ["x", "y", "z"],
            "responses": [
                {"model": s, "response": f"reply {c}-{r}", **scores} for r, s in enumerate(SYSTEMS3)
            ],
        }
        for c in range(2)
    ]
    if edit is not None:
        edit(data)
    path = tmp_path / "topical_chat_usr" / "tc_usr_data.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def _lists(tmp_path, **options):
    from promptlottery.data import load_items

    return load_items("topical_chat_usr_lists", data_dir=tmp_path, **options)


def test_the_toy_usr_file_loads_as_two_lists(tmp_path):
    """The well-formed file the error tests below break one field of at a time."""
    _usr_file(tmp_path)
    items = _lists(tmp_path, turns=2)
    assert [it.id for it in items] == ["usr-tc-c0-k3", "usr-tc-c1-k3"]
    assert items[1].inputs["response_3"] == "reply 1-2" and items[0].human["overall"] == [13 / 3] * 3
    assert items[0].inputs["context"].count("\n") == 1  # the last two turns


@pytest.mark.parametrize(
    "systems",
    [SYSTEMS3[:2], [SYSTEMS3[0], SYSTEMS3[1], SYSTEMS3[0]], "Argmax Decoding", 3],
    ids=["two", "a-repeat", "a-string", "a-number"],
)
def test_usr_lists_need_three_distinct_systems(tmp_path, systems):
    path = _usr_file(tmp_path)
    with pytest.raises(UserError, match=r"must list 3 or more distinct systems of the file") as exc:
        _lists(tmp_path, systems=systems)
    assert str(exc.value).startswith(f"{path}: dataset.options.systems=") and "\n" not in str(exc.value)


def test_usr_lists_name_an_unknown_system_and_the_files_systems(tmp_path):
    path = _usr_file(tmp_path)
    with pytest.raises(UserError) as exc:
        _lists(tmp_path, systems=[*SYSTEMS3[:2], "Beam Search"])
    assert str(exc.value) == (
        f"{path}: dataset.options.systems names ['Beam Search'], which no response of the file has; "
        f"its systems: {sorted(SYSTEMS3)}"
    )


def test_usr_lists_name_the_context_that_lacks_a_system(tmp_path):
    path = _usr_file(tmp_path, lambda d: d[1]["responses"].pop(1))
    with pytest.raises(UserError) as exc:
        _lists(tmp_path)
    assert str(exc.value).startswith(f"{path}[1]: context 1 has no response of ['Argmax Decoding']")
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("turns", [0, -2, "4", True, 1.5])
def test_usr_lists_turns_must_be_a_positive_integer(tmp_path, turns):
    path = _usr_file(tmp_path)
    with pytest.raises(UserError) as exc:
        _lists(tmp_path, turns=turns)
    assert str(exc.value) == (
        f"{path}: dataset.options.turns={turns!r} must be a positive integer (the dialogue turns kept)"
    )


def test_usr_lists_name_an_unknown_subset_and_the_folder(tmp_path):
    _usr_file(tmp_path)
    with pytest.raises(UserError) as exc:
        _lists(tmp_path, subset="dc")
    assert str(exc.value) == (
        f"{tmp_path / 'topical_chat_usr'}: dataset.options.subset='dc' is not a USR subset; valid: ['pc', 'tc']"
    )


@pytest.mark.parametrize(
    "edit, where, what",
    [
        (lambda d: d[1]["responses"][2].pop("model"), "[1][responses][2]", "missing field 'model'"),
        (lambda d: d[0]["responses"][1].update(Overall=[5, 9, 4]), "[0][responses][1]", "Overall"),
        (lambda d: d[1]["responses"][0].update(Overall=[5, 4]), "[1][responses][0]", "Overall has 2 scores"),
        (lambda d: d[0].pop("annotators"), "[0]", "missing field 'annotators'"),
    ],
    ids=["no-model", "score-out-of-range", "a-score-short", "no-annotators"],
)
def test_usr_lists_name_the_file_and_row_of_a_malformed_response(tmp_path, edit, where, what):
    path = _usr_file(tmp_path, edit)
    with pytest.raises(UserError) as exc:
        _lists(tmp_path)
    assert str(exc.value).startswith(f"{path}{where}: ") and what in str(exc.value), str(exc.value)
    assert "\n" not in str(exc.value)


def test_usr_lists_name_a_missing_file(tmp_path):
    with pytest.raises(UserError, match="tc_usr_data.json") as exc:
        _lists(tmp_path)
    assert str(tmp_path / "topical_chat_usr" / "tc_usr_data.json") in str(exc.value)


def test_tau_b_by_hand():
    # x = (1, 0, 0), y = (4.7, 3.3, 2.7): pairs (1,2) and (1,3) concordant, (2,3) tied in x:
    # tau_b = (2 - 0) / sqrt((3 - 1) * (3 - 0)) = 2 / sqrt(6)
    assert tau_b([1.0, 0.0, 0.0], [4.7, 3.3, 2.7]) == pytest.approx(2 / math.sqrt(6))
    assert math.isnan(tau_b([1 / 3] * 3, [4.7, 3.3, 2.7]))


def _rows(picks: dict[tuple[str, str], str]) -> pd.DataFrame:
    """Rows of list l1 (human best: responses 2 and 3) from ``{(variant, order): picked}``."""
    return pd.DataFrame(
        [
            {
                "item_id": "l1", "variant": v, "order": o, "picked": p, "picked_position": o.index(p) + 1,
                "p_responses": json.dumps([float(p == str(i)) for i in (1, 2, 3)]),
                "human_scores": "[2.0, 4.0, 4.0]", "systems": '["s1", "s2", "s3"]',
            }
            for (v, o), p in picks.items()
        ]
    )  # fmt: skip


def test_measures_by_hand():
    # P1 always picks response 2 (consistent, a best, first shown only in 231); P2 always the first shown
    picks = {("P1", o): "2" for o in rotations(3)} | {("P2", o): o[0] for o in rotations(3)}
    t = listwise_tables({"c": _rows(picks)})
    w = t["listwise_wordings"].set_index("variant")
    assert w.loc["P1", "top1_agreement"] == 1.0 and w.loc["P1", "order_consistency"] == 1.0
    assert w.loc["P1", "first_shown_win_rate"] == pytest.approx(1 / 3)
    # P1's probabilities (0, 1, 0) against (2, 4, 4): (1,2) concordant, (1,3) discordant... no:
    # x = (0, 1, 0), y = (2, 4, 4): (1,2) C, (1,3) tie in x, (2,3) tie in y: tau_b = 1 / sqrt(2 * 2)
    assert w.loc["P1", "kendall_tau"] == pytest.approx(0.5)
    # P2 picks 1, 2, 3: two of three are a best; never the same response twice; always the first shown
    assert w.loc["P2", "top1_agreement"] == pytest.approx(2 / 3) and w.loc["P2", "order_consistency"] == 0.0
    assert w.loc["P2", "first_shown_win_rate"] == 1.0 and math.isnan(w.loc["P2", "kendall_tau"])
    lot = t["listwise_lottery"].iloc[0]
    # subjects 123, 231, 312: P1 says 2, 2, 2; P2 says 1, 2, 3: Fleiss' kappa by hand:
    # P_i = (0, 1, 0) (two raters, agreement 1 only on 231) -> P_bar = 1/3; p_j = (1/6, 4/6, 1/6):
    # P_e = (1 + 16 + 1) / 36 = 1/2; kappa = (1/3 - 1/2) / (1 - 1/2) = -1/3
    assert lot["kappa_top1"] == pytest.approx(-1 / 3)
    # win rates: P1 s2 = 1 (s1, s3 rank 2); P2 each 1/3 (all rank 1): s1 and s3 change rank, by 1
    assert lot["systems_rank_changed"] == 2 and lot["max_rank_shift"] == 1.0


def test_a_mode_no_section_reads_is_refused_in_one_line(monkeypatch):
    from promptlottery.analysis.lottery.sections import registry

    grid = JudgmentGrid(pd.DataFrame(), by_mode={"listwise": {"c": _rows({("P1", "123"): "2"})}})
    check_read(grid)  # the listwise section reads it
    monkeypatch.setattr(registry, "SECTIONS", tuple(s for s in registry.SECTIONS if s.mode != "listwise"))
    with pytest.raises(
        UserError, match=r"^1 judgments of judge.mode=listwise, which no report section reads"
    ):
        check_read(grid)


@pytest.mark.parametrize("behaviour", ["always_first", "oracle"])
def test_known_answer_judges_give_the_hand_derived_numbers_end_to_end(tmp_path, behaviour):
    from promptlottery.stages import run_stage

    variants = ("P1", "P2", "P3")
    base = ["+experiment=tc_usr_listwise", "backbone=fake", "dataset.limit=8", "stage=judge"]
    for v in variants:
        cfg = compose(
            [*base, f"judge.variant={v}", f"backbone.backend.behaviour={behaviour}"], tmp_path=tmp_path
        )
        run_stage(cfg, tmp_path / "sweep" / v)
    judged = pd.read_parquet(tmp_path / "sweep" / "P1" / "judgments.parquet")
    assert len(judged) == 8 * 3 and set(judged["order"]) == {"123", "231", "312"}
    lottery = ["+analysis=lottery", f"analysis.runs={tmp_path / 'sweep'}/*", "analysis.embeddings=none"]
    run_stage(compose(lottery, tmp_path=tmp_path), tmp_path / "lottery")
    w = pd.read_csv(tmp_path / "lottery" / "tables" / "listwise_wordings.csv", comment="#")
    lot = pd.read_csv(tmp_path / "lottery" / "tables" / "listwise_lottery.csv", comment="#").iloc[0]
    # by hand from the human scores: n_best = how many responses share the top mean score
    n_best = [len(human_best(json.loads(h))) for h in judged.groupby("item_id")["human_scores"].first()]
    share = sum(n_best) / (3 * len(n_best))  # a list's bests are shown first in n_best of its 3 rotations
    near = {"abs": 5e-5}  # the tables are written with 4 decimals
    assert len(w) == 3 and w["chance"].to_numpy() == pytest.approx([1 / 3] * 3, **near)
    if behaviour == "always_first":
        # picks response 1, 2, 3 in rotations 123, 231, 312: a best n_best times of 3, never the same twice
        assert (w["first_shown_win_rate"] == 1.0).all() and (w["order_consistency"] == 0.0).all()
        assert w["top1_agreement"].to_numpy() == pytest.approx([share] * 3, **near)
        assert (
            w["n_tau"] == 0
        ).all()  # probabilities (1/3, 1/3, 1/3) after averaging the rotations: no ranking
    else:
        # the first shown of the bests: always a best; the first shown wins where a best is first
        assert (w["top1_agreement"] == 1.0).all()
        assert w["first_shown_win_rate"].to_numpy() == pytest.approx([share] * 3, **near)
        unique = sum(n == 1 for n in n_best) / len(n_best)
        assert w["order_consistency"].to_numpy() == pytest.approx([unique] * 3, **near)
    # every wording answers alike: kappa 1 where the picks vary over the subjects (undefined where every
    # pick is one response), and no system changes rank
    kappa = 1.0 if judged["picked"].nunique() > 1 else math.nan
    assert lot["kappa_top1"] == pytest.approx(kappa, nan_ok=True, **near) and lot["systems_rank_changed"] == 0
    report = (tmp_path / "lottery" / "report.md").read_text()
    assert "## Listwise judges" in report and "**Fake judge**" in report
    # a listwise-only report leads with its own section: the pointwise sections (all n/a) are left out
    heads = [line for line in report.splitlines() if line.startswith("## ")]
    assert heads == ["## Listwise judges", "## Files"], heads
    assert (
        f"{len(judged) * len(variants)} judgments). No configuration judged in pointwise or analytic"
        in report
    )


def test_a_mode_without_a_section_is_refused_before_any_call():
    from promptlottery.modes.listwise import Listwise

    class NoSection(Listwise):
        name, sections = "nosection", ()

    with pytest.raises(UserError, match=r"^judge.mode=nosection has no report section to read its judgments"):
        NoSection().check(SCALE, group="G18", items=[LIST], where="dataset toy")
    get_mode("listwise").check(SCALE, group="G18", items=[LIST], where="dataset toy")


def test_the_budget_stage_asks_the_mode_and_names_a_missing_one():
    from promptlottery.analysis.budget.modes import mode_budget

    grid = JudgmentGrid(pd.DataFrame(), by_mode={"listwise": {"c": _rows({("P1", "123"): "2"})}})
    with pytest.raises(UserError, match=r"^\+analysis=budget of a judge.mode=listwise grid: missing"):
        mode_budget(grid, sparse=False)
    pairs = JudgmentGrid(pd.DataFrame(), by_mode={"pairwise": {"c": pd.DataFrame({"x": [1]})}})
    run = mode_budget(pairs, sparse=True)
    assert run.func.__name__ == "run_sparse_pairwise" and run.keywords["mode"] is get_mode("pairwise")
    assert mode_budget(JudgmentGrid(pd.DataFrame()), sparse=False) is None


def kendall_tau_by_scipy(judgments: pd.DataFrame) -> pd.DataFrame:
    """Each wording's mean Kendall tau-b over its lists, recomputed from judgments.parquet's rows with
    ``scipy.stats.kendalltau(variant="b")`` apart from the section's code: per list the judge's
    probability of each response averaged over the orders judged, against the human scores; the lists
    where tau is undefined (a side all tied) left out."""
    from scipy.stats import kendalltau

    rows = judgments[judgments["sample_index"] == 0] if "sample_index" in judgments else judgments
    out = []
    for variant, by_variant in rows[rows["human_scores"].notna()].groupby("variant"):
        taus = []
        for _, lst in by_variant.groupby("item_id"):
            probs = pd.DataFrame([json.loads(v) for v in lst["p_responses"]]).mean(axis=0, skipna=True)
            human = json.loads(lst["human_scores"].iloc[0])
            if probs.nunique() > 1 and len(set(human)) > 1:
                taus.append(kendalltau(probs.to_numpy(), human, variant="b").statistic)
        out.append(
            {"variant": variant, "kendall_tau": np.mean(taus) if taus else math.nan, "n_tau": len(taus)}
        )
    return pd.DataFrame(out)


def test_kendall_tau_is_scipys_tau_b_on_a_fake_grid(tmp_path):
    """The hash judge's listwise grid (probabilities that rank the responses), its lottery analysis,
    and the table's kendall_tau against scipy's tau-b recomputed from the judgments."""
    from promptlottery.stages import run_stage

    base = ["+experiment=tc_usr_listwise", "backbone=fake", "dataset.limit=6", "stage=judge"]
    for v in ("P1", "P2"):
        run_stage(compose([*base, f"judge.variant={v}"], tmp_path=tmp_path), tmp_path / "sweep" / v)
    lottery = ["+analysis=lottery", f"analysis.runs={tmp_path / 'sweep'}/*", "analysis.embeddings=none"]
    run_stage(compose(lottery, tmp_path=tmp_path), tmp_path / "lottery")
    table = pd.read_csv(tmp_path / "lottery" / "tables" / "listwise_wordings.csv", comment="#")
    judgments = pd.concat(pd.read_parquet(tmp_path / "sweep" / v / "judgments.parquet") for v in ("P1", "P2"))
    want = kendall_tau_by_scipy(judgments).set_index("variant")
    got = table.set_index("variant").loc[want.index]
    assert (want["n_tau"] > 0).all()  # the hash judge ranks the responses: tau is defined on its lists
    assert got["n_tau"].tolist() == want["n_tau"].tolist()
    assert got["kendall_tau"].to_numpy() == pytest.approx(
        want["kendall_tau"].to_numpy(), abs=5e-5
    )  # 4 decimals

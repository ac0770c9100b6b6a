"""Dataset loaders on the real data in ../shared/data: counts and label ranges as SOURCE.md states,
error messages that name the file and line/row, and every conf/dataset config composing and loading.

The expected numbers are copied from each folder's SOURCE.md (and the data README); where the
loader's count differs from a SOURCE.md number on purpose the comment says why.
"""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from promptlottery.data.registry import LOADERS, _import_all, load_items, resolve_data_dir
from promptlottery.data.schema import DatasetError, Item

REPO = Path(__file__).resolve().parents[1]
DATA = resolve_data_dir(None)
if not DATA.is_absolute():
    DATA = (REPO / DATA).resolve()
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"real data folder {DATA} is absent")


@cache
def _load(name: str, options: tuple = ()) -> tuple[Item, ...]:
    return tuple(load_items(name, data_dir=DATA, **dict(options)))


def load(name: str, **options) -> tuple[Item, ...]:
    return _load(name, tuple(sorted(options.items())))


# name, options, expected count, {criterion: (lo, hi)} (every listed criterion present on every
# item, values inside the range), human_kind, input keys every item has
CASES = [
    ("summeval", {}, 1600, dict.fromkeys(["coherence", "consistency", "fluency", "relevance"], (1, 5)),
     "mean", {"source", "response"}),
    ("topical_chat_usr", {"subset": "tc"}, 360,
     {"understandable": (0, 1), "natural": (1, 3), "maintains_context": (1, 3), "engaging": (1, 3),
      "uses_knowledge": (0, 1), "overall": (1, 5)}, "per_rater", {"context", "response", "knowledge"}),
    ("topical_chat_usr", {"subset": "pc"}, 300,
     {"understandable": (0, 1), "natural": (1, 3), "maintains_context": (1, 3), "engaging": (1, 3),
      "uses_knowledge": (0, 1), "overall": (1, 5)}, "per_rater", {"context", "response", "knowledge"}),
    # one item per context, three systems' responses; human: the three responses' mean scores
    ("topical_chat_usr_lists", {"subset": "tc"}, 60, {"overall": (1, 5), "engaging": (1, 3)}, "per_response",
     {"context", "response_1", "response_2", "response_3"}),
    ("fed", {"level": "turn"}, 375,
     {**dict.fromkeys(["interesting", "engaging", "specific", "relevant", "correct",
                       "semantically_appropriate", "fluent"], (0, 2)), "understandable": (0, 1),
      "overall": (0, 4)}, "per_rater", {"context", "response", "knowledge"}),
    ("fed", {"level": "dialogue"}, 125,
     {**dict.fromkeys(["coherent", "error_recovery", "diverse", "depth", "likeable", "understanding",
                       "flexible", "informative", "inquisitive"], (0, 2)), "consistent": (0, 1),
      "overall": (0, 4)}, "per_rater", {"context", "conversation", "response", "knowledge"}),
    ("squad_v2", {}, 6078, {"answerable": (0, 1)}, "single", {"question", "reference", "context"}),
    ("qa_eval_nq301", {}, 1490, {"correct": (0, 1)}, "per_rater", {"question", "reference", "response"}),
    # SOURCE.md: 15,434 NQ judgments
    ("evouna_qa_eval", {"subset": "NQ"}, 15434, {"correct": (0, 1)}, "single", {"question", "reference", "response"}),
    # SOURCE.md: 10,000 TQ judgments, but 15 questions carry the string "nan" for all 5 systems
    ("evouna_qa_eval", {"subset": "TQ"}, 10000 - 15 * 5, {"correct": (0, 1)}, "single",
     {"question", "reference", "response"}),
    ("begin_groundedness", {}, 4836, {"attributable": (0, 1)}, "single", {"evidence", "response", "context"}),
    ("begin_groundedness", {"subset": "wow"}, 430 + 3607, {"attributable": (0, 1)}, "single",
     {"evidence", "response", "context"}),
    ("begin_groundedness", {"subset": "wow", "split": "dev"}, 430, {"attributable": (0, 1)}, "single",
     {"evidence", "response", "context"}),
    ("begin_groundedness", {"subset": "topicalchat"}, 383, {"attributable": (0, 1)}, "single",
     {"evidence", "response", "context"}),
    ("begin_groundedness", {"subset": "cmu-dog"}, 416, {"attributable": (0, 1)}, "single",
     {"evidence", "response", "context"}),
    ("qags", {"subset": "cnndm"}, 235, {"consistent": (0, 1)}, "mean", {"source", "evidence", "response", "context"}),
    ("qags", {"subset": "xsum"}, 239, {"consistent": (0, 1)}, "mean", {"source", "evidence", "response", "context"}),
    ("stsb", {}, 1500, {"similarity": (0, 5)}, "mean", {"reference", "prediction"}),
    ("stsb", {"split": "test"}, 1379, {"similarity": (0, 5)}, "mean", {"reference", "prediction"}),
    ("newsroom", {}, 420, dict.fromkeys(["coherence", "fluency", "informativeness", "relevance"], (1, 5)),
     "mean", {"source", "response"}),
    ("newsroom", {"source": "judge_bench"}, 420,
     dict.fromkeys(["coherence", "fluency", "informativeness", "relevance"], (1, 5)), "per_rater",
     {"source", "response"}),
    ("hanna", {}, 1056,
     dict.fromkeys(["relevance", "coherence", "empathy", "surprise", "engagement", "complexity"], (1, 5)),
     "mean", {"source", "response"}),
    ("unieval_data2text", {"subset": "sfhot"}, 875,
     dict.fromkeys(["informativeness", "naturalness", "overall"], (1, 6)), "mean", {"source", "response", "reference"}),
    ("unieval_data2text", {"subset": "sfres"}, 1181,
     dict.fromkeys(["informativeness", "naturalness", "overall"], (1, 6)), "mean", {"source", "response", "reference"}),
    ("pandalm", {}, 999, {"preference": (0, 1)}, "per_rater", {"question", "response_a", "response_b"}),
    ("llmbar", {"subset": "natural"}, 100, {"preference": (0, 1)}, "single", {"question", "response_a", "response_b"}),
    ("llmbar", {"subset": "neighbor"}, 134, {"preference": (0, 1)}, "single", {"question", "response_a", "response_b"}),
    ("llmbar", {"subset": "gptinst"}, 92, {"preference": (0, 1)}, "single", {"question", "response_a", "response_b"}),
    ("llmbar", {"subset": "gptout"}, 47, {"preference": (0, 1)}, "single", {"question", "response_a", "response_b"}),
    ("llmbar", {"subset": "manual"}, 46, {"preference": (0, 1)}, "single", {"question", "response_a", "response_b"}),
    ("llmbar", {"subset": "faireval"}, 66, {"preference": (0, 1)}, "single", {"question", "response_a", "response_b"}),
    ("llmbar", {"subset": "llmeval2"}, 200, {"preference": (0, 1)}, "single", {"question", "response_a", "response_b"}),
    ("llmbar", {"subset": "mtbench"}, 200, {"preference": (0, 1)}, "single", {"question", "response_a", "response_b"}),
    # README: "about 1200 pairs" = 419 LLMBar + 466 processed + 315 case study
    ("llmbar", {"subset": "all"}, 1200, {"preference": (0, 1)}, "single", {"question", "response_a", "response_b"}),
    ("asap", {"essay_set": "all"}, 12975, {"holistic": (0, 30)}, "per_rater", {"essay", "response", "prompt", "source"}),
    ("infobench", {}, 500, {}, "none", {"question", "instruction", "input", "response", "decomposed_questions"}),
    ("infobench", {"level": "question"}, 2250, {}, "none", {"question", "response", "decomposed_question"}),
    # the five general categories (50 questions) x 31 models' first-turn answers
    ("mt_bench", {}, 1550, {}, "none", {"question", "response"}),
    # Auto-J pairwise: 1392 pairs, 373 ties (0.5); one pair with an empty response left out
    ("autoj_pairwise", {}, 1392, {"preference": (0, 1)}, "single", {"question", "response_a", "response_b"}),
    ("autoj_pairwise", {"drop_empty_pairs": True}, 1391, {"preference": (0, 1)}, "single", {"question", "response_a", "response_b"}),
    ("pandalm", {"drop_empty_pairs": True}, 945, {"preference": (0, 1)}, "per_rater", {"question", "response_a", "response_b"}),
    # 50 general questions x 30 models against gpt-3.5-turbo's answer
    ("mt_bench_pairs", {}, 1500, {}, "none", {"question", "response_a", "response_b"}),
]  # fmt: skip


@needs_data
@pytest.mark.parametrize(("name", "options", "count", "criteria", "kind", "keys"), CASES)
def test_counts_and_ranges(name, options, count, criteria, kind, keys):
    items = load(name, **options)
    assert len(items) == count
    assert len({it.id for it in items}) == count
    for it in items:
        assert it.dataset == name
        assert it.human_kind == kind
        assert keys <= set(it.inputs), (it.id, sorted(it.inputs))
        assert all(isinstance(v, str) for v in it.inputs.values()), it.id
        for crit, (lo, hi) in criteria.items():
            value = it.human[crit]
            listed = kind in ("per_rater", "per_response")
            values = value if listed else [value]
            assert isinstance(value, list) == listed, (it.id, crit)
            assert all(v is None or lo <= v <= hi for v in values), (it.id, crit, value)
        if kind == "none":
            assert it.human == {}


@needs_data
def test_every_registered_loader_is_covered():
    _import_all()
    # `table` reads the user's own file: tested on files written in tests/test_own_judge.py
    assert {c[0] for c in CASES} == set(LOADERS) - {"table"}


# --- facts from SOURCE.md beyond the counts -------------------------------------------------------


@needs_data
def test_summeval_100_articles_by_16_systems():
    items = load("summeval")
    assert len({it.meta["article_id"] for it in items}) == 100
    assert len({it.system for it in items}) == 16


@needs_data
@pytest.mark.parametrize(("subset", "systems"), [("tc", 6), ("pc", 5)])
def test_usr_three_annotators_and_systems(subset, systems):
    items = load("topical_chat_usr", subset=subset)
    assert len({it.system for it in items}) == systems
    assert all(len(v) == 3 for it in items for v in it.human.values())
    assert all(it.inputs["context"].splitlines()[-1].startswith("Speaker A: ") for it in items)


@needs_data
def test_usr_tc_means_equal_unieval_means():
    """The per-annotator file and UniEval's mean file describe the same 360 responses."""
    unieval = json.loads((DATA / "topical_chat_usr" / "topical_chat_unieval.json").read_text())
    names = {"understandability": "understandable", "naturalness": "natural", "coherence": "maintains_context",
             "engagingness": "engaging", "groundedness": "uses_knowledge", "overall": "overall"}  # fmt: skip
    items = load("topical_chat_usr", subset="tc")
    for it, u in zip(items, unieval, strict=True):
        assert it.inputs["response"] == u["system_output"].strip()
        for theirs, ours in names.items():
            assert it.human_score(ours) == pytest.approx(u["scores"][theirs], abs=1e-3)


@needs_data
def test_fed_five_raters_na_as_none():
    items = load("fed", level="turn") + load("fed", level="dialogue")
    assert all(len(v) == 5 for it in items for v in it.human.values())
    assert {it.system for it in items} == {"Meena", "Mitsuku", "Human"}
    with_na = [it for it in items if it.meta["na_answers"]]
    assert with_na and all(None in it.human[c] for it in with_na for c in it.meta["na_answers"])
    assert not any(it.inputs["response"].startswith("System:") for it in items)


@needs_data
def test_squad_answerable_split():
    items = load("squad_v2")
    assert sum(it.human["answerable"] for it in items) == 2910
    unanswerable = [it for it in items if not it.human["answerable"]]
    assert len(unanswerable) == 3168
    assert all(it.inputs["reference"] == "unanswerable" for it in unanswerable)


@needs_data
def test_nq301_questions_and_majority():
    items = load("qa_eval_nq301")
    assert len({it.meta["question_id"] for it in items}) == 301
    for it in items:
        assert len(it.human["correct"]) in (2, 3)
        assert it.meta["acceptable"] == float(it.human_score("correct") > 0.5)
    named = {it.system for it in items} - {None}
    assert len(named) == 12  # the 12 systems of SOURCE.md


@needs_data
def test_evouna_five_systems():
    assert {it.system for it in load("evouna_qa_eval", subset="NQ")} == {
        "fid",
        "gpt35",
        "chatgpt",
        "gpt4",
        "newbing",
    }


@needs_data
def test_begin_three_way_label_in_meta():
    items = load("begin_groundedness")
    for it in items:
        assert it.human["attributable"] == float(it.meta["begin_label"] == "Fully attributable")
    assert {it.meta["begin_label"] for it in items} == {
        "Fully attributable",
        "Not fully attributable",
        "Generic",
    }


@needs_data
@pytest.mark.parametrize(("subset", "sentences"), [("cnndm", 714), ("xsum", 239)])
def test_qags_sentences_and_unieval_aggregate(subset, sentences):
    items = load("qags", subset=subset)
    assert sum(len(it.meta["sentences"]) for it in items) == sentences
    assert all(len(v) == 3 for it in items for v in it.meta["sentences"])
    unieval = json.loads((DATA / "qags" / f"qags_{subset}_unieval.json").read_text())
    for it, u in zip(items, unieval, strict=True):
        assert it.human["consistent"] == pytest.approx(u["scores"]["consistency"])


@needs_data
def test_newsroom_and_hanna_grids():
    news = load("newsroom")
    assert len({it.meta["article_id"] for it in news}) == 60 and len({it.system for it in news}) == 7
    assert all(len(v) == 3 for it in load("newsroom", source="judge_bench") for v in it.human.values())
    hanna = load("hanna")
    assert len({it.meta["prompt_id"] for it in hanna}) == 96 and len({it.system for it in hanna}) == 11


@needs_data
def test_pandalm_unanimous_and_coding():
    items = load("pandalm")
    assert sum(it.meta["unanimous"] for it in items) == 879
    code = {0: 0.5, 1: 1.0, 2: 0.0}
    assert all(it.human["preference"] == [code[v] for v in it.meta["labels"]] for it in items)
    assert "response" not in items[0].inputs


@needs_data
def test_asap_traits_and_scales():
    # ASAP++ rows per SOURCE.md: 1783/1800/1726/1772/1805/1800; 4365 (set 2) has none, 4355 (set 2)
    # has two conflicting rows, and three set-4 rows name essays not in the set-4 file
    with_traits = {1: 1783, 2: 1798, 3: 1726, 4: 1769, 5: 1805, 6: 1800}
    for s, n in with_traits.items():
        items = load("asap", essay_set=s)
        assert sum("content" in it.human for it in items) == n
        assert all(len(it.human["holistic"]) == 2 for it in items)
    traits_78 = {7: ("ideas", "organization", "style", "conventions"),
                 8: ("ideas_and_content", "organization", "voice", "word_choice", "sentence_fluency", "conventions")}  # fmt: skip
    for s, names in traits_78.items():
        items = load("asap", essay_set=s)
        assert all(set(names) <= set(it.human) for it in items)
    set8 = load("asap", essay_set=8)
    assert sum(it.meta["rater3_domain1"] is not None for it in set8) == 128
    assert load("asap", essay_set=4)[0].inputs["source"].startswith("Winter Hibiscus")
    assert load("asap", essay_set=1)[0].inputs["source"] == ""
    assert all(it.inputs["prompt"] for s in range(1, 9) for it in load("asap", essay_set=s)[:1])


@needs_data
def test_infobench_labels_are_not_human():
    items = load("infobench")
    assert sum(it.meta["subset"] == "Easy_set" for it in items) == 252
    assert all(it.human == {} and it.human_kind == "none" and it.system == "gpt-4" for it in items)
    assert all(len(it.meta["gpt4_answers"]) == len(it.meta["decomposed_questions"]) for it in items)


@needs_data
def test_ids_stable_and_sample_seeded():
    a = load_items("hanna", data_dir=DATA, limit=20, seed=3)
    b = load_items("hanna", data_dir=DATA, limit=20, seed=3)
    assert [it.id for it in a] == [it.id for it in b]


# --- squad_v2 predictions ----------------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_squad_predictions_join(tmp_path, fmt):
    base = load("squad_v2")[:2]
    rows = [
        {"item_id": base[0].id, "system": "m1", "response": "France"},
        {"item_id": base[0].meta["question_id"], "system": "m2", "response": "Italy"},
        {"item_id": base[1].id, "system": "m1", "response": None},
    ]
    path = tmp_path / f"pred.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pd.DataFrame(rows).to_parquet(path)
    items = load_items("squad_v2", data_dir=DATA, predictions=str(path))
    assert [it.id for it in items] == [f"{base[0].id}::m1", f"{base[0].id}::m2", f"{base[1].id}::m1"]
    assert [it.system for it in items] == ["m1", "m2", "m1"]
    assert [it.inputs["response"] for it in items] == ["France", "Italy", ""]
    assert items[0].inputs["reference"] == base[0].inputs["reference"]
    assert items[0].human == base[0].human


@needs_data
def test_squad_predictions_unknown_item(tmp_path):
    path = tmp_path / "pred.jsonl"
    path.write_text(json.dumps({"item_id": "nope", "system": "m", "response": "x"}) + "\n")
    with pytest.raises(DatasetError, match=r"pred\.jsonl:1: item_id 'nope'"):
        load_items("squad_v2", data_dir=DATA, predictions=str(path))


# --- malformed files: the error names the file and the line / row ----------------------------------


def _copy(rel: str, tmp: Path) -> Path:
    dst = tmp / rel
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DATA / rel, dst)
    dst.chmod(0o644)
    return dst


def _edit_line(path: Path, lineno: int, fn) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[lineno - 1] = fn(lines[lineno - 1])
    path.write_text("\n".join(lines), encoding="utf-8")


def _edit_json(path: Path, fn) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    fn(data)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")


def _raises(name: str, tmp: Path, *parts: str, **options) -> str:
    with pytest.raises(DatasetError) as err:
        load_items(name, data_dir=tmp, **options)
    msg = str(err.value)
    for part in parts:
        assert part in msg, msg
    return msg


@needs_data
def test_jsonl_bad_json_names_line(tmp_path):
    path = _copy("summeval/summeval_ppairs.jsonl", tmp_path)
    _edit_line(path, 7, lambda s: s[:-5])
    _raises("summeval", tmp_path, f"{path}:7", "bad JSON")


@needs_data
def test_jsonl_missing_field_and_bad_label_name_line(tmp_path):
    path = _copy("hanna/hanna_ppairs.jsonl", tmp_path)
    _edit_line(path, 12, lambda s: json.dumps({k: v for k, v in json.loads(s).items() if k != "story"}))
    _raises("hanna", tmp_path, f"{path}:12", "missing field 'story'")
    path = _copy("hanna/hanna_ppairs.jsonl", tmp_path)
    _edit_line(path, 30, lambda s: json.dumps({**json.loads(s), "empathy": 7}))
    _raises("hanna", tmp_path, f"{path}:30", "empathy 7 outside 1-5")
    path = _copy("qags/mturk_xsum.jsonl", tmp_path)
    _edit_line(path, 3, lambda s: s.replace('"response": "yes"', '"response": "maybe"', 1).replace(
        '"response": "no"', '"response": "maybe"', 1))  # fmt: skip
    _raises("qags", tmp_path, f"{path}:3", "'maybe'", subset="xsum")


@needs_data
def test_tsv_bad_label_and_short_row_name_line(tmp_path):
    path = _copy("begin_groundedness/cmu-dog/begin_dev_cmu.tsv", tmp_path)
    _edit_line(path, 9, lambda s: s.rsplit("\t", 1)[0] + "\tPartly attributable")
    _raises("begin_groundedness", tmp_path, f"{path}:9", "Partly attributable", subset="cmu-dog")
    path = _copy("qa_eval_nq301/NQ301_human.tsv", tmp_path)
    _copy("qa_eval_nq301/model_outputs/NQ301_R2D2.jsonl", tmp_path)
    _edit_line(path, 40, lambda s: s.split("\t", 3)[0])
    _raises("qa_eval_nq301", tmp_path, f"{path}:40", "tab-separated columns")
    path = _copy("qa_eval_nq301/NQ301_human.tsv", tmp_path)
    _edit_line(path, 41, lambda s: "\t".join([*s.split("\t")[:4], "Maybe", *s.split("\t")[5:]]))
    _raises("qa_eval_nq301", tmp_path, f"{path}:41", "annotator1 is 'Maybe'")


@needs_data
def test_json_list_bad_label_names_index(tmp_path):
    path = _copy("fed/fed_data.json", tmp_path)
    _edit_json(path, lambda d: d[3]["annotations"]["Overall"].__setitem__(2, "high"))  # a dialogue
    _raises("fed", tmp_path, f"{path}[3]", "'high' is not a number", level="dialogue")
    path = _copy("fed/fed_data.json", tmp_path)
    _edit_json(path, lambda d: d[5]["annotations"]["Overall"].__setitem__(0, 9))
    _raises("fed", tmp_path, f"{path}[5]", "Overall 9 outside 0-4")
    path = _copy("pandalm/testset-v1.json", tmp_path)
    _edit_json(path, lambda d: d[17].pop("response2"))
    _raises("pandalm", tmp_path, f"{path}[17]", "missing field 'response2'")
    path = _copy("llmbar/LLMBar/Natural/dataset.json", tmp_path)
    _edit_json(path, lambda d: d[4].__setitem__("label", 3))
    _raises("llmbar", tmp_path, f"{path}[4]", "label is 3", subset="natural")
    path = _copy("evouna_qa_eval/TQ.json", tmp_path)
    _edit_json(path, lambda d: d[8].__setitem__("judge_gpt4", "yes"))
    _raises("evouna_qa_eval", tmp_path, f"{path}[8]", "judge_gpt4", subset="TQ")


@needs_data
def test_json_syntax_error_names_line(tmp_path):
    path = _copy("unieval_data2text/sfres.json", tmp_path)
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    line = next(k for k, s in enumerate(lines, start=1) if '"doc_id": 5,' in s)
    lines[line - 1] = lines[line - 1].replace('"doc_id": 5,', '"doc_id": 5,,')
    path.write_text("\n".join(lines), encoding="utf-8")
    _raises("unieval_data2text", tmp_path, f"{path}:{line}", "bad JSON", subset="sfres")


@needs_data
def test_csv_bad_value_names_row(tmp_path):
    """ASAP: the quoted TSV of essays (csv module) and the ASAP++ CSV name row and line."""
    essays = _copy("asap/asap_original_by_prompt/essay_set_3.tsv", tmp_path)
    traits = _copy("asap/rubrics/asapplusplus_trait_scores/Prompt-3.csv", tmp_path)
    _edit_line(traits, 6, lambda s: s.rsplit(",", 1)[0] + ",9")  # row 5 (line 6): Narrativity 9
    _raises("asap", tmp_path, f"{traits} row 5 (line 6)", "Narrativity 9 outside 0-3", essay_set=3)
    traits = _copy("asap/rubrics/asapplusplus_trait_scores/Prompt-3.csv", tmp_path)
    rows = essays.read_text(encoding="utf-8").split("\n")
    i = next(k for k, s in enumerate(rows) if s.startswith("5990\t"))  # an essay row on one line
    cols = rows[i].split("\t")
    cols[3] = "x"  # rater1_domain1
    rows[i] = "\t".join(cols)
    essays.write_text("\n".join(rows), encoding="utf-8")
    msg = _raises(
        "asap", tmp_path, str(essays), f"(line {i + 1})", "rater1_domain1 'x' is not a number", essay_set=3
    )
    assert " row " in msg


@needs_data
def test_missing_file_names_path(tmp_path):
    for name, options, rel in [
        ("hanna", {}, "hanna/hanna_ppairs.jsonl"),
        ("fed", {}, "fed/fed_data.json"),
        ("begin_groundedness", {"subset": "topicalchat"}, "begin_groundedness/topicalchat/begin_dev_tc.tsv"),
        ("asap", {"essay_set": 7}, "asap/asap_original_by_prompt/essay_set_7.tsv"),
    ]:
        _raises(name, tmp_path, "file not found", str(tmp_path / rel), **options)


def test_unknown_subset_is_an_error(tmp_path):
    for name, options in [
        ("topical_chat_usr", {"subset": "xx"}),
        ("evouna_qa_eval", {"subset": "nq"}),
        ("qags", {"subset": "cnn"}),
        ("llmbar", {"subset": "x"}),
        ("asap", {"essay_set": 9}),
        ("fed", {"level": "x"}),
    ]:
        with pytest.raises(DatasetError, match="unknown"):
            load_items(name, data_dir=tmp_path, **options)


# --- every dataset config composes and loads `limit` items --------------------------------------------

CONFIGS = sorted(p.stem for p in (REPO / "conf" / "dataset").glob("*.yaml") if p.stem != "table")


@needs_data
@pytest.mark.parametrize("config", CONFIGS)
def test_dataset_config_composes_and_loads(config):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from promptlottery.stages import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"dataset={config}", "logger=none", "backbone=fake"])
    ds = cfg.dataset
    # ``id``: the configuration's own name where several dataset configs share one loader (issue 45)
    assert set(ds) - {"id"} == {
        "name",
        "limit",
        "seed",
        "sample_by",
        "human_range",
        "options",
        "path",
        "fields",
    }
    lo, hi = ds.human_range
    assert lo < hi
    items = load_items(
        ds.name, data_dir=DATA, limit=ds.limit, seed=ds.seed, sample_by=ds.sample_by, **ds.options
    )
    if ds.sample_by == "group":  # `limit` groups, each with every system's response
        assert (
            len({it.meta["group"] for it in items}) == ds.limit and len(items) >= ds.limit
        )  # SQuAD v2: one base item a question
    else:
        assert len(items) == ds.limit
    main = MAIN_CRITERION[ds.name]
    if main is not None:
        values = [v for it in items for v in _as_list(it.human[main]) if v is not None]
        assert values and all(lo <= v <= hi for v in values), (config, main)


#: the criterion whose range a config's human_range gives
MAIN_CRITERION = {
    "summeval": "coherence", "topical_chat_usr": "overall", "topical_chat_usr_lists": "overall", "fed": "overall", "squad_v2": "answerable",
    "qa_eval_nq301": "correct", "evouna_qa_eval": "correct", "begin_groundedness": "attributable",
    "qags": "consistent", "stsb": "similarity", "newsroom": "coherence", "hanna": "coherence",
    "unieval_data2text": "overall", "pandalm": "preference", "llmbar": "preference", "asap": "holistic",
    "infobench": None, "mt_bench": None, "autoj_pairwise": "preference", "mt_bench_pairs": None,
}  # fmt: skip


def _as_list(value):
    return value if isinstance(value, list) else [value]

"""Every pairwise, QA and instruction loader against its raw file, read here with json/csv only.

For each row of the file the test rebuilds the item from the file's own fields and SOURCE.md's
words (ids, texts, system names, labels) and ``raw_files.check`` compares it with the loaded item
field by field, on every row. The ratings loaders are in ``test_loaders_raw_ratings.py``.
"""

from __future__ import annotations

import csv
import unicodedata
from collections import Counter

import pytest

from promptlottery.data.loaders.llmbar import GROUPS, SUBSETS
from promptlottery.data.registry import LOADERS, _import_all, load_items
from tests.conftest import DATA_DIR, REPO
from tests.raw_files import check, expect, folder, read_json, read_jsonl

# --- PandaLM ---------------------------------------------------------------------------------------
#: the PandaLM README: "1" or "2" means response 1 or 2 is better and "0" means they are similar;
#: coded as the preference for response_a (= response 1)
PANDALM_PREFERENCE = {1: 1.0, 2: 0.0, 0: 0.5}


def _text(value) -> str:
    """Six responses are the JSON literal true (the answer "True")."""
    return "True" if value is True else value


def _joined(instruction: str, inp: str | None) -> str:
    """The instruction, then the input after a blank line when there is one."""
    inp = (inp or "").strip()
    return instruction.strip() + (f"\n\n{inp}" if inp else "")


def _pandalm_expected() -> list[dict]:
    rows = read_json(folder("pandalm") / "testset-v1.json")
    out = []
    for row in rows:
        labels = [row["annotator1"], row["annotator2"], row["annotator3"]]
        first, second = row["cmp_key"].split("_")
        out.append(
            expect(
                f"pandalm-{row['idx']}",
                None,
                {
                    "question": _joined(row["instruction"], row["input"]),
                    "response_a": _text(row["response1"]),
                    "response_b": _text(row["response2"]),
                },
                {"preference": [PANDALM_PREFERENCE[v] for v in labels]},
                labels=labels,
                cmp_key=row["cmp_key"],
                system_1=first,
                system_2=second,
            )
        )
    return out


def test_pandalm_every_row_equals_the_raw_file():
    expected = _pandalm_expected()
    assert len(expected) == 999
    check("pandalm", expected)


def test_pandalm_readme_example_by_hand():
    """The PandaLM README's test-data example (its index 749 is idx 293 here): ``"cmp_key":
    "opt-7b_pythia-6.9b", ## It means response 1 is from opt-7B and response 2 is from pythia-6.9B``,
    response1 "Politics", response2 "Arts & Culture", all three labels "2" (response 2 better)."""
    folder("pandalm")
    it = next(i for i in load_items("pandalm", data_dir=DATA_DIR) if i.id == "pandalm-293")
    assert it.inputs["response_a"] == "Politics"
    assert it.inputs["response_b"] == "Arts & Culture"
    assert it.inputs["question"].endswith(
        "Politics, Tech, and Science & Health.\n\nThe #Banksy Exhibit in Cambridge, MA is absolutely terrific."
    )
    assert (it.meta["system_1"], it.meta["system_2"]) == ("opt-7b", "pythia-6.9b")
    assert it.human["preference"] == [0.0, 0.0, 0.0]


def test_pandalm_drop_empty_pairs_drops_every_empty_answer():
    """An empty response1 or response2 is an empty pair: 29 + 25 = 54 of 999 dropped, 945 kept."""
    expected = _pandalm_expected()
    empty_1 = [e for e in expected if not e["inputs"]["response_a"].strip()]
    empty_2 = [e for e in expected if not e["inputs"]["response_b"].strip()]
    assert (len(empty_1), len(empty_2)) == (29, 25)
    kept = [e for e in expected if e not in empty_1 and e not in empty_2]
    assert len(kept) == 945
    check("pandalm", kept, drop_empty_pairs=True)


# --- LLMBar, Auto-J ------------------------------------------------------------------------------
def test_llmbar_every_file_every_row():
    root = folder("llmbar")
    files = {p.parent.relative_to(root).as_posix() for p in root.rglob("dataset.json")}
    assert files == {rel for rel, _, _ in SUBSETS.values()}  # every file is a subset, and back
    expected = []
    for sub in GROUPS["all"]:
        rows = read_json(root / SUBSETS[sub][0] / "dataset.json")
        for i, row in enumerate(rows):
            # SOURCE.md: label 1 or 2 = the better output
            pref = {1: 1.0, 2: 0.0}[row["label"]]
            inputs = {
                "question": row["input"].strip(),
                "response_a": row["output_1"],
                "response_b": row["output_2"],
            }
            expected.append(expect(f"llmbar-{sub}-{i}", None, inputs, {"preference": pref}, subset=sub))
    assert len(expected) == 1200
    check("llmbar", expected, subset="all")
    kept = [e for e in expected if e["inputs"]["response_a"].strip() and e["inputs"]["response_b"].strip()]
    assert [e["id"] for e in expected if e not in kept] == ["llmbar-llmeval2-169"]
    check("llmbar", kept, subset="all", drop_empty_pairs=True)


def test_autoj_every_row():
    expected = []
    for lineno, row in read_jsonl(folder("autoj_pairwise") / "testdata_pairwise.jsonl"):
        # SOURCE.md: 0 = response 1 better, 1 = response 2 better, 2 = tie
        pref = {0: 1.0, 1: 0.0, 2: 0.5}[row["label"]]
        inputs = {
            "question": row["prompt"].strip(),
            "response_a": row["response 1"],
            "response_b": row["response 2"],
        }
        expected.append(
            expect(
                f"autoj-{lineno - 1}",
                None,
                inputs,
                {"preference": pref},
                scenario=row["scenario"],
                label=row["label"],
            )
        )
    assert len(expected) == 1392
    check("autoj_pairwise", expected)
    kept = [e for e in expected if e["inputs"]["response_a"].strip() and e["inputs"]["response_b"].strip()]
    assert len(kept) == 1391
    check("autoj_pairwise", kept, drop_empty_pairs=True)


# --- MT-Bench --------------------------------------------------------------------------------------
#: the five categories FastChat grades without a reference answer
GENERAL = ("writing", "roleplay", "extraction", "stem", "humanities")
ALL_CATEGORIES = GENERAL + ("reasoning", "math", "coding")


def _mt_bench_expected(categories) -> list[dict]:
    root = folder("mt_bench")
    first_turn = {
        q["question_id"]: q["turns"][0]
        for _, q in read_jsonl(root / "question.jsonl")
        if q["category"] in categories
    }
    out = []
    for path in sorted((root / "model_answer").glob("*.jsonl")):
        for _, row in read_jsonl(path):
            qid = row["question_id"]
            if qid in first_turn:
                inputs = {"question": first_turn[qid], "response": row["choices"][0]["turns"][0]}
                out.append(
                    expect(
                        f"mt_bench-{qid}-{path.stem}", path.stem, inputs, {}, question_id=qid, group=str(qid)
                    )
                )
    return sorted(out, key=lambda e: (e["meta"]["question_id"], e["system"]))


@pytest.mark.parametrize("categories", [GENERAL, ALL_CATEGORIES], ids=["general", "all"])
def test_mt_bench_every_answer(categories):
    expected = _mt_bench_expected(categories)
    assert len(expected) == (1550 if categories == GENERAL else 80 * 31)
    check("mt_bench", expected, categories=list(categories))


def test_mt_bench_pairs_every_model_against_the_baseline():
    answers = _mt_bench_expected(GENERAL)
    base = {
        e["meta"]["question_id"]: e["inputs"]["response"] for e in answers if e["system"] == "gpt-3.5-turbo"
    }
    expected = []
    for e in answers:
        qid, model = e["meta"]["question_id"], e["system"]
        if model != "gpt-3.5-turbo":
            inputs = {
                "question": e["inputs"]["question"],
                "response_a": e["inputs"]["response"],
                "response_b": base[qid],
            }
            expected.append(
                expect(
                    f"mt_bench_pairs-{qid}-{model}-vs-gpt-3.5-turbo",
                    None,
                    inputs,
                    {},
                    system_1=model,
                    system_2="gpt-3.5-turbo",
                )
            )
    assert len(expected) == 1500
    check("mt_bench_pairs", expected)


# --- QA --------------------------------------------------------------------------------------------
def test_squad_v2_every_question():
    data = read_json(folder("squad_v2") / "dev-v2.0_cs224n_split.json")
    expected = []
    for article in data["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                answers = [a["text"] for a in qa["answers"]]
                distinct = list(dict.fromkeys(a.strip() for a in answers if a.strip()))
                inputs = {
                    "question": qa["question"],
                    "context": para["context"],
                    "reference": " | ".join(distinct) if distinct else "unanswerable",
                }
                plausible = [a["text"] for a in qa.get("plausible_answers", [])]
                human = {"answerable": 0.0 if qa["is_impossible"] else 1.0}
                expected.append(
                    expect(f"squad_v2-{qa['id']}", None, inputs, human, answers=answers, title=article["title"],
                           plausible_answers=plausible)
                )  # fmt: skip
    assert len(expected) == 6078
    assert sum(e["human"]["answerable"] for e in expected) == 2910
    check("squad_v2", expected)


def _fold(s: str) -> str:
    """NFKC, lower case, whitespace runs to one space (the loader docstring's answer match)."""
    return " ".join(unicodedata.normalize("NFKC", s).lower().split())


def test_nq301_every_judged_answer():
    root = folder("qa_eval_nq301")
    golds: dict[str, Counter] = {}  # question -> how many files give each gold list
    predicted: dict[str, dict[str, set[str]]] = {}  # question -> system -> folded predictions
    for path in sorted((root / "model_outputs").glob("*.jsonl")):
        system = path.stem.split("_", 1)[1]  # NQ301_<system> / NQ_<system>
        for _, row in read_jsonl(path):
            golds.setdefault(row["question"], Counter())[tuple(row["answer"])] += 1
            preds = [row["prediction"]] if isinstance(row["prediction"], str) else row["prediction"]
            predicted.setdefault(row["question"], {}).setdefault(system, set()).update(
                _fold(str(p)) for p in preds
            )
    # 16 of the 17 files give the same gold list; NQ_EviGen adds re-decoded copies of 7 questions'
    # mojibake answers ("54Â\xa0Mbit/s" and "54\xa0Mbit/s"): the reference is the list most files give
    gold = {q: list(c.most_common(1)[0][0]) for q, c in golds.items()}
    expected = []
    with open(root / "NQ301_human.tsv", encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader)
        for row in reader:
            r = dict(zip(header, row, strict=True))
            votes = [
                {"Yes": 1.0, "No": 0.0}[r[c]] for c in ("annotator1", "annotator2", "annotator3") if r[c]
            ]
            q, answer = r["Question"], r["Model answer"]
            systems = sorted(s for s, p in predicted[q].items() if _fold(answer) in p)
            inputs = {"question": q, "reference": " | ".join(gold[q]), "response": answer}
            expected.append(
                expect(f"nq301-{r['id']}-{reader.line_num}", systems[0] if len(systems) == 1 else None, inputs,
                       {"correct": votes}, systems=systems, acceptable={"Yes": 1.0, "No": 0.0}[r["Acceptable?"]])
            )  # fmt: skip
    assert len(expected) == 1490
    check("qa_eval_nq301", expected)


@pytest.mark.parametrize(("subset", "count"), [("NQ", 15434), ("TQ", 9925)])
def test_evouna_every_judgment(subset, count):
    rows = read_json(folder("evouna_qa_eval") / f"{subset}.json")
    expected = []
    for i, row in enumerate(rows):
        for system in ("fid", "gpt35", "chatgpt", "gpt4", "newbing"):
            judge = row[f"judge_{system}"]
            if judge is None or judge == "nan":  # not judged
                continue
            inputs = {
                "question": row["question"],
                "reference": " | ".join(a.strip() for a in row["golden_answer"].split("/") if a.strip()),
                "response": (row[f"answer_{system}"] or "").strip(),
            }
            expected.append(
                expect(f"evouna-{subset}-{i}-{system}", system, inputs, {"correct": float(judge is True)},
                       improper=row["improper"])
            )  # fmt: skip
    assert len(expected) == count
    check("evouna_qa_eval", expected, subset=subset)


# --- InFoBench -------------------------------------------------------------------------------------
@pytest.mark.parametrize("level", ["instruction", "question"])
def test_infobench_every_instruction_and_question(level):
    root = folder("infobench")
    gpt4 = {
        row["id"]: row
        for _, row in read_jsonl(root / "NOT_HUMAN_gpt4_outputs_with_gpt4_decomposed_eval.jsonl")
    }
    expected = []
    for _, row in read_jsonl(root / "infobench_instructions_500.jsonl"):
        qs = row["decomposed_questions"]
        inputs = {
            "question": _joined(row["instruction"], row["input"]),
            "instruction": row["instruction"],
            "input": row["input"] or "",
            "response": gpt4[row["id"]]["output"],
            "decomposed_questions": "\n".join(f"{k + 1}. {q}" for k, q in enumerate(qs)),
        }
        meta = {"category": row["category"], "subset": row["subset"], "gpt4_answers": gpt4[row["id"]]["eval"]}
        if level == "instruction":
            expected.append(expect(row["id"], "gpt-4", inputs, {}, **meta))
            continue
        for k, q in enumerate(qs):
            expected.append(
                expect(f"{row['id']}::q{k}", "gpt-4", {**inputs, "decomposed_question": q}, {},
                       question_label=row["question_label"][k], gpt4_answer=gpt4[row["id"]]["eval"][k], **meta)
            )  # fmt: skip
    assert len(expected) == (500 if level == "instruction" else 2250)
    check("infobench", expected, level=level)


# --- table: the shipped example tables, with the field maps README.md and docs/pairwise.md give -----
ANSWERS_FIELDS = {
    "context": "question",
    "reference": "gold",
    "response": "answer",
    "system": "system",
    "human": "rating",
}
PAIRS_FIELDS = {"question": "question", "response_a": "answer_a", "response_b": "answer_b", "human": "pref"}


def _answers_expected(rows) -> list[dict]:
    inputs = [{"response": r["answer"], "context": r["question"], "reference": r["gold"]} for r in rows]
    return [
        expect(str(n), r["system"], x, {"human": float(r["rating"])})
        for n, (r, x) in enumerate(zip(rows, inputs, strict=True), 1)
    ]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_table_example_answers_every_row(tmp_path, fmt):
    path = REPO / "examples" / "own_judge" / "qa_answers.jsonl"
    rows = [row for _, row in read_jsonl(path)]
    if fmt == "csv":  # the same table as a CSV file: every cell a string
        path = tmp_path / "qa_answers.csv"
        with open(path, "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    check("table", _answers_expected(rows), path=str(path), fields=ANSWERS_FIELDS, human_range=[1, 5])


def test_table_example_pairs_every_row():
    path = REPO / "examples" / "own_judge" / "qa_pairs.jsonl"
    # docs/pairwise.md: pref 1 = answer_a is better, 2 = answer_b, tie
    coded = {"1": 1.0, "2": 0.0, "tie": 0.5}
    expected = [
        expect(str(n), None, {"question": r["question"], "response_a": r["answer_a"], "response_b": r["answer_b"]},
               {"human": coded[str(r["pref"])]})
        for n, (_, r) in enumerate(read_jsonl(path), start=1)
    ]  # fmt: skip
    assert len(expected) == 24
    check("table", expected, path=str(path), fields=PAIRS_FIELDS)


def test_every_loader_has_a_raw_file_test():
    """A new loader needs its test here or in test_loaders_raw_ratings.py (then add its name)."""
    _import_all()
    here = {"pandalm", "llmbar", "autoj_pairwise", "mt_bench", "mt_bench_pairs", "squad_v2", "qa_eval_nq301",
            "evouna_qa_eval", "infobench", "table"}  # fmt: skip
    ratings = {"summeval", "hanna", "newsroom", "stsb", "unieval_data2text", "topical_chat_usr", "fed", "qags",
               "begin_groundedness", "asap", "topical_chat_usr_lists"}  # fmt: skip
    assert here | ratings == set(LOADERS)

"""Every ratings loader (summaries, stories, dialogue, data-to-text, similarity, groundedness, essays)
against its raw file, read here with json/csv/pandas only; every row, as in ``test_loaders_raw.py``.

Where the loader aggregates (QAGS: majority per sentence, then the share of sentences), the test
recomputes it from the words of the loader's docstring and SOURCE.md, not from the loader's code.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from promptlottery.data.registry import load_items
from tests.conftest import DATA_DIR
from tests.raw_files import check, expect, folder, read_json, read_jsonl


# --- PPairS means: SummEval, HANNA, Newsroom -------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "file", "group", "unit", "source", "response", "criteria", "count"),
    [
        ("summeval", "summeval_ppairs.jsonl", "article_id", "summary_id", "article", "summary",
         ("coherence", "consistency", "fluency", "relevance"), 1600),
        ("hanna", "hanna_ppairs.jsonl", "prompt_id", "story_id", "prompt", "story",
         ("relevance", "coherence", "empathy", "surprise", "engagement", "complexity"), 1056),
        ("newsroom", "newsroom_ppairs.jsonl", "article_id", "summary_id", "article", "summary",
         ("coherence", "fluency", "informativeness", "relevance"), 420),
    ],
)  # fmt: skip
def test_ppairs_means_every_row(name, file, group, unit, source, response, criteria, count):
    expected = [
        expect(f"{name}-{row[group]}-{row[unit]}", row[unit], {"source": row[source], "response": row[response]},
               {c: row[c] for c in criteria}, group=row[group], line=lineno)
        for lineno, row in read_jsonl(folder(name) / file)
    ]  # fmt: skip
    assert len(expected) == count
    check(name, expected)


def test_newsroom_judge_bench_per_rater_every_instance():
    data = read_json(folder("judge_bench_dmg_illc") / "newsroom" / "newsroom.json")
    expected = []
    for i, inst in enumerate(data["instances"]):
        head, article = inst["instance"].split("\n\n### Source Article\n\n")
        assert head.startswith("### Generated Summary\n\n")
        summary = head.removeprefix("### Generated Summary\n\n").strip()
        human = {
            c: inst["annotations"][c.capitalize()]["individual_human_scores"]
            for c in ("coherence", "fluency", "informativeness", "relevance")
        }
        expected.append(
            expect(
                f"newsroom-jb-{inst['id']}", None, {"source": article, "response": summary}, human, index=i
            )
        )
    assert len(expected) == 420
    check("newsroom", expected, source="judge_bench")


# --- STS-B, SFHOT / SFRES --------------------------------------------------------------------------
@pytest.mark.parametrize(("split", "count"), [("dev", 1500), ("test", 1379)])
def test_stsb_every_pair(split, count):
    path = folder("stsb") / f"sts-{split}.tsv"
    expected = []
    with open(path, encoding="utf-8", newline="") as f:
        # SOURCE.md: genre, file, year, id, score, sentence1, sentence2; no header, no quoting
        for lineno, row in enumerate(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE), start=1):
            genre, source, year, sid, score, s1, s2 = row[:7]
            expected.append(
                expect(f"stsb-{split}-{lineno}", None, {"prediction": s1, "reference": s2},
                       {"similarity": float(score)}, genre=genre, source=source, year=year, sid=sid)
            )  # fmt: skip
    assert len(expected) == count
    check("stsb", expected, split=split)


@pytest.mark.parametrize(("subset", "count"), [("sfhot", 875), ("sfres", 1181)])
def test_data2text_every_item(subset, count):
    rows = read_json(folder("unieval_data2text") / f"{subset}.json")
    expected = [
        expect(f"{subset}-{row['doc_id']}", None,
               {"source": row["source"], "response": row["system_output"], "reference": row["reference"]},
               dict(row["scores"]))
        for row in rows
    ]  # fmt: skip
    assert len(expected) == count
    check("unieval_data2text", expected, subset=subset)


# --- dialogue: USR, FED ----------------------------------------------------------------------------
def _speakers_from_the_end(turns: list[str]) -> str:
    """The last turn is Speaker A's, the one before Speaker B's, and so on back to the first."""
    named = [("Speaker A" if k % 2 == 0 else "Speaker B") + ": " + t for k, t in enumerate(reversed(turns))]
    return "\n".join(reversed(named))


@pytest.mark.parametrize(
    ("subset", "file", "count"), [("tc", "tc_usr_data.json", 360), ("pc", "pc_usr_data.json", 300)]
)
def test_usr_every_response(subset, file, count):
    contexts = read_json(folder("topical_chat_usr") / file)
    usr = {"Understandable": "understandable", "Natural": "natural", "Maintains Context": "maintains_context",
           "Engaging": "engaging", "Uses Knowledge": "uses_knowledge", "Overall": "overall"}  # fmt: skip
    expected = []
    for ci, ctx in enumerate(contexts):
        turns = [t.strip() for t in ctx["context"].split("\n") if t.strip()]
        for ri, resp in enumerate(ctx["responses"]):
            inputs = {
                "context": _speakers_from_the_end(turns),
                "response": resp["response"].strip(),
                "knowledge": ctx["fact"].strip(),
            }
            human = {ours: resp[theirs] for theirs, ours in usr.items()}
            expected.append(
                expect(
                    f"usr-{subset}-c{ci}-r{ri}", resp["model"], inputs, human, annotators=ctx["annotators"]
                )
            )
    assert len(expected) == count
    check("topical_chat_usr", expected, subset=subset)


@pytest.mark.parametrize(("level", "count"), [("turn", 375), ("dialogue", 125)])
def test_fed_every_item(level, count):
    rows = read_json(folder("fed") / "fed_data.json")
    expected = []
    for i, row in enumerate(rows):
        if ("response" in row) != (level == "turn"):
            continue
        # a rater's free-text "N/A (...)" is no rating
        human = {
            k.lower().replace(" ", "_"): [
                None if isinstance(v, str) and v.startswith("N/A") else v for v in vals
            ]
            for k, vals in row["annotations"].items()
        }
        if level == "turn":
            assert row["response"].startswith("System: ")
            inputs = {
                "context": row["context"],
                "response": row["response"][len("System: ") :].strip(),
                "knowledge": "",
            }
        else:
            inputs = {
                "context": row["context"],
                "conversation": row["context"],
                "response": "",
                "knowledge": "",
            }
        expected.append(expect(f"fed-{level}-{i}", row["system"], inputs, human))
    assert len(expected) == count
    check("fed", expected, level=level)


# --- groundedness: QAGS, BEGIN ---------------------------------------------------------------------
@pytest.mark.parametrize(("subset", "count"), [("cnndm", 235), ("xsum", 239)])
def test_qags_every_summary(subset, count):
    expected = []
    for lineno, row in read_jsonl(folder("qags") / f"mturk_{subset}.jsonl"):
        votes = [[r["response"] == "yes" for r in s["responses"]] for s in row["summary_sentences"]]
        # a sentence is consistent when a majority of its workers said yes; the label is the share
        # of the summary's consistent sentences
        consistent = [sum(v) > len(v) / 2 for v in votes]
        inputs = {
            "source": row["article"],
            "evidence": row["article"],
            "response": " ".join(s["sentence"].strip() for s in row["summary_sentences"]),
            "context": "",
        }
        all_votes = [x for v in votes for x in v]
        expected.append(
            expect(f"qags-{subset}-{lineno}", None, inputs, {"consistent": sum(consistent) / len(consistent)},
                   vote_share=sum(all_votes) / len(all_votes))
        )  # fmt: skip
    assert len(expected) == count
    check("qags", expected, subset=subset)


def test_qags_majority_by_hand():
    """The first XSum summary has one sentence with votes yes, yes, no: consistent, label 1.0, share 2/3."""
    folder("qags")
    first = load_items("qags", data_dir=DATA_DIR, subset="xsum")[0]
    assert first.inputs["response"].startswith("Two security guards have been threatened")
    assert first.human == {"consistent": 1.0}
    assert first.meta["vote_share"] == pytest.approx(2 / 3)


BEGIN_FILES = {
    ("wow", "dev"): "wow/begin_dev_wow.tsv",
    ("wow", "test"): "wow/begin_test_wow.tsv",
    ("topicalchat", "dev"): "topicalchat/begin_dev_tc.tsv",
    ("cmu-dog", "dev"): "cmu-dog/begin_dev_cmu.tsv",
}


def test_begin_every_row():
    root = folder("begin_groundedness")
    expected = []
    for (sub, split), rel in BEGIN_FILES.items():
        df = pd.read_csv(root / rel, sep="\t", quoting=csv.QUOTE_NONE, dtype=str, keep_default_na=False)
        for k, row in enumerate(df.to_dict("records")):
            message = row["message"].strip()
            inputs = {
                "evidence": row["knowledge"].strip(),
                "knowledge": row["knowledge"].strip(),
                "response": row["response"].strip(),
                "context": f"Speaker A: {message}" if message else "",  # the response is Speaker B's
            }
            # SOURCE.md's three labels; attributable only when fully so
            human = {"attributable": 1.0 if row["begin_label"].strip() == "Fully attributable" else 0.0}
            expected.append(
                expect(f"begin-{sub}-{split}-{k + 2}", row["model_name"].strip(), inputs, human,
                       begin_label=row["begin_label"].strip(), data_source=row["data_source"])
            )  # fmt: skip
    assert len(expected) == 4836
    check("begin_groundedness", expected)


# --- ASAP + ASAP++ ---------------------------------------------------------------------------------
#: the official ASAP readme's trait names (sets 7, 8) and the ASAP++ columns (sets 1-6)
OFFICIAL = {
    7: ("ideas", "organization", "style", "conventions"),
    8: ("ideas_and_content", "organization", "voice", "word_choice", "sentence_fluency", "conventions"),
}
NARRATIVE = ("Content", "Organization", "Word Choice", "Sentence Fluency", "Conventions")
SOURCE_BASED = ("Content", "Prompt Adherence", "Language", "Narrativity")
ASAP_PP = {1: NARRATIVE, 2: NARRATIVE, 3: SOURCE_BASED, 4: SOURCE_BASED, 5: SOURCE_BASED, 6: SOURCE_BASED}


def _between(lines: list[str], start: str, stop: str) -> str:
    if start not in lines:
        return ""
    i = lines.index(start) + 1
    j = next((j for j in range(i, len(lines)) if lines[j].startswith(stop)), len(lines))
    return "\n".join(lines[i:j]).strip()


def _asap_pp(path: Path, names: tuple[str, ...]) -> dict[str, dict | str]:
    """Essay id -> traits (one annotator: one-element lists); an id with two different rows -> a reason."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    id_col = "EssayID" if "EssayID" in df.columns else "Essay ID"
    out: dict[str, dict | str] = {}
    for row in df.to_dict("records"):
        traits = {n.lower().replace(" ", "_"): [float(row[n])] for n in names}
        eid = row[id_col].strip()
        out[eid] = traits if out.get(eid, traits) == traits else "conflicting duplicate ASAP++ rows"
    return out


def test_asap_every_essay():
    root = folder("asap")
    expected = []
    for s in range(1, 9):
        lines = (
            (root / "rubrics" / "readme_full_text" / f"essay_set_{s}_readme.txt")
            .read_text(encoding="utf-8")
            .splitlines()
        )
        prompt, source = (
            _between(lines, "Prompt", "Rubric Guidelines"),
            _between(lines, "Source Essay", "Prompt"),
        )
        pp = (
            _asap_pp(root / "rubrics" / "asapplusplus_trait_scores" / f"Prompt-{s}.csv", ASAP_PP[s])
            if s in ASAP_PP
            else {}
        )
        df = pd.read_csv(
            root / "asap_original_by_prompt" / f"essay_set_{s}.tsv",
            sep="\t",
            dtype=str,
            keep_default_na=False,
        )
        for row in df.to_dict("records"):
            human = {"holistic": [float(row["rater1_domain1"]), float(row["rater2_domain1"])]}
            meta = {"essay_set": s, "essay_id": row["essay_id"], "domain1_score": float(row["domain1_score"])}
            if s == 2:
                human["language_conventions"] = [float(row["rater1_domain2"]), float(row["rater2_domain2"])]
                meta["domain2_score"] = float(row["domain2_score"])
            if s == 8:
                meta["rater3_domain1"] = float(row["rater3_domain1"]) if row["rater3_domain1"] else None
            for k, name in enumerate(OFFICIAL.get(s, ()), start=1):
                cells = [row[f"rater{r}_trait{k}"] for r in (1, 2, 3)]
                human[name] = [float(c) for c in cells if c]
            if s in ASAP_PP:
                traits = pp.get(row["essay_id"], "no ASAP++ row")
                meta["asap_pp"] = "ok" if isinstance(traits, dict) else traits
                human.update(traits if isinstance(traits, dict) else {})
            essay = row["essay"].strip()
            inputs = {"essay": essay, "response": essay, "prompt": prompt, "source": source}
            expected.append(expect(f"asap-{row['essay_id']}", None, inputs, human, **meta))
    assert len(expected) == 12975
    check("asap", expected, essay_set="all")


def test_usr_lists_every_context():
    """topical_chat_usr_lists, read back from the raw file: one item per context, its three systems'
    responses in the loader's order, each one's mean "Engaging" score, the last 4 turns of the history."""
    contexts = read_json(folder("topical_chat_usr") / "tc_usr_data.json")
    systems = ["Original Ground Truth", "Argmax Decoding", "Nucleus Decoding (p = 0.3)"]
    items = {it.id: it for it in load_items("topical_chat_usr_lists", data_dir=DATA_DIR)}
    assert len(items) == len(contexts) == 60
    for ci, ctx in enumerate(contexts):
        by_model = {r["model"]: r for r in ctx["responses"]}
        turns = [t.strip() for t in ctx["context"].split("\n") if t.strip()]
        it = items[f"usr-tc-c{ci}-k3"]
        assert it.inputs["context"] == "\n".join(_speakers_from_the_end(turns).split("\n")[-4:])
        for k, s in enumerate(systems, start=1):
            assert it.inputs[f"response_{k}"] == by_model[s]["response"].strip()
        means = [sum(by_model[s]["Engaging"]) / len(by_model[s]["Engaging"]) for s in systems]
        assert it.human["engaging"] == pytest.approx(means)
        assert it.meta["systems"] == systems and it.human_kind == "per_response"

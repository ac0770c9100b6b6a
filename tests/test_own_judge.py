"""Your own judge: any table (dataset=table), any prompt group (judge.group_file / judge.template),
one command (+experiment=own_judge) that ends with the plain-words verdict.

Every table and prompt here is written in the test: the project has never seen them.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from promptlottery.analysis.lottery.verdict import NO_CONSENSUS, agreement_band, item_table
from promptlottery.data.loaders.table import load_table
from promptlottery.data.schema import DatasetError
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.metrics.aggregate import majority
from promptlottery.metrics.convergence import online_convergence
from promptlottery.prompts.group_text import check_variables
from promptlottery.prompts.groups import PromptError, group_from_template, load_group_file
from tests.conftest import MODEL_CACHE, REPO, compose, subprocess_env

ROWS = [
    {"qid": "q1", "question": "Capital of France?", "answer": "Paris", "bot": "A", "stars": 9},
    {"qid": "q2", "question": "Capital of Spain?", "answer": "Lisbon", "bot": "A", "stars": 2},
    {"qid": "q3", "question": "2 + 2?", "answer": "4", "bot": "B", "stars": 10},
    {"qid": "q4", "question": "Colour of the sky?", "answer": "Green", "bot": "B", "stars": 1},
    {"qid": "q5", "question": "Largest ocean?", "answer": "The Pacific", "bot": "A", "stars": 8},
    {"qid": "q6", "question": "Author of Hamlet?", "answer": "Dickens", "bot": "B", "stars": 3},
]
FIELDS = {"id": "qid", "context": "question", "response": "answer", "system": "bot", "human": "stars"}
GROUP = """\
id: my_helpfulness
judge_family: helpfulness
scale: likert_1_5
version: 1
variants:
  P1:
    user: "Rate the helpfulness of the answer from 1 to 5.\\nQuestion: {{ context }}\\nAnswer: {{ response }}"
  P2:
    system: You grade answers.
    user: "How helpful is this reply, 1 (useless) to 5 (perfect)?\\n{{ context }}\\n{{ response }}"
"""


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


# ------------------------------------------------------------------------------ dataset=table


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_table_loads_every_format_with_the_field_map(tmp_path, kind):
    path = tmp_path / f"t.{kind}"
    if kind == "jsonl":
        write_jsonl(path, ROWS)
    elif kind == "csv":
        write_csv(path, ROWS)
    else:
        pd.DataFrame(ROWS).to_parquet(path)
    items = load_table(tmp_path, path=str(path), fields=FIELDS, human_range=[1, 10])
    assert [it.id for it in items] == ["q1", "q2", "q3", "q4", "q5", "q6"]
    q2 = items[1]
    assert q2.inputs == {"response": "Lisbon", "context": "Capital of Spain?"}
    assert q2.system == "A" and q2.human_score("human") == 2.0 and q2.human_kind == "single"


def test_table_without_id_or_human_numbers_rows_and_leaves_labels_empty(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [{"answer": "x"}, {"answer": "y"}])
    items = load_table(tmp_path, path=str(path), fields={"response": "answer"})
    assert [it.id for it in items] == ["1", "2"] and items[0].human == {} and items[0].system is None


@pytest.mark.parametrize(
    "rows, fields, match",
    [
        (ROWS, {**FIELDS, "reference": "gold"}, r"t\.csv: column\(s\) reference='gold' not in the table"),
        ([], FIELDS, r"t\.csv:1: empty file"),
        (
            [ROWS[0], {**ROWS[1], "stars": "great"}],
            FIELDS,
            r"t\.csv row 2 \(line 3\): column 'stars': label 'great' is not a number",
        ),
        (
            [ROWS[0], {**ROWS[1], "qid": "q1"}],
            FIELDS,
            r"t\.csv row 2 \(line 3\): duplicate id 'q1' in column 'qid'",
        ),
        (
            [ROWS[0], {**ROWS[1], "stars": 11}],
            FIELDS,
            r"row 2 \(line 3\): column 'stars': label 11 outside 1-10",
        ),
        (
            [ROWS[0], {**ROWS[1], "answer": ""}],
            FIELDS,
            r"row 2 \(line 3\): column 'answer' is missing or empty",
        ),
        (ROWS, {"context": "question"}, r"dataset.fields.response is required"),
        (ROWS, {**FIELDS, "prompt": "question"}, r"unknown role\(s\) \['prompt'\]"),
    ],
)
def test_table_errors_name_file_line_and_column(tmp_path, rows, fields, match):
    path = tmp_path / "t.csv"
    if rows:
        write_csv(path, rows)
    else:
        path.write_text("", encoding="utf-8")
    with pytest.raises(DatasetError, match=match):
        load_table(tmp_path, path=str(path), fields=fields, human_range=[1, 10])


def test_jsonl_errors_name_the_line(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [ROWS[0], ROWS[1], {**ROWS[2], "stars": [3]}])
    with pytest.raises(DatasetError, match=r"t\.jsonl:3: column 'stars': label \[3\] is not a number"):
        load_table(tmp_path, path=str(path), fields=FIELDS, human_range=[1, 10])
    empty = tmp_path / "e.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"e\.jsonl: empty file"):
        load_table(tmp_path, path=str(empty), fields=FIELDS)


@pytest.fixture
def offline_datasets(tmp_path, monkeypatch):
    """The `datasets` package with its cache under tmp_path and the Hub switched off."""
    datasets = pytest.importorskip("datasets")  # in the dev extra: `make setup` installs it
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_cache")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return datasets


def test_hf_path_loads_a_local_folder_and_a_saved_dataset(tmp_path, offline_datasets):
    folder = tmp_path / "files"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", ROWS[:4])
    write_jsonl(folder / "test.jsonl", ROWS[4:])
    train = load_table(tmp_path, path=f"hf:{folder}", fields=FIELDS, human_range=[1, 10])
    assert [it.id for it in train] == ["q1", "q2", "q3", "q4"]
    assert train[1].inputs == {"response": "Lisbon", "context": "Capital of Spain?"}
    assert train[1].human_score("human") == 2.0 and train[1].system == "A"
    test = load_table(tmp_path, path=f"hf:{folder}:test", fields=FIELDS, human_range=[1, 10])
    assert [it.id for it in test] == ["q5", "q6"]
    saved = tmp_path / "saved"
    offline_datasets.DatasetDict({"validation": offline_datasets.Dataset.from_list(ROWS[2:])}).save_to_disk(
        str(saved)
    )
    items = load_table(tmp_path, path=f"hf:{saved}:validation", fields=FIELDS, human_range=[1, 10])
    assert [it.id for it in items] == ["q3", "q4", "q5", "q6"] and items[0].human_score("human") == 10.0
    with pytest.raises(DatasetError, match=r"hf:.*saved: no split 'train'; splits: \['validation'\]"):
        load_table(tmp_path, path=f"hf:{saved}", fields=FIELDS)


def test_hf_path_errors_are_one_line_naming_the_path(tmp_path, offline_datasets):
    folder = tmp_path / "files"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", [{**r, "stars": "great"} if r["qid"] == "q2" else r for r in ROWS])
    with pytest.raises(
        DatasetError, match=r"^hf:.*files row 2: column 'stars': label 'great' is not a number"
    ):
        load_table(tmp_path, path=f"hf:{folder}", fields=FIELDS, human_range=[1, 10])
    with pytest.raises(
        DatasetError, match=r"^dataset.path=hf:nobody/no_such_table: cannot load split 'train': "
    ):
        load_table(tmp_path, path="hf:nobody/no_such_table", fields=FIELDS)


# ------------------------------------------------------------------------------ judge.group_file / template


def test_group_file_and_template_load_from_anywhere(tmp_path):
    gf = tmp_path / "mine.yaml"
    gf.write_text(GROUP, encoding="utf-8")
    g = load_group_file(gf)
    assert g.id == "my_helpfulness" and list(g.variants) == ["P1", "P2"] and g.scale.name == "likert_1_5"
    tpl = tmp_path / "judge.j2"
    tpl.write_text("Is the answer right?\n{{ context }}\n{{ response }}\nyes or no:", encoding="utf-8")
    one = group_from_template(tpl, "binary_yes_no")
    assert list(one.variants) == ["P1"] and one.id == "judge" and one.scale.labels == ("yes", "no")
    with pytest.raises(PromptError, match=r"variant P1: unknown template variable\(s\) \['context'\]"):
        check_variables(one, {"response"}, where=str(tpl))


def test_unknown_template_variable_fails_before_any_model_call(tmp_path):
    from promptlottery.backends.fake import FakeBackend
    from promptlottery.stages import run_stage as run

    data = write_jsonl(tmp_path / "t.jsonl", ROWS)
    gf = tmp_path / "bad.yaml"
    gf.write_text(
        GROUP.replace("{{ context }}\\n{{ response }}", "{{ question }}\\n{{ response }}"), encoding="utf-8"
    )
    cfg = compose(
        [
            "dataset=table",
            f"dataset.path={data}",
            *[f"dataset.fields.{k}={v}" for k, v in FIELDS.items()],
            "dataset.human_range=[1,10]",
            "judge=own",
            f"judge.group_file={gf}",
            "judge.variant=P1",
            "backbone=fake",
        ],
        tmp_path=tmp_path,
    )
    backend = FakeBackend()
    with pytest.raises(
        PromptError, match=r"bad\.yaml .*variant P2: unknown template variable\(s\) \['question'\]"
    ):
        run(cfg, tmp_path / "job", backend=backend)
    assert backend.calls == 0


# ------------------------------------------------------------------------------ the verdict's definitions


def _majority(labels: list, n_judges: int):
    return majority([labels], n_judges=n_judges)[0]


def _k_needed(labels: list) -> float:
    return online_convergence([labels], rule="majority")[0]


def test_strict_majority_is_ceil_j_plus_one_over_two_of_j():
    # 3 of 5 is a majority, 2 of 5 (even when it is the unique plurality) is not
    assert _majority(["4", "4", "4", "1", "2"], 5) == "4"
    assert _majority(["4", "4", "1", "2", "3"], 5) is None
    # 2 of 3; of 2 variants both must agree; a missing verdict is no vote
    assert _majority(["yes", "no", "yes"], 3) == "yes"
    assert _majority(["yes", "no"], 2) is None
    assert _majority(["yes", None, None], 3) is None


def test_k_needed_is_where_the_running_majority_settles():
    # P1 alone is the final majority and every longer prefix agrees
    assert _k_needed(["4", "4", "4", "4", "4"]) == 1
    # prefixes: 1 -> '2'; 2 -> none; 3 -> '4' (2 of 3); 4 -> '4' (3 of 4); 5 -> '4' (3 of 5)
    assert _k_needed(["2", "4", "4", "4", "1"]) == 3
    # prefix 3 is '4' but prefix 4 ('4','4','1','1') has none: settles only at 5
    assert _k_needed(["4", "4", "1", "1", "4"]) == 5
    assert math.isnan(_k_needed(["1", "2", "3", "1", "2"]))


def _judgments(labels: dict[str, list[str]], systems: list[str]) -> pd.DataFrame:
    rows = []
    for v, labs in labels.items():
        for i, lab in enumerate(labs):
            rows.append(
                {"item_id": f"i{i}", "variant": v, "label": lab, "value": float(lab), "system": systems[i]}
            )
    df = pd.DataFrame(rows).assign(
        config_id="c", temperature=1e-5, sample_index=0, seed=0, human=np.nan, backbone="fake"
    )
    return df


def test_item_table_and_summary_by_hand():
    from promptlottery.analysis.lottery.options import LotteryOptions
    from promptlottery.analysis.lottery.verdict import verdict_summary

    # 4 items x 3 variants: i0 stable; i1 majority 2 overrides P1's 1; i2 no consensus; i3 majority = P1
    df = _judgments(
        {"P1": ["3", "1", "1", "5"], "P2": ["3", "2", "2", "5"], "P3": ["3", "2", "3", "4"]},
        ["a", "a", "b", "b"],
    )
    t = item_table(JudgmentGrid.from_verdicts(df))
    by = t.set_index("item_id")
    assert list(t["item_id"])[:1] == ["i2"] and list(t["item_id"])[-1] == "i0"  # most unstable first
    assert by.loc["i2", "majority"] == NO_CONSENSUS and by.loc["i1", "majority"] == "2"
    assert not by.loc["i0", "changed"] and by.loc[["i1", "i2", "i3"], "changed"].all()
    assert by.loc["i1", "majority_differs"] and not by.loc["i3", "majority_differs"]
    assert by.loc["i1", "k_needed"] == 3 and by.loc["i3", "k_needed"] == 1
    opts = LotteryOptions(n_resamples=200)
    s = verdict_summary(t, {}, opts).iloc[0]
    assert s["changed"] == 0.75 and s["majority_differs"] == pytest.approx(1 / 3)
    assert s["no_consensus"] == 0.25
    # k needed: i0 1, i3 1, i1 3, i2 never -> median of (1, 1, 3, inf) = 2
    assert s["k_most"] == 2.0
    assert (
        s["band"] == "n/a" and "majority of the variants overrides the original prompt (P1)" in s["sentence"]
    )


def _verdict_section(labels: dict[str, list[str]]) -> str:
    from promptlottery.analysis.common import report as rp
    from promptlottery.analysis.lottery.options import LotteryOptions
    from promptlottery.analysis.lottery.verdict import render_verdict, verdict_summary

    t = item_table(JudgmentGrid.from_verdicts(_judgments(labels, ["a", "a", "b", "b"])))
    R = rp.Report("r")
    render_verdict(R, verdict_summary(t, {}, LotteryOptions(n_resamples=50)))
    return "\n".join(R.parts)


def test_the_majority_sentence_counts_the_sweeps_own_wordings():
    # 3 wordings: the majority the code computes is 2 of 3 (i1: '2' from P2 and P3), not the paper's 3 of 5
    three = _verdict_section(
        {"P1": ["3", "1", "1", "5"], "P2": ["3", "2", "2", "5"], "P3": ["3", "2", "3", "4"]}
    )
    assert "of the J variants (a strict majority: 2 of 3); items without one" in three
    assert "3 of 5" not in three
    # 5 wordings: the paper's plurality cluster, worded as before
    five = _verdict_section({f"P{j}": ["3", "1", str(j), "5"] for j in range(1, 6)})
    assert "of the J variants (3 of 5); items without one" in five


def test_item_table_carries_the_item_texts_after_the_id():
    df = _judgments({"P1": ["1", "2"], "P2": ["1", "3"]}, ["a", "b"])
    df["input_response"] = df["item_id"].map({"i0": "Paris", "i1": "Lisbon"})
    t = item_table(JudgmentGrid.from_verdicts(df))
    assert list(t.columns[:3]) == ["config_id", "item_id", "response"]
    assert t.set_index("item_id")["response"].to_dict() == {"i0": "Paris", "i1": "Lisbon"}


def test_agreement_band_uses_the_whole_ci():
    th = {"usable": 0.61, "robust": 0.80}
    assert agreement_band(0.9, 0.82, 0.95, th) == "robust"
    assert agreement_band(0.85, 0.70, 0.95, th) == "usable"
    assert agreement_band(0.5, 0.40, 0.60, th) == "below usable"
    assert agreement_band(0.62, 0.55, 0.70, th) == "inconclusive"
    assert agreement_band(float("nan"), float("nan"), float("nan"), th) == "n/a"


# ------------------------------------------------------------------------------ one command, one answer


def own_judge(tmp_path: Path, *overrides: str, backbone: str = "fake") -> subprocess.CompletedProcess:
    cmd = [
        sys.executable, "-m", "run", "-m", "+experiment=own_judge", f"backbone={backbone}", "logger=none",
        f"paths.model_dir={MODEL_CACHE}", f"paths.cache_dir={tmp_path / 'cache'}",
        f"paths.output_dir={tmp_path / 'out'}", "hydra.sweep.dir=" + str(tmp_path / "sweep"),
        "analysis.embeddings=none", "analysis.plots=false", "analysis.n_resamples=200", *overrides,
    ]  # fmt: skip
    env = subprocess_env(tmp_path)
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)


def test_own_judge_command_judges_every_variant_of_the_file_and_opens_with_the_verdict(tmp_path):
    data = write_csv(tmp_path / "mine.csv", ROWS)
    gf = tmp_path / "mine.yaml"
    gf.write_text(GROUP, encoding="utf-8")
    fields = [f"dataset.fields.{k}={v}" for k, v in FIELDS.items()]
    args = (f"dataset.path={data}", *fields, "dataset.human_range=[1,10]", f"judge.group_file={gf}")
    proc = own_judge(tmp_path, *args, backbone="fake")
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = sorted(p.parent.name for p in (tmp_path / "sweep").glob("*/judgments.parquet"))
    assert jobs == ["0_P1_fake", "1_P2_fake"]  # the file's two variants, not a fixed P1-P5 list
    # the sweep plan resolves ${group_variants:...} to those two variants (it was "sweep plan not written")
    plan = json.loads((tmp_path / "sweep" / "sweep_plan.json").read_text())["jobs"]
    assert [[o for o in j["overrides"] if o.startswith("judge.variant=")] for j in plan] == [
        ["judge.variant=P1"],
        ["judge.variant=P2"],
    ]
    assert "sweep plan not written" not in proc.stderr
    report = (tmp_path / "sweep" / "lottery" / "report.md").read_text()
    head = report.split("\n## ", 2)[1]
    assert (
        head.startswith("Verdict: would a rewording")
        and "agreement across the 2 variants is mean pairwise cohen's kappa" in head.lower()
    )
    assert "of 6 items get a different verdict" in head and "of the 2 systems change rank" in head
    unstable = pd.read_csv(tmp_path / "sweep" / "lottery" / "unstable_items.csv")
    assert len(unstable) == 6 and unstable["modal_share"].is_monotonic_increasing
    # the item's texts stand next to its id, so a user can read which items flip
    assert list(unstable.columns[1:4]) == ["item_id", "context", "response"]
    texts = {r["qid"]: (r["question"], r["answer"]) for r in ROWS}
    assert all(
        texts[i] == (c, r) for i, c, r in zip(unstable["item_id"], unstable["context"], unstable["response"])
    )
    from promptlottery.analysis.lottery.first_screen import show

    shown = show(tmp_path / "sweep" / "lottery")  # what `make demo` prints
    assert "| Fleiss' kappa across the five paraphrases | about 0.24 |" in shown
    assert shown.startswith("Fake judge") and "\nThe finding:" in shown and "lottery/report.md" in shown
    assert "is not shown to track the human labels" in shown  # the fake judge's Pearson CI covers 0
    df = pd.read_parquet(tmp_path / "sweep" / "0_P1_fake" / "judgments.parquet")
    assert set(df["prompt_group"]) == {"my_helpfulness"} and df["human"].tolist()[:1] == [9.0]
    # resumable: a second run answers every call from the cache
    again = own_judge(tmp_path, *args, backbone="fake")
    log = again.stdout + again.stderr
    assert again.returncode == 0 and "cache_misses=0" in log and "cache_misses=6" not in log


@pytest.mark.slow
def test_own_judge_with_a_real_cpu_judge(tmp_path):
    data = write_jsonl(tmp_path / "mine.jsonl", ROWS)
    gf = tmp_path / "mine.yaml"
    gf.write_text(GROUP, encoding="utf-8")
    fields = [f"dataset.fields.{k}={v}" for k, v in FIELDS.items()]
    proc = own_judge(
        tmp_path, f"dataset.path={data}", *fields, "dataset.human_range=[1,10]", f"judge.group_file={gf}",
        "backbone.backend.dtype=float32", backbone="smollm2",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    df = pd.concat(pd.read_parquet(p) for p in (tmp_path / "sweep").glob("*/judgments.parquet"))
    assert len(df) == 12 and df["argmax_label"].notna().all()  # SmolLM2 puts mass on the 1-5 labels
    summary = pd.read_csv(tmp_path / "sweep" / "lottery" / "tables" / "verdict.csv").iloc[0]
    assert 0.0 <= summary["changed"] <= 1.0 and summary["n_items"] == 6


def test_own_judge_with_one_template_file_judges_its_one_wording(tmp_path):
    # the experiment's documented alternative to a group file; it was "judge.group_file=PATH is required"
    tpl = tmp_path / "grade.j2"
    tpl.write_text("Question: {{ context }}\nAnswer: {{ response }}\nRate it 1-5. Reply with the number.\n")
    data = write_csv(tmp_path / "mine.csv", ROWS)
    fields = [f"dataset.fields.{k}={v}" for k, v in FIELDS.items()]
    args = (f"dataset.path={data}", *fields, "dataset.human_range=[1,10]")
    proc = own_judge(tmp_path, *args, f"judge.template={tpl}", "judge.scale=likert_1_5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = sorted(p.parent.name for p in (tmp_path / "sweep").glob("*/judgments.parquet"))
    assert jobs == ["0_P1_fake"]  # the template is the group's one variant, P1
    rec = json.loads((tmp_path / "sweep" / "0_P1_fake" / "results.json").read_text())
    assert rec["status"] == "ok" and rec["condition"] == "table/custom/grade/P1/fake"
    # one wording is compared with none: the verdict says it cannot tell, it gives no agreement number
    report = (tmp_path / "sweep" / "lottery" / "report.md").read_text()
    assert "cannot tell from agreement" in report.lower() and "need >= 2" in report

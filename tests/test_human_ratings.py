"""Importing human ratings: the recorded Label Studio export (tests/data/human/, from a real
1.23.2 server by scripts/record_human_export.py) and plain tables, with a one-line error for each
bad rating; the campaign stage without a server writes the import files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from promptlottery.human.ratings import RatingsError
from promptlottery.human.stage import HumanOptions, import_ratings
from tests.conftest import REPO, compose

REC = REPO / "tests" / "data" / "human"
EXPORTS = sorted(str(p) for p in REC.glob("export_*.json"))
TRUTH = {
    json.loads(line)["id"]: str(json.loads(line)["rating"])
    for line in (REPO / "examples/own_judge/qa_answers.jsonl").read_text().splitlines()
    if line.strip()
}


def _import(**kw) -> pd.DataFrame:
    return import_ratings(HumanOptions(campaign=str(kw.pop("campaign", REC)), **kw))


def test_recorded_export_imports_the_simulated_labels():
    df = _import(export=EXPORTS)
    assert len(df) == 6 * 2 * 3 and df["annotator"].nunique() == 3
    # the recording's rule: the table's rating; a01 and a02 rate 2 lower (floor 1) under P2
    for r in df.itertuples():
        y = int(TRUTH[r.item_id])
        want = max(1, y - 2) if r.wording == "P2" and r.annotator in ("a01", "a02") else y
        assert r.label == str(want), r
    assert set(df["scale"]) == {"likert_1_5"} and df["task_id"].notna().all()
    # every annotator's queue as the assignment has it
    a = pd.read_csv(REC / "assignment.csv", dtype=str)
    merged = df.merge(a, on=["annotator", "item_id", "wording"], suffixes=("", "_a"))
    assert (merged["position"].astype(int) == merged["position_a"].astype(int)).all()


def _edited_export(tmp_path: Path, edit) -> list[str]:
    tasks = json.loads(Path(EXPORTS[0]).read_text())
    edit(tasks)
    p = tmp_path / "export_a01.json"
    p.write_text(json.dumps(tasks))
    return [str(p), *EXPORTS[1:]]


@pytest.mark.parametrize(
    "edit, match",
    [
        (
            lambda t: t[0]["data"].update(item_id="q99-omega"),
            r"export_a01.json task \d+: unknown item 'q99-omega'",
        ),
        (
            lambda t: t[0]["data"].update(wording="P7"),
            r"task \d+: unknown wording 'P7' \(the campaign has 2: P1, P2\)",
        ),
        (lambda t: t[0]["data"].update(annotator="zz"), r"task \d+: unknown annotator 'zz'"),
        (
            lambda t: t[0]["annotations"][0]["result"][0]["value"].update(choices=["6"]),
            r"export_a01.json task \d+: label '6' is outside the scale \(1, 2, 3, 4, 5\)",
        ),
        (
            lambda t: t[0]["annotations"].append(dict(t[0]["annotations"][0], id=999)),
            r"export_a01.json task \d+: annotator a01 rated item q\d+-\w+ under wording P\d twice",
        ),
    ],
)
def test_bad_rating_is_one_line_naming_file_and_task(tmp_path, edit, match):
    with pytest.raises(RatingsError, match=match) as exc:
        _import(export=_edited_export(tmp_path, edit))
    assert "\n" not in str(exc.value)


def test_cancelled_annotation_is_no_rating(tmp_path):
    paths = _edited_export(tmp_path, lambda t: t[0]["annotations"][0].update(was_cancelled=True))
    assert len(_import(export=paths)) == 35


def test_plain_table(tmp_path):
    rows = [("q01-alpha", "P1", "a01", "5"), ("q01-alpha", "P1", "a02", "4"), ("q01-alpha", "P2", "a03", "5")]
    p = tmp_path / "r.csv"
    pd.DataFrame(rows, columns=["item", "wording", "annotator", "label"]).to_csv(p, index=False)
    df = _import(table=str(p))
    assert list(df["label"]) == ["5", "4", "5"] and set(df["source"]) == {"table"}
    pd.DataFrame(
        [*rows, ("q01-alpha", "P1", "a01", "3")], columns=["item", "wording", "annotator", "label"]
    ).to_csv(p, index=False)
    with pytest.raises(
        RatingsError,
        match=r"r.csv row 5: annotator a01 rated item q01-alpha under wording P1 twice \(also .*row 2\)",
    ):
        _import(table=str(p))
    pd.DataFrame(
        [("q01-alpha", "P1", "a01", "five")], columns=["item", "wording", "annotator", "label"]
    ).to_csv(p, index=False)
    with pytest.raises(RatingsError, match=r"r.csv row 2: label 'five' is outside the scale"):
        _import(table=str(p))
    with pytest.raises(RatingsError, match="no column 'label' or 'rating'"):
        pd.DataFrame([("q01-alpha", "P1", "a01")], columns=["item", "wording", "annotator"]).to_csv(
            p, index=False
        )
        _import(table=str(p))


def test_campaign_stage_without_a_server_writes_the_import_files(tmp_path):
    from promptlottery.stages import run_stage

    cfg = compose(
        [
            "+human=campaign",
            "dataset=table",
            f"dataset.path={REPO}/examples/own_judge/qa_answers.jsonl",
            "dataset.fields.id=id",
            "dataset.fields.response=answer",
            "dataset.fields.context=question",
            "dataset.fields.reference=gold",
            "dataset.fields.human=rating",
            "dataset.limit=6",
            "judge=own",
            f"judge.group_file={REPO}/examples/own_judge/correctness.yaml",
            "human.annotators=4",
            "human.wordings=[P1,P2]",
        ],
        tmp_path=tmp_path,
    )
    rec = run_stage(cfg, tmp_path / "c")
    assert (
        rec["status"] == "ok" and rec["n_tasks"] == 6 * 2 * 3 and (rec["load_min"], rec["load_max"]) == (9, 9)
    )
    tasks = json.loads((tmp_path / "c" / "tasks" / "a01.json").read_text())
    assert [t["data"]["position"] for t in tasks] == list(range(9))
    first = tasks[0]["data"]
    assert "Gold answer:" in first["instruction"] and first["wording"] in ("P1", "P2")
    xml = (tmp_path / "c" / "label_config.xml").read_text()
    assert xml.count("<Choice ") == 5 and 'value="$instruction"' in xml
    # the import files round-trip: a plain table of ratings for these tasks imports against the campaign
    shutil.copy(tmp_path / "c" / "campaign.json", tmp_path / "campaign.json")
    a = pd.read_csv(tmp_path / "c" / "assignment.csv", dtype=str).assign(label="3")
    a.to_csv(tmp_path / "r.csv", index=False)
    assert len(_import(campaign=tmp_path / "c", table=str(tmp_path / "r.csv"))) == 36


def test_unknown_human_option_is_one_line():
    from promptlottery.config import ConfigError

    with pytest.raises(ConfigError, match=r"unknown human option\(s\) \['raters'\]"):
        HumanOptions.from_dict({"raters": 3})


def test_lottery_report_section_and_metrics(tmp_path):
    """The lottery stage with analysis.human_ratings: the human tables, the report section and the
    results.json metrics; without it, no human table (the report as before)."""
    from promptlottery.analysis.options import LotteryOptions
    from promptlottery.analysis.stage import run_lottery
    from promptlottery.stages import run_stage as judge

    ratings = tmp_path / "human_ratings.parquet"
    _import(export=EXPORTS).to_parquet(ratings)
    data = [
        "dataset=table",
        f"dataset.path={REPO}/examples/own_judge/qa_answers.jsonl",
        "dataset.fields.id=id",
        "dataset.fields.response=answer",
        "dataset.fields.context=question",
        "dataset.fields.reference=gold",
        "dataset.fields.system=system",
        "dataset.fields.human=rating",
        "judge=own",
        f"judge.group_file={REPO}/examples/own_judge/correctness.yaml",
        "backbone=fake",
        "decoding.temperature=0.7",
    ]
    judge(compose([*data, "judge.variant=P1", "n_samples=3"], tmp_path=tmp_path), tmp_path / "runs" / "P1")
    judge(compose([*data, "judge.variant=P2"], tmp_path=tmp_path), tmp_path / "runs" / "P2")
    base = dict(
        runs=str(tmp_path / "runs" / "*"), embeddings="none", plots=False, n_resamples=30, n_permutations=10
    )
    rec = run_lottery(LotteryOptions(**base, human_ratings=str(ratings)), tmp_path / "with")
    report = (tmp_path / "with" / "report.md").read_text()
    assert "## Human baseline under rewording" in report and "ratio judge/human (ours)" in report
    deg = pd.read_csv(tmp_path / "with" / "tables" / "human_degradation.csv")
    assert list(deg["measure"]) == ["overlap", "cohen", "fleiss", "alpha"]
    cid = deg["config_id"].iloc[0]
    assert rec["metrics"][f"human/{cid}/cohen/human_drop"] == pytest.approx(
        deg["human_drop"].iloc[1], abs=1e-4
    )
    assert "human/within/overlap" in rec["metrics"]
    run_lottery(LotteryOptions(**base), tmp_path / "without")
    assert "Human baseline" not in (tmp_path / "without" / "report.md").read_text()
    assert not (tmp_path / "without" / "tables" / "human_agreement.csv").exists()


def test_label_studio_url_without_sdk_or_key_is_one_line(monkeypatch):
    import importlib.util

    from promptlottery.human.labelstudio import LabelStudioClient, LabelStudioError

    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    has_sdk = importlib.util.find_spec("label_studio_sdk") is not None
    want = (
        "needs the API key in the environment variable LABEL_STUDIO_API_KEY" if has_sdk else "not installed"
    )
    with pytest.raises(LabelStudioError, match=want) as exc:
        LabelStudioClient("http://127.0.0.1:9")
    assert "\n" not in str(exc.value)

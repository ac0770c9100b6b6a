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
from promptlottery.stages.human import HumanOptions
from promptlottery.stages.human_import import import_ratings
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
            lambda t: t[0]["meta"].update(item_id="q99-omega"),
            r"export_a01.json task \d+: unknown item 'q99-omega'",
        ),
        (
            lambda t: t[0]["meta"].update(wording="P7"),
            r"task \d+: unknown wording 'P7' \(the campaign has 2: P1, P2\)",
        ),
        (lambda t: t[0]["meta"].update(annotator="zz"), r"task \d+: unknown annotator 'zz'"),
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
    # blind: the annotator's data is the instruction alone; the campaign's keys are in the hidden meta
    assert all(set(t["data"]) == {"instruction"} for t in tasks)
    assert [t["meta"]["position"] for t in tasks] == list(range(9))
    assert "Gold answer:" in tasks[0]["data"]["instruction"] and tasks[0]["meta"]["wording"] in ("P1", "P2")
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
    from promptlottery.analysis.lottery.options import LotteryOptions
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


# --------------------------------------------------------------------------- the import's checks


def _stage_import(tmp_path: Path, exports: list[str]) -> dict:
    from promptlottery.stages import run_stage

    cfg = compose(
        ["+human=import", f"human.campaign={REC}", f"human.export=[{','.join(exports)}]"], tmp_path=tmp_path
    )
    return run_stage(cfg, tmp_path / "import")


def test_recorded_export_checks_pass(tmp_path):
    rec = _stage_import(tmp_path, EXPORTS)
    c = rec["checks"]
    assert c["attribution"].startswith("every annotation completed by its annotator's")
    assert c["back_to_back"] == 0 and c["annotators_out_of_plan"] == []
    assert c["coverage"] == {
        "planned": 36,
        "rated": 36,
        "skipped": 0,
        "not_done": 0,
        "annotators_missing": [],
        "cells": 12,
        "cells_short": 0,
    }


def test_rating_by_another_user_refuses_the_export(tmp_path):
    """a02's Label Studio user labels a task in a01's project: credited to a01 before, refused now."""
    users = json.loads((REC / "campaign.json").read_text())["label_studio_users"]
    other = users["a02"]["id"]
    paths = _edited_export(tmp_path, lambda t: t[3]["annotations"][0].update(completed_by=other))
    with pytest.raises(
        RatingsError,
        match=(
            rf"export_a01.json task \d+ annotation \d+: completed by Label Studio user {other} \(annotator a02's user\), "
            rf"not by a01's user {users['a01']['id']}: a rating by another person in a01's project; export refused"
        ),
    ) as exc:
        _import(export=paths)
    assert "\n" not in str(exc.value)


def test_order_of_labelling_is_checked_against_the_rule(tmp_path):
    """a01 labels their queue sorted by item (as a Data Manager sorted by item would serve it): the
    created_at order puts each item's two tasks (P1, P2) next to each other: 6 back-to-back pairs."""

    def by_item(tasks):
        order = sorted(tasks, key=lambda t: (t["meta"]["item_id"], t["meta"]["wording"]))
        for n, t in enumerate(order):
            t["annotations"][0]["created_at"] = f"2026-12-01T10:{n:02d}:00.000000Z"

    rec = _stage_import(tmp_path, _edited_export(tmp_path, by_item))
    c = rec["checks"]
    assert c["back_to_back"] == 6 and c["annotators_back_to_back"] == ["a01"]
    assert c["annotators_out_of_plan"] == ["a01"]
    report = (tmp_path / "import" / "import_report.md").read_text()
    assert "6 pair(s) of consecutive annotations on one item" in report


def test_coverage_names_skips_and_missing_annotators(tmp_path):
    """One a01 task skipped (a cancelled annotation) and a03's export not given: 36 planned, 23 rated,
    1 skipped, 12 not done, a03 missing; a01's skipped cell and a03's 12 cells are short of 3 raters."""
    paths = _edited_export(tmp_path, lambda t: t[0]["annotations"][0].update(was_cancelled=True, result=[]))
    rec = _stage_import(tmp_path, [p for p in paths if not p.endswith("export_a03.json")])
    assert rec["checks"]["coverage"] == {
        "planned": 36,
        "rated": 23,
        "skipped": 1,
        "not_done": 12,
        "annotators_missing": ["a03"],
        "cells": 12,
        "cells_short": 12,
    }
    report = (tmp_path / "import" / "import_report.md").read_text()
    assert (
        "23 of 36 planned tasks rated, 1 skipped (cancelled), 12 not done; annotators with no rating: a03"
        in report
    )


class _FakeSDK:
    """The few SDK calls of LabelStudioClient, recorded (no server)."""

    def __init__(self, users):
        from types import SimpleNamespace as NS

        self.calls, self._users = [], list(users)
        self.users = NS(list=lambda: self._users, create=self._create_user)
        self.projects = NS(
            create=self._create_project, import_tasks=lambda **kw: self.calls.append(("import", kw))
        )

    def _create_user(self, **kw):
        from types import SimpleNamespace as NS

        u = NS(id=100 + len(self._users), email=kw["email"])
        self._users.append(u)
        self.calls.append(("user", kw))
        return u

    def _create_project(self, **kw):
        from types import SimpleNamespace as NS

        self.calls.append(("project", kw))
        return NS(id=len([c for c in self.calls if c[0] == "project"]))


def test_client_maps_or_creates_users_and_makes_projects_without_skip():
    from types import SimpleNamespace as NS

    from promptlottery.human.labelstudio import LabelStudioClient

    client = LabelStudioClient.__new__(LabelStudioClient)
    client.url, client.sdk = "http://x", _FakeSDK([NS(id=7, email="A01@lab.org")])
    users = client.map_users({"a01": "a01@lab.org", "a02": "a02@lab.org"})
    assert users == {
        "a01": {"id": 7, "email": "A01@lab.org", "created": False},
        "a02": {"id": 101, "email": "a02@lab.org", "created": True},
    }
    client.create_projects({"a01": [{"data": {"instruction": "x"}}]}, "<View/>", title="toy")
    kw = next(c[1] for c in client.sdk.calls if c[0] == "project")
    assert kw["show_skip_button"] is False and kw["sampling"] == "Sequential sampling"
    assert kw["maximum_annotations"] == 1


def test_design_counts_say_what_the_design_supports():
    """2 annotators, 2 raters per task, 3 wordings, 4 items: both annotators rate every cell. Across
    slot s takes P1's rating s, P2's from s+1, P3's from s+2 skipping annotators in the unit: slot 0 =
    (a P1, b P2), P3 has only a and b -> missing; slot 1 = (b P1, a P2), likewise. So every item has
    units (of two wordings), none with all three; per item 2 of 6 ratings (the P3 ones) are in no unit."""
    from promptlottery.human.assignment import Design, assign
    from promptlottery.human.campaign import design_counts, format_design_counts

    d = Design(raters_per_task=2, seed=0)
    a = assign(["i1", "i2", "i3", "i4"], ["P1", "P2", "P3"], ["a", "b"], d)
    c = design_counts(a, ["P1", "P2", "P3"], d)
    assert c["tasks"] == 24 and c["tasks_per_annotator"] == [12, 12]
    assert c["items_with_across_units"] == 4 and c["items_with_complete_across_units"] == 0
    assert c["ratings_in_no_across_unit"] == 8
    assert c["repeats_in_a_queue"] == 2 * 4 * 2 and c["min_gap_between_repeats"] >= 2
    text = format_design_counts(c)
    assert "not supported: across-wordings Fleiss on 4 item(s)" in text


def test_docs_fill_the_per_wording_heading():
    doc = (REPO / "docs" / "human_baseline.md").read_text()
    section = doc.split("### Human agreement under each wording", 1)[1].split("\n## ", 1)[0]
    assert "| wording |" in section and "| P1 |" in section and "| P2 |" in section


def test_export_of_a_campaign_before_the_blind_tasks_still_imports(tmp_path):
    """Campaigns of 7cc7f2a kept the keys in the task's data: read from there when meta has none."""

    def old_style(tasks):
        for t in tasks:
            t["data"].update(t.pop("meta"))

    df = _import(export=_edited_export(tmp_path, old_style))
    assert len(df) == 36 and set(df[df["file"].str.endswith("export_a01.json")]["annotator"]) == {"a01"}

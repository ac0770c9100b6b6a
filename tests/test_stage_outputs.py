"""Every stage writes its outputs through the one writer, ``tracking.staging.staged_outputs``.

The files go to a staging directory first and move into the output directory together when the
stage's writing is done; a stage killed mid-write leaves no half-written file among its outputs
and the files of an earlier run as they were. The lottery analysis has its own tests
(tests/test_analysis_staging.py); these cover the writer itself and the stages routed through it
later: compare, validation, human import and export, the gate's search (the gate stage's own test is in
tests/test_gate_stage.py; budget, rubric, human campaign and analyse go by the same code path).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promptlottery.tracking.jobdir import file_sha256
from promptlottery.tracking.staging import STAGING, OutputsError, staged_outputs
from tests.conftest import REPO, compose


class Killed(BaseException):
    """Stands for SIGKILL: no handler of the job wrapper runs (it catches Exception only)."""


def files(folder) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): file_sha256(p) for p in folder.rglob("*") if p.is_file()}


def test_the_writer_publishes_everything_together_and_returns_the_digests(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{}")
    (out / "kept.txt").write_text("an earlier file the stage does not write")
    writer = staged_outputs(out)
    with writer as staging:
        (staging / "report.md").write_text("new\n")
        (staging / "tables").mkdir()
        (staging / "tables" / "t.csv").write_text("a\n1\n")
        assert not (out / "report.md").exists()  # nothing reaches the output dir before the end
    assert (out / "report.md").read_text() == "new\n" and (out / "tables" / "t.csv").read_text() == "a\n1\n"
    assert writer.outputs == {
        "report.md": file_sha256(out / "report.md"),
        "tables/t.csv": file_sha256(out / "tables" / "t.csv"),
    }
    assert not (out / "results.json").exists()  # the stage writes it last, after publishing
    assert (out / "kept.txt").exists() and not (out / STAGING).exists()


def test_a_write_killed_mid_way_leaves_the_old_files_and_nothing_half_written(tmp_path):
    out = tmp_path / "out"
    with staged_outputs(out) as staging:
        (staging / "report.md").write_text("old\n")
    old = files(out)
    with pytest.raises(Killed), staged_outputs(out) as staging:
        (staging / "report.md").write_text("half of the new rep")
        raise Killed
    assert files(out) == old and not (out / STAGING).exists()


def test_a_full_disk_is_one_line_and_leaves_no_staging_dir(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(OutputsError, match="could not be written into"), staged_outputs(out) as staging:
        (staging / "report.md").write_text("x")
        raise OSError(28, "No space left on device")
    assert not (out / STAGING).exists() and not (out / "report.md").exists()


def test_compare_killed_mid_write_leaves_no_compare_md(tmp_path, monkeypatch):
    """Before the one writer, compare.md was in place when config_diff.csv's write died."""
    from promptlottery.stages import run_stage

    runs = []
    for v in ("P1", "P2"):
        cfg = compose(["backbone=fake", "dataset.limit=4", f"judge.variant={v}"], tmp_path=tmp_path)
        run_stage(cfg, tmp_path / "runs" / v)
        runs.append(tmp_path / "runs" / v)
    to_csv = pd.DataFrame.to_csv

    def dying(self, path=None, *a, **kw):
        if path is not None and str(path).endswith("config_diff.csv"):
            raise Killed
        return to_csv(self, path, *a, **kw)

    out = tmp_path / "cmp"
    cfg = compose(["+analysis=compare", f"analysis.runs=[{runs[0]},{runs[1]}]"], tmp_path=tmp_path)
    monkeypatch.setattr(pd.DataFrame, "to_csv", dying)
    with pytest.raises(Killed):
        run_stage(cfg, out)
    monkeypatch.undo()
    assert not (out / "compare.md").exists() and not (out / STAGING).exists()
    rec = run_stage(cfg, out)
    assert rec["status"] == "ok"
    assert {"compare.md", "config_diff.csv", "metrics.csv"} <= set(files(out))


def _fake_encoder(texts):
    rng = np.random.default_rng(0)
    return np.array([rng.normal(size=8) + len(t) % 7 for t in texts])


def test_validation_killed_mid_write_keeps_the_earlier_validation(tmp_path, monkeypatch):
    from promptlottery.stages.validation import run_validation

    cfg = compose(
        ["+experiment=validate_prompts", "validation.groups=[G1]", "backbone=fake"], tmp_path=tmp_path
    )
    out = tmp_path / "val"
    run_validation(cfg, out, encoder=_fake_encoder)
    old = files(out)
    assert {"validation.csv", "validation_variants.csv", "validation.md"} == set(old)
    to_csv = pd.DataFrame.to_csv

    def dying(self, path=None, *a, **kw):
        if path is not None and str(path).endswith("validation_variants.csv"):
            raise Killed
        return to_csv(self, path, *a, **kw)

    monkeypatch.setattr(pd.DataFrame, "to_csv", dying)
    cfg12 = compose(
        ["+experiment=validate_prompts", "validation.groups=[G12]", "backbone=fake"], tmp_path=tmp_path
    )
    with pytest.raises(Killed):
        run_validation(cfg12, out, encoder=_fake_encoder)
    assert files(out) == old  # validation.csv of G12 never replaced G1's


HUMAN = REPO / "tests" / "data" / "human"  # the recorded campaign and its Label Studio exports


def test_human_import_killed_mid_write_keeps_the_earlier_ratings(tmp_path, monkeypatch):
    """Killed after human_ratings.parquet was staged, before import_report.md: the earlier import's
    ratings and report as they were (before the one writer, the new parquet was already in place)."""
    from promptlottery.analysis.common import report
    from promptlottery.stages import run_stage

    exports = sorted(str(p) for p in HUMAN.glob("export_*.json"))

    def stage(paths):
        cfg = compose(
            ["+human=import", f"human.campaign={HUMAN}", f"human.export=[{','.join(paths)}]"],
            tmp_path=tmp_path,
        )
        return run_stage(cfg, tmp_path / "import")

    out = tmp_path / "import"
    assert stage(exports)["n_ratings"] == 36
    old = {k: v for k, v in files(out).items() if k != "results.json"}
    assert set(old) == {"human_ratings.parquet", "import_report.md"}

    def dying(self):
        assert (out / STAGING / "human_ratings.parquet").is_file()  # staged, not yet published
        raise Killed

    monkeypatch.setattr(report.Report, "text", dying)
    with pytest.raises(Killed):
        stage(exports[:1])  # one annotator's ratings would have replaced all three's
    assert files(out) == old and not (out / STAGING).exists()


def test_human_export_failing_mid_way_keeps_the_earlier_exports(tmp_path, monkeypatch):
    """A project whose export fails (the server, after the first projects came): the earlier export
    files as they were, none of the new ones published, the failure recorded in one line."""
    import json

    from promptlottery.human import labelstudio
    from promptlottery.stages import run_stage

    projects = json.loads((HUMAN / "campaign.json").read_text())["label_studio_projects"]
    by_id = {pid: (HUMAN / f"export_{a}.json").read_bytes() for a, pid in projects.items()}
    failing: set[int] = set()

    class Exports:
        def download_sync(self, id, export_type):
            if id in failing:
                raise ConnectionError("connection reset by peer")
            yield by_id[id].replace(b'"annotations"', b'"annotations" ') if failing else by_id[id]

    def offline(self, url, *, api_key_env):
        self.url = url
        self.sdk = type("SDK", (), {"projects": type("Projects", (), {"exports": Exports()})()})()

    monkeypatch.setattr(labelstudio.LabelStudioClient, "__init__", offline)
    cfg = compose(["+human=export", f"human.campaign={HUMAN}"], tmp_path=tmp_path)
    out = tmp_path / "export"
    rec = run_stage(cfg, out)
    assert rec["annotations_per_annotator"] == {"a01": 12, "a02": 12, "a03": 12}
    old = {k: v for k, v in files(out).items() if k != "results.json"}
    assert set(old) == {"export_a01.json", "export_a02.json", "export_a03.json"}
    failing.add(max(projects.values()))  # the last project fails; the first two come (changed)
    with pytest.raises(labelstudio.LabelStudioError, match="connection reset"):
        run_stage(cfg, out)
    assert {k: v for k, v in files(out).items() if k != "results.json"} == old
    assert not (out / STAGING).exists()
    assert json.loads((out / "results.json").read_text())["status"] == "failed"


def test_gate_search_killed_mid_write_keeps_the_earlier_summary(tmp_path, monkeypatch):
    """The Optuna search's files (trials.csv / .md, best_overrides.txt, best_params.json) go through the
    one writer: killed before best_params.json, the earlier search's files as they were."""
    import json

    import optuna

    from promptlottery.gating import tune

    def search(n_trials: int):
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
        study.optimize(lambda t: (t.suggest_float("lr", 1e-5, 1e-3, log=True) - 1e-4) ** 2, n_trials=n_trials)
        space = {"lr": {"path": "gate.classifier.lr"}}
        return tune._write_outputs(study, tmp_path / "tune", space, {"metric": "toy"}, t0=0.0, overrides=[])

    summary, _ = search(2)
    old = files(tmp_path / "tune")
    assert set(old) == {"trials.csv", "trials.md", "best_overrides.txt", "best_params.json"}
    assert json.loads((tmp_path / "tune" / "best_params.json").read_text())["n_trials"] == 2
    dumps = json.dumps

    def dying(obj, *a, **kw):
        if isinstance(obj, dict) and "n_trials" in obj:  # the summary: best_params.json's text
            raise Killed
        return dumps(obj, *a, **kw)

    monkeypatch.setattr(json, "dumps", dying)
    with pytest.raises(Killed):
        search(3)
    assert files(tmp_path / "tune") == old and not (tmp_path / "tune" / STAGING).exists()


def test_a_tools_folder_keeps_a_results_json_it_does_not_own(tmp_path):
    """``results=False`` (a command-line tool's folder: the judge cards, ``compare --out``) publishes the
    same way but leaves a results.json already there alone: ``--out`` may name another's folder."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text('{"status": "ok"}')
    writer = staged_outputs(out, results=False)
    with writer as staging:
        (staging / "page.md").write_text("p\n")
    assert (out / "results.json").read_text() == '{"status": "ok"}' and (out / "page.md").is_file()
    assert writer.outputs == {"page.md": file_sha256(out / "page.md")} and not (out / STAGING).exists()


def test_the_judge_cards_are_published_together_and_a_failed_write_keeps_the_earlier_ones(
    tmp_path, monkeypatch
):
    """Before the one writer, write_cards wrote card.json, card.md and cards.json in place: a figure that
    failed on the second card left the first card new and the index old."""
    import json

    from promptlottery.analysis.card import build, render

    monkeypatch.setattr(render, "markdown", lambda card: f"# {card['headline']}\n")
    monkeypatch.setattr(render, "figure", lambda card, path: path.write_bytes(b"png"))
    out = tmp_path / "card"
    cards = [{"id": i, "fake": True, "headline": f"{i} old"} for i in ("a", "b")]
    assert build.write_cards(cards, out) == [out / "a" / "card.md", out / "b" / "card.md"]
    index = json.loads((out / "cards.json").read_text())
    assert [c["page"] for c in index] == [str(out / "a" / "card.md"), str(out / "b" / "card.md")]
    old = files(out)
    assert set(old) == {"cards.json", *(f"{i}/card.{x}" for i in "ab" for x in ("json", "md", "png"))}

    def failing(card, path):
        if card["id"] == "b":
            raise OSError(28, "No space left on device")
        path.write_bytes(b"png")

    monkeypatch.setattr(render, "figure", failing)
    with pytest.raises(OutputsError, match="could not be written into"):
        build.write_cards([{**c, "headline": f"{c['id']} new"} for c in cards], out)
    assert files(out) == old and not (out / STAGING).exists()


def test_compare_cli_killed_mid_write_leaves_no_compare_md(tmp_path, monkeypatch):
    """``python -m promptlottery.analysis.compare.runs A B --out DIR`` goes through the one writer too."""
    from promptlottery.analysis.compare import runs as cmp
    from promptlottery.stages import run_stage

    runs = []
    for v in ("P1", "P2"):
        cfg = compose(["backbone=fake", "dataset.limit=4", f"judge.variant={v}"], tmp_path=tmp_path)
        run_stage(cfg, tmp_path / "runs" / v)
        runs.append(str(tmp_path / "runs" / v))
    to_csv = pd.DataFrame.to_csv

    def dying(self, path=None, *a, **kw):
        if path is not None and str(path).endswith("metrics.csv"):
            raise Killed
        return to_csv(self, path, *a, **kw)

    out = tmp_path / "cmp"
    monkeypatch.setattr(pd.DataFrame, "to_csv", dying)
    with pytest.raises(Killed):
        cmp.main([*runs, "--out", str(out)])
    monkeypatch.undo()
    assert not (out / "compare.md").exists() and not (out / STAGING).exists()
    assert cmp.main([*runs, "--out", str(out)]) == 0
    assert set(files(out)) == {"compare.md", "config_diff.csv", "metrics.csv"}

"""Every stage writes its outputs through the one writer, ``tracking.staging.staged_outputs``.

The files go to a staging directory first and move into the output directory together when the
stage's writing is done; a stage killed mid-write leaves no half-written file among its outputs
and the files of an earlier run as they were. The lottery analysis has its own tests
(tests/test_analysis_staging.py); these cover the writer itself and the stages routed through it
later: compare, validation, human import and export, the gate's search (the gate stage's own test is in
tests/test_gate_stage.py; budget, rubric, human campaign and analyse go by the same code path), the judge
cards and ``compare --out``; the study page's is in tests/test_study.py. Last, a scan of the source with
``ast``: any file write outside the writer, outside ``atomic_write`` and not named in :data:`ALLOWED`
(with its reason) fails, so a new stage cannot write in place silently.
"""

from __future__ import annotations

import ast

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


def _two_runs(tmp_path) -> list[str]:
    """Two fake judging jobs (P1, P2) to compare."""
    from promptlottery.stages import run_stage

    runs = []
    for v in ("P1", "P2"):
        cfg = compose(["backbone=fake", "dataset.limit=4", f"judge.variant={v}"], tmp_path=tmp_path)
        run_stage(cfg, tmp_path / "runs" / v)
        runs.append(str(tmp_path / "runs" / v))
    return runs


def _killed_writing(monkeypatch, name: str) -> None:
    """``DataFrame.to_csv`` dies (:class:`Killed`) when it writes a file named ``name``."""
    to_csv = pd.DataFrame.to_csv

    def dying(self, path=None, *a, **kw):
        if path is not None and str(path).endswith(name):
            raise Killed
        return to_csv(self, path, *a, **kw)

    monkeypatch.setattr(pd.DataFrame, "to_csv", dying)


def test_compare_killed_mid_write_leaves_no_compare_md(tmp_path, monkeypatch):
    """Before the one writer, compare.md was in place when config_diff.csv's write died."""
    from promptlottery.stages import run_stage

    runs = _two_runs(tmp_path)
    out = tmp_path / "cmp"
    cfg = compose(["+analysis=compare", f"analysis.runs=[{runs[0]},{runs[1]}]"], tmp_path=tmp_path)
    _killed_writing(monkeypatch, "config_diff.csv")
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

    runs = _two_runs(tmp_path)
    out = tmp_path / "cmp"
    _killed_writing(monkeypatch, "metrics.csv")
    with pytest.raises(Killed):
        cmp.main([*runs, "--out", str(out)])
    monkeypatch.undo()
    assert not (out / "compare.md").exists() and not (out / STAGING).exists()
    assert cmp.main([*runs, "--out", str(out)]) == 0
    assert set(files(out)) == {"compare.md", "config_diff.csv", "metrics.csv"}


# --- no stage writes in place: every file write in src/promptlottery is staged, atomic or named here ---

#: the file-writing calls looked for: pandas' and pathlib's writers, matplotlib's, and open() to write
WRITERS = {"to_csv", "to_parquet", "write_text", "write_bytes", "savefig"}

#: ``module path::function`` -> why it may write outside a ``with staged_outputs(...)`` block of its own
ALLOWED = {
    # helpers whose every caller hands them the staging dir of a staged_outputs block
    "tracking/tables.py::write_table": "the table writer itself; called with a staging dir",
    "analysis/common/plots.py::save_figure": "every figure: called with a path in a staging dir",
    "analysis/lottery/plots_verdict.py::plot_verdict_map": "the lottery's figure: render.write_outputs' dir",
    "analysis/lottery/render.py::write_outputs": "the lottery report: analysis/stage.py's staging dir",
    "analysis/lottery/study_report.py::write_study_page": "the study page: stages/study.py's extra writer",
    "analysis/budget/pairwise/wording_model.py::write_model_full": "budget/pairwise/report.py's staging dir",
    "analysis/budget/pairwise/wording_model.py::write_model_sparse": "budget/pairwise/report.py's staging dir",
    "analysis/card/figure.py::figure": "the card's figure: card/build.py's write_cards staging dir",
    "analysis/compare/runs.py::compare": "the compare stage's and compare --out's staging dir",
    "gating/report.py::plot_cost_curves": "the gate's figure: gating/stage.py's _write_files staging dir",
    "gating/report.py::write_report": "the gate's report: gating/stage.py's _write_files staging dir",
    "gating/stage.py::_write_files": "the gate's files: called with the stage's staging dir",
    "human/campaign.py::write_campaign": "stages/human.py's _published staging dir",
    "human/labelstudio.py::write_import_files": "write_campaign's (staged) dir",
    "human/labelstudio.py::LabelStudioClient.export": "stages/human.py's export staging dir",
    "rubrics/study.py::write_tables": "rubrics/grid_stage.py's write_study_tables, with a staging dir",
    "stages/validation.py::_equivalence": "run_validation's staging dir",
    # caches and records written atomically: a temporary file, then one os.replace
    "judging/predict.py::ensure_predictions": "the predictions cache: tmp + replace",
    "calls/provider_batch.py::Journal.save": "the provider batch journal: tmp + os.replace",
    "calls/spend.py::SpendCap._sync": "the spend ledger (tmp + os.replace) and its lock file",
    "calls/cache.py::CallCache._keep_pending": "a batch the cache could not take: .part + os.replace",
    "tracking/secrets.py::redact_yaml_files": "Hydra's config copies redacted: tmp + replace",
    "backends/weights.py::assemble_chunks": "a model's weights from its chunks: tmp, hash checked, rename",
    # neither a stage's output nor a cache
    "prompts/group_text.py::dump_group": "rewrites a user's prompt-group YAML, on request",
    "tracking/jobdir.py::_lock": "a job's lock file (opened to hold a lock, never written)",
    "backends/serve.py::VLLMServer.start": "the vLLM server's log, appended while it runs",
    "backends/fake.py::_fault_hooks": "the fake backend's call log for tests, appended and fsynced",
}


#: a stage's helper of :data:`ALLOWED` -> the functions that call it (``caller as alias`` where it is
#: imported under another name), each (checked below) inside a ``with staged_outputs(...)`` block,
#: handing it a dir named ``staging``, or a helper listed here in turn; the low-level writers
#: (write_table, save_figure, ...) are called from many writers of these and are not followed
CALLERS = {
    "analysis/lottery/render.py::write_outputs": ("analysis/stage.py::_lottery",),
    "analysis/lottery/study_report.py::write_study_page": ("stages/study.py::study",),
    "analysis/card/figure.py::figure": ("analysis/card/build.py::write_cards",),
    "analysis/compare/runs.py::compare": (
        "analysis/stage.py::compare as compare_runs",
        "analysis/compare/runs.py::_compare_cli",
    ),
    "gating/stage.py::_write_files": ("gating/stage.py::write_outputs",),
    "gating/report.py::plot_cost_curves": ("gating/stage.py::_write_files",),
    "gating/report.py::write_report": ("gating/stage.py::_write_files",),
    "human/labelstudio.py::LabelStudioClient.export": ("stages/human.py::human_export",),
    "rubrics/study.py::write_tables": ("rubrics/grid_stage.py::write_study_tables",),
    "rubrics/grid_stage.py::write_study_tables": (
        "rubrics/grid_stage.py::rubric_tables",
        "rubrics/stage.py::rubric",
    ),
    "stages/validation.py::_equivalence": ("stages/validation.py::run_validation",),
}


def _write_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr in WRITERS
    if not (isinstance(f, ast.Name) and f.id == "open"):
        return False
    mode = (
        node.args[1]
        if len(node.args) > 1
        else next((k.value for k in node.keywords if k.arg == "mode"), None)
    )
    return isinstance(mode, ast.Constant) and bool(set(str(mode.value)) & set("wax+"))


def _called(node: ast.AST, name: str) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name)


def _writes(node: ast.AST, where: str, covered: bool, found: list[tuple[str, int, bool]]) -> None:
    """Every write call under ``node`` as ``(module::function, line, covered)``; ``covered``: inside a
    ``with staged_outputs(...)`` block or a function handed to ``atomic_write``."""
    for child in ast.iter_child_nodes(node):
        here, cov = where, covered
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            prefix, _, name = where.partition("::")
            here, cov = f"{prefix}::{name + '.' if name else ''}{child.name}", False
        if isinstance(child, ast.With) and any(
            _called(i.context_expr, "staged_outputs") for i in child.items
        ):
            cov = True
        if _called(child, "atomic_write"):
            cov = True  # atomic_write(path, lambda tmp: df.to_parquet(tmp)): writes a temporary file
        if _write_call(child):
            found.append((here, child.lineno, cov))
        _writes(child, here, cov, found)


def _all_writes() -> list[tuple[str, int, bool]]:
    src = REPO / "src" / "promptlottery"
    found: list[tuple[str, int, bool]] = []
    for path in sorted(src.rglob("*.py")):
        _writes(
            ast.parse(path.read_text(encoding="utf-8")), f"{path.relative_to(src).as_posix()}::", False, found
        )
    return found


def test_every_file_write_is_staged_atomic_or_a_named_exception():
    """A stage that writes in place (a kill mid-write leaves half a file; results.json does not vouch for
    it) fails here: every ``.to_csv`` / ``.to_parquet`` / ``.write_text`` / ``.write_bytes`` / ``.savefig``
    / ``open(..., "w")`` in src/promptlottery is inside a ``with staged_outputs(...)`` block, inside
    ``atomic_write(...)``, or in a function of :data:`ALLOWED`, with its reason."""
    found = _all_writes()
    loose = sorted(f"{where} (line {line})" for where, line, cov in found if not cov and where not in ALLOWED)
    assert not loose, "writes outside the one writer (route them through staged_outputs): " + ", ".join(loose)
    stale = sorted(set(ALLOWED) - {where for where, _, cov in found if not cov})
    assert not stale, f"ALLOWED names functions that no longer write outside the writer: {stale}"


def _function(where: str) -> ast.AST | None:
    """The definition ``module path::Qual.name`` names in src/promptlottery, or None."""
    module, _, qualname = where.partition("::")
    node: ast.AST = ast.parse((REPO / "src" / "promptlottery" / module).read_text(encoding="utf-8"))
    for part in qualname.split("."):
        node = next((n for n in ast.iter_child_nodes(node) if getattr(n, "name", None) == part), None)
        if node is None:
            return None
    return node


def _calls_of(node: ast.AST, name: str, covered: bool = False) -> list[tuple[int, bool]]:
    """``(line, staged)`` of every call of ``name`` under ``node``: ``staged`` when inside a
    ``with staged_outputs(...)`` block or handed a name ``staging``."""
    found = []
    for child in ast.iter_child_nodes(node):
        cov = covered or (
            isinstance(child, ast.With)
            and any(_called(i.context_expr, "staged_outputs") for i in child.items)
        )
        if _called(child, name):
            args = [*child.args, *(k.value for k in child.keywords)]
            staging = any(isinstance(n, ast.Name) and n.id == "staging" for a in args for n in ast.walk(a))
            found.append((child.lineno, cov or staging))
        found += _calls_of(child, name, cov)
    return found


@pytest.mark.parametrize("helper", sorted(CALLERS))
def test_a_stages_helper_is_called_with_its_staging_dir(helper):
    """A helper of :data:`ALLOWED` writes where it is told: each of its callers tells it a staging dir
    (before, the study stage called write_study_page on the published output dir)."""
    for entry in CALLERS[helper]:
        caller, _, alias = entry.partition(" as ")
        name = alias or helper.rsplit("::", 1)[1].rsplit(".", 1)[-1]
        node = _function(caller)
        assert node is not None, f"{caller}: no such function (CALLERS is out of date)"
        calls = _calls_of(node, name)
        assert calls, f"{caller} no longer calls {name} (CALLERS is out of date)"
        loose = [line for line, staged in calls if not staged and caller not in CALLERS]
        assert not loose, f"{caller} calls {name} outside a staged_outputs block (line {loose[0]})"


def test_the_scan_sees_a_write_in_place_and_passes_a_staged_one():
    """The scanner itself, on two made-up stages: the in-place one is found, the staged one is not."""
    code = """
def in_place(df, out):
    df.to_csv(out / "t.csv")
    with open(out / "x.txt", "w") as f:
        f.write("x")

def staged(df, out):
    with staged_outputs(out) as staging:
        df.to_csv(staging / "t.csv")
    atomic_write(out / "p.parquet", lambda tmp: df.to_parquet(tmp))
    open(out / "r.txt").read()
"""
    found: list[tuple[str, int, bool]] = []
    _writes(ast.parse(code), "made_up.py::", False, found)
    assert found == [
        ("made_up.py::in_place", 3, False),
        ("made_up.py::in_place", 4, False),
        ("made_up.py::staged", 9, True),
        ("made_up.py::staged", 10, True),
    ]

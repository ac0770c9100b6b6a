"""The lottery stage end to end: report, tables, figures, reproducibility, CLI, callback, notebook, compare."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.stage import run_lottery
from tests.conftest import compose
from tests.test_analysis_fixtures import fake_encode, write_sweep

REPO = Path(__file__).resolve().parents[1]
FAST = {"n_resamples": 40, "n_permutations": 40}
SECTIONS = [
    "## Headlines: the paper vs ours",
    "## Verdict label distributions",
    "## 1. Agreement collapse",
    "## 2. By task type and backbone",
    "## 3. No prompt wins",
    "## 4. Similarity vs stability",
    "## 5. Wording dimensions",
    "## 6. Rank reversals",
    "## 7. Aggregation",
    "## 8. Convergence",
]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return write_sweep(tmp_path_factory.mktemp("lottery") / "grid")


@pytest.fixture(scope="module")
def analysis(sweep, tmp_path_factory):
    out = tmp_path_factory.mktemp("analysis")
    opts = LotteryOptions.from_dict({"runs": str(sweep / "*"), **FAST})
    res = run_lottery(opts, out, encode=fake_encode)
    return out, res


def test_report_has_every_section_and_says_why_when_na(analysis):
    out, res = analysis
    text = (out / "report.md").read_text()
    for s in SECTIONS:
        assert s in text, s
    assert "Verdict: the argmax label" in text
    assert "objective = qa_correctness, qa_groundedness, semantic_alignment" in text
    assert "subjective = dialogue_quality, general_quality, domain_evaluation" in text
    # the collapsed configuration is explained, not printed as a number
    assert "labels collapsed: every verdict is '5'" in text
    assert "n/a: fewer than 2 evaluated systems" in text
    assert (
        "| 0.89 (at T = 1e-5) |" in text
        and "| 0.86 (at T = 1e-5) |" in text
        and "| 0.39 (at T = 0.7) |" in text
        and "94.7%" in text
        and "r = -0.11" in text
        and "tau = 0.176" in text
    )
    # Fleiss: mean over A (1/3) and B (-1/8, tests/test_lottery_paper_rows.py); C is collapsed and left out
    assert res["n_judgments"] > 0 and res["metrics"]["paraphrase_kappa"] == pytest.approx(5 / 48)
    # mean pairwise Cohen beside it: A 1/3, B -1/9
    assert res["metrics"]["paraphrase_kappa_cohen"] == pytest.approx(1 / 9)
    assert json.loads((out / "results.json").read_text())["status"] == "ok"
    # p1 match, binary: 4 of 6 (see tests/test_analysis_fixtures.py)
    assert res["metrics"]["p1_match_binary"] == pytest.approx(4 / 6)


def test_every_table_and_figure_written(analysis):
    out, res = analysis
    tables = {p.stem for p in (out / "tables").glob("*.csv")}
    assert {
        "headlines",
        "agreement_collapse",
        "agreement_by_task_type",
        "variant_human_correlation",
        "best_variant_counts",
        "similarity_stability",
        "wording_dimensions",
        "rank_summary",
        "rank_trajectories",
        "aggregation_vs_humans",
        "ensemble_designs",
        "convergence_summary",
    } <= tables
    assert all((out / "tables" / f"{t}.md").exists() for t in tables)
    figures = sorted((out / "figures").glob("*.png"))
    assert len(figures) >= 8
    for f in figures:
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    assert matplotlib.image.imread(figures[0]).ndim == 3


def test_rerun_is_byte_identical(sweep, tmp_path):
    opts = LotteryOptions.from_dict({"runs": str(sweep / "*"), "plots": False, **FAST})
    a, b = tmp_path / "a", tmp_path / "b"
    run_lottery(opts, a, encode=fake_encode)
    run_lottery(opts, b, encode=fake_encode)
    first = sorted(p.relative_to(a) for p in (a / "tables").iterdir())
    assert first == sorted(p.relative_to(b) for p in (b / "tables").iterdir())
    for rel in [*first, Path("report.md")]:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_options_are_checked():
    with pytest.raises(ValueError, match="unknown analysis option"):
        LotteryOptions.from_dict({"runs": "x", "n_resample": 10})
    with pytest.raises(ValueError, match="embeddings"):
        LotteryOptions.from_dict({"runs": "x", "embeddings": "bert"})


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"embeddings": "bert"}, "analysis.embeddings='bert': must be one of minilm, none"),
        ({"rank_score": "rank"}, "analysis.rank_score='rank': must be one of value, cont"),
        ({"best_by": "spearman"}, "analysis.best_by='spearman': must be one of kendall, pearson"),
        ({"kappa_interval": "bca"}, "analysis.kappa_interval='bca': must be one of studentized, percentile"),
        ({"level": 1.5}, "analysis.level=1.5: must be in (0, 1)"),
        ({"n_resamples": 0}, "analysis.n_resamples=0: must be an integer >= 1"),
        ({"blas_threads": 0}, "analysis.blas_threads=0: must be a positive integer or null"),
    ],
)
def test_bad_option_is_one_line_config_error(bad, message):
    from promptlottery.errors import ConfigError

    with pytest.raises(ConfigError) as exc:
        LotteryOptions.from_dict({"runs": "x", **bad})
    assert str(exc.value) == message


@pytest.mark.parametrize("threads", [1, 2, None])
def test_blas_threads_is_the_analysis_blas_pin(monkeypatch, threads):
    """analysis.blas_threads pins BLAS to that many threads while the analysis runs (1 by default);
    null leaves it as it was."""
    from threadpoolctl import threadpool_info

    from promptlottery.analysis import stage

    def blas():
        return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}

    outside = blas()
    seen = []
    monkeypatch.setattr(stage, "_lottery", lambda opts, job, encode=None, **_: seen.append(blas()) or {})
    assert LotteryOptions.from_dict({"runs": "x"}).blas_threads == 1
    stage._lottery_blas_threads(LotteryOptions.from_dict({"runs": "x", "blas_threads": threads}), None)
    assert outside and seen == [outside if threads is None else {min(threads, max(outside))}]
    assert blas() == outside


def test_choices_are_recorded_as_plain_strings():
    """StrEnum options serialise as their value, so results.json keeps the strings it had."""
    from dataclasses import asdict

    opts = LotteryOptions.from_dict({"runs": "x", "embeddings": "none", "best_by": "pearson"})
    assert opts.embeddings == "none" and f"{opts.best_by}" == "pearson"
    rec = json.loads(json.dumps(asdict(opts)))
    assert (rec["embeddings"], rec["rank_score"], rec["best_by"]) == ("none", "value", "pearson")


def test_command_line(sweep, tmp_path):
    """The exact form scripts rely on: python -m run +analysis=lottery analysis.runs='<glob>'."""
    out = tmp_path / "cli"
    cmd = [
        sys.executable,
        "-m",
        "run",
        "+analysis=lottery",
        f"analysis.runs={sweep}/*_stsb_bb1_*",
        "analysis.embeddings=none",
        "analysis.n_resamples=20",
        "analysis.n_permutations=20",
        "analysis.plots=false",
        "logger=none",
        f"hydra.run.dir={out}",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rec = json.loads((out / "results.json").read_text())
    assert rec["status"] == "ok" and rec["stage"] == "lottery"
    assert rec["metrics"]["paraphrase_kappa"] == pytest.approx(1 / 3)  # configuration A only
    text = (out / "report.md").read_text()
    assert "n/a: prompt embeddings unavailable (AnalysisError: analysis.embeddings=none)" in text


def test_sweep_end_callback(sweep, tmp_path):
    from omegaconf import OmegaConf

    from promptlottery.analysis.callbacks import LotteryAnalysis

    cfg = OmegaConf.create(
        {
            "hydra": {"sweep": {"dir": str(sweep)}},
            "logger": {"name": "none"},
            "paths": {"root_dir": str(REPO)},
            "analysis": {"runs": None, "embeddings": "none", "plots": False, **FAST},
        }
    )
    LotteryAnalysis(output_subdir=str(tmp_path / "lottery")).on_multirun_end(cfg)
    out = tmp_path / "lottery"
    assert (out / "report.md").exists()
    assert json.loads((out / "results.json").read_text())["status"] == "ok"
    # jobs that were analyses themselves (runs given): the callback adds nothing
    cfg.analysis.runs = str(sweep)
    LotteryAnalysis(output_subdir=str(tmp_path / "again")).on_multirun_end(cfg)
    assert not (tmp_path / "again").exists()


def test_notebook_executes(analysis, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    out, _ = analysis
    nb = nbformat.read(REPO / "notebooks" / "prompt_lottery.ipynb", as_version=4)
    os.environ["PROMPTLOTTERY_ANALYSIS_DIR"] = str(out)
    os.environ["PROMPTLOTTERY_NOTEBOOK_FIGURES"] = str(tmp_path / "figs")
    try:
        NotebookClient(
            nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        ).execute()
    finally:
        os.environ.pop("PROMPTLOTTERY_ANALYSIS_DIR")
        os.environ.pop("PROMPTLOTTERY_NOTEBOOK_FIGURES")
    printed = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "figures drawn:" in printed
    assert len(list((tmp_path / "figs").glob("*.png"))) >= 8


def test_compare_results_and_wandb_offline(sweep, analysis, tmp_path, monkeypatch):
    import wandb

    from promptlottery.analysis.compare.runs import main
    from promptlottery.tracking.wandb_offline import read_wandb_log

    jobs = sorted(p for p in sweep.iterdir() if p.is_dir())
    out_dir, _ = analysis
    run = wandb.init(
        project="t",
        mode="offline",
        dir=str(tmp_path),
        config={"judge": {"variant": "P9"}, "seed": 0},
        reinit="finish_previous",
    )
    run.summary.update({"metrics/paraphrase_kappa": 0.5})
    run.log({"metrics/paraphrase_kappa": 0.5, "tbl": wandb.Table(columns=["a"], data=[[1]])})
    run.finish()
    wandb_run = next((tmp_path / "wandb").glob("offline-run-*"))
    # wandb-core may still be flushing the run's log when finish() returns
    log = next(wandb_run.glob("run-*.wandb"))
    for _ in range(100):
        if "judge" in read_wandb_log(log)[0]:
            break
        time.sleep(0.1)
    rc = main([str(jobs[0]), str(out_dir), str(wandb_run), "--out", str(tmp_path / "cmp")])
    assert rc == 0
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "wandb-" in md and "results.json" in md
    metrics = (tmp_path / "cmp" / "metrics.csv").read_text()
    assert "metrics/paraphrase_kappa" in metrics and "tbl/" not in metrics
    diff = (tmp_path / "cmp" / "config_diff.csv").read_text()
    assert "judge.variant" in diff
    assert main([str(jobs[0])]) == 2  # one run is not a comparison


def test_compare_stage(sweep, tmp_path):
    from promptlottery.stages import run_stage

    jobs = sorted(p for p in sweep.iterdir() if p.is_dir())
    cfg = compose(["+analysis=compare", f"analysis.runs=[{jobs[0]},{jobs[1]}]"], tmp_path=tmp_path)
    assert cfg.stage == "compare"
    rec = run_stage(cfg, tmp_path)
    assert rec["status"] == "ok" and len(rec["runs"]) == 2
    assert (tmp_path / "compare.md").exists()


def test_the_analysis_configs_name_their_stage():
    """`+analysis=lottery` runs the analysis; `+analysis=lottery_after_sweep` judges and adds the callback
    that analyses the sweep when it ends; the lottery stage itself never judges."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from promptlottery.stages import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        alone = hydra_compose("config", overrides=["+analysis=lottery"], return_hydra_config=True)
        after = hydra_compose("config", overrides=["+analysis=lottery_after_sweep"], return_hydra_config=True)
        own = hydra_compose("config", overrides=["+experiment=own_judge"], return_hydra_config=True)
    assert alone.stage == "lottery" and not alone.hydra.callbacks.get("lottery_analysis")
    assert after.stage == "judge" and after.analysis.verdict == alone.analysis.verdict
    target = "promptlottery.analysis.callbacks.LotteryAnalysis"
    assert after.hydra.callbacks.lottery_analysis._target_ == target
    assert own.stage == "judge" and own.hydra.callbacks.lottery_analysis._target_ == target

"""The analysis stages: ``lottery`` (judgments of one or many sweeps in, tables + figures + report.md
out) and ``compare`` (two or more runs side by side, :mod:`~promptlottery.analysis.compare.runs`).

    python -m run +analysis=lottery analysis.runs='outputs/cpu_study/grid/*/*'
    python -m run +analysis=compare analysis.runs='[outputs/a,outputs/b]'

Never calls a judge model (the only model it loads is the small sentence encoder of analysis 4,
``analysis.embeddings=minilm``; ``none`` skips it). Writes into its output directory:
``report.md``, ``tables/<name>.csv`` + ``tables/<name>.md``, ``figures/<name>.png`` and
``results.json`` (the headline numbers as ``metrics``, for ``compare``, and the sha256 of every
file above as ``outputs``); the files are written into a staging directory and moved into place
before results.json is written (:mod:`promptlottery.tracking.staging`), so a killed analysis leaves
no results.json saying ok beside files it does not describe. Logs the same to W&B when
``logger=wandb``. The options live in :mod:`~promptlottery.analysis.lottery.options`, the analyses in
:mod:`~promptlottery.analysis.lottery.analyse`, the headline rows in :mod:`~promptlottery.analysis.lottery.headlines`
and the report in :mod:`~promptlottery.analysis.lottery.render`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from promptlottery.analysis.lottery import table_names as lt
from promptlottery.analysis.lottery.analyse import analyse
from promptlottery.analysis.lottery.budget_link import find_budget
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.lottery.render import write_outputs
from promptlottery.analysis.lottery.sections import registry
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.table import AnalysisError
from promptlottery.tracking.job import StageJob, run_job
from promptlottery.tracking.staging import staged_outputs

logger = logging.getLogger(__name__)

__all__ = ["budget", "compare", "load_grid", "lottery", "run_lottery", "summary_metrics"]


def run_lottery(
    opts: LotteryOptions,
    output_dir: str | Path,
    *,
    tracker=None,
    encode=None,
    config: dict | None = None,
    root: str | Path = ".",
) -> dict[str, Any]:
    """Load ``opts.runs``, analyse, write everything (and ``results.json``) into ``output_dir``.

    ``config`` is recorded in results.json (default: the analysis options); ``tracker`` (from
    :func:`promptlottery.tracking.wandb_logger.make_tracker`, or a function that builds one)
    receives the headline metrics, every table and every figure, and is finished here. Returns the
    results.json record plus ``files`` (the judgments read) and ``written`` (the paths).
    """
    job = StageJob(
        "lottery",
        output_dir,
        config=config if config is not None else asdict(opts),
        root=root,
        tracker=tracker,
        fields={"stage": "lottery"},
        label="lottery analysis",
    )
    return run_job(job, lambda job: _lottery_blas_threads(opts, job, encode=encode))


def _lottery_blas_threads(opts: LotteryOptions, job: StageJob, *, encode=None, extra=None) -> dict[str, Any]:
    """The analysis with BLAS on ``opts.blas_threads`` threads (default 1; None: as the environment
    set it). Its matrix products are many and small (one bootstrap's resamples at a time: the Kendall
    blocks, the kappa and Pearson batches), and OpenBLAS's threads, spinning for work on a shared
    2-core machine, made the study analysis about 3x slower (docs/benchmarks.md); ``analysis.n_jobs``
    is the parallelism (joblib limits its workers' BLAS threads likewise). Every table is the same,
    byte for byte (tested by diffing a fake study)."""
    if opts.blas_threads is None:
        return _lottery(opts, job, encode=encode, extra=extra)
    with threadpool_limits(limits=opts.blas_threads, user_api="blas"):
        return _lottery(opts, job, encode=encode, extra=extra)


def _lottery(opts: LotteryOptions, job: StageJob, *, encode=None, extra=None) -> dict[str, Any]:
    """The analysis into ``job.output_dir``, through the one writer; ``extra(staging)``, when given,
    writes more files beside the lottery's (the study page: ``+analysis=study``) into the same staging
    dir, after the lottery's and before the publish, so results.json vouches for them too."""
    output_dir = job.output_dir
    if opts.runs in (None, "", []):
        raise AnalysisError(
            "analysis.runs is required: a glob (or list) of sweep / job directories (to judge a sweep and "
            "analyse it when it ends: +analysis=lottery_after_sweep)"
        )
    # no results.json saying ok until every new file is in place (tracking.staging)
    (output_dir / "results.json").unlink(missing_ok=True)
    grid = load_grid(opts)
    job.tracker.update_config(grid_config(grid))  # W&B: what was analysed, not the default composition
    designs = {
        str(d)
        for f in (grid.judgments, *grid.mode_frames())
        if "design" in f.columns
        for d in f["design"].dropna()
    }
    if "adaptive" in designs:
        raise AnalysisError(
            "these judgments are an adaptive design (judge.design=adaptive): each item stopped at its own "
            "wording, so the lottery's full-grid measures do not apply; its plurality labels and the calls "
            f"saved: python -m run +analysis=budget 'analysis.runs={opts.runs}'"
        )
    if "sparse" in designs:
        raise AnalysisError(
            "these judgments are a sparse design (judge.design=sparse): the lottery report needs every item "
            f"under every wording; estimate from the sparse grid with: python -m run +analysis=budget "
            f"'analysis.runs={opts.runs}'"
        )
    files, incomplete = grid.files, grid.problems
    logger.info(
        "lottery analysis files=%d judgments=%d configurations=%d",
        len(files),
        grid.n_judgments,
        len(grid),
    )
    result = analyse(grid, opts, encode=encode)
    budget_dir = find_budget(opts.budget_runs, files)
    if budget_dir is not None:  # relative to where the report ends up, not to the staging dir
        result["budget_link"] = Path(os.path.relpath(budget_dir, Path(output_dir).resolve())).as_posix()
    result["tables"]["incomplete_configurations"] = pd.DataFrame(
        sorted(incomplete.items()), columns=["config_id", "status"]
    )
    writer = staged_outputs(output_dir)  # a full disk: one line, no .staging left, the old report kept
    with writer as staging:
        written = write_outputs(result, grid, opts, staging, files)
        if extra is not None:
            extra(staging)
    outputs = writer.outputs
    written = _moved(written, staging, output_dir)
    metrics = summary_metrics(result["tables"])
    tracker = job.tracker
    tracker.log_metrics({"metrics": metrics})  # the same keys as results.json: compare can mix the two
    for name, table in result["tables"].items():
        tracker.log_table(f"lottery/table/{name}", table)
    for name, (curve, x, y, stroke, title) in lottery_curves(result["tables"]).items():
        tracker.log_line(f"lottery/curve/{name}", curve, x=x, y=y, stroke=stroke, title=title)
    for name, path in written["figures"].items():
        tracker.log_image(f"lottery/figure/{name}", str(path))
    record = job.ok(
        analysis=asdict(opts),
        metrics=metrics,
        n_judgments=grid.n_judgments,
        n_files=len(files),
        partial=bool(opts.allow_partial and incomplete),
        incomplete_configurations=incomplete,
        report=str(written["report"]),
        outputs=outputs,
    )
    return {**record, "files": files, "written": written}


def _moved(written: Any, staging: Path, output_dir: Path) -> Any:
    """``written``'s paths, from the staging directory to where :func:`publish` moved them."""
    if isinstance(written, dict):
        return {k: _moved(v, staging, output_dir) for k, v in written.items()}
    return Path(output_dir) / Path(written).relative_to(staging)


def load_grid(opts: LotteryOptions) -> JudgmentGrid:
    """The judgment grid of ``opts.runs``, built once with the options' verdict, reference and temperature."""
    return JudgmentGrid.load(
        opts.runs,
        verdict=opts.verdict,
        sampled=opts.sampled_verdict,
        reference=opts.reference,
        temperature=opts.temperature,
        allow_partial=opts.allow_partial,
        allow_mixed_dtypes=opts.allow_mixed_dtypes,
    )


def make_analysis_tracker(logger_cfg, opts: LotteryOptions, *, stage: str = "lottery"):
    """The W&B (or no-op) tracker of one lottery analysis, from the ``logger`` config group. Its W&B
    config is the stage (``lottery``, or ``study`` for a whole study's analysis: also the run's name)
    and the analysis' own options (resolved), then the analysed grid's datasets, backbones and
    wordings (:func:`grid_config`, added once the grid is loaded), never the composition's defaults
    (a standalone analysis composes ``backbone=smollm2 dataset=stsb``; an after-sweep one, the
    judge stage's config)."""
    from omegaconf import OmegaConf

    from promptlottery.tracking.wandb_logger import make_tracker

    return make_tracker(
        OmegaConf.to_container(logger_cfg, resolve=True),
        config={"stage": stage, "analysis": asdict(opts)},
        name=opts.name if stage == "lottery" else stage,
        group="analysis",
        job_type="analysis",
    )


#: the judgment columns that say what a grid is, as W&B config keys (one value: a scalar W&B sorts
#: and groups by; several: their sorted list, comma-joined)
GRID_KEYS = {
    "dataset": "dataset",
    "backbone": "backbone",
    "variant": "wording",
    "judge_family": "judge_family",
    "prompt_group": "prompt_group",
    "criterion": "criterion",
    "judge_mode": "judge_mode",
}


def grid_config(grid: JudgmentGrid) -> dict[str, Any]:
    """What an analysis ran on, for its W&B config: each of :data:`GRID_KEYS`, the configurations
    and the number of judgments."""
    frames = [f for f in (grid.judgments, *grid.mode_frames()) if not f.empty]
    out: dict[str, Any] = {}
    for col, key in GRID_KEYS.items():
        values = sorted({str(v) for f in frames if col in f.columns for v in f[col].dropna().unique()})
        if values:
            out[key] = values[0] if len(values) == 1 else ", ".join(values)
    configs = [c.config_id for c in grid]
    out.update(n_configurations=len(configs), config_ids=configs, n_judgments=int(grid.n_judgments))
    return out


def lottery_curves(tables: dict[str, pd.DataFrame]) -> dict[str, tuple]:
    """The lottery's curves for W&B line plots, ``{name: (table, x, y, stroke, title)}``:
    ``settled_by_k``, the share of a configuration's items whose strict majority is settled by the
    k-th wording (the verdict's ``k_needed``); ``rank_trajectories``, each system's rank under the
    wordings in their order (x: the wording's position, 1 = the reference)."""
    out: dict[str, tuple] = {}
    items = tables.get(lt.UNSTABLE_ITEMS)
    if items is not None and not items.empty and "k_needed" in items.columns:
        rows = []
        for cid, g in items.groupby("config_id", sort=True):
            k_needed = g["k_needed"].fillna(np.inf).to_numpy(float)  # never settled: never counted
            for k in range(1, int(g["n_variants"].max()) + 1):
                rows.append({"config_id": cid, "wordings": k, "settled_share": float((k_needed <= k).mean())})
        out["settled_by_k"] = (
            pd.DataFrame(rows), "wordings", "settled_share", "config_id",
            "items whose majority is settled by the k-th wording",
        )  # fmt: skip
    traj = tables.get(lt.RANK_TRAJECTORIES)
    if traj is not None and not traj.empty and {"variant", "rank", "system"} <= set(traj.columns):
        t = traj.copy()
        t["wording_position"] = t.groupby("config_id")["variant"].transform(
            lambda v: v.map({w: i + 1 for i, w in enumerate(dict.fromkeys(v))})
        )
        t["line"] = t["config_id"].astype(str) + " | " + t["system"].astype(str)
        out["rank_trajectories"] = (t, "wording_position", "rank", "line", "system rank under each wording")
    return out


def summary_metrics(tables: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Flat headline numbers (finite ones only) for results.json, W&B summaries and ``compare``:
    every section's, in report order (the lottery's headlines, ``pairwise/<config>/...``, ``human/...``)."""
    out: dict[str, float] = {}
    for section in registry.SECTIONS:
        out.update(section.metrics(tables))
    return out


def lottery(cfg, job: StageJob, *, stage: str = "lottery", extra=None) -> dict[str, Any]:
    """Stage ``lottery``: the options of ``cfg.analysis``, the analysis into ``job.output_dir``;
    ``stage`` names the W&B run (``study``: the lottery part of a whole study's analysis) and
    ``extra(staging)`` writes that stage's own files into the lottery's staging dir (:func:`_lottery`)."""
    from omegaconf import OmegaConf

    job.fields["stage"] = "lottery"
    job.label = "lottery analysis"
    a = OmegaConf.to_container(cfg.analysis, resolve=True) if cfg.get("analysis") is not None else {}
    opts = LotteryOptions.from_dict(a)
    job.track(make_analysis_tracker(cfg.logger, opts, stage=stage))
    res = _lottery_blas_threads(opts, job, extra=extra)  # the Hydra stage pins BLAS as run_lottery does
    return {k: v for k, v in res.items() if k not in ("files", "written")}


def compare(cfg, job: StageJob) -> dict[str, Any]:
    """Stage ``compare``: ``analysis.runs`` lists the runs; writes compare.md, config_diff.csv, metrics.csv."""
    from omegaconf import OmegaConf

    from promptlottery.analysis.compare.runs import compare as compare_runs

    job.fields["stage"] = "compare"
    a = OmegaConf.to_container(cfg.analysis, resolve=True) if cfg.get("analysis") is not None else {}
    runs = a.get("runs")
    if not runs:
        raise ValueError(
            "analysis.runs is required: a list of run directories, e.g. analysis.runs='[dirA,dirB]'"
        )
    try:
        with staged_outputs(job.output_dir) as staging:
            res = compare_runs([runs] if isinstance(runs, str) else list(runs), staging)
    except (FileNotFoundError, ValueError) as exc:  # a run compare refuses: one line, not a traceback
        raise AnalysisError(f"compare: {exc}") from None
    print(res["markdown"])
    return job.write("ok", runs=[r.path for r in res["runs"]], n_config_differences=len(res["config_diff"]))


def budget(cfg, job: StageJob) -> dict[str, Any]:
    """Stage ``budget``: sparse designs and adaptive stopping simulated on the full grid of ``analysis.runs``."""
    from omegaconf import OmegaConf

    from promptlottery.analysis.budget.report import BudgetOptions, run_budget

    job.fields["stage"] = "budget"
    job.label = "budget simulation"
    a = OmegaConf.to_container(cfg.analysis, resolve=True) if cfg.get("analysis") is not None else {}
    return run_budget(BudgetOptions.from_dict(a), job)

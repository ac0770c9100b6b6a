"""The ``lottery`` stage: judgments of one or many sweeps in, tables + figures + report.md out.

    python -m run +analysis=lottery analysis.runs='outputs/cpu_study/grid/*/*'

Never calls a judge model (the only model it loads is the small sentence encoder of analysis 4,
``analysis.embeddings=minilm``; ``none`` skips it). Writes into its output directory:
``report.md``, ``tables/<name>.csv`` + ``tables/<name>.md``, ``figures/<name>.png`` and
``results.json`` (the headline numbers as ``metrics``, for ``compare``); logs the same to W&B when
``logger=wandb``. The options live in :mod:`~promptlottery.analysis.options`, the analyses in
:mod:`~promptlottery.analysis.analyse`, the headline rows in :mod:`~promptlottery.analysis.headlines`
and the report in :mod:`~promptlottery.analysis.render`.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.analyse import analyse
from promptlottery.analysis.options import LotteryOptions
from promptlottery.analysis.pairwise import pairwise_metrics
from promptlottery.analysis.render import render_report, write_outputs
from promptlottery.judging.table import AnalysisError, add_verdicts, load_judgments
from promptlottery.stages import StageJob, run_stage

logger = logging.getLogger(__name__)

__all__ = ["LotteryOptions", "analyse", "render_report", "run", "run_lottery", "summary_metrics"]


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
    )
    return run_stage(job, lambda job: _lottery(opts, job, encode=encode), name="lottery analysis")


def _lottery(opts: LotteryOptions, job: StageJob, *, encode=None) -> dict[str, Any]:
    output_dir = job.output_dir
    if opts.runs in (None, "", []):
        raise AnalysisError("analysis.runs is required: a glob (or list) of sweep / job directories")
    problems: list[dict[str, str]] = []
    loaded = load_judgments(
        opts.runs,
        allow_partial=opts.allow_partial,
        allow_mixed_dtypes=opts.allow_mixed_dtypes,
        problems=problems,
    )
    files = sorted({str(Path(d) / "judgments.parquet") for d in loaded["run_dir"].unique() if d})
    df = add_verdicts(loaded, opts.verdict, sampled=opts.sampled_verdict)
    incomplete = problems[0] if problems else {}
    logger.info(
        "lottery analysis files=%d judgments=%d configurations=%d",
        len(files),
        len(df),
        df["config_id"].nunique(),
    )
    result = analyse(df, opts, encode=encode)
    result["tables"]["incomplete_configurations"] = pd.DataFrame(
        sorted(incomplete.items()), columns=["config_id", "status"]
    )
    written = write_outputs(result, df, opts, output_dir, files)
    metrics = summary_metrics(result["tables"])
    tracker = job.tracker
    tracker.log_metrics({"metrics": metrics})  # the same keys as results.json: compare can mix the two
    for name, table in result["tables"].items():
        tracker.log_table(f"lottery/table/{name}", table)
    for name, path in written["figures"].items():
        tracker.log_image(f"lottery/figure/{name}", str(path))
    record = job.ok(
        analysis=asdict(opts),
        metrics=metrics,
        n_judgments=len(df),
        n_files=len(files),
        partial=bool(opts.allow_partial and incomplete),
        incomplete_configurations=incomplete,
        report=str(written["report"]),
    )
    return {**record, "files": files, "written": written}


def make_analysis_tracker(logger_cfg, config: dict, opts: LotteryOptions):
    """The W&B (or no-op) tracker of one lottery analysis, from the ``logger`` config group."""
    from omegaconf import OmegaConf

    from promptlottery.tracking.wandb_logger import make_tracker

    return make_tracker(
        OmegaConf.to_container(logger_cfg, resolve=True),
        config=config,
        name=opts.name,
        group="analysis",
        job_type="analysis",
    )


def summary_metrics(tables: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Flat headline numbers (finite ones only) for results.json, W&B summaries and ``compare``."""
    out: dict[str, float] = {}
    for _, r in tables["headlines"].iterrows():
        for suffix, col in (("", "ours"), ("_lo", "ours_lo"), ("_hi", "ours_hi")):
            v = r[col]
            if v is not None and np.isfinite(v):
                out[f"{r['key']}{suffix}"] = float(v)
    out.update(pairwise_metrics(tables))  # pairwise/<config>/...: the "Pairwise judges" measures
    return out


def run(cfg, output_dir: str | Path) -> dict[str, Any]:
    """Stage entry point (``stage: lottery``)."""
    from omegaconf import OmegaConf

    a = OmegaConf.to_container(cfg.analysis, resolve=True) if cfg.get("analysis") is not None else {}
    opts = LotteryOptions.from_dict(a)
    config = OmegaConf.to_container(cfg, resolve=True)
    root = cfg.paths.root_dir if cfg.get("paths") else "."
    tracker = make_analysis_tracker(cfg.logger, config, opts)
    res = run_lottery(opts, output_dir, tracker=tracker, config=config, root=root)
    return {k: v for k, v in res.items() if k not in ("files", "written")}

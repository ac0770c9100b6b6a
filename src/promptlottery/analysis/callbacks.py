"""Hydra callback: run the lottery analysis on a sweep's directory when the sweep ends.

Enabled by ``+analysis=lottery_after_sweep`` (``conf/analysis/lottery_after_sweep.yaml``, whose jobs
judge: ``stage: judge``): ``on_multirun_end`` analyses every judgments.parquet of the sweep into
``<sweep dir>/lottery``, when every job of the sweep finished ``ok`` (Hydra skips
``on_multirun_end`` when a job raised; a job that failed on a bad input returns, and its
``results.json`` says ``failed``); otherwise re-run the sweep to finish it, or run the analysis by
hand (``python -m run +analysis=lottery analysis.runs=<sweep dir>``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

logger = logging.getLogger(__name__)


def check_after_sweep_options(a) -> None:
    """The ``analysis`` options of a judging sweep, checked as the callback will read them when the
    sweep ends (a typo'd key, ``n_resamples=0``): one-line ConfigError before the first call."""
    from promptlottery.analysis.lottery.options import LotteryOptions

    a = OmegaConf.to_container(a, resolve=True) if isinstance(a, DictConfig) else dict(a or {})
    LotteryOptions.from_dict({**a, "runs": a.get("runs") or "."})


class LotteryAnalysis(Callback):
    def __init__(self, output_subdir: str = "lottery") -> None:
        self.output_subdir = output_subdir

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        a = config.get("analysis")
        if a is None or a.get("runs") not in (None, "", []):
            return  # the jobs were analyses themselves (analysis.runs given): nothing to add
        sweep_dir = Path(config.hydra.sweep.dir)
        from promptlottery.tracking.callbacks import summarize_sweep

        jobs = summarize_sweep(sweep_dir)["jobs"] if sweep_dir.is_dir() else []
        failed = [j["job"] for j in jobs if j["status"] not in ("ok", "dry_run")]
        if failed:
            logger.warning(
                "lottery analysis skipped: %d of %d jobs did not finish (%s, sweep_summary.json); re-run the "
                "sweep to finish them, or analyse by hand: python -m run +analysis=lottery analysis.runs=%s",
                len(failed),
                len(jobs),
                ", ".join(failed),
                sweep_dir,
            )
            return
        if not any(sweep_dir.rglob("judgments.parquet")):
            logger.warning("lottery analysis skipped: no judgments.parquet under %s", sweep_dir)
            return
        from promptlottery.analysis.lottery.options import LotteryOptions
        from promptlottery.analysis.stage import make_analysis_tracker, run_lottery

        out = sweep_dir / self.output_subdir
        opts = LotteryOptions.from_dict({**OmegaConf.to_container(a, resolve=True), "runs": str(sweep_dir)})
        cfg = OmegaConf.to_container(config, resolve=False)
        cfg.pop("hydra", None)
        tracker = make_analysis_tracker(config.logger, opts)
        try:  # run_lottery records the failure and finishes the tracker
            res = run_lottery(opts, out, tracker=tracker, config=cfg, root=config.paths.root_dir)
        except Exception as exc:  # noqa: BLE001 - a failed analysis must not fail the finished sweep
            logger.error("lottery analysis failed sweep_dir=%s error=%s", sweep_dir, exc)
            return
        from promptlottery.analysis.lottery.first_screen import verdict_sentences

        for sentence in verdict_sentences(out):
            logger.info("verdict %s", sentence)
        logger.info("lottery analysis written report=%s", res["written"]["report"])

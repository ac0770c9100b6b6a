"""Hydra callbacks: a sweep summary built from each job's own results.json.

Launchers (submitit in particular) can report a job whose function raised as completed; the
summary therefore trusts only the results file each job wrote, and a job without one failed.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

logger = logging.getLogger(__name__)


def summarize_sweep(sweep_dir: str | Path) -> dict[str, Any]:
    sweep_dir = Path(sweep_dir)
    jobs = []
    for job_dir in sorted(p for p in sweep_dir.iterdir() if p.is_dir() and (p / ".hydra").exists()):
        res = job_dir / "results.json"
        if not res.exists():
            jobs.append({"job": job_dir.name, "status": "failed", "error": "no results.json (job died)"})
            continue
        r = json.loads(res.read_text())
        jobs.append({"job": job_dir.name, "status": r.get("status"), "condition": r.get("condition"),
                     "calls": r.get("calls"), "error": r.get("error")})
    counts: dict[str, int] = {}
    for j in jobs:
        counts[j["status"]] = counts.get(j["status"], 0) + 1
    return {"sweep_dir": str(sweep_dir), "n_jobs": len(jobs), "status_counts": counts, "jobs": jobs}


class SweepSummary(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.exists():
            return
        summary = summarize_sweep(sweep_dir)
        (sweep_dir / "sweep_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        failed = [j for j in summary["jobs"] if j["status"] != "ok" and j["status"] != "dry_run"]
        logger.info("sweep finished dir=%s jobs=%d status=%s", sweep_dir, summary["n_jobs"], summary["status_counts"])
        for j in failed:
            logger.error("job failed job=%s error=%s", j["job"], j.get("error"))

"""Hydra callbacks: a sweep summary built from each job's own results.json.

Launchers (submitit in particular) can report a job whose function raised as completed; the
summary therefore trusts only the results file each job wrote, and a job without one failed.

Hydra calls ``on_multirun_end`` only when no job raised, so the summary is also rewritten after
each job (``on_job_end``, in the job's own process): a sweep with a failed job still leaves a
``sweep_summary.json`` that lists it as failed. A job that failed on a bad input (a
:class:`~promptlottery.errors.UserError`) printed its one line and returned (``stages.main``):
``on_multirun_end`` then finds it failed in the summary and ends the sweep with exit status 2. A dry-run sweep adds ``dry_run_total``,
the sum of the jobs' estimates (conditions, calls, prompt tokens, cached calls, cost).

The summary lists the jobs the sweep *planned*: ``on_multirun_start`` expands the sweep's overrides
(``hydra.sweeper.params`` + the command line) the way Hydra's basic sweeper does and writes them to
``sweep_plan.json``; a planned job that never wrote a final results.json is ``missing`` (never
started, killed, or died), so a killed sweep never looks complete.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from promptlottery.atomic import atomic_write_text
from promptlottery.tracking.secrets import redact, redact_yaml_files

logger = logging.getLogger(__name__)

_SUM_KEYS = ("conditions", "calls", "cached_calls", "prompt_tokens", "uncached_prompt_tokens")


PLAN_FILE = "sweep_plan.json"
MISSING_ERROR = "no results.json: the job never started, was killed or died"


def job_overrides(job_dir: Path) -> tuple[str, ...] | None:
    import yaml

    try:
        return tuple(sorted(yaml.safe_load((job_dir / ".hydra" / "overrides.yaml").read_text()) or []))
    except (OSError, ValueError, TypeError, yaml.YAMLError):
        return None


def summarize_sweep(sweep_dir: str | Path) -> dict[str, Any]:
    sweep_dir = Path(sweep_dir)
    jobs = []
    estimates = []
    plan = read_plan(sweep_dir)
    seen: set[tuple[str, ...]] = set()
    for job_dir in sorted(p for p in sweep_dir.iterdir() if p.is_dir() and (p / ".hydra").exists()):
        res = job_dir / "results.json"
        ov = job_overrides(job_dir)
        if ov is not None:
            seen.add(redact_overrides(ov))
        if not res.exists():
            jobs.append({"job": job_dir.name, "status": "missing", "error": MISSING_ERROR})
            continue
        try:
            r = json.loads(res.read_text())
        except (OSError, ValueError) as exc:
            jobs.append({"job": job_dir.name, "status": "failed", "error": f"unreadable results.json: {exc}"})
            continue
        jobs.append(
            {
                "job": job_dir.name,
                "status": r.get("status"),
                "condition": r.get("condition"),
                "calls": r.get("calls"),
                "error": r.get("error"),
            }
        )
        if r.get("status") == "dry_run" and r.get("estimate"):
            estimates.append(r["estimate"])
            jobs[-1]["estimate"] = r["estimate"]
    for planned in plan or []:
        if redact_overrides(planned["overrides"]) not in seen:
            jobs.append(
                {"job": f"#{planned['num']}", "status": "missing", "overrides": planned["overrides"]}
                | {"error": "never started (no job dir)"}
            )
    counts: dict[str, int] = {}
    for j in jobs:
        counts[j["status"]] = counts.get(j["status"], 0) + 1
    summary = {
        "sweep_dir": str(sweep_dir),
        "n_jobs": len(jobs),
        "n_planned": len(plan) if plan is not None else None,
        "status_counts": counts,
        "jobs": jobs,
    }
    if estimates:
        summary["dry_run_total"] = dry_run_total(estimates)
    return redact(summary)


def redact_overrides(overrides) -> tuple[str, ...]:
    return tuple(sorted(redact(list(overrides))))


def plan_jobs(config: DictConfig) -> list[dict[str, Any]] | None:
    """The jobs a sweep will launch (``num`` + ``overrides``), as Hydra's basic sweeper expands them.

    None for other sweepers (their jobs are not known in advance).
    """
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    target = str(config.hydra.sweeper.get("_target_", ""))
    if not target.endswith("BasicSweeper"):
        return None
    from omegaconf import OmegaConf

    # unresolved, like the overrides.yaml Hydra writes (an ${oc.env:...} stays a reference); another
    # interpolation (``${group_variants:${judge.group_file}}``) is resolved: its value is the list swept
    params = []
    for k, v in (OmegaConf.to_container(config.hydra.sweeper, resolve=False).get("params") or {}).items():
        if isinstance(v, str) and "${" in v and "oc.env" not in v:
            v = config.hydra.sweeper.params[k]
        params.append(f"{k}={v}")
    params += OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
    overrides = OverridesParser.create().parse_overrides(params)
    batches = BasicSweeper.split_arguments(overrides, None)
    return [{"num": i, "overrides": sorted(o)} for i, o in enumerate(batches[0])]


def read_plan(sweep_dir: Path) -> list[dict[str, Any]] | None:
    try:
        return json.loads((sweep_dir / PLAN_FILE).read_text())["jobs"]
    except (OSError, ValueError, KeyError):
        return None


def dry_run_total(estimates: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum per-job dry-run estimates; the cost covers only the jobs whose backbone has a price."""
    total: dict[str, Any] = {k: sum(int(e.get(k) or 0) for e in estimates) for k in _SUM_KEYS}
    priced = [e for e in estimates if e.get("cost_usd") is not None]
    total["cost_usd"] = round(sum(float(e["cost_usd"]) for e in priced), 6) if priced else None
    total["priced_conditions"] = len(priced)
    methods = sorted({str(e.get("token_count", "tokenizer")) for e in estimates})
    total["token_count"] = methods[0] if len(methods) == 1 else ",".join(methods)
    return total


def format_dry_run_total(total: dict[str, Any]) -> str:
    line = "dry_run_total " + " ".join(f"{k}={v}" for k, v in total.items())
    if "approx" in str(total.get("token_count")):
        line += (
            "\nnote: some backbones' tokenizers could not be loaded offline; their prompt tokens are"
            " approximated as chars/4 + 4 per chat message"
        )
    return line


def study_dirs(root: Path) -> list[Path]:
    """The experiments' sweep dirs of a study at ``root`` (its ``study_plan.json``, written by the
    study sweeper before any job); empty for an ordinary sweep."""
    try:
        names = json.loads((root / "study_plan.json").read_text())["experiments"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [root / n for n in names]


def write_summary(sweep_dir: Path) -> dict[str, Any]:
    summary = summarize_sweep(sweep_dir)
    atomic_write_text(sweep_dir / "sweep_summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


class SweepSummary(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Write the plan (and a first summary, all ``missing``) before any job runs."""
        try:
            sweep_dir = Path(str(config.hydra.sweep.dir))
            jobs = plan_jobs(config)
        except Exception as exc:  # noqa: BLE001 - never let the summary break a sweep
            logger.warning("sweep plan not written error=%s", exc)
            return
        if jobs is None:
            return
        sweep_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(sweep_dir / PLAN_FILE, json.dumps({"jobs": redact(jobs)}, indent=2) + "\n")
        write_summary(sweep_dir)

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        try:
            from hydra.core.hydra_config import HydraConfig
            from hydra.types import RunMode

            hc = HydraConfig.get()
            if hc.mode != RunMode.MULTIRUN:
                return
            sweep_dir = Path(hc.sweep.dir)
        except Exception:  # noqa: BLE001 - never let the summary break a job
            return
        # a failed job's results.json was written by the job wrapper (tracking.job.run_job); a job
        # without one never started, was killed or died, and the summary lists it as missing
        redact_yaml_files([sweep_dir / "multirun.yaml"])
        try:
            write_summary(sweep_dir)
        except OSError as exc:
            logger.warning("sweep summary not written dir=%s error=%s", sweep_dir, exc)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.exists():
            return
        redact_yaml_files([sweep_dir / "multirun.yaml"])
        # a study (promptlottery.stages.study): one sweep dir per experiment, listed in its plan
        dirs = study_dirs(sweep_dir)
        failed = []
        for d in dirs or [sweep_dir]:
            if not d.exists():
                continue
            summary = write_summary(d)
            failed += [j for j in summary["jobs"] if j["status"] != "ok" and j["status"] != "dry_run"]
            logger.info(
                "sweep finished dir=%s jobs=%d status=%s", d, summary["n_jobs"], summary["status_counts"]
            )
            if "dry_run_total" in summary:
                print(format_dry_run_total(summary["dry_run_total"]))
        for j in failed:
            logger.error("job failed job=%s error=%s", j["job"], j.get("error"))
        if failed:  # each failed job printed its own error line; the others' outputs stay
            raise SystemExit(2)

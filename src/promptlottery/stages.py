"""The jobs `python -m run` can run, by name (``stage=...``), and the shell every stage runs in.

A stage is a function from its options to a result record and the files it writes. The shell
around it (as lightning-hydra-template's ``task_wrapper``) is :func:`run_stage`: it keeps the time,
builds the tracker on first use, writes ``results.json`` for a failure (the stage writes the one
for success through :meth:`StageJob.ok`), finishes the tracker with the exit code and logs the
final line. ``results.json`` is written atomically and redacted (:func:`tracking.records.write_results`);
claiming the output directory and the one-line error of a single run stay in
:func:`tracking.guard.guarded_job`, around the whole job.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from promptlottery.tracking.records import write_results

logger = logging.getLogger(__name__)

STAGES: dict[str, str] = {
    "compare": "promptlottery.analysis.compare:run",
    "gate": "promptlottery.gating.stage:run",
    "human_analyse": "promptlottery.human.stage:run_analyse",
    "human_campaign": "promptlottery.human.stage:run_campaign",
    "human_import": "promptlottery.human.stage:run_import",
    "judge": "promptlottery.pipeline:run",
    "lottery": "promptlottery.analysis.stage:run",
    "paraphrase": "promptlottery.prompts.generate:run",
    "rubric": "promptlottery.rubrics.study:run",
    "validate_prompts": "promptlottery.prompts.validation:run_validation",
}

T = TypeVar("T")


def get_stage(name: str) -> Callable:
    if name not in STAGES:
        raise ValueError(f"unknown stage {name!r}; valid: {sorted(STAGES)}")
    module, _, attr = STAGES[name].partition(":")
    return getattr(importlib.import_module(module), attr)


class StageJob:
    """One run of a stage: where it writes, what its records carry, its tracker.

    ``fields`` go into every record the job writes, ok or failed (e.g. ``stage``, ``condition``);
    ``tracker`` is a tracker (finished by :func:`run_stage`), or the keywords of
    :func:`tracking.wandb_logger.make_tracker` (``name``, ``group``, ``job_type``) to build one
    from ``config["logger"]`` on first use of :attr:`tracker` (a dry run that never logs starts no
    W&B run), or None (no-op).
    """

    def __init__(
        self,
        stage: str,
        output_dir: str | Path,
        *,
        config: dict,
        root: str | Path = ".",
        tracker: Any = None,
        fields: dict[str, Any] | None = None,
        t0: float | None = None,
    ):
        self.stage = stage
        self.output_dir = Path(output_dir)
        self.config = config
        self.root = root
        self.fields = dict(fields or {})
        self.notes: dict[str, Any] = {}
        self.record: dict[str, Any] | None = None
        self._tracker_source = tracker
        self._tracker = None if tracker is None or isinstance(tracker, dict) else tracker
        self.t0 = time.perf_counter() if t0 is None else t0

    @property
    def tracker(self):
        if self._tracker is None:
            from promptlottery.tracking.wandb_logger import NullTracker, make_tracker

            kw = self._tracker_source
            self._tracker = (
                NullTracker() if kw is None else make_tracker(self.config["logger"], config=self.config, **kw)
            )
        return self._tracker

    @property
    def seconds(self) -> float:
        return round(time.perf_counter() - self.t0, 3)

    def write(self, status: str, **fields: Any) -> dict[str, Any]:
        """Write ``results.json`` (atomic, secrets redacted) and remember it as this job's record."""
        self.record = write_results(
            self.output_dir / "results.json",
            config=self.config,
            status=status,
            root=self.root,
            **self.fields,
            **fields,
        )
        return self.record

    def ok(self, **fields: Any) -> dict[str, Any]:
        """The success record, with the seconds since the job started last."""
        return self.write("ok", **fields, seconds=self.seconds)

    def note(self, **fields: Any) -> None:
        """key=value pairs for the final log line."""
        self.notes.update(fields)


def run_stage(job: StageJob, body: Callable[[StageJob], T], *, name: str | None = None) -> T:
    """Run ``body(job)``; on failure write a ``failed`` record unless the body wrote one; finish
    the tracker (if one was built) with the exit code; log ``<name> done|failed key=value ...``."""
    name = name or job.stage
    try:
        result = body(job)
        if job.record is None:
            raise RuntimeError(
                f"stage {job.stage} returned without writing {job.output_dir / 'results.json'}"
            )
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        if job.record is None:
            job.write("failed", error=message)
        if job._tracker is not None:
            job._tracker.finish(exit_code=1)
        logger.error(
            "%s failed stage=%s %soutput_dir=%s error=%s",
            name,
            job.stage,
            _kv(job.fields),
            job.output_dir,
            message,
        )
        raise
    if job._tracker is not None:
        job._tracker.finish()
    logger.info(
        "%s done stage=%s status=%s %s%soutput_dir=%s seconds=%.1f",
        name,
        job.stage,
        job.record.get("status"),
        _kv(job.fields),
        _kv(job.notes),
        job.output_dir,
        time.perf_counter() - job.t0,
    )
    return result


def _kv(fields: dict[str, Any]) -> str:
    return "".join(f"{k}={v} " for k, v in fields.items() if k != "stage")

"""The one wrapper every stage runs in (as lightning-hydra-template's ``task_wrapper``).

:func:`run_job` runs a stage's body on a :class:`StageJob` and is the only code that writes a
failed ``results.json``: it runs the config check first (``check``; the stage registry passes
``config.check_config``, so the config is checked once), claims the output directory when asked
(``claim``: a ``python -m run`` job, :mod:`promptlottery.tracking.jobdir`), keeps the time, builds
the tracker on first use, writes ``results.json`` for a failure unless the body wrote one (the body
writes the one for success through :meth:`StageJob.ok`) or the directory is another job's,
finishes the tracker with the exit code, logs the final line and releases the directory.
``results.json`` is written atomically and redacted (:func:`tracking.records.write_results`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from promptlottery.tracking.jobdir import OutputDirError, check_job_dir, claim_output_dir, release_output_dir
from promptlottery.tracking.records import write_results

logger = logging.getLogger(__name__)

T = TypeVar("T")


class StageJob:
    """One run of a stage: where it writes, what its records carry, its tracker.

    ``fields`` go into every record the job writes, ok or failed (e.g. ``stage``, ``condition``);
    ``tracker`` is a tracker (finished by :func:`run_job`), or the keywords of
    :func:`tracking.wandb_logger.make_tracker` (``name``, ``group``, ``job_type``; ``config``: what
    the run's config shows, default the job's whole config) to build one
    from ``config["logger"]`` on first use of :attr:`tracker` (a dry run that never logs starts no
    W&B run), or None (no-op). A stage body that learns them late (a judge job names its tracker
    after its condition) sets them with :meth:`track` and ``fields`` before first use. ``label``
    names the job in the final log line (default: the stage).
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
        label: str | None = None,
    ):
        self.stage = stage
        self.output_dir = Path(output_dir)
        self.config = config
        self.root = root
        self.fields = dict(fields or {})
        self.label = label or stage
        self.notes: dict[str, Any] = {}
        self.record: dict[str, Any] | None = None
        self._tracker_source = None
        self._tracker = None
        self.track(tracker)
        self.t0 = time.perf_counter() if t0 is None else t0

    def track(self, tracker: Any = None, **make_tracker_kw: Any) -> None:
        """Set the tracker (an object, or ``make_tracker`` keywords) before its first use."""
        if self._tracker is not None:
            raise RuntimeError(f"stage {self.stage}: the tracker is already in use")
        source = make_tracker_kw or tracker
        self._tracker_source = source
        self._tracker = None if source is None or isinstance(source, dict) else source

    @property
    def tracker(self):
        if self._tracker is None:
            from promptlottery.tracking.wandb_logger import NullTracker, make_tracker

            kw = dict(self._tracker_source or {})
            config = kw.pop("config", self.config)  # a stage may log less than its composed config
            self._tracker = (
                NullTracker()
                if self._tracker_source is None
                else make_tracker(self.config["logger"], config=config, **kw)
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


def run_job(
    job: StageJob,
    body: Callable[[StageJob], T],
    *,
    check: Callable[[], None] | None = None,
    claim: bool = False,
) -> T:
    """Run ``check()``, claim the output dir (``claim``), then ``body(job)``; on failure write a
    ``failed`` record unless the body wrote one or the directory belongs to another job; finish the
    tracker (if one was built) with the exit code; log ``<label> done|failed key=value ...``."""
    out = job.output_dir
    checked = claimed = False
    try:
        if check is not None:
            check()  # before anything is written: a refused config claims no directory
        # no job's or analysis's dir is written through a link (one planted at <sweep>/lottery, or
        # above it), nor inside the source tree: checked here too for a job that claims nothing
        check_job_dir(out, job.root, entries=False)
        checked = True
        if claim:
            claim_output_dir(out, job.config)
            claimed = True
        out.mkdir(parents=True, exist_ok=True)
        result = body(job)
        if job.record is None:
            raise RuntimeError(f"stage {job.stage} returned without writing {out / 'results.json'}")
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        if job.record is None and _may_record(out, exc, checked=checked, claim=claim, claimed=claimed):
            try:
                out.mkdir(parents=True, exist_ok=True)
                job.write("failed", error=message)
            except OSError as record_exc:  # a full disk: the error itself is what the user must see
                logger.error("%s: the failed record could not be written either (%s)", out, record_exc)
        if job._tracker is not None:
            job._tracker.finish(exit_code=1)
        logger.error(
            "%s failed stage=%s %soutput_dir=%s error=%s", job.label, job.stage, _kv(job.fields), out, message
        )
        raise
    finally:
        if claimed:
            release_output_dir(out)
    if job._tracker is not None:
        job._tracker.finish()
    logger.info(
        "%s done stage=%s status=%s %s%soutput_dir=%s seconds=%.1f",
        job.label,
        job.stage,
        job.record.get("status"),
        _kv(job.fields),
        _kv(job.notes),
        out,
        time.perf_counter() - job.t0,
    )
    return result


def _may_record(out: Path, exc: Exception, *, checked: bool, claim: bool, claimed: bool) -> bool:
    """Whether a failure may be written into ``out``: never into another job's directory.

    A config refused by the check creates no directory: its failure is recorded only where the
    directory exists already (a ``python -m run`` job's, made by Hydra). A job that claims its
    directory and failed before the claim records only into a directory that holds no job's files
    yet (Hydra's own files aside)."""
    if isinstance(exc, OutputDirError) or (not checked and not out.is_dir()):
        return False
    if claim and not claimed:
        return not (out / ".job.json").exists() and not (out / "results.json").exists()
    return True


def _kv(fields: dict[str, Any]) -> str:
    return "".join(f"{k}={v} " for k, v in fields.items() if k != "stage")

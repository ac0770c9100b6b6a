"""A study's tasks: one task per configuration x backbone, its wordings judged in one process with one
engine load (``study.layout``).

A study launched one job per condition loads an engine per condition: on SLURM, 660 loads of a 7-9B
model at about two minutes each, more GPU-hours than the judging (the plan's ``task per job``). With
``study.layout=configuration_backbone`` the study sweeper launches one task per group of an
experiment's jobs that differ only in their wording (``judge.variant``). The task runs each member
job as Hydra's basic launcher would have (its composed config, its ``hydra.job.num``, its dir
``<experiment>/<num>_<dataset>_<group>_<variant>_<backbone>``, its ``.hydra/`` files, the callbacks),
inside :func:`~promptlottery.calls.compose.shared_backends`, so the members share one engine. The
job dirs, results and sweep summaries are those of ``study.layout=condition``; the tasks' own dirs
are ``<experiment>/.study_tasks/<task>/`` (their Hydra files and log), beside ``tasks.json``, which
lists each task's member jobs. ``auto`` (the default) groups under any launcher but Hydra's basic
one, which runs every job in one local process anyway.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from promptlottery.errors import ConfigError

logger = logging.getLogger(__name__)

TASKS_DIR = ".study_tasks"
TASKS_FILE = "tasks.json"
LAYOUTS = ("auto", "condition", "configuration_backbone")
BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
#: the override a configuration x backbone's jobs differ in
WORDING_KEY = "judge.variant"


def study_layout(config: DictConfig) -> str:
    """``condition`` or ``configuration_backbone``: the study's ``study.layout``, ``auto`` resolved by
    the launcher (grouped unless it is Hydra's basic launcher). A typo is one line naming the key and
    its choices."""
    layout = str(OmegaConf.select(config, "study.layout", default="auto") or "auto")
    if layout not in LAYOUTS:
        raise ConfigError(f"study.layout={layout}: not one of {', '.join(LAYOUTS)}")
    if layout != "auto":
        return layout
    launcher = str(OmegaConf.select(config, "hydra.launcher._target_", default="") or "")
    return "condition" if launcher in ("", BASIC_LAUNCHER) else "configuration_backbone"


def group_jobs(jobs: list[list[str]]) -> list[list[int]]:
    """The indices of ``jobs`` (override lists) grouped by everything but their wording
    (``judge.variant=...``), in the order each group's first job comes; each group in job order.

    >>> group_jobs([["b=x", "judge.variant=P1"], ["b=y", "judge.variant=P1"], ["b=x", "judge.variant=P2"]])
    [[0, 2], [1]]
    """
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, job in enumerate(jobs):
        rest = tuple(sorted(o for o in job if o.split("=", 1)[0].lstrip("+~") != WORDING_KEY))
        groups.setdefault(rest, []).append(i)
    return list(groups.values())


def task_overrides(launch: list[list[str]], groups: list[list[int]]) -> list[list[str]]:
    """Each task's own overrides, as launched: its first member's, in ``<sweep dir>/.study_tasks/<k>``
    (its dir; the members keep theirs)."""
    return [[*launch[g[0]], f"hydra.sweep.subdir={TASKS_DIR}/{k}"] for k, g in enumerate(groups)]


def write_tasks(sweep_dir: Path, launch: list[list[str]], groups: list[list[int]]) -> Path:
    """``<sweep_dir>/.study_tasks/tasks.json``: each task's member jobs (``num`` and the overrides
    they are launched with), read by :class:`GroupTask` in the task's process."""
    from promptlottery.atomic import atomic_write_text

    path = sweep_dir / TASKS_DIR / TASKS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "layout": "configuration_backbone",
        "tasks": {
            str(k): [{"num": i, "overrides": list(launch[i])} for i in g] for k, g in enumerate(groups)
        },
    }
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return path


def _without_task_dir(config: DictConfig) -> DictConfig:
    """The task's config as its members' master: the hydra overrides of the study's command line,
    without the ``hydra.sweep.dir`` and ``hydra.sweep.subdir`` the task was launched with (appended
    last; each member brings its own)."""
    import copy

    master = copy.deepcopy(config)
    OmegaConf.set_readonly(master.hydra, False)
    hydra = [str(o) for o in master.hydra.overrides.hydra]
    for key in ("hydra.sweep.subdir=", "hydra.sweep.dir="):
        last = max((i for i, o in enumerate(hydra) if o.startswith(key)), default=None)
        if last is not None:
            del hydra[last]
    master.hydra.overrides.hydra = hydra
    return master


def task_members(output_dir: Path) -> list[dict[str, Any]] | None:
    """The member jobs of the task whose dir is ``output_dir``; None for an ordinary job."""
    output_dir = Path(output_dir)
    if output_dir.parent.name != TASKS_DIR:
        return None
    try:
        return json.loads((output_dir.parent / TASKS_FILE).read_text())["tasks"][output_dir.name]
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"{output_dir}: a study task without its member list ({exc})") from None


class GroupTask:
    """The task function of a study's jobs (picklable, for submitit): an ordinary job runs
    ``task_function``; a task of ``study.layout=configuration_backbone`` runs each of its member jobs
    as Hydra's basic launcher runs a job, sharing one engine, and fails after the last of them when
    one raised (the others' results stay)."""

    def __init__(self, task_function) -> None:
        self.task_function = task_function

    def __call__(self, cfg: DictConfig) -> Any:
        from hydra.core.hydra_config import HydraConfig

        hc = HydraConfig.instance().cfg
        members = task_members(Path(str(hc.hydra.runtime.output_dir)))
        if members is None:
            return self.task_function(cfg)
        return self.run_members(hc, members)

    def run_members(self, master: DictConfig, members: list[dict[str, Any]]) -> list[Any]:
        from hydra._internal.callbacks import Callbacks
        from hydra.core.global_hydra import GlobalHydra
        from hydra.core.utils import JobStatus, configure_log, run_job
        from hydra.types import HydraContext
        from omegaconf import open_dict

        from promptlottery.calls.compose import shared_backends

        context = HydraContext(
            config_loader=GlobalHydra.instance().config_loader(), callbacks=Callbacks(master)
        )
        master = _without_task_dir(master)
        task_id = master.hydra.job.id
        logger.info("study task: %d jobs, one engine per backbone", len(members))
        returns = []
        with shared_backends():
            for m in members:  # as hydra's BasicLauncher.launch runs a job
                config = context.config_loader.load_sweep_config(master, list(m["overrides"]))
                with open_dict(config):
                    config.hydra.job.id = f"{task_id}_{m['num']}"
                    config.hydra.job.num = m["num"]
                returns.append(
                    run_job(
                        hydra_context=context,
                        task_function=self.task_function,
                        config=config,
                        job_dir_key="hydra.sweep.dir",
                        job_subdir_key="hydra.sweep.subdir",
                    )
                )
                configure_log(master.hydra.job_logging, master.hydra.verbose)  # the task's own log again
        failed = [r for r in returns if r.status == JobStatus.FAILED]
        if failed:
            return failed[0].return_value  # re-raises the first failed member's exception
        return [r.return_value for r in returns]

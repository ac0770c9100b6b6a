"""Hydra's sweeper for a study (``+study=<name>``, conf/study/): each experiment's own sweep, launched
into its own sweep dir; ``dry_run=true`` prints the study's plan and launches nothing.

Hydra finds sweepers only in the ``hydra_plugins`` namespace package; the work is done in
:mod:`promptlottery.stages.study`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig

logger = logging.getLogger(__name__)


class StudySweeper(Sweeper):
    def __init__(self, max_batch_size: int | None = None, params: Any = None) -> None:
        self.max_batch_size = max_batch_size
        self.config: DictConfig | None = None
        self.launcher = None
        self.hydra_context = None

    def setup(self, *, hydra_context, task_function, config: DictConfig) -> None:
        from promptlottery.stages.study_tasks import GroupTask

        self.config = config
        self.hydra_context = hydra_context
        # a task of study.layout=configuration_backbone runs its member jobs; any other job runs as is
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=GroupTask(task_function), config=config
        )

    def _compose(self, overrides: list[str]) -> DictConfig:
        return self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))

    def sweep(self, arguments: list[str]) -> Any:
        import sys

        from promptlottery.errors import UserError
        from promptlottery.stages import study as st
        from promptlottery.stages import user_message
        from promptlottery.stages.study_plan import plan_study
        from promptlottery.stages.study_plan_text import format_plan, write_study_plan

        root = Path(str(self.config.hydra.sweep.dir))
        name = str(self.config.study.get("name") or "study")
        from promptlottery.stages import study_tasks as tasks

        try:
            experiments = st.study_experiments(self.config, arguments, self._compose)
            layout = tasks.study_layout(self.config)
        except Exception as exc:  # noqa: BLE001 - a bad input is one line, a bug a traceback
            message = str(exc) if isinstance(exc, UserError) else user_message(exc)
            if message is None:
                raise
            print(f"error: {message}", file=sys.stderr)
            raise SystemExit(2) from None
        n = sum(len(e.jobs) for e in experiments)
        logger.info(
            "study=%s experiments=%d jobs=%d dir=%s layout=%s", name, len(experiments), n, root, layout
        )
        if self.config.get("dry_run") or self.config.study.get("plan_first", True):
            plan = plan_study(experiments, self._compose)
            path = write_study_plan(plan, root, study=name)
            print(format_plan(plan, study=f"study {name}"), flush=True)
            if self.config.get("dry_run"):
                print(f"plan written: {path} (and study_dry_run.md); no job started")
                return []
        st.write_plans(experiments, root, study=name)
        returns = []
        for e in experiments:  # numbered from 0 in its own dir, like a sweep of that experiment alone
            launch = e.launch_overrides()
            if layout == "configuration_backbone":  # one task per configuration x backbone
                groups = tasks.group_jobs(e.jobs)
                tasks.write_tasks(e.sweep_dir, launch, groups)
                launch = tasks.task_overrides(launch, groups)
                logger.info("experiment=%s: %d jobs in %d tasks", e.name, len(e.jobs), len(groups))
            returns.append(self.launcher.launch(launch, initial_job_idx=0))
        return returns

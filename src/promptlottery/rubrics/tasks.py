"""Rubric-study tasks by dataset: per dataset, the rubric texts, criteria, human labels and examples.

A task answers every dataset-specific question of the study, so the runner and the tables never
branch on a dataset name: which items are eligible, the task block and the response shown to the
judge, the holistic rubric and scale, the analytic criteria (ASAP++ traits / InFoBench decomposed
questions) with their scales, the human holistic and analytic labels, the raters' agreement level,
the non-human reference labels where the dataset has only those, and representative examples.

Official texts are read from the data dir at run time (ASAP prompts, holistic rubrics, source
texts: copyrighted, never copied into the repository); the wording the datasets do not ship is
package data in ``rubrics/texts/`` (our own words).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from promptlottery.registry import Registry
from promptlottery.rubrics.asap_task import AsapTask
from promptlottery.rubrics.infobench_task import InfoBenchTask
from promptlottery.rubrics.task_base import RubricTask

#: rubric tasks by dataset name (the loader's registry name)
TASKS: Registry[type[RubricTask]] = Registry("rubric task", error=ValueError)
TASKS.register("asap", AsapTask)
TASKS.register("infobench", InfoBenchTask)


def make_task(
    dataset: str,
    data_dir: str | Path,
    options: dict[str, Any],
    settings: dict[str, Any],
    *,
    human_holistic: str | None = None,
) -> RubricTask:
    """The rubric task of ``dataset``; ``human_holistic`` picks the human holistic label's definition
    (``RubricTask.HUMAN_HOLISTIC``; None: the task's default)."""
    if dataset not in TASKS:
        raise ValueError(f"rubric study: no rubric task for dataset {dataset!r}; valid: {sorted(TASKS)}")
    return TASKS.get(dataset)(data_dir, options, settings, human_holistic)

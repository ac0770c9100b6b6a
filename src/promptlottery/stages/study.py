"""The study: every configuration of a study x backbone x wording as one sweep, and its plan.

A study (``conf/study/<name>.yaml``, ``python -m run +study=paper grid=gpu -m``) lists experiments, each
an ordinary ``conf/experiment/`` overlay with its own sweep (``hydra.sweeper.params``: P1-P5, the grid's
backbones). The study sweeper (``conf/hydra/sweeper/study.yaml``) expands each experiment's own sweep
with the study's overrides for it (``study.overrides``; ``study.overrides_by_grid.<grid>`` on top, e.g.
SQuAD v2's 400 questions under ``grid=gpu``) and the command line's, and launches each experiment's
jobs into ``<hydra.sweep.dir>/<experiment>/`` numbered from 0: the layout, overrides and plan file of
``python -m run +experiment=<e> <overrides> hydra.sweep.dir=<root>/<e> -m``, so a study resumes the
sweeps run one at a time before it (same requests: every call a cache hit).

``dry_run=true`` launches nothing: :func:`~promptlottery.stages.study_plan.plan_study` counts each job's calls, prompt tokens, cached
calls and API cost, loading each dataset once and rendering each wording's prompts once per backbone,
and turns tokens into GPU- and CPU-hours at each backbone's declared throughput (``backbone.throughput``,
measured here for the CPU judges, an assumption for the GPU ones), with the two ways of running it on
SLURM (:func:`~promptlottery.stages.study_plan_text.slurm_layouts`). Tokens are counted as characters / 4 + 4 per chat message for every
backbone (no tokenizer is loaded: the Hub's are unavailable offline); a one-configuration dry run
(``+experiment=<e> dry_run=true -m``) counts with the real tokenizers where they load.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from promptlottery.errors import ConfigError
from promptlottery.stages.study_plan import StudyExperiment

logger = logging.getLogger(__name__)

SWEEPER = "hydra_plugins.promptlottery_study.study_sweeper.StudySweeper"
PLAN_FILE = "study_plan.json"


def is_study(config: DictConfig) -> bool:
    """Whether ``config`` (a sweep's) is swept by the study sweeper."""
    return str(OmegaConf.select(config, "hydra.sweeper._target_", default="")) == SWEEPER


def check_experiment_sweep(args: Iterable[str]) -> None:
    """Refuse ``+experiment=a,b -m`` outside a study in one line: a plain sweep over experiments keeps
    only what the command line sweeps and drops each experiment's own sweep (its P1-P5 wordings)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = [a for a in args if not a.startswith("-")]
    try:
        parsed = OverridesParser.create().parse_overrides(args)
    except Exception:  # noqa: BLE001 - a malformed override: Hydra's own message says where
        return
    if any(o.key_or_group == "study" for o in parsed):
        return
    for o in parsed:
        if o.key_or_group == "experiment" and o.is_sweep_override():
            names = ",".join(str(v) for v in o.sweep_iterator())
            raise ConfigError(
                f"{o.input_line}: a sweep over experiments would drop each one's own sweep (its wordings "
                f"P1-P5, hydra.sweeper.params); run them as a study: python -m run +study=paper "
                f"'study.experiments=[{names}]' -m"
            )


def _params(node: Any) -> list[str]:
    if not node:
        return []
    return [f"{k}={v}" for k, v in OmegaConf.to_container(node, resolve=True).items()]


def study_experiments(
    config: DictConfig, arguments: list[str], compose: Callable[[list[str]], DictConfig]
) -> list[StudyExperiment]:
    """The study's experiments and their jobs: each experiment's own sweep params (composed with the
    study and the command line's plain overrides), then the study's overrides for it, then the command
    line (which wins), expanded like Hydra's basic sweeper. ``compose(overrides)`` composes a job."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    study = config.study
    if not study or not study.get("experiments"):
        raise ConfigError("+study: study.experiments is empty; a study lists the experiments it runs")
    parser = OverridesParser.create()
    # the study's own overrides (+study=..., study.*) shape the study, not its jobs
    args = [a for a in arguments if parser.parse_override(a).key_or_group.split(".")[0] != "study"]
    plain = [a for a in args if not parser.parse_override(a).is_sweep_override()]
    study_arg = [a for a in arguments if a not in args]
    grid = str(OmegaConf.select(config, "hydra.runtime.choices.grid", default="") or "")
    by_grid = (study.get("overrides_by_grid") or {}).get(grid) or {}
    root = Path(str(config.hydra.sweep.dir))
    out = []
    for name in study.experiments:
        name = str(name)
        own = [
            *(study.get("overrides") or {}).get(name, study.get("default_overrides") or []),
            *by_grid.get(name, []),
        ]
        own = [str(o) for o in own]
        composed = compose([*study_arg, f"+experiment={name}", *own, *plain])
        params = _params(OmegaConf.select(composed, "hydra.sweeper.params"))
        overrides = parser.parse_overrides([*params, f"+experiment={name}", *own, *args])
        batches = BasicSweeper.split_arguments(overrides, None)[0]
        out.append(StudyExperiment(name, root / name, [list(b) for b in batches]))
    return out


def write_plans(experiments: list[StudyExperiment], root: Path, *, study: str) -> None:
    """Each experiment's ``sweep_plan.json`` and the study's ``study_plan.json`` (its experiments)."""
    from promptlottery.atomic import atomic_write_text
    from promptlottery.tracking.secrets import redact

    for e in experiments:
        e.sweep_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(e.sweep_dir / "sweep_plan.json", json.dumps(redact(e.plan()), indent=2) + "\n")
    root.mkdir(parents=True, exist_ok=True)
    record = {"study": study, "experiments": {e.name: len(e.jobs) for e in experiments}}
    atomic_write_text(root / PLAN_FILE, json.dumps(record, indent=2) + "\n")


class SweepPlan(Callback):
    """Hydra callback (``conf/hydra/default.yaml``): an ordinary judging sweep prints its plan (jobs,
    calls, tokens, cost, hours, a predict stage) before its first job, e.g. ``python -m run
    +experiment=squad_v2 -m`` before the candidate systems and the judges start. A dry run prints its
    own totals, a study its own plan; a plan that cannot be made is a warning, never a failed sweep."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from hydra.core.global_hydra import GlobalHydra

        from promptlottery.stages.study_plan import plan_study
        from promptlottery.stages.study_plan_text import format_plan
        from promptlottery.tracking.callbacks import plan_jobs

        if is_study(config) or config.get("dry_run") or (config.get("stage") or "judge") != "judge":
            return
        try:
            jobs = plan_jobs(config)
            if not jobs:
                return
            loader = GlobalHydra.instance().config_loader()
            name = str(config.get("task_name") or "sweep")
            exp = StudyExperiment(
                name, Path(str(config.hydra.sweep.dir)), [list(j["overrides"]) for j in jobs]
            )
            plan = plan_study([exp], lambda ov: loader.load_sweep_config(config, list(ov)), progress=False)
        except Exception as exc:  # noqa: BLE001 - the plan informs; the preflight refuses bad inputs
            logger.warning(
                "no plan for this sweep error=%s", str(exc).splitlines()[0][:200] if str(exc) else exc
            )
            return
        print(format_plan(plan, study=f"sweep {name}"), flush=True)


def study(cfg: DictConfig, job) -> dict[str, Any]:
    """Stage ``study`` (``+analysis=study``): the lottery analysis of every configuration of a study dir
    (each kept separate), then the study page ``study.md`` with the paper's rows and the breakdowns
    per backbone and per judge family (:mod:`promptlottery.analysis.lottery.study_report`), written
    into the lottery's staging dir and published with it: results.json vouches for the page too."""
    from promptlottery.analysis.lottery.study_report import not_analysed, write_study_page
    from promptlottery.analysis.stage import lottery

    def page(staging: Path) -> None:
        write_study_page(staging, fake=is_fake_study(staging / "tables"))

    record = lottery(cfg, job, stage="study", extra=page)
    tables = Path(job.output_dir) / "tables"
    fake = is_fake_study(tables)
    for line in not_analysed(tables):
        logger.warning("configuration not analysed (incomplete): %s", line)
    log_study(job.tracker, tables, fake=fake)
    print(f"study page: {Path(job.output_dir) / 'study.md'}" + (" (FAKE judge)" if fake else ""))
    return record


def is_fake_study(tables: Path) -> bool:
    """Whether any configuration of the lottery tables in ``tables`` was judged by the fake backend."""
    import pandas as pd

    configs = pd.read_csv(tables / "configurations.csv")
    backbones = configs["backbone"].astype(str)
    return bool(
        (backbones == "fake").any()
        or backbones.str.startswith("fake-").any()  # a stand-in named as fake (benchmarks/bench_study.py)
        or (configs["model"].astype(str) == "fake-judge").any()
    )


def log_study(tracker, tables: Path, *, fake: bool) -> None:
    """The study page to W&B, beside the lottery's headlines: its numbers as ``study/...`` scalars
    (:func:`~promptlottery.analysis.lottery.study_report.study_metrics`: the §4.2 breakdowns with
    their intervals, per backbone and per judge family), its breakdown tables, and
    ``study/judge_is_fake`` (1 for a fake judge: a fake study says so in W&B too)."""
    import pandas as pd

    from promptlottery.analysis.lottery.study_report import paper_breakdown, study_metrics

    tracker.log_metrics({"study": {**study_metrics(tables), "judge_is_fake": int(fake)}})
    for name in ("study_by_backbone", "study_by_family"):
        tracker.log_table(f"study/table/{name[len('study_') :]}", pd.read_csv(tables / f"{name}.csv"))
    beside = paper_breakdown(tables)
    if len(beside):
        tracker.log_table("study/table/paper_section_4_2", beside)

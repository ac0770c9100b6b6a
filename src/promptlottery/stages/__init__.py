"""The jobs `python -m run` can run, by name (``stage=...``), and how one is run.

:data:`STAGES` finds a stage: ``stage=NAME`` runs the function it names (``stage=gate`` ->
``promptlottery.gating.stage:gate``); a stage that combines packages (paraphrase generation, prompt
validation, the human baseline) lives in this package, above every package it calls. The
config picks the stage by name: ``conf/config.yaml`` judges (``stage: judge``), and each
stage's config group sets its own (``+analysis=lottery`` -> ``stage: lottery``, ``+gate=selective``
-> ``stage: gate``, ...). A stage is a function ``(cfg, job, **kw) -> record`` that does its work and
writes its ``results.json`` through ``job`` (:class:`~promptlottery.tracking.job.StageJob`);
:func:`run_stage` runs it inside the one job wrapper (:func:`~promptlottery.tracking.job.run_job`),
which checks the config once (:func:`check`) and records a failure.

:func:`register_configs` puts the run schema and every stage's typed options into Hydra's
ConfigStore (``promptlottery.config`` imports no stage: each stage registers its own).
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from promptlottery.errors import ConfigError, UserError
from promptlottery.registry import Registry
from promptlottery.tracking.job import StageJob, run_job

logger = logging.getLogger(__name__)

#: stage name -> ``module:function`` of its body: a stage that serves one package is that package's
#: ``stage.py``; a stage that combines packages below it lives in this package (promptlottery.stages.*)
STAGES: Registry[str] = Registry("stage", error=ConfigError)
for _name, _target in {
    "budget": "promptlottery.analysis.stage:budget",
    "compare": "promptlottery.analysis.stage:compare",
    "gate": "promptlottery.gating.stage:gate",
    "human_analyse": "promptlottery.stages.human:human_analyse",
    "human_campaign": "promptlottery.stages.human:human_campaign",
    "human_export": "promptlottery.stages.human:human_export",
    "human_import": "promptlottery.stages.human_import:human_import",
    "judge": "promptlottery.judging.stage:judge",
    "lottery": "promptlottery.analysis.stage:lottery",
    "paraphrase": "promptlottery.stages.paraphrase:paraphrase",
    "rubric": "promptlottery.rubrics.stage:rubric",
    "rubric_judge": "promptlottery.rubrics.grid_stage:rubric_judge",
    "rubric_tables": "promptlottery.rubrics.grid_stage:rubric_tables",
    "study": "promptlottery.stages.study:study",
    "validate_prompts": "promptlottery.stages.validation:validate_prompts",
}.items():
    STAGES.register(_name, _target)

#: stage name -> the function that checks its user inputs before any job starts (:func:`preflight`)
INPUT_CHECKS: Registry[str] = Registry("stage input check")
INPUT_CHECKS.register("judge", "promptlottery.judging.inputs:check_inputs")

#: the modules of the stages' typed options: each has ``register_configs()`` (its schema in the
#: ConfigStore) and ``check(cfg)`` (its cross-field checks, run with the config check)
STAGE_OPTIONS: Registry[str] = Registry("stage options")
STAGE_OPTIONS.register("gate", "promptlottery.gating.config")


def _target(spec: str) -> Any:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def register_configs() -> None:
    """The run schema, its resolvers and every stage's typed options, in Hydra's ConfigStore."""
    from promptlottery import config

    config.register_configs()
    for _, module in STAGE_OPTIONS.items():
        importlib.import_module(module).register_configs()


def check(cfg: DictConfig) -> None:
    """The one config check of a job, before any output: the run config's keys and ranges
    (:func:`promptlottery.config.check_config`), then every stage's typed options."""
    from promptlottery.config import check_config

    check_config(cfg)
    for _, module in STAGE_OPTIONS.items():
        importlib.import_module(module).check(cfg)


def preflight(cfg: DictConfig) -> None:
    """Every check of a job's inputs that needs no model and writes nothing: the config
    (:func:`check`), then the stage's own inputs (:data:`INPUT_CHECKS`: the judge stage's prompt
    group, table and rendered prompts). Raises a one-line :class:`UserError`. A single run calls it
    in its job wrapper; a sweep calls it for every planned job before the first starts
    (:class:`Preflight`)."""
    check(cfg)
    name = OmegaConf.select(cfg, "stage", default="judge")
    if name == "judge" and OmegaConf.select(cfg, "analysis", default=None) is not None:
        # the lottery analysis after a judging sweep (+analysis=lottery_after_sweep): its options
        # are checked now, not after every call is made
        from promptlottery.analysis.callbacks import check_after_sweep_options

        check_after_sweep_options(cfg.analysis)
    if name in INPUT_CHECKS:
        _target(INPUT_CHECKS.get(name))(cfg)


def user_message(exc: BaseException) -> str | None:
    """The one line a bad input gets, found in ``exc`` or its causes (a :class:`UserError`, or a
    Hydra / OmegaConf composition error such as a wrong type); None for a bug (a traceback then)."""
    from hydra.errors import ConfigCompositionException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    seen = set()
    chain: list[BaseException] = []
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    for e in chain:
        if isinstance(e, UserError):
            return str(e)
    first = chain[0] if chain else None
    if isinstance(first, (ConfigCompositionException, MissingConfigException, OmegaConfBaseException)):
        # the override and what is wrong with it (the deeper causes repeat it as a template)
        lines = [str(e).strip().splitlines()[0] for e in chain[:2] if str(e).strip()]
        return ": ".join(dict.fromkeys(lines))
    return None


def check_composition(args: list[str], config_dir: str | Path, config_name: str = "config") -> None:
    """Compose the command line's plain overrides once before Hydra starts, so that a wrong type
    (``n_samples=abc``) or an unknown config group is one line (:func:`user_message`) instead of
    Hydra's multi-line report. Sweeps (``a,b``), ``hydra.*`` overrides and Hydra's own flags are left to
    Hydra (a sweep's values are composed per job by :class:`Preflight`)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if any(a.startswith("-") and a not in ("-m", "--multirun") for a in args):
        return
    try:
        parsed = OverridesParser.create().parse_overrides([a for a in args if not a.startswith("-")])
    except Exception:  # noqa: BLE001 - a malformed override: Hydra's own message says where
        return
    plain = [
        o.input_line for o in parsed if not o.is_sweep_override() and not o.key_or_group.startswith("hydra")
    ]
    dirs = [o.input_line for o in parsed if not o.is_sweep_override() and o.key_or_group in _HYDRA_DIRS]
    try:
        with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
            composed = compose(config_name, overrides=plain + dirs, return_hydra_config=True)
    except Exception as exc:  # noqa: BLE001 - a bad input becomes one line, a bug is Hydra's to show
        message = user_message(exc)
        if message is not None:
            raise ConfigError(message) from None
        return
    check_output_dirs(composed, multirun=any(a in ("-m", "--multirun") for a in args))


#: the directories Hydra makes before any of the project's code runs
_HYDRA_DIRS = ("hydra.run.dir", "hydra.sweep.dir")


def check_output_dirs(cfg: DictConfig, *, multirun: bool) -> None:
    """The dirs a run writes, checked before Hydra makes them (:func:`~promptlottery.tracking.jobdir.check_output_root`:
    writable, no link, not inside the source tree): ``paths.output_dir``, the run's or sweep's dir and
    the call cache's dir. A dir that cannot be resolved yet (a sweep value) is left to the job's own check."""
    from promptlottery.tracking.jobdir import check_output_root

    root = OmegaConf.select(cfg, "paths.root_dir", default=None)
    wanted = [
        ("paths.output_dir", "paths.output_dir"),
        ("hydra.sweep.dir" if multirun else "hydra.run.dir",) * 2,
    ]
    if not OmegaConf.select(cfg, "paths.cache_url", default=None):
        wanted.append(("paths.cache_dir", "paths.cache_dir"))
    for key, what in wanted:
        try:
            value = OmegaConf.select(cfg, key, default=None)
        except Exception:  # noqa: BLE001 - an interpolation only a job can resolve
            continue
        if value:
            check_output_root(value, what, root, follow_ok=key == "paths.cache_dir")


def get_stage(name: str) -> Callable[..., dict[str, Any]]:
    """The function of stage ``name`` (its ``module:function`` in :data:`STAGES`)."""
    if name not in STAGES:
        raise ConfigError(f"stage={name}: unknown stage; valid: {STAGES.names()}")
    return _target(STAGES.get(name))


def run_stage(cfg: DictConfig, output_dir: str | Path, *, claim: bool = False, **kw: Any) -> dict[str, Any]:
    """Run the stage ``cfg.stage`` names into ``output_dir`` inside the job wrapper; ``kw`` go to
    the stage (tests pass a fake ``backend=``); ``claim`` takes the directory first (``python -m run``).
    The values of the config's key variables are redacted from everything the job prints or writes."""
    from promptlottery.tracking.secrets import remember_secret_values

    remember_secret_values(OmegaConf.to_container(cfg, resolve=False))
    name = OmegaConf.select(cfg, "stage", default="judge")
    config = _config(cfg)
    root = (config.get("paths") or {}).get("root_dir", ".")
    job = StageJob(name, output_dir, config=config, root=root)
    return run_job(
        job, lambda job: get_stage(name)(cfg, job, **kw), check=lambda: preflight(cfg), claim=claim
    )


def main(cfg: DictConfig, output_dir: str | Path) -> dict[str, Any]:
    """A ``python -m run`` job: secrets redacted from every log handler and Hydra's ``.hydra/*.yaml``,
    the stage run with its directory claimed, and a :class:`UserError` shown as one line on stderr
    instead of a traceback. A single run then exits with status 2. A job of a sweep names its dir in
    that line and returns its failed record (its ``results.json`` says ``failed``): the other jobs go
    on, and the sweep exits with status 2 when it ends (:class:`~promptlottery.tracking.callbacks.SweepSummary`);
    re-raised, Hydra's multirun would print the error again under its traceback. A bug is re-raised
    in both. An exception's text is redacted before anyone prints it."""
    from promptlottery.tracking.secrets import install_log_redaction, redact_exception, redact_yaml_files

    install_log_redaction()
    redact_yaml_files(sorted((Path(output_dir) / ".hydra").glob("*.yaml")))
    try:
        return run_stage(cfg, output_dir, claim=True)
    except Exception as exc:
        redact_exception(exc)  # Hydra prints a bug's exception itself
        if not isinstance(exc, UserError):
            raise
        if in_multirun():
            print(f"error: job {Path(output_dir).name}: {exc}", file=sys.stderr)
            return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def in_multirun() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:  # noqa: BLE001
        return False


def _config(cfg: DictConfig) -> dict[str, Any]:
    for resolve in (True, False):  # resolved like a job's own record, unresolved if that fails
        try:
            return OmegaConf.to_container(cfg, resolve=resolve)
        except Exception:  # noqa: BLE001
            continue
    return {}


def preflight_sweep(config: DictConfig) -> None:
    """:func:`preflight` for every job a sweep plans (Hydra's basic sweeper), each composed as the
    launcher will compose it, before any job starts; raises the first one-line :class:`UserError`.
    A sweeper whose jobs are not known in advance gets the sweep's own config checked."""
    import time

    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import open_dict, read_write
    from tqdm import tqdm

    from promptlottery.tracking.callbacks import plan_jobs

    try:
        jobs = plan_jobs(config)
        loader = GlobalHydra.instance().config_loader()
        configs = (
            [config]
            if jobs is None
            else (loader.load_sweep_config(config, list(j["overrides"])) for j in jobs)
        )
        started = time.monotonic()
        n = 1 if jobs is None else len(jobs)
        logger.info("preflight: checking the inputs of %d job(s) before the first starts", n)
        for k, job_cfg in enumerate(tqdm(configs, total=n, desc="preflight", unit="job", disable=None), 1):
            job_cfg = job_cfg.copy()
            with read_write(job_cfg), open_dict(job_cfg):
                job_cfg.pop("hydra", None)
            preflight(job_cfg)
            if k % max(1, n // 10) == 0 and k < n:  # a line every tenth, for logs (the bar needs a tty)
                logger.info("preflight: %d of %d jobs checked (%.0f s)", k, n, time.monotonic() - started)
        logger.info("preflight: %d job(s) checked in %.1f s", n, time.monotonic() - started)
    except Exception as exc:  # noqa: BLE001 - a bad input becomes one line, a bug stays a traceback
        message = user_message(exc)
        if message is None:
            raise
        raise ConfigError(message) from None


class Preflight(Callback):
    """Hydra callback (``conf/hydra/default.yaml``): a sweep's bad input is one line on stderr and
    exit status 2, printed once, before any job starts (:func:`preflight_sweep`)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            preflight_sweep(config)
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        except Exception as exc:  # noqa: BLE001 - a bug: Hydra would warn and start the jobs anyway
            import traceback

            from promptlottery.tracking.secrets import redact_exception

            redact_exception(exc)
            traceback.print_exc()
            print(
                f"error: the sweep's preflight failed ({type(exc).__name__}); no job was started",
                file=sys.stderr,
            )
            raise SystemExit(2) from None

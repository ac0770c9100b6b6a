"""The jobs `python -m run` can run, by name (``stage=...``), and how one is run.

One rule finds a stage: ``stage=NAME`` runs the function ``NAME`` of its package's ``stage.py``
(``stage=gate`` -> ``promptlottery.gating.stage.gate``); :data:`STAGES` names the package. The
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

from omegaconf import DictConfig, OmegaConf

from promptlottery.errors import ConfigError, UserError
from promptlottery.tracking.job import StageJob, run_job

logger = logging.getLogger(__name__)

#: stage name -> the package whose ``stage.py`` defines a function of that name
STAGES: dict[str, str] = {
    "budget": "analysis",
    "compare": "analysis",
    "gate": "gating",
    "human_analyse": "human",
    "human_campaign": "human",
    "human_export": "human",
    "human_import": "human",
    "judge": "judging",
    "lottery": "analysis",
    "paraphrase": "prompts",
    "rubric": "rubrics",
    "validate_prompts": "prompts",
}

#: the modules of the stages' typed options: each has ``register_configs()`` (its schema in the
#: ConfigStore) and ``check(cfg)`` (its cross-field checks, run with the config check)
STAGE_OPTIONS = ("promptlottery.gating.config",)


def register_configs() -> None:
    """The run schema, its resolvers and every stage's typed options, in Hydra's ConfigStore."""
    from promptlottery import config

    config.register_configs()
    for module in STAGE_OPTIONS:
        importlib.import_module(module).register_configs()


def check(cfg: DictConfig) -> None:
    """The one config check of a job, before any output: the run config's keys and ranges
    (:func:`promptlottery.config.check_config`), then every stage's typed options."""
    from promptlottery.config import check_config

    check_config(cfg)
    for module in STAGE_OPTIONS:
        importlib.import_module(module).check(cfg)


def get_stage(name: str) -> Callable[..., dict[str, Any]]:
    """The function of stage ``name``: ``promptlottery.<STAGES[name]>.stage.<name>``."""
    if name not in STAGES:
        raise ConfigError(f"stage={name}: unknown stage; valid: {sorted(STAGES)}")
    return getattr(importlib.import_module(f"promptlottery.{STAGES[name]}.stage"), name)


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
    return run_job(job, lambda job: get_stage(name)(cfg, job, **kw), check=lambda: check(cfg), claim=claim)


def main(cfg: DictConfig, output_dir: str | Path) -> dict[str, Any]:
    """A ``python -m run`` job: secrets redacted from every log handler and Hydra's ``.hydra/*.yaml``,
    the stage run with its directory claimed and, for a single run, a :class:`UserError` shown as one
    line on stderr with exit status 2 instead of a traceback (a sweep re-raises, so Hydra records the
    failed job and the other jobs go on); an exception's text is redacted before anyone prints it."""
    from promptlottery.tracking.secrets import install_log_redaction, redact_exception, redact_yaml_files

    install_log_redaction()
    redact_yaml_files(sorted((Path(output_dir) / ".hydra").glob("*.yaml")))
    try:
        return run_stage(cfg, output_dir, claim=True)
    except Exception as exc:
        redact_exception(exc)  # Hydra prints a sweep's (or a bug's) exception itself
        if not isinstance(exc, UserError) or in_multirun():
            raise
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

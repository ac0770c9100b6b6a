"""What every `python -m run` job does around its stage: checks first, a clear failure record last.

Before the stage: log redaction on every handler, secrets redacted from Hydra's ``.hydra/*.yaml``,
the config checked (unknown keys, value ranges), the output directory claimed
(:mod:`promptlottery.tracking.jobdir`). If the stage raises: a ``results.json`` with
``status: failed`` and the error (unless the stage wrote one, or the directory is another job's),
and, for a single run, the error as one line on stderr with exit status 2 instead of a traceback
(a sweep re-raises, so Hydra records the failed job and the other jobs go on).
"""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

logger = logging.getLogger(__name__)


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors whose message says everything: shown as one line, no traceback."""
    from promptlottery.config import ConfigError
    from promptlottery.data.schema import DatasetError
    from promptlottery.judging.cache import CacheError
    from promptlottery.judging.runner import JudgingError
    from promptlottery.tracking.jobdir import OutputDirError

    errors: list[type[BaseException]] = [ConfigError, DatasetError, CacheError, JudgingError, OutputDirError]
    try:
        from promptlottery.judging.table import AnalysisError

        errors.append(AnalysisError)
    except ImportError:  # pragma: no cover
        pass
    return tuple(errors)


def _config(cfg: DictConfig) -> dict[str, Any]:
    for resolve in (True, False):  # resolved like a job's own record, unresolved if that fails
        try:
            return OmegaConf.to_container(cfg, resolve=resolve)
        except Exception:  # noqa: BLE001
            continue
    return {}


@contextmanager
def guarded_job(cfg: DictConfig, output_dir: str | Path, *, multirun: bool | None = None):
    from promptlottery.config import check_config
    from promptlottery.tracking.jobdir import OutputDirError, claim_output_dir, release_output_dir
    from promptlottery.tracking.records import write_results
    from promptlottery.tracking.secrets import install_log_redaction, redact_yaml_files

    out = Path(output_dir)
    install_log_redaction()
    redact_yaml_files(sorted((out / ".hydra").glob("*.yaml")))
    if multirun is None:
        multirun = in_multirun()
    claimed = False
    try:
        check_config(cfg)
        claim_output_dir(out, _config(cfg))
        claimed = True
        yield
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        # a config refused before the claim leaves a dir with only Hydra's files: record why there too,
        # but never into a directory that belongs to another job
        foreign = isinstance(exc, OutputDirError) or (not claimed and (out / ".job.json").exists())
        if not foreign and not (out / "results.json").exists():
            config = _config(cfg)
            root = (config.get("paths") or {}).get("root_dir", ".")
            write_results(out / "results.json", config=config, status="failed", root=root, error=message)
        logger.error("job failed output_dir=%s error=%s", out, message)
        if multirun or not isinstance(exc, _user_errors()):
            raise
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        if claimed:
            release_output_dir(out)


def in_multirun() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:  # noqa: BLE001
        return False

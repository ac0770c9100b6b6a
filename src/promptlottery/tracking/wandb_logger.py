"""W&B tracking, offline by default; a no-op tracker when ``logger=none``."""

from __future__ import annotations

import logging
import math
from typing import Any

import pandas as pd

logger = logging.getLogger(__name__)


class NullTracker:
    def log_metrics(self, metrics: dict[str, Any]) -> None: ...
    def log_table(self, name: str, df: pd.DataFrame) -> None: ...
    def log_line(
        self, name: str, df: pd.DataFrame, *, x: str, y: str, stroke: str | None = None, title: str = ""
    ) -> None: ...
    def log_image(self, name: str, path: str) -> None: ...
    def update_config(self, config: dict[str, Any]) -> None: ...
    def finish(self, exit_code: int = 0) -> None: ...


class WandbTracker(NullTracker):
    def __init__(
        self,
        *,
        project: str,
        mode: str,
        dir: str | None,
        config: dict,
        name: str | None,
        group: str | None = None,
        tags: list[str] = (),
        job_type: str = "judge",
        max_rows: int = 2000,
    ):
        import wandb  # lazy: heavy import

        self._wandb = wandb
        self.max_rows = max_rows
        if dir:
            from pathlib import Path

            Path(dir).mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=project,
            mode=mode,
            dir=dir,
            config=config,
            name=name,
            group=group,
            tags=list(tags),
            job_type=job_type,
            reinit="finish_previous",
        )
        logger.info("wandb run mode=%s dir=%s id=%s", mode, dir, self.run.id)

    def log_metrics(self, metrics: dict[str, Any]) -> None:
        """Numbers as summary scalars (and one history step); an undefined one (NaN, inf) is left
        out: W&B's run table would sort it as a value."""
        flat = {
            k: v
            for k, v in _flatten(metrics).items()
            if isinstance(v, (int, float)) and v is not None and math.isfinite(v)
        }
        self.run.summary.update(flat)
        self.run.log(flat)

    def log_table(self, name: str, df: pd.DataFrame) -> None:
        self.run.log(
            {name: self._wandb.Table(dataframe=df.head(self.max_rows).astype(object).where(df.notna(), None))}
        )

    def log_line(
        self, name: str, df: pd.DataFrame, *, x: str, y: str, stroke: str | None = None, title: str = ""
    ) -> None:
        """A native W&B line plot (``wandb.plot.line`` over a table of ``x``, ``y`` and one line per
        ``stroke`` value); rows without ``x`` or ``y`` are left out, an empty curve is not logged."""
        cols = [c for c in (x, y, stroke) if c]
        if df is None or df.empty or any(c not in df.columns for c in cols):
            return
        data = df[cols].copy()
        data[x], data[y] = pd.to_numeric(data[x], errors="coerce"), pd.to_numeric(data[y], errors="coerce")
        data = data.dropna(subset=[x, y]).head(self.max_rows)
        if data.empty:
            return
        if stroke:
            data[stroke] = data[stroke].astype(str)
        table = self._wandb.Table(dataframe=data.reset_index(drop=True))
        self.run.log({name: self._wandb.plot.line(table, x, y, stroke=stroke, title=title or name)})

    def log_image(self, name: str, path: str) -> None:
        self.run.log({name: self._wandb.Image(path)})

    def update_config(self, config: dict[str, Any]) -> None:
        """Add keys to the run's config (a stage that learns what it ran on after the run started)."""
        from promptlottery.tracking.secrets import redact

        self.run.config.update(redact(config), allow_val_change=True)

    def finish(self, exit_code: int = 0) -> None:
        self.run.finish(exit_code=exit_code)


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def make_tracker(
    logger_cfg: dict,
    *,
    config: dict,
    name: str | None = None,
    group: str | None = None,
    job_type: str = "judge",
) -> NullTracker:
    if logger_cfg.get("name", "none") == "none":
        return NullTracker()
    if logger_cfg["name"] != "wandb":
        raise ValueError(f"logger.name must be 'wandb' or 'none', got {logger_cfg['name']!r}")
    from promptlottery.tracking.secrets import redact

    return WandbTracker(
        project=logger_cfg.get("project", "promptlottery"),
        mode=logger_cfg.get("mode", "offline"),
        dir=logger_cfg.get("dir"),
        config=redact(config),
        name=name,
        group=group,
        job_type=job_type,
        max_rows=logger_cfg.get("log_table_rows", 2000),
    )

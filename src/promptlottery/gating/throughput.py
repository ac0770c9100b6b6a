"""What the gate's training needs besides the model: CPU threads, a per-epoch progress bar with
examples/s, and Lightning's W&B logger (split out of :mod:`promptlottery.gating.model`)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from promptlottery.gating.config import ClassifierConfig

logger = logging.getLogger("promptlottery.gating.model")  # the training's log lines keep their name

__all__ = ["free_cores", "gate_threads", "lightning_wandb_logger", "on_cpu", "throughput_callback"]


def lightning_wandb_logger(
    logger_cfg: dict,
    *,
    run=None,
    name: str | None = None,
    group: str | None = None,
    job_type: str = "gate_train",
    config: dict | None = None,
):
    """Lightning's WandbLogger for the ``logger`` config (None when ``logger=none``): on ``run`` (an
    open W&B run, the stage's) or a new run ``name`` in ``group`` (one per Optuna trial)."""
    if (logger_cfg or {}).get("name", "none") != "wandb":
        return None
    from lightning.pytorch.loggers import WandbLogger

    if run is not None:
        return WandbLogger(experiment=run)
    save_dir = logger_cfg.get("dir") or "."
    from pathlib import Path

    Path(save_dir).mkdir(parents=True, exist_ok=True)
    mode = logger_cfg.get("mode", "offline")
    return WandbLogger(
        name=name,
        project=logger_cfg.get("project", "promptlottery"),
        save_dir=str(save_dir),
        offline=mode == "offline",
        # the mode goes to wandb.init itself: Lightning's offline flag only sets WANDB_MODE, which
        # W&B reads once per process (a run opened earlier in the process fixes it)
        mode=mode,
        group=group,
        job_type=job_type,
        config=config or {},
        reinit="finish_previous",
    )


def all_cores() -> int:
    """The cores this process may use (its CPU affinity, else the machine's count)."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def gate_threads(setting) -> int:
    """The torch threads the gate trains with, from ``gate.classifier.num_threads``: a whole number
    as given; ``all`` (the default; null too) every core this process may use; ``auto`` the cores
    left by the machine's load at start (:func:`free_cores`: machine-state dependent, so opt-in)."""
    if setting is None or setting == "all":
        return all_cores()
    if setting == "auto":
        return free_cores()
    return int(setting)


def free_cores() -> int:
    """The CPU threads to train with when ``num_threads`` is ``auto``: the cores this process may use
    minus the 1-minute load average (at least 1). Ours: on a CPU shared with other jobs, one torch
    thread per core made the gate's step 3x slower than one thread (1,140 ms against 3,391 ms per
    16 examples of 64 tokens on 2 cores at load 8; the matmul rate 60.6 against 14.8 GFLOP/s)."""
    import os

    n = all_cores()
    busy = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return max(1, min(n, int(n - busy + 0.5)))


def on_cpu(cfg: ClassifierConfig) -> bool:
    """Whether the classifier trains on the CPU (``accelerator`` cpu, or auto without a GPU)."""
    if cfg.accelerator == "cpu":
        return True
    if cfg.accelerator != "auto":
        return False
    import torch

    return not (torch.cuda.is_available() or torch.backends.mps.is_available())


def throughput_callback(show: bool):
    """A progress bar per training epoch in examples (tqdm shows examples/s), and the epoch's
    examples/s (training steps only, validation excluded) logged and kept in the history."""
    import lightning as L
    from tqdm.auto import tqdm

    class Throughput(L.Callback):
        def on_train_epoch_start(self, trainer, pl_module):
            loader = trainer.train_dataloader
            total = len(loader.dataset) if hasattr(loader, "dataset") else None
            self.n, self.t0, self.t_last = 0, time.perf_counter(), time.perf_counter()
            self.bar = tqdm(
                total=total, unit="ex", desc=f"gate epoch {trainer.current_epoch}", disable=not show
            )

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            k = len(batch["labels"])
            self.n += k
            self.t_last = time.perf_counter()
            self.bar.update(k)
            pl_module.train_examples_per_s = self.n / max(self.t_last - self.t0, 1e-9)

        def on_train_epoch_end(self, trainer, pl_module):
            self.bar.close()
            seconds = self.t_last - self.t0
            pl_module.log("train/examples_per_s", self.n / max(seconds, 1e-9))
            logger.info(
                "gate train epoch=%d examples=%d seconds=%.1f examples_per_s=%.2f",
                trainer.current_epoch,
                self.n,
                seconds,
                self.n / max(seconds, 1e-9),
            )

    return Throughput()

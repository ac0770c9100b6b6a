"""The CPU gate's speed settings: the torch threads option, the frozen backbone's dropout off."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from promptlottery.errors import ConfigError
from promptlottery.gating.backbones import build_model, drop_backbone_dropout
from promptlottery.gating.config import ClassifierConfig, LoraSettings
from promptlottery.gating.model import load_tokenizer
from promptlottery.gating.throughput import free_cores, gate_threads


def test_free_cores_is_the_idle_share_of_the_allowed_cores(monkeypatch):
    n = len(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert free_cores() == n
    monkeypatch.setattr(os, "getloadavg", lambda: (n + 7.0, 0.0, 0.0))
    assert free_cores() == 1  # never below one thread
    monkeypatch.setattr(os, "getloadavg", lambda: (n - 1.2, 0.0, 0.0))
    assert free_cores() == max(1, round(1.2))


def test_threads_option_is_honoured_and_only_auto_reads_the_load(monkeypatch):
    n = len(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "getloadavg", lambda: (n + 7.0, 0.0, 0.0))  # a busy machine
    assert gate_threads("all") == n and gate_threads(None) == n  # the default ignores the load
    assert gate_threads(3) == 3
    assert gate_threads("auto") == 1  # the load-based choice, only when asked for
    assert ClassifierConfig().num_threads == "all"
    for bad in (0, "some", 1.5):
        with pytest.raises(ConfigError, match="gate.classifier.num_threads"):
            ClassifierConfig.from_dict({"num_threads": bad})


class _Set(Exception):
    pass


@pytest.mark.parametrize("setting, expected", [(1, 1), ("all", "n"), ("auto", "free")])
def test_training_sets_the_configured_threads(monkeypatch, tmp_path, setting, expected):
    """train_classifier hands torch the option's threads (stopped there: nothing is trained)."""
    import pandas as pd

    from promptlottery.gating import model

    def record(k):
        raise _Set(k)

    monkeypatch.setattr(torch, "set_num_threads", record)
    monkeypatch.setattr(os, "getloadavg", lambda: (40.0, 0.0, 0.0))
    cfg = ClassifierConfig.from_dict({"num_threads": setting, "accelerator": "cpu"})
    df = pd.DataFrame({"answer": ["a", "b"], "query": ["q", "q"], "in_cluster": [1, 0]})
    with pytest.raises(_Set) as got:
        model.train_classifier(cfg, df, df, default_root_dir=str(tmp_path))
    want = {"n": len(os.sched_getaffinity(0)), "free": 1}.get(expected, expected)
    assert got.value.args[0] == want


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


def test_the_gate_bench_loads_and_its_limit_is_a_ratio_of_rates():
    """benchmarks/bench_gate.py (``make bench-gate``) imports what it uses (its ``free_cores`` import
    broke when the function moved to gating.throughput), and its matmul rate is 2mkn FLOPs over the
    median time: a 64 x 64 by 64 x 64 product is 524,288 FLOPs, so the rate is positive and finite."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_gate.py"
    spec = importlib.util.spec_from_file_location("bench_gate", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.free_cores is free_cores and callable(mod.main)
    rate = mod.matmul_gflops(64, 64, 64, repeats=3)
    assert 0 < rate < float("inf")
    rows = mod.synthetic_rows(4, 8)
    assert rows["in_cluster"].tolist() == [0, 1, 0, 1] and len(rows["query"][0].split()) == 16

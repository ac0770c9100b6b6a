"""The LoRA gate classifier: MiniLM learns on tiny data (CPU), the tiny DeBERTa-v2 path runs, pruning."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from promptlottery.gating.model import (
    ClassifierConfig,
    load_tokenizer,
    make_module,
    mean_loss,
    predict_proba,
    train_classifier,
)
from tests.conftest import compose


def classifier_cfg(name: str, **overrides) -> ClassifierConfig:
    cfg = compose(["+gate=selective", "gate.runs=unused", f"gate/classifier={name}"])
    d = OmegaConf.to_container(cfg.gate.classifier, resolve=True)
    d.update(overrides)
    return ClassifierConfig.from_dict(d)


def tiny_data(n: int = 8) -> pd.DataFrame:
    """Verdict "5" after a query about cats is in the cluster; verdict "1" after dogs is not."""
    rows = []
    for k in range(n):
        pos = k % 2 == 0
        rows.append(
            {
                "answer": f"Verdict: {'5' if pos else '1'}. Answer: {'5' if pos else '1'}",
                "query": f"[user] Rate the {'cat' if pos else 'dog'} sentence number {k}. Answer with a number.",
                "in_cluster": int(pos),
            }
        )
    return pd.DataFrame(rows)


def test_minilm_lora_trains_and_loss_goes_down():
    cfg = classifier_cfg(
        "minilm",
        max_epochs=4,
        batch_size=8,
        accumulate_grad_batches=1,
        lr=1e-2,
        monitor="val/loss",
        monitor_mode="min",
        warmup_ratio=0.0,
        eval_batch_size=8,
    )
    assert (
        cfg._target_ == "promptlottery.gating.backbones.MiniLM"
        and cfg.max_length == 256
        and cfg.query_truncation == "middle"
    )
    data = tiny_data()
    tok = load_tokenizer(cfg)
    before = make_module(cfg, tok, data["in_cluster"].to_numpy())  # same seed: the initial weights
    loss_before = mean_loss(before, tok, cfg, data)
    res = train_classifier(cfg, data, data, tokenizer=tok)
    loss_after = mean_loss(res.module, tok, cfg, data)
    assert loss_after < loss_before - 0.05, (loss_before, loss_after)
    # only LoRA adapters on query/key/value and the head are trained
    names = [n for n, p in res.module.model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n or "classifier" in n or "pooler" in n for n in names)
    assert any("pooler" in n for n in names)  # modules_to_save: [pooler]
    assert {"query", "key", "value"} <= {n.split(".")[-4] for n in names if "lora_A" in n}
    assert res.trainable_params < 0.02 * res.total_params  # adapters + pooler + head: 1.1%
    assert len(res.history) == 4 and {"val/mcc", "val/balanced_accuracy", "val/tpr", "val/tnr"} <= set(
        res.history[0]
    )
    p = predict_proba(res, data)
    assert p.shape == (8,) and ((p >= 0) & (p <= 1)).all()
    assert p[data["in_cluster"] == 1].mean() > p[data["in_cluster"] == 0].mean()


def test_middle_truncation_keeps_instructions_and_the_judged_item():
    from promptlottery.gating.model import encode

    tok = load_tokenizer(classifier_cfg("minilm"))
    shots = " ".join(f"Example {k}: the sky is green. Answer: no." for k in range(60))
    query = f"INSTRUCTIONS rate the response. {shots} JUDGED ITEM the cat sat. Answer:"
    answer = "Verdict: yes. Answer: yes"
    short = "INSTRUCTIONS rate. JUDGED ITEM the cat sat. Answer:"
    for mode, keeps_item in (("middle", True), ("right", False)):
        rows = encode(tok, [answer, answer], [query, short], max_length=64, query_truncation=mode)
        assert len(rows[0]["input_ids"]) <= 64
        text = tok.decode(rows[0]["input_ids"], skip_special_tokens=True).lower()
        assert text.startswith("verdict : yes. answer : yes instructions rate the response")
        assert ("judged item the cat sat. answer :" in text) is keeps_item, text
        # a query that fits is left as it is
        assert (
            tok.decode(rows[1]["input_ids"], skip_special_tokens=True)
            .lower()
            .endswith("instructions rate. judged item the cat sat. answer :")
        )
    with pytest.raises(ValueError, match="query_truncation"):
        classifier_cfg("minilm", query_truncation="left")


def test_tiny_deberta_v2_path_runs(tmp_path):
    from promptlottery.gating.model import save_adapter

    cfg = classifier_cfg("deberta_tiny")
    assert (
        cfg._target_ == "promptlottery.gating.backbones.RandomInit"
        and cfg.model_config["model_type"] == "deberta-v2"
    )
    data = tiny_data(16)
    res = train_classifier(cfg, data, data.iloc[:8])
    model = res.module.model
    assert model.base_model.model.config.model_type == "deberta-v2"
    lora = {n.split(".")[-4] for n, p in model.named_parameters() if p.requires_grad and "lora_A" in n}
    assert lora == {"query_proj", "key_proj", "value_proj"}
    assert any("pooler" in n and p.requires_grad for n, p in model.named_parameters())
    assert res.history and 0.0 <= res.best["val/balanced_accuracy"] <= 1.0
    p = predict_proba(res, data)
    assert p.shape == (16,) and np.isfinite(p).all()
    save_adapter(res, tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_config.json").exists()


def test_pruning_callback_stops_a_bad_trial():
    import optuna

    from promptlottery.gating.tune import pruning_callback

    class AlwaysPrune:
        number = 0

        def __init__(self):
            self.reports = []

        def report(self, value, step):
            self.reports.append((step, value))

        def should_prune(self):
            return True

    trial = AlwaysPrune()
    cfg = classifier_cfg("deberta_tiny", max_epochs=3)
    with pytest.raises(optuna.TrialPruned):
        train_classifier(cfg, tiny_data(8), tiny_data(8), callbacks=[pruning_callback(trial, "val/mcc")])
    assert [s for s, _ in trial.reports] == [0]  # reported after the first validation, then pruned


def test_unknown_classifier_key_fails():
    with pytest.raises(ValueError, match=r"unknown config key gate.classifier.lrr \(valid keys under"):
        ClassifierConfig.from_dict({"lrr": 1.0})
    with pytest.raises(ValueError, match="needs gate.classifier.model_name"):
        ClassifierConfig.from_dict({"_target_": "promptlottery.gating.backbones.Pretrained"})


def test_a_trials_validation_mcc_interval_by_hand(monkeypatch):
    """The search reports its winner's validation MCC with an item-cluster interval: on 3 items of 2
    verdicts each, a gate right on items a and b and wrong on item c has (cut 0.5) tp = 2, tn = 2,
    fp = 1, fn = 1: MCC (4 - 1) / sqrt(3 * 3 * 3 * 3) = 1/3; a resample of items a and b only is
    perfect (1), so the interval reaches 1; one of item c only is -1, so it reaches below 0."""
    from promptlottery.gating import model, tune

    val = pd.DataFrame({"item_key": ["a", "a", "b", "b", "c", "c"], "in_cluster": [1, 0, 1, 0, 1, 0]})
    monkeypatch.setattr(model, "predict_proba", lambda res, df: np.array([0.9, 0.1, 0.8, 0.2, 0.3, 0.7]))
    g = type("G", (), {"n_bootstrap": 2000, "bootstrap_level": 0.95, "seed": 0})()
    m = tune.val_mcc_interval(object(), val, g)
    assert m["mcc"] == pytest.approx(1 / 3) and m["n_rows"] == 6
    assert m["mcc_hi"] == pytest.approx(1.0) and m["mcc_lo"] < 0 <= m["mcc"]
    assert tune.val_mcc_interval(object(), val.iloc[:0], g) == {}


def test_a_second_worker_does_not_replay_the_first_workers_trials(tmp_path):
    """Two workers with the same sampler seed on one study: the second joins after the first's trial
    and must sample other parameters (before the fix both drew the same start-up trial)."""
    import optuna

    from promptlottery.gating import tune

    opts = {"sampler_seed": 0, "tpe_startup_trials": 10, "heartbeat_s": None}
    url = f"sqlite:///{tmp_path / 'o.db'}"
    first = tune._create_study(opts, url, "s", "maximize")
    first.optimize(lambda t: t.suggest_float("lr", 0.0, 1.0), n_trials=1)
    second = tune._create_study(opts, url, "s", "maximize")
    second.optimize(lambda t: t.suggest_float("lr", 0.0, 1.0), n_trials=1)
    lrs = [t.params["lr"] for t in optuna.load_study(study_name="s", storage=url).trials]
    assert len(lrs) == 2 and lrs[0] != lrs[1]
    assert tune.worker_seed(5, 0) == 5 and tune.worker_seed(5, 2) == 7 and tune.worker_seed(None, 2) is None

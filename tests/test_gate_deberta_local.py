"""The paper's gate (``gate/classifier=deberta_v3_large``) end to end on a local random-weight tiny
DeBERTa-v3 (``tests/gate_grids.tiny_deberta_v3``: a sentencepiece tokenizer trained here, no Hub), through
the same code path as the real classifier: only ``gate.classifier.model_name`` differs (and the epochs,
so the test stays short). An A100 user adds the weights and nothing else."""

from __future__ import annotations

import pandas as pd
import pytest

from promptlottery.stages import run_stage
from tests.conftest import compose
from tests.gate_grids import marker_grid, tiny_deberta_v3

pytest.importorskip(
    "sentencepiece", reason="the DeBERTa-v3 tokenizer needs sentencepiece: pip install -e .[gating]"
)


def test_deberta_v3_config_runs_the_gate_on_local_weights(tmp_path):
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    grid = marker_grid(tmp_path, 30, "label")
    rows = pd.concat(pd.read_parquet(p) for p in sorted(grid.glob("*/judgments.parquet")))
    texts = [*rows["query"].tolist(), *(f"Verdict: {x}. Answer: {x} stable shaky" for x in "12345")]
    weights = tiny_deberta_v3(tmp_path / "deberta", texts)
    cfg = compose(
        [
            "+gate=selective",
            "gate/classifier=deberta_v3_large",
            f"gate.classifier.model_name={weights}",
            "gate.classifier.max_epochs=1",
            "gate.classifier.num_threads=1",
            "backbone=fake",
            "gate.llm_baseline.enabled=false",
            "gate.n_bootstrap=200",
            f"gate.runs={grid}/*",
        ],
        tmp_path=tmp_path,
    )
    # the config is the paper's: only the weights' path was overridden (and the epochs)
    assert (
        cfg.gate.classifier._target_.endswith("Pretrained") and cfg.gate.classifier.precision == "bf16-mixed"
    )
    assert list(cfg.gate.classifier.lora.target_modules) == ["query_proj", "key_proj", "value_proj"]
    out = tmp_path / "gate"
    rec = run_stage(cfg, out)
    assert rec["status"] == "ok"
    pred = pd.read_parquet(out / "heldout_predictions.parquet")
    assert pred["p_gate"].between(0, 1).all() and pred["p_gate"].nunique() > 1
    # the adapter holds the LoRA weights on DeBERTa's projections and the trained pooler, and the
    # sentencepiece tokenizer travels with it
    adapter = load_file(out / "adapter" / "adapter_model.safetensors")
    assert any("query_proj.lora_A" in k for k in adapter) and any("pooler" in k for k in adapter)
    tok = AutoTokenizer.from_pretrained(out / "adapter")
    assert tok.convert_ids_to_tokens(tok("a b")["input_ids"])[0] == "[CLS]"
    base = AutoModelForSequenceClassification.from_pretrained(weights, num_labels=2)
    model = PeftModel.from_pretrained(base, out / "adapter")
    assert sum(p.numel() for n, p in model.named_parameters() if "lora_" in n) > 0
    hist = pd.read_csv(out / "training_history.csv")
    assert len(hist) == 1 and hist["train/examples_per_s"].iloc[0] > 0

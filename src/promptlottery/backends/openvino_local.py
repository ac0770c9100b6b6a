"""The fast CPU backend: the transformers judge's weights run by OpenVINO on the CPU's bf16 units.

A different judge from the float32 reference, and its cache key says so: ``identity()`` names the
engine and its version, the inference precision and the weight format, so its answers are never
mixed with the transformers backend's (``benchmarks/bench_fastcpu.py --only fidelity`` measures how
far they are apart).

The model is converted once (``openvino.convert_model`` of a wrapper that returns the logits of the
positions it is asked for) and saved as OpenVINO IR under ``<cache_dir>/openvino/``. The graph is
always traced from the float32 model, so every activation, norm and softmax in it is float32 and the
inference precision alone decides where bf16 is used; ``weights`` only says how the linear layers'
weights are stored: ``bf16`` (each weight rounded to bfloat16 and cast back to float32 where it is
used: the numbers bf16 inference reads anyway, at 4.2 GB instead of 6.7), ``f32`` (as converted from
the GGUF), ``int8`` (NNCF weight compression). An IR traced from a bfloat16 torch model (this
backend's first conversion, ``CONVERSION`` 1) carries bfloat16 activations into the graph, whatever
the inference hint: measured against the float32 judge on 16 STS-B items it moved a label probability
by 0.50 where this conversion moves it by 0.008 (docs/benchmarks.md). The converted model has no
KV cache: the label distribution, the route through a bare space token (the space appended to every
prompt: one pass gives p0 at the prompt's last position and p1 one position later) and each
teacher-forced multi-token prefix (one more pass per distinct prefix, the prefix appended) are read
from full forward passes. Generated text re-runs the prompt plus the tokens so far for each new
token, so this backend suits label judging (``max_new_tokens`` small, ``stop_at_label``), not long
generation. The prompt prefix all rows share is computed per row here (the transformers backend runs
it once per batch).

On a CPU without bf16 instructions (``avx512_bf16`` / ``amx_bf16``) ``precision=bf16`` is refused with
a one-line error rather than falling back: a silent fallback would give a judge whose numbers differ
from the ones its config name promises. ``precision=f32`` runs anywhere.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from functools import cached_property
from pathlib import Path

from promptlottery.backends.base import BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.backends.transformers_local import TransformersBackend, cpu_supports_bf16
from promptlottery.backends.weights import materialize
from promptlottery.errors import ConfigError

logger = logging.getLogger(__name__)

PRECISIONS = {"bf16": "bfloat16", "f32": "float32"}
#: how the converted weights are stored: bf16 (the default; what bf16 inference rounds them to
#: anyway), f32 (as converted from the GGUF: the tests' exact comparison with float32), int8 (NNCF)
WEIGHTS = ("bf16", "f32", "int8")
#: the conversion's version, part of the IR's folder and of the cache key: 2 traces the float32 model
#: (1 traced a bfloat16 model: bf16 activations in the graph, answers 0.5 apart from float32's)
CONVERSION = 2


def engine_version() -> str:
    """``openvino``'s version, or a one-line ConfigError saying how to install it."""
    try:
        import openvino
    except ImportError:
        raise ConfigError(
            "backbone.backend: the OpenVINO backend needs the `openvino` package, which is not installed; "
            "`make setup-fast` installs it (pip install -e '.[fastcpu]')"
        ) from None
    return openvino.__version__.split("-")[0]


class OpenVINOBackend(TransformersBackend):
    """:class:`TransformersBackend`'s tokenizer, label spellings and request encoding, with the forward
    passes run by an OpenVINO model (see the module docstring for what differs)."""

    def __init__(
        self,
        source: str,
        *,
        name: str | None = None,
        cache_dir: str = ".cache/promptlottery",
        precision: str = "bf16",
        weights: str = "bf16",
        batch_size: int = 8,
        max_length: int = 2048,
        num_threads: int | None = None,
        revision: str | None = None,
    ):
        if precision not in PRECISIONS:
            raise ConfigError(f"backbone.backend.precision={precision!r}: valid: {sorted(PRECISIONS)}")
        if weights not in WEIGHTS:
            raise ConfigError(f"backbone.backend.weights={weights!r}: valid: {list(WEIGHTS)}")
        self.engine = f"openvino=={engine_version()}"
        if precision == "bf16" and not cpu_supports_bf16():
            raise ConfigError(
                "backbone.backend.precision=bf16: this CPU has neither avx512_bf16 nor amx_bf16 "
                "(/proc/cpuinfo); use backbone.backend.precision=f32 or the float32 transformers backbone"
            )
        super().__init__(
            source,
            name=name,
            cache_dir=cache_dir,
            dtype="float32",  # the tokenizer side only; the numbers are OpenVINO's (precision)
            batch_size=batch_size,
            max_length=max_length,
            num_threads=num_threads,
            revision=revision,
        )
        self.precision = precision
        self.weights = weights

    def identity(self) -> dict:
        return {
            "backend": "openvino",
            "engine": self.engine,
            "model": self.name,
            "source": self.source,
            "revision": self.resolved_revision,
            "dtype": f"openvino-{self.precision}",
            "weights": self.weights,
            "conversion": CONVERSION,
        }

    # -- conversion / loading -------------------------------------------------------------------
    @property
    def ir_dir(self) -> Path:
        rev = self.resolved_revision.replace("==", "-")
        engine = self.engine.replace("==", "-")
        return self.cache_dir / "openvino" / f"{rev}-w{self.weights}-c{CONVERSION}-{engine}"

    def convert(self) -> Path:
        """The OpenVINO IR of the model (converted once, written atomically)."""
        target = self.ir_dir
        if (target / "model.xml").exists():
            return target
        import openvino as ov
        import torch

        t0 = time.perf_counter()
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(
            materialize(self.source, self.cache_dir), dtype=torch.float32, **self._hub_kw
        ).eval()
        if self.weights == "bf16":
            _store_linear_weights_bf16(model)
        example = {
            "input_ids": torch.tensor([[0, 0, 11, 12, 13, 14], [11, 12, 13, 14, 15, 16]]),
            "attention_mask": torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]]),
            "position_ids": torch.tensor([[0, 0, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5]]),
            "keep": torch.tensor([4, 5]),
        }
        with torch.no_grad():
            ov_model = ov.convert_model(_Positions(model), example_input=example)
        if self.weights == "int8":
            try:
                import nncf
            except ImportError:
                raise ConfigError(
                    "backbone.backend.weights=int8 needs the `nncf` package, not installed here "
                    "(pip install nncf)"
                ) from None
            ov_model = nncf.compress_weights(ov_model, mode=nncf.CompressWeightsMode.INT8_ASYM)
        tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        # the IR's constants share the torch tensors' memory (convert_model's share_weights): the
        # torch model stays alive until the IR is written (freed first, the save read freed memory)
        ov.save_model(ov_model, tmp / "model.xml", compress_to_fp16=False)
        del ov_model, model
        try:
            tmp.rename(target)
        except OSError:  # another job converted it first
            shutil.rmtree(tmp, ignore_errors=True)
        logger.info("converted model=%s to %s seconds=%.1f", self.name, target, time.perf_counter() - t0)
        return target

    @cached_property
    def compiled(self):
        import openvino as ov

        path = self.convert()
        t0 = time.perf_counter()
        config = {
            "INFERENCE_PRECISION_HINT": self.precision,
            "PERFORMANCE_HINT": "LATENCY",
            "NUM_STREAMS": 1,
        }
        if self.num_threads:
            config["INFERENCE_NUM_THREADS"] = self.num_threads
        compiled = ov.Core().compile_model(str(path / "model.xml"), "CPU", config)
        logger.info("compiled model=%s seconds=%.1f", self.name, time.perf_counter() - t0)
        return compiled

    @property
    def model(self):  # the transformers model is never loaded by this backend
        raise AttributeError("OpenVINOBackend has no transformers model; see .compiled")

    # -- the forward passes -----------------------------------------------------------------------
    def forward(self, rows: list[list[int]], last: int):
        """Next-token probabilities (float32 torch) after each of the last ``last`` tokens of every
        row: shape [rows, last, vocab]; rows left-padded into one batch."""
        import numpy as np
        import torch

        pad, width = self.tokenizer.pad_token_id, max(map(len, rows))
        ids = np.array([[pad] * (width - len(r)) + r for r in rows], dtype=np.int64)
        mask = np.array([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=np.int64)
        pos = np.clip(mask.cumsum(-1) - 1, 0, None)
        keep = np.arange(width - last, width, dtype=np.int64)
        request = self.compiled.create_infer_request()
        out = request.infer({"input_ids": ids, "attention_mask": mask, "position_ids": pos, "keep": keep})
        logits = torch.from_numpy(np.asarray(out[self.compiled.output(0)], dtype=np.float32))
        return torch.softmax(logits, dim=-1)

    def _batch(self, requests: list[JudgeRequest], decoding: Decoding) -> list[JudgeResponse]:
        t0 = time.perf_counter()
        encoded = [self.encode(r) for r in requests]
        space = self.space_id
        tail = [space] if space is not None else []
        probs = self.forward([e + tail for e in encoded], 1 + len(tail))
        p0, p1 = probs[:, 0], (probs[:, 1] if tail else None)
        prefixes = sorted({m.prefix for r in requests for m in self.multi_token_labels(r.labels)})
        forced = {pfx: self.forward([e + list(pfx) for e in encoded], len(pfx)) for pfx in prefixes}
        label_probs = [
            self._label_probs(r, p0[i], p1 if p1 is None else p1[i], forced, i)
            for i, r in enumerate(requests)
        ]
        if decoding.max_new_tokens > 0:
            texts, n_new = self._generate_uncached(p0, encoded, requests, decoding)
        else:
            texts, n_new = [""] * len(requests), [0] * len(requests)
        latency = (time.perf_counter() - t0) / len(requests)
        return [
            JudgeResponse(texts[i], label_probs[i], len(encoded[i]), n_new[i], latency)
            for i in range(len(requests))
        ]

    def _label_probs(self, request: JudgeRequest, p0, p1, forced: dict, i: int) -> dict[str, float]:
        """The transformers backend's rule (backends.tokens): spellings summed, the space route
        added, multi-token labels teacher-forced."""
        from promptlottery.backends import tokens

        groups = list(zip(request.labels, self.label_token_ids(request.labels)))
        probs = {lab: float(p0[ids].sum()) for lab, ids in groups}
        if p1 is not None:
            after_space = {lab: float(p1[ids].sum()) for lab, ids in groups}
            tokens.add_space_route(probs, float(p0[self.space_id]), after_space)
        multi = self.multi_token_labels(request.labels)
        if not multi:
            return probs
        mass = [probs[lab] for lab in request.labels]
        for m in multi:
            cond = forced[m.prefix][i]
            for j in range(1, len(m.pieces)):
                mass[m.index] *= float(cond[j - 1, m.pieces[j]])
        return dict(zip(request.labels, tokens.combine_paths(mass, multi), strict=True))

    def _generate_uncached(self, p0, encoded, requests, decoding):
        """Greedy (or seeded sampled) text, each new token from a full pass over prompt + text so far."""
        tok, n = self.tokenizer, len(requests)
        eos = {tok.eos_token_id, *tok.all_special_ids} - {None}
        stops = [self._stop_tokens(r.labels) if decoding.stop_at_label else set() for r in requests]
        generated: list[list[int]] = [[] for _ in range(n)]
        active = list(range(n))
        picks = self._pick(p0, requests, decoding, step=0)
        for step in range(decoding.max_new_tokens):
            still = []
            for i, t in zip(active, picks, strict=True):
                if t in eos:
                    continue
                generated[i].append(t)
                if t not in stops[i]:
                    still.append(i)
            active = still
            if not active or step == decoding.max_new_tokens - 1:
                break
            probs = self.forward([encoded[i] + generated[i] for i in active], 1)[:, 0]
            picks = self._pick(probs, [requests[i] for i in active], decoding, step + 1)
        return [tok.decode(g, skip_special_tokens=True) for g in generated], [len(g) for g in generated]


def _store_linear_weights_bf16(model) -> int:
    """Store every linear layer's weight (the lm_head and embeddings excepted) as bfloat16, cast back
    to the activations' float32 where it is used, so the traced graph stays float32 and its weights
    are ``Constant(bf16) -> Convert(f32)``, which OpenVINO's CPU plugin reads as compressed weights."""
    import types

    import torch
    import torch.nn.functional as F  # noqa: N812

    def forward(self, x):
        return F.linear(x, self.weight.to(x.dtype), self.bias)

    n = 0
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and not name.endswith("lm_head"):
            module.weight = torch.nn.Parameter(module.weight.data.to(torch.bfloat16), requires_grad=False)
            module.forward = types.MethodType(forward, module)
            n += 1
    return n


def _positions_module():
    import torch

    class Positions(torch.nn.Module):
        """The causal LM's logits at the positions ``keep`` (a 1-D index over the padded width)."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, keep):
            # the 4-D mask is built here, from the data, so the trace bakes in no branch of the
            # library's mask code; a padded query also sees itself (a row that sees nothing is NaN
            # in OpenVINO's attention, and a NaN value times weight 0 is NaN for the rows after it)
            ar = torch.ones_like(attention_mask[0]).cumsum(0)
            causal = ar[None, :] <= ar[:, None]
            sees = (causal[None, None] & attention_mask[:, None, None, :].bool()) | (
                ar[None, :] == ar[:, None]
            )
            out = self.model(
                input_ids=input_ids,
                attention_mask=sees,
                position_ids=position_ids,
                use_cache=False,
                logits_to_keep=keep,
            )
            return out.logits

    return Positions


def _Positions(model):  # noqa: N802 - a class made on first use (torch is imported lazily)
    return _positions_module()(model)


__all__ = ["OpenVINOBackend", "engine_version", "BackendError"]

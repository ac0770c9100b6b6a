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
by 0.50 where this conversion moves it by 0.008 (docs/benchmarks.md). The converted model takes
the keys and values of earlier positions and returns them extended (conversion 3; earlier
conversions had no cache input): the token prefix the rows of a batch share (a wording's
instructions) is run once, its keys and values kept (the last few prefixes, so the next batches
of the same wording start from it) and each row runs only its own tokens after it, as the
transformers backend does within a batch. The label distribution, the route through a bare
space token (the space appended to every prompt: one pass gives p0 at the prompt's last position
and p1 one position later) and each teacher-forced multi-token prefix (one more pass per distinct
prefix, the prefix appended) are read from passes over each row's own tokens. Generated text
re-runs the row's own tokens plus the text so far for each new token, so this backend suits label
judging (``max_new_tokens`` small, ``stop_at_label``), not long generation.

On a CPU without bf16 instructions (``avx512_bf16`` / ``amx_bf16``) ``precision=bf16`` is refused with
a one-line error rather than falling back: a silent fallback would give a judge whose numbers differ
from the ones its config name promises. ``precision=f32`` runs anywhere.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections import OrderedDict
from functools import cached_property
from pathlib import Path

from promptlottery.backends.base import BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.backends.openvino_graph import store_linear_weights_bf16, with_past
from promptlottery.backends.tokens import shared_prefix_len
from promptlottery.backends.transformers_local import TransformersBackend, cpu_supports_bf16
from promptlottery.backends.weights import materialize
from promptlottery.checks import check_choice
from promptlottery.errors import ConfigError

logger = logging.getLogger(__name__)

PRECISIONS = {"bf16": "bfloat16", "f32": "float32"}
#: how the converted weights are stored: bf16 (the default; what bf16 inference rounds them to
#: anyway), f32 (as converted from the GGUF: the tests' exact comparison with float32), int8 (NNCF)
WEIGHTS = ("bf16", "f32", "int8")
#: the conversion's version, part of the IR's folder and of the cache key: 3 takes and returns the
#: keys and values (the shared prefix is run once); 2 traced the float32 model without a cache input;
#: 1 traced a bfloat16 model (bf16 activations in the graph, answers 0.5 apart from float32's)
CONVERSION = 3
#: shared prefixes whose keys and values are kept between batches (a wording's instructions)
PREFIX_SLOTS = 4
#: (IR path, compile settings) -> the compiled model, for the next job of a sweep in this process (one
#: entry: compiling the 1.5B takes 3-5 s a job, holding two would hold two models' weights)
_COMPILED: dict[tuple, object] = {}


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
        min_shared_prefix: int = 16,
        dynamic_quantization: int = 0,
        revision: str | None = None,
    ):
        check_choice("backbone.backend.precision", precision, PRECISIONS)
        check_choice("backbone.backend.weights", weights, WEIGHTS)
        if not isinstance(dynamic_quantization, int) or dynamic_quantization < 0:
            raise ConfigError(
                f"backbone.backend.dynamic_quantization={dynamic_quantization!r}: a group size >= 0 (0: off)"
            )
        if dynamic_quantization and weights != "int8":
            raise ConfigError(
                f"backbone.backend.dynamic_quantization={dynamic_quantization}: only int8 weights "
                f"(backbone.backend.weights=int8) are multiplied in int8; with weights={weights} it does nothing"
            )
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
            min_shared_prefix=min_shared_prefix,
            revision=revision,
        )
        self.precision = precision
        self.weights = weights
        #: int8 weights: the activations quantized to int8 per group of this many values at run time,
        #: so the matrix products run in int8 (VNNI / AMX-int8); 0: decompressed to bf16 / f32 instead
        self.dynamic_quantization = dynamic_quantization
        #: prefix tokens -> their keys and values [layers, 2, 1, kv heads, 1 + len, head dim]
        self._prefixes: OrderedDict[tuple[int, ...], object] = OrderedDict()
        #: tokens run through the model so far (padding included; a shared prefix once)
        self.computed_tokens = 0

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
            **({"dynamic_quantization": self.dynamic_quantization} if self.dynamic_quantization else {}),
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
            store_linear_weights_bf16(model)
        cfg = model.config
        layers, heads = cfg.num_hidden_layers, cfg.num_key_value_heads
        dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        example = {  # two rows of 3 new tokens after 3 cached positions (the first one masked out)
            "input_ids": torch.tensor([[0, 11, 12], [11, 12, 13]]),
            "attention_mask": torch.tensor([[0, 1, 1, 0, 1, 1], [0, 1, 1, 1, 1, 1]]),
            "position_ids": torch.tensor([[2, 2, 3], [2, 3, 4]]),
            "keep": torch.tensor([1, 2]),
            "past": torch.zeros(layers, 2, 2, heads, 3, dim),
        }
        with torch.no_grad():
            ov_model = ov.convert_model(with_past(model), example_input=example)
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
        if self.weights == "int8":  # 0 stated too: the plugin's own default may change between releases
            config["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = self.dynamic_quantization
        key = (str(path.resolve()), tuple(sorted(config.items())))
        if key in _COMPILED:  # the sweep's previous job compiled the same IR with the same settings
            logger.info("compiled model=%s reused=true", self.name)
            return _COMPILED[key]
        _COMPILED.clear()  # one compiled model per process: a sweep over backbones holds one at a time
        compiled = ov.Core().compile_model(str(path / "model.xml"), "CPU", config)
        _COMPILED[key] = compiled
        logger.info("compiled model=%s seconds=%.1f", self.name, time.perf_counter() - t0)
        return compiled

    @property
    def model(self):  # the transformers model is never loaded by this backend
        raise AttributeError("OpenVINOBackend has no transformers model; see .compiled")

    # -- the forward passes -----------------------------------------------------------------------
    def forward(self, rows: list[list[int]], last: int, past=None):
        """Next-token probabilities (float32 torch) after each of the last ``last`` tokens of every
        row: shape [rows, last, vocab]; rows left-padded into one batch after ``past`` (the keys and
        values of a prefix all rows share, :meth:`prefix_cache`; none: one masked-out position),
        and the keys and values of the whole batch."""
        import numpy as np
        import torch

        pad, width, n = self.tokenizer.pad_token_id, max(map(len, rows)), len(rows)
        if past is None:
            past, seen = self._empty_past, 0
        else:
            seen = past.shape[4] - 1  # the first cached position is the masked-out one
        ids = np.array([[pad] * (width - len(r)) + r for r in rows], dtype=np.int64)
        own = np.array([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=np.int64)
        mask = np.concatenate([np.zeros((n, 1), np.int64), np.ones((n, seen), np.int64), own], axis=1)
        pos = seen + np.clip(own.cumsum(-1) - 1, 0, None)
        keep = np.arange(width - last, width, dtype=np.int64)
        request = self.compiled.create_infer_request()
        out = request.infer([ids, mask, pos, keep, np.repeat(past, n, axis=2)])
        self.computed_tokens += ids.size  # padding included: what the matrix units worked on
        logits = torch.from_numpy(np.asarray(out[self.compiled.output(0)], dtype=np.float32))
        return torch.softmax(logits, dim=-1), np.asarray(out[self.compiled.output(1)])

    @cached_property
    def _empty_past(self):
        """One cached position, masked out: the input of a pass with nothing before it."""
        import numpy as np

        # the returned keys and values have static layers, heads and head size: [L, 2, ?, H, ?, D]
        shape = [d.get_length() if d.is_static else 1 for d in self.compiled.output(1).get_partial_shape()]
        return np.zeros(shape, dtype=np.float32)

    def prefix_cache(self, prefix: tuple[int, ...]):
        """The keys and values after ``prefix`` (run once; the last :data:`PREFIX_SLOTS` kept)."""
        if prefix in self._prefixes:
            self._prefixes.move_to_end(prefix)
            return self._prefixes[prefix]
        _, present = self.forward([list(prefix)], 1)
        self._prefixes[prefix] = present
        while len(self._prefixes) > PREFIX_SLOTS:
            self._prefixes.popitem(last=False)
        return present

    def _shared(self, encoded: list[list[int]]) -> int:
        """The length of the prefix the batch runs once (the transformers backend's rule)."""
        return shared_prefix_len(encoded, self.min_shared_prefix)

    def _batch(self, requests: list[JudgeRequest], decoding: Decoding) -> list[JudgeResponse]:
        t0 = time.perf_counter()
        encoded = [self.encode(r) for r in requests]
        shared = self._shared(encoded)
        past = self.prefix_cache(tuple(encoded[0][:shared])) if shared else None
        own = [e[shared:] for e in encoded]
        space = self.space_id
        tail = [space] if space is not None else []
        probs, _ = self.forward([e + tail for e in own], 1 + len(tail), past)
        p0, p1 = probs[:, 0], (probs[:, 1] if tail else None)
        prefixes = sorted({m.prefix for r in requests for m in self.multi_token_labels(r.labels)})
        forced = {pfx: self.forward([e + list(pfx) for e in own], len(pfx), past)[0] for pfx in prefixes}
        label_probs = [
            self._label_probs(r, p0[i], p1 if p1 is None else p1[i], forced, i)
            for i, r in enumerate(requests)
        ]
        if decoding.max_new_tokens > 0:
            texts, n_new = self._generate_uncached(p0, own, requests, decoding, past)
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

    def _generate_uncached(self, p0, own, requests, decoding, past):
        """Greedy (or seeded sampled) text, each new token from a pass over the row's own tokens and
        the text so far (after the shared prefix's ``past``)."""
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
            probs = self.forward([own[i] + generated[i] for i in active], 1, past)[0][:, 0]
            picks = self._pick(probs, [requests[i] for i in active], decoding, step + 1)
        return [tok.decode(g, skip_special_tokens=True) for g in generated], [len(g) for g in generated]


__all__ = ["OpenVINOBackend", "engine_version", "BackendError"]

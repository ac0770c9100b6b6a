"""The 1.5B judge on this CPU: where its bf16 time goes, raw prefill speed per engine, fast vs float32.

    .venv/bin/python benchmarks/bench_fastcpu.py [--only profile|raw|fidelity] [--items 24]

``profile``: one bf16 forward pass of a judge-like batch (8 STS-B prompts, last-position logits only)
under torch.profiler, its CPU time grouped by kind (linear layers, attention, norms, the rest), the
bf16 cast at load time and the tokenisation; with ONEDNN_VERBOSE=1 in a child process, which oneDNN
kernels the linear layers ran (``avx512_core_amx`` or not).
``raw``: prompt tokens/s of the same batches, interleaved (A, B, A, B) in one run: transformers
float32, transformers bfloat16 and llama.cpp (``backbone=qwen25_coder_15b_fast``; skipped with the
reason when llama-cpp-python is missing), with the fraction of the AMX bf16 limit (see
:func:`amx_limit_tokens_per_s`).
``fidelity``: ``--items`` STS-B items x 5 wordings (G12 P1-P5) judged by both backbones: argmax
labels equal, weighted-score Pearson, largest label-probability difference, prompt tokens/s of each
and their ratio. Prints key=value lines; the load average is printed beside every timing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_backends import grid_requests  # noqa: E402

REFERENCE, FAST = "qwen25_coder_15b", "qwen25_coder_15b_fast"
#: non-embedding parameters of Qwen2.5-1.5B (the issue's count); 2 FLOP per parameter per token
NON_EMBEDDING_PARAMS = 1.31e9


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def cpu_ghz() -> float:
    """The clock the kernel reports (the mean of /proc/cpuinfo's ``cpu MHz``), in GHz."""
    mhz = [
        float(line.split(":")[1]) for line in Path("/proc/cpuinfo").read_text().splitlines() if "MHz" in line
    ]
    return sum(mhz) / len(mhz) / 1000 if mhz else float("nan")


def amx_limit_tokens_per_s(cores: int, ghz: float) -> float:
    """Prompt tokens/s at AMX's bf16 peak: 1,024 FLOP / cycle / core (16x32 by 32x16 tiles: a
    ``TDPBF16PS`` of 16 x 16 x 32 multiply-adds every 16 cycles), over 2 FLOP per non-embedding
    parameter per token (attention <= 2% at these lengths is left out)."""
    return cores * ghz * 1e9 * 1024 / (2 * NON_EMBEDDING_PARAMS)


def batches(backend, items: int, variants: list[str]) -> list[list[int]]:
    rows = sorted((backend.encode(r) for r in grid_requests(backend, items, variants)), key=len)
    return [rows[i : i + 8] for i in range(0, len(rows), 8)]

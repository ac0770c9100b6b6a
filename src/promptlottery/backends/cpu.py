"""What this CPU's matrix units can do (/proc/cpuinfo), and the CPU judge that follows from it."""

from __future__ import annotations

from pathlib import Path

__all__ = ["cpu_matrix_unit", "cpu_supports_bf16", "fast_judge_backbone"]


def cpu_supports_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def cpu_matrix_unit() -> str:
    """The widest bf16 matrix instructions this CPU reports (/proc/cpuinfo): ``amx_bf16`` (AMX tiles),
    ``avx512_bf16`` (vector dot products only) or ``none``. bf16 pays only with AMX: on an
    avx512_bf16 CPU without it, bf16 inference measured slower than float32 (docs/benchmarks.md)."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return "none"
    return next((unit for unit in ("amx_bf16", "avx512_bf16") if unit in flags), "none")


def fast_judge_backbone(reference: str = "qwen25_coder_15b") -> str:
    """The backbone a CPU script judges with: ``<reference>_fast`` (OpenVINO bf16) where the CPU has
    AMX, the float32 ``reference`` elsewhere (see :func:`cpu_matrix_unit`)."""
    return f"{reference}_fast" if cpu_matrix_unit() == "amx_bf16" else reference

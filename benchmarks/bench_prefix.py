"""Batches by shared prefix against batches by length, on a judge that runs a batch's shared prefix once.

    .venv/bin/python benchmarks/bench_prefix.py [--experiment newsroom_coherence] [--groups 2]
        [--backbone smollm2] [--threads 1]

The requests of one wording (P1) of ``--experiment`` at ``dataset.limit=--groups`` (articles, each with
its systems' summaries), composed like ``python -m run`` does, answered by the same backend twice from a
fresh call cache: under ``BatchPlan("length")`` (the order every backend had before) and
``BatchPlan("prefix")`` (the transformers and OpenVINO judges' default now), in one process, one after the
other, after a warm-up batch. Prints key=value lines: seconds each way and their ratio, the prompt tokens
each plan's forward passes ran (a shared prefix once, padding included, counted from the backend's own
tokenizer), and how far the two plans' label probabilities are apart (float32: rounding only).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
DATA_DIR = (REPO / ".." / "shared" / "data").resolve()


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from promptlottery.stages import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return hydra_compose("config", overrides=overrides)


def forward_tokens(backend, batches) -> int:
    """Tokens the backend's prefill runs for these batches: the shared prefix once, every row padded."""
    from promptlottery.backends.tokens import shared_prefix_len

    total = 0
    for batch in batches:
        enc = [backend.encode(r) for r in batch]
        shared = shared_prefix_len(enc, backend.min_shared_prefix)
        total += shared + len(enc) * max(len(e) - shared for e in enc)
    return total


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--experiment", default="newsroom_coherence")
    ap.add_argument("--groups", type=int, default=2)
    ap.add_argument("--backbone", default="smollm2")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    from promptlottery.calls.cache import CallCache
    from promptlottery.calls.compose import build_judge_runtime
    from promptlottery.calls.loop import BatchPlan, CallStats, prefix_batches, run_calls
    from promptlottery.judging.inputs import judge_inputs
    from promptlottery.judging.judge_job import JudgeJob

    cfg = compose([
        f"+experiment={args.experiment}", f"backbone={args.backbone}", f"dataset.limit={args.groups}",
        "judge.variant=P1", "logger=none", f"paths.data_dir={DATA_DIR}",
        f"paths.model_dir={REPO / '.cache' / 'promptlottery'}", f"+backbone.backend.num_threads={args.threads}",
    ])  # fmt: skip
    inputs = judge_inputs(cfg)
    backend, _, decoding = build_judge_runtime(cfg)
    job = JudgeJob(inputs.items, inputs.condition, inputs.group, backend, decoding, examples=inputs.examples,
                   rendered=inputs.rendered, human_range=tuple(cfg.dataset.human_range))  # fmt: skip
    reqs = [r for _, r in job.requests()]
    size = backend.max_concurrency
    by_length = sorted(reqs, key=lambda r: (len(r.prompt or str(r.messages)), r.key))
    plans = {
        "length": [by_length[i : i + size] for i in range(0, len(by_length), size)],
        "prefix": prefix_batches(
            sorted(reqs, key=lambda r: (r.prompt or json.dumps(r.messages), r.key)), size
        ),
    }
    print(
        f"experiment={args.experiment} backbone={args.backbone} threads={args.threads} requests={len(reqs)} batch={size}"
    )
    backend.generate(reqs[:1], decoding)  # warm-up: weights loaded, kernels chosen
    seconds, probs = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("length", "prefix"):
            t0 = time.perf_counter()
            answers = run_calls(reqs, backend, CallCache(Path(tmp) / f"{name}.sqlite"), decoding,
                                stats=CallStats(), plan=BatchPlan(name), desc=name)  # fmt: skip
            seconds[name] = time.perf_counter() - t0
            probs[name] = {k: a.label_probs for k, a in answers.items()}
            print(f"plan={name} batches={len(plans[name])} forward_tokens={forward_tokens(backend, plans[name])} "
                  f"seconds={seconds[name]:.1f}")  # fmt: skip
    diff = max(
        abs(probs["length"][k].get(lab, 0.0) - p)
        for k in probs["prefix"] for lab, p in (probs["prefix"][k] or {}).items()
    )  # fmt: skip
    same = sum(
        max(probs["length"][k], key=probs["length"][k].get) == max(probs["prefix"][k], key=probs["prefix"][k].get)
        for k in probs["prefix"] if probs["prefix"][k]
    )  # fmt: skip
    print(f"speedup_prefix_over_length={seconds['length'] / seconds['prefix']:.2f}")
    print(f"label_prob_max_abs_diff={diff:.2e} argmax_same={same}/{len(probs['prefix'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

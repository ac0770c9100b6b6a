"""Benchmark: the CPU gate's training examples/s against the limit set by this CPU's matmul rate.

    .venv/bin/python benchmarks/bench_gate.py [--max-length 256] [--batch-size 16] [--threads N]

The gate (``gate/classifier=minilm``: all-MiniLM-L6-v2 + LoRA on query/key/value, pooler and head
trained) is trained on full-length (answer, query) pairs, every example ``--max-length`` tokens:

* ``flops_per_example``: the FLOPs of one training step (forward and backward) counted by
  ``torch.utils.flop_counter.FlopCounterMode``, divided by the batch size;
* ``matmul_gflops``: this CPU's float32 matmul rate at the thread count used, measured on the shape
  that dominates the model (``batch x tokens`` by 384 times 384 by 1536, the feed-forward layer),
  before the steps and after the epoch (both printed; the mean is used: on a shared CPU it moves);
* ``limit_examples_per_s`` = matmul rate / FLOPs per example: what the step would reach if every FLOP
  ran at the matmul rate;
* ``step_examples_per_s``: the raw training step (forward, backward, AdamW), median of ``--steps``;
* ``lightning_examples_per_s``: one epoch of ``gating.model.train_classifier`` (the code the gate
  stage runs; the throughput callback's figure, training batches only);
* ``ratio_step`` / ``ratio_lightning``: measured / limit (target >= 0.5).

Threads: ``--threads`` (default ``gating.throughput.free_cores()``: the cores the load average leaves
free, the gate's ``gate.classifier.num_threads=auto``; pass 1 on a CPU shared with other jobs).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import pandas as pd
import torch

# at module level, so that tests/test_gate_speed.py fails when a name moves (it did: free_cores)
from promptlottery.gating.model import load_tokenizer, make_module, train_classifier
from promptlottery.gating.throughput import free_cores


def matmul_gflops(m: int, k: int, n: int, repeats: int = 20) -> float:
    a, b = torch.randn(m, k), torch.randn(k, n)
    a @ b
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return 2 * m * k * n / statistics.median(times) / 1e9


def minilm_config(max_length: int, batch_size: int, threads: int | None = None):
    from omegaconf import OmegaConf

    from promptlottery.gating.config import ClassifierConfig

    raw = OmegaConf.to_container(OmegaConf.load("conf/gate/classifier/minilm.yaml"))
    raw.update(seed=0, max_length=max_length, batch_size=batch_size, accumulate_grad_batches=1, max_epochs=1)
    raw.update(eval_batch_size=64, accelerator="cpu")
    if threads is not None:  # the epoch on the threads the step and the matmul rate are measured on
        raw.update(num_threads=threads)
    return ClassifierConfig.from_dict(raw)


def synthetic_rows(n: int, max_length: int, seed: int = 0) -> pd.DataFrame:
    """(answer, query) pairs long enough to fill ``max_length`` tokens, labels balanced."""
    rng = np.random.default_rng(seed)
    words = "the judge rates how well a response answers the question on a scale from one to five".split()
    query = lambda: " ".join(rng.choice(words, size=max_length * 2))  # noqa: E731
    return pd.DataFrame(
        {
            "answer": [f"Verdict: {i % 5 + 1}. Answer: {i % 5 + 1}" for i in range(n)],
            "query": [query() for _ in range(n)],
            "in_cluster": [i % 2 for i in range(n)],
        }
    )


def main(argv: list[str]) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    ap = argparse.ArgumentParser()
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--epoch-examples", type=int, default=64)
    args = ap.parse_args(argv)
    threads = args.threads or free_cores()
    torch.set_num_threads(threads)
    cfg = minilm_config(args.max_length, args.batch_size, threads)
    tok = load_tokenizer(cfg)
    module = make_module(cfg, tok, np.array([0, 1]))
    module.train()
    bs, n_tok = args.batch_size, args.max_length
    batch = {
        "input_ids": torch.randint(1000, 20000, (bs, n_tok)),
        "attention_mask": torch.ones(bs, n_tok, dtype=torch.long),
        "token_type_ids": torch.zeros(bs, n_tok, dtype=torch.long),
        "labels": torch.randint(0, 2, (bs,)),
    }
    opt = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-3)

    def step():
        loss = module._loss(module(batch), batch["labels"])
        loss.backward()
        opt.step()
        opt.zero_grad()

    with FlopCounterMode(display=False) as fc:
        step()
    flops = fc.get_total_flops() / bs
    # warm up first: a process's first step and matmul pay one-off costs (allocations, kernel choice)
    # that belong to neither the median step nor the rate
    step()
    matmul_gflops(bs * n_tok, 384, 1536)
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    step_rate = bs / statistics.median(times)
    rates = [matmul_gflops(bs * n_tok, 384, 1536)]
    rows = synthetic_rows(args.epoch_examples, n_tok)
    res = train_classifier(cfg, rows, rows.head(16), tokenizer=tok)
    lit_rate = float(res.history[-1]["train/examples_per_s"])
    # on a shared CPU the rate moves with the other jobs: measured before and after the epoch, averaged
    rates.append(matmul_gflops(bs * n_tok, 384, 1536))
    rate = statistics.mean(rates)
    limit = rate * 1e9 / flops
    print(
        f"bench=gate_train classifier=minilm threads={threads} max_length={n_tok} batch_size={bs} "
        f"flops_per_example={flops / 1e9:.2f}G matmul_gflops={rate:.1f} ({rates[0]:.1f}, {rates[1]:.1f}) "
        f"limit_examples_per_s={limit:.2f} "
        f"step_examples_per_s={step_rate:.2f} ratio_step={step_rate / limit:.2f} "
        f"lightning_examples_per_s={lit_rate:.2f} ratio_lightning={lit_rate / limit:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

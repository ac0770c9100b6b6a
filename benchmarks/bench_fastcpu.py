"""The 1.5B judge on this CPU: where its bf16 time goes, and raw prefill speed per dtype.

    .venv/bin/python benchmarks/bench_fastcpu.py [--only ceiling|profile|raw|fidelity] [--raw-items 16] [--reps 2]
        [--items 120] [--variants P1,P2,P3,P4,P5]

``ceiling``: what this machine's matrix units give, measured rather than taken from the data sheet: one
matrix product of the 1.5B's MLP shape (512 tokens x 1,536 -> 8,960) through torch's oneDNN kernels in
float32 and in bfloat16 on all threads, its TFLOPS, and their ratio: the most a bf16 judge can gain over
the float32 one from the arithmetic (a judge also gains by computing fewer tokens: the kept prefixes).

``profile``: one bf16 forward pass of a judge-like batch (8 STS-B prompts, last-position logits only,
no cache) timed by module with forward hooks (exclusive times: linear layers, attention without its
linears, MLP activation, RMS norms, lm_head, the rest), and the load-time cast and request building.
``raw``: prompt tokens/s of the same batches through transformers float32 and bfloat16, interleaved
(A, B, A, B) in one run, with the fraction of the AMX bf16 limit (see :func:`amx_limit_tokens_per_s`) and of
this CPU's own bf16 limit (:func:`cpu_limit`: AMX, avx512_bf16 without AMX, or neither).
``fidelity``: the fast judge (``backbone=qwen25_coder_15b_fast``, OpenVINO bf16) against the float32
reference on the same STS-B judgments (``--items`` x ``--variants``, G12, greedy, label probabilities
and text as a judge run asks): the share of equal argmax labels, the Pearson correlation of the
logprob-weighted scores, the largest label-probability difference, and prompt tokens/s of each, timed
interleaved (the batches split into rounds: reference, fast, reference, fast) with their ratio and the
fraction of the AMX bf16 limit.
Prints key=value lines; the load average is printed beside every timing.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_backends import DATA_DIR, MODEL_DIR, grid_requests  # noqa: E402
from bench_backends import backbone_backend as _compose  # noqa: E402

REFERENCE = "qwen25_coder_15b"
#: non-embedding parameters of Qwen2.5-1.5B (the issue's count); 2 FLOP per parameter per token
NON_EMBEDDING_PARAMS = 1.31e9


@functools.cache
def backbone_backend(backbone: str, dtype: str):
    """One backend per backbone and dtype for the whole run: the parts share loaded weights."""
    return _compose(backbone, dtype)


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


#: bf16 FLOP per cycle per core of each unit: AMX tiles (above); avx512_bf16's VDPBF16PS, 32 multiply-adds
#: per 512-bit instruction on two FMA ports (no CPU here has one port); none: float32 FMA on AVX2's two ports
BF16_FLOP_PER_CYCLE = {"amx_bf16": 1024, "avx512_bf16": 128, "none": 32}


def cpu_limit() -> tuple[str, float]:
    """This CPU's bf16 unit (``cpu_matrix_unit``) and its peak in prompt tokens/s on these cores."""
    from promptlottery.backends.transformers_local import cpu_matrix_unit

    unit = cpu_matrix_unit()
    flops = (os.cpu_count() or 1) * cpu_ghz() * 1e9 * BF16_FLOP_PER_CYCLE[unit]
    return unit, flops / (2 * NON_EMBEDDING_PARAMS)


def part_ceiling(reps: int = 8, rows: int = 512) -> dict[str, float]:
    """TFLOPS of one ``rows`` x 1,536 -> 8,960 product (the 1.5B's gate / up projection) per dtype, the
    best of ``reps`` after two warm-up products, on all of torch's threads; and the bf16 / float32 ratio."""
    import torch

    torch.manual_seed(0)
    flop = 2 * rows * 1536 * 8960
    got = {}
    for dtype in ("float32", "bfloat16"):
        x = torch.randn(rows, 1536).to(getattr(torch, dtype))
        w = torch.randn(8960, 1536).to(getattr(torch, dtype))
        best = float("inf")
        with torch.inference_mode():
            for k in range(reps + 2):
                t0 = time.perf_counter()
                torch.nn.functional.linear(x, w)
                if k >= 2:
                    best = min(best, time.perf_counter() - t0)
        got[dtype] = flop / best / 1e12
    unit, own = cpu_limit()
    peak = own * 2 * NON_EMBEDDING_PARAMS / 1e12
    print(
        f"bench=fastcpu part=ceiling threads={torch.get_num_threads()} rows={rows} {limits_line()} load={load()}"
    )
    print(
        f"ceiling_tflops float32={got['float32']:.3f} bfloat16={got['bfloat16']:.3f} "
        f"bf16_over_float32={got['bfloat16'] / got['float32']:.2f} "
        f"bf16_fraction_of_cpu_bf16_peak={got['bfloat16'] / peak:.3f} cpu_bf16_unit={unit}",
        flush=True,
    )
    return got


def limits_line() -> str:
    unit, own = cpu_limit()
    amx = amx_limit_tokens_per_s(os.cpu_count() or 1, cpu_ghz())
    return f"cpu_bf16_unit={unit} cpu_bf16_limit_tokens_per_s={own:.0f} amx_bf16_limit_tokens_per_s={amx:.0f}"


def batches(backend, items: int, variants: list[str]) -> list[list[int]]:
    rows = sorted((backend.encode(r) for r in grid_requests(backend, items, variants)), key=len)
    return [rows[i : i + 8] for i in range(0, len(rows), 8)]


def part_profile(items: int) -> None:
    """Wall time of one bf16 forward pass (8 rows, last-position logits, no cache) by module (forward
    hooks, exclusive times), and the load-time cast and tokenisation before it."""
    import torch

    t0 = time.perf_counter()
    b = backbone_backend(REFERENCE, "bfloat16")
    rows = batches(b, items, ["P1"])[0]
    tokenise = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = b.model
    cast = time.perf_counter() - t0
    spent: dict[str, float] = {}
    starts: dict[str, float] = {}

    def kind(name: str, mod) -> str | None:
        if isinstance(mod, torch.nn.Linear):
            return (
                "lm_head"
                if name == "lm_head"
                else ("linear_attention" if "self_attn" in name else "linear_mlp")
            )
        return {
            "Qwen2RMSNorm": "rms_norm",
            "Qwen2Attention": "attention",
            "Qwen2MLP": "mlp",
            "Embedding": "embed",
        }.get(type(mod).__name__)

    for name, mod in model.named_modules():
        k = kind(name, mod)
        if k:
            mod.register_forward_pre_hook(lambda m, _, n=name: starts.__setitem__(n, time.perf_counter()))
            mod.register_forward_hook(
                lambda m, _, __, n=name, k=k: spent.__setitem__(
                    k, spent.get(k, 0.0) + time.perf_counter() - starts[n]
                )
            )
    pad, width = b.tokenizer.pad_token_id, max(map(len, rows))
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=mask, logits_to_keep=1, use_cache=False)  # warm-up
        spent.clear()
        t0 = time.perf_counter()
        model(input_ids=ids, attention_mask=mask, logits_to_keep=1, use_cache=False)
        total = time.perf_counter() - t0
    parts = {
        "linear layers (q/k/v/o + gate/up/down, oneDNN bf16)": spent["linear_attention"]
        + spent["linear_mlp"],
        "attention without its linears (rotary, SDPA, reshapes)": spent["attention"]
        - spent["linear_attention"],
        "MLP without its linears (SiLU x up)": spent["mlp"] - spent["linear_mlp"],
        "RMS norms (upcast to float32)": spent["rms_norm"],
        "lm_head (last position) + embedding": spent["lm_head"] + spent["embed"],
    }
    parts["rest (masks, residual adds, Python)"] = total - sum(parts.values())
    print(
        f"bench=fastcpu part=profile dtype=bfloat16 rows={len(rows)} tokens={sum(map(len, rows))} load={load()}"
    )
    print(f"profile_forward_s={total:.2f} tokens_per_s={sum(map(len, rows)) / total:.1f}")
    print(f"profile_build_and_tokenise_s={tokenise:.2f} profile_load_and_cast_s={cast:.1f}")
    for name, sec in parts.items():
        print(f"profile_part={name!r} seconds={sec:.2f} share={sec / total:.3f}")


def _transformers_forward(backend):
    import torch

    pad = backend.tokenizer.pad_token_id

    def run(rows: list[list[int]]) -> None:
        width = max(map(len, rows))
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
        with torch.inference_mode():
            backend.model(input_ids=ids, attention_mask=mask, logits_to_keep=1, use_cache=False)

    return run


def part_raw(items: int, reps: int) -> None:
    """Prompt tokens/s of the judge-like batches per engine, interleaved ``reps`` times."""
    from promptlottery.backends.base import BackendError

    engines = {
        "transformers_float32": lambda: _transformers_forward(backbone_backend(REFERENCE, "float32")),
        "transformers_bfloat16": lambda: _transformers_forward(backbone_backend(REFERENCE, "bfloat16")),
    }
    rows = batches(backbone_backend(REFERENCE, "float32"), items, ["P1"])
    tokens = sum(len(r) for b in rows for r in b)
    runs = {}
    for name, make in engines.items():
        try:
            runs[name] = make()
            runs[name](rows[0][:2])  # loads, warms the kernels
        except BackendError as e:
            print(f"raw_engine={name} skipped: {e}")
            runs.pop(name, None)
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(reps):
        for name, run in runs.items():
            t0 = time.perf_counter()
            for b in rows:
                run(b)
            seconds[name].append(time.perf_counter() - t0)
            print(f"raw_engine={name} seconds={seconds[name][-1]:.2f} load={load()}", flush=True)
    unit, own = cpu_limit()
    limit = amx_limit_tokens_per_s(os.cpu_count() or 1, cpu_ghz())
    print(
        f"bench=fastcpu part=raw batches={len(rows)}x8 prompt_tokens={tokens} cpus={os.cpu_count()} "
        f"ghz={cpu_ghz():.2f} {limits_line()}"
    )
    base = tokens / min(seconds["transformers_float32"])
    for name, s in seconds.items():
        tps = tokens / min(s)
        print(
            f"raw_engine={name} best_s={min(s):.2f} prompt_tokens_per_s={tps:.1f} "
            f"ratio_to_float32={tps / base:.2f} fraction_of_amx_bf16_limit={tps / limit:.3f} "
            f"fraction_of_cpu_bf16_limit={tps / own:.3f}"
        )


FAST = "qwen25_coder_15b_fast"


def fast_backend(overrides: tuple[str, ...] = ()):
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from promptlottery.stages import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[f"backbone={FAST}", f"paths.model_dir={MODEL_DIR}", "logger=none", *overrides],
        )
    return instantiate(cfg.backbone.backend)


def weighted(probs: dict[str, float]) -> float:
    """The logprob-weighted score sum_i p_i s_i / sum_j p_j (labels "1".."5": s_i = the label's value)."""
    return sum(p * float(lab) for lab, p in probs.items()) / sum(probs.values())


def part_fidelity(
    items: int, variants: list[str], rounds: int = 4, fast: tuple[str, ...] = (), dump: str | None = None
) -> None:
    """Fast vs float32 on the same judgments; speed interleaved over ``rounds`` rounds, the figures
    so far printed after each round (a run stopped early still reports its n)."""
    from promptlottery.backends.base import Decoding

    ref = backbone_backend(REFERENCE, "float32")
    print(f"fidelity_fast_overrides={' '.join(fast) or 'none'}")
    fast = fast_backend(fast)
    meta = fidelity_grid(ref, items, variants)
    # batched as a judge job batches them: one wording per job, its requests in length order
    batches_ = []
    for v in variants:
        reqs = sorted((r for r, m in meta.values() if m[1] == v), key=lambda r: (len(ref.encode(r)), r.key))
        batches_ += [reqs[i : i + 8] for i in range(0, len(reqs), 8)]
    reqs = [r for b in batches_ for r in b]
    print(f"bench=fastcpu part=fidelity items={items} variants={len(variants)} judgments={len(reqs)}")
    for name, b in (("float32", ref), ("fast", fast)):
        t0 = time.perf_counter()
        b.generate(reqs[:2], Decoding())  # loads (converts once), warms the kernels
        print(f"fidelity_engine={name} startup_s={time.perf_counter() - t0:.1f} load={load()}", flush=True)
    fast.computed_tokens = 0  # from here on: the timed judgments only
    answers: dict[str, list] = {"float32": [], "fast": []}
    seconds = {"float32": 0.0, "fast": 0.0}
    for k in range(rounds):
        part = batches_[k::rounds]
        for name, b in (("float32", ref), ("fast", fast)):
            t0 = time.perf_counter()
            got = [resp for batch in part for resp in b.generate(batch, Decoding())]
            spent = time.perf_counter() - t0
            seconds[name] += spent
            answers[name] += got
            print(
                f"fidelity_round={k} engine={name} judgments={len(got)} seconds={spent:.1f} load={load()}",
                flush=True,
            )
        fidelity_figures(answers["float32"], answers["fast"], seconds, getattr(fast, "computed_tokens", None))
    done = [r.key for k in range(rounds) for batch in batches_[k::rounds] for r in batch]
    headline_rows(meta, done, answers)
    if dump:
        with open(dump, "w") as fh:
            for key, a, f in zip(done, answers["float32"], answers["fast"], strict=True):
                item, variant, human = meta[key][1]
                row = {"item_id": item, "variant": variant, "human": human, "key": key}
                fh.write(json.dumps(row | {"float32": a.label_probs, "fast": f.label_probs}) + "\n")
        print(f"fidelity_dump={dump}")


def fidelity_grid(backend, items: int, variants: list[str]) -> dict:
    """request key -> (request, (item id, wording, the human STS-B score)) of the fidelity grid."""
    from promptlottery.backends.base import Decoding
    from promptlottery.data import load_items
    from promptlottery.judging.runner import Condition, build_requests
    from promptlottery.prompts import load_group

    its = load_items("stsb", data_dir=DATA_DIR, limit=items, seed=0, split="dev")
    group, out = load_group("G12"), {}
    for v in variants:
        cond = Condition("stsb", "semantic_alignment", "G12", v, "bench", "similarity")
        for item, r in build_requests(its, cond, group, backend, Decoding()):
            out[r.key] = (r, (item.id, v, item.human_score("similarity")))
    return out


def headline_rows(meta: dict, keys: list[str], answers: dict, resamples: int = 1000) -> None:
    """The study's two headline rows per engine (Fleiss' kappa of the argmax labels across the
    wordings; Pearson of the logprob-weighted score with the human score over all judgments), the
    float32 run's 95% percentile interval over items (``resamples`` item resamples, seed 0), and
    whether the fast engine's value lies in it."""
    import numpy as np

    from promptlottery.metrics.agreement import fleiss_kappa

    items = sorted({meta[k][1][0] for k in keys})
    variants = sorted({meta[k][1][1] for k in keys})
    at = {(meta[k][1][0], meta[k][1][1]): i for i, k in enumerate(keys)}
    if len(at) != len(items) * len(variants):
        print("fidelity_headline skipped: the grid is not complete (a stopped run)")
        return
    human = {meta[k][1][0]: meta[k][1][2] for k in keys}

    def rows(name, chosen):
        labels = [
            [
                max(answers[name][at[i, v]].label_probs, key=answers[name][at[i, v]].label_probs.get)
                for v in variants
            ]
            for i in chosen
        ]
        w = [weighted(answers[name][at[i, v]].label_probs) for i in chosen for v in variants]
        h = [human[i] for i in chosen for v in variants]
        return fleiss_kappa(labels, labels=["1", "2", "3", "4", "5"]), float(np.corrcoef(w, h)[0, 1])

    point = {name: rows(name, items) for name in ("float32", "fast")}
    rng = np.random.default_rng(0)
    boot = np.array(
        [
            rows("float32", [items[j] for j in rng.integers(0, len(items), len(items))])
            for _ in range(resamples)
        ]
    )
    for j, stat in enumerate(("fleiss_across_wordings", "pearson_weighted_vs_human")):
        lo, hi = np.nanpercentile(boot[:, j], [2.5, 97.5])
        ref, fast = point["float32"][j], point["fast"][j]
        print(
            f"fidelity_headline stat={stat} items={len(items)} wordings={len(variants)} float32={ref:.4f} "
            f"ci95=[{lo:.4f}, {hi:.4f}] fast={fast:.4f} fast_within_ci={lo <= fast <= hi}"
        )


def fidelity_figures(a: list, f: list, seconds: dict[str, float], computed: int | None = None) -> None:
    """Agreement of the two engines' answers so far, and their speed: prompt tokens judged per
    second (every prompt token of every judgment, the figure a user waits on; both engines run a
    batch's shared prefix once, the fast one also keeps it for the next batches of the wording) and,
    for the fast engine, the tokens it computed per second (padding included, shared prefixes once)
    as a fraction of the AMX bf16 limit."""
    import numpy as np

    tokens = sum(r.prompt_tokens for r in a)
    argmax = [
        max(x.label_probs, key=x.label_probs.get) == max(y.label_probs, key=y.label_probs.get)
        for x, y in zip(a, f, strict=True)
    ]
    wa, wf = np.array([weighted(x.label_probs) for x in a]), np.array([weighted(y.label_probs) for y in f])
    diff = max(abs(x.label_probs[lab] - y.label_probs[lab]) for x, y in zip(a, f) for lab in x.label_probs)
    texts = sum(x.raw_text == y.raw_text for x, y in zip(a, f))
    limit = amx_limit_tokens_per_s(os.cpu_count() or 1, cpu_ghz())
    unit, own = cpu_limit()
    tps = {name: tokens / s for name, s in seconds.items()}
    print(
        f"fidelity_so_far judgments={len(a)} prompt_tokens={tokens} argmax_equal={sum(argmax)}/{len(argmax)} "
        f"share={np.mean(argmax):.3f} weighted_pearson={np.corrcoef(wa, wf)[0, 1]:.4f} "
        f"max_label_prob_diff={diff:.4f} max_weighted_diff={np.abs(wa - wf).max():.3f} "
        f"raw_text_equal={texts}/{len(a)} load={load()}"
    )
    print(
        f"fidelity_tokens_per_s float32={tps['float32']:.1f} fast={tps['fast']:.1f} "
        f"ratio={tps['fast'] / tps['float32']:.2f} fast_fraction_of_amx_bf16_limit={tps['fast'] / limit:.3f} "
        f"{limits_line()}",
        flush=True,
    )
    if computed is not None:
        print(
            f"fidelity_fast_computed tokens={computed} per_s={computed / seconds['fast']:.1f} "
            f"fraction_of_amx_bf16_limit={computed / seconds['fast'] / limit:.3f} "
            f"fraction_of_cpu_bf16_limit={computed / seconds['fast'] / own:.3f} cpu_bf16_unit={unit}",
            flush=True,
        )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["ceiling", "profile", "raw", "fidelity"])
    ap.add_argument("--items", type=int, default=120, help="STS-B items of the fidelity part")
    ap.add_argument("--variants", default="P1,P2,P3,P4,P5", help="G12 wordings of the fidelity part")
    ap.add_argument(
        "--raw-items", type=int, default=16, help="STS-B items of the raw part (P1, batches of 8)"
    )
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4, help="interleaved rounds of the fidelity part")
    ap.add_argument("--dump", help="the fidelity part's judgments of both engines as JSON lines")
    ap.add_argument(
        "--fast", action="append", default=[], help="a Hydra override of the fast backbone (repeatable)"
    )
    args = ap.parse_args()
    from promptlottery.backends.weights import missing_weights

    missing = missing_weights(backbone_backend(REFERENCE, "float32").source, MODEL_DIR)
    if missing:
        print(f"bench=fastcpu skipped: {missing}")
        return 0
    parts = {
        "ceiling": lambda: part_ceiling(),
        "profile": lambda: part_profile(8),
        "raw": lambda: part_raw(args.raw_items, args.reps),
        "fidelity": lambda: part_fidelity(
            args.items, args.variants.split(","), args.rounds, tuple(args.fast), args.dump
        ),
    }
    for name, part in parts.items():
        if args.only in (None, name):
            part()
    return 0


if __name__ == "__main__":
    sys.exit(main())

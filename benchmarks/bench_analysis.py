"""Benchmark: the lottery analysis at the paper's scale, and against the time of judging.

    .venv/bin/python benchmarks/bench_analysis.py            # minutes: grid of 1..8 tasks
    .venv/bin/python benchmarks/bench_analysis.py --full     # the paper's 33 tasks (about 10 min)

Three parts, each printing ``key=value`` lines:

1. ``bench=judge_vs_analysis``: judge the one-configuration fake grid (fake backbone, STS-B,
   P1-P5 x ``--items`` items) with ``python -m run -m +experiment=stsb_alignment``, then analyse it
   with ``python -m run +analysis=lottery analysis.embeddings=none``, both as subprocesses of this
   run (imports included on both sides); prints both times and ``ratio`` (analysis / judging).
2. ``bench=loop_vs_vectorised``: :func:`~promptlottery.analysis.stage.analyse` on one
   configuration with ``--loop-resamples`` resamples, once with every bootstrap forced through the
   loop over resamples and once with the vectorised (``batch``) forms; both times and ``speedup``.
3. ``bench=paper_grid``: a grid shaped like the paper's -- ``--tasks`` tasks (one in three binary,
   one in four with evaluated systems) x 5 backbones x 5 variants x 100 items, judgments files
   written directly from the fake judge's rows of part 1 with labels redrawn per backbone --
   analysed end to end (load, tables, report; figures unless ``--no-plots``) with 1000 resamples
   for the first 1, 2, 4, ... tasks. Per size: seconds, judgments/s and seconds per configuration
   (flat when the time grows linearly); then the least-squares seconds per judgment and the
   extrapolation to ``--extrapolate`` judgments (the paper's 400,000).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
BACKBONES = 5
VARIANTS = ("P1", "P2", "P3", "P4", "P5")


def _run(args: list[str], cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "run", *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - t0
    if proc.returncode:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"bench_analysis: `python -m run {' '.join(args)}` failed (exit {proc.returncode})")
    return seconds


def judge_vs_analysis(work: Path, items: int) -> Path:
    """Part 1; returns the sweep directory of the judged grid."""
    out = work / "judged"
    t_judge = _run(
        [
            "-m",
            "+experiment=stsb_alignment",
            "backbone=fake",
            f"dataset.limit={items}",
            "logger=none",
            f"paths.output_dir={out}",
        ],
        ROOT,
    )
    sweep = next((out / "stsb_alignment" / "multiruns").iterdir())
    t_analysis = _run(
        [
            "+analysis=lottery",
            f"analysis.runs={sweep}",
            "analysis.embeddings=none",
            "logger=none",
            f"hydra.run.dir={work / 'analysis_one'}",
        ],
        ROOT,
    )
    n = len(VARIANTS) * items
    print(
        f"bench=judge_vs_analysis judgments={n} judge_s={t_judge:.1f} analysis_s={t_analysis:.1f} "
        f"ratio={t_analysis / t_judge:.2f} target_ratio<=10",
        flush=True,
    )
    return sweep


def paper_grid(sweep: Path, root: Path, n_tasks: int, items: int = 100, seed: int = 0) -> list[list[str]]:
    """Write the paper-shaped grid; returns, per task, the globs of its job directories."""
    base = pd.concat(
        [pd.read_parquet(p) for p in sorted(sweep.glob("*/judgments.parquet"))], ignore_index=True
    )
    keep = sorted(base["item_id"].unique())[:items]
    base = base[base["item_id"].isin(keep)].reset_index(drop=True)
    rng = np.random.default_rng(seed)
    globs = []
    for k in range(n_tasks):
        binary = k % 3 == 2
        for b in range(BACKBONES):
            df = base.copy()
            df["criterion"] = f"similarity_{k:02d}"
            df["backbone"] = f"fake{b}"
            score = df["argmax_score"].to_numpy(float)
            redraw = rng.random(len(df)) < 0.3  # this backbone's own verdicts on 30% of the rows
            score = np.where(redraw, rng.integers(1, 6, len(df)), score)
            weighted = np.clip(score + rng.normal(0, 0.4, len(df)), 1, 5)
            if binary:
                df["scale"] = "binary_yes_no"
                labels = np.where(score >= 3, "yes", "no")
                score, weighted = (score >= 3).astype(float), (weighted - 1) / 4
            else:
                labels = score.astype(int).astype(str)
            df["argmax_label"] = df["parsed_label"] = labels
            df["argmax_score"] = df["parsed_score"] = score
            df["weighted_score"] = df["score"] = weighted
            if k % 4 == 0:
                df["system"] = [f"sys{int(i.rsplit('-', 1)[-1]) % 4}" for i in df["item_id"]]
            for v, g in df.groupby("variant"):
                job = root / f"t{k:02d}_b{b}_{v}"
                job.mkdir(parents=True, exist_ok=True)
                g.to_parquet(job / "judgments.parquet", index=False)
                (job / "results.json").write_text(
                    json.dumps({"status": "ok", "backend": {"model": f"fake{b}"}})
                )
        globs.append([str(root / f"t{k:02d}_*")])
    return globs


def loop_vs_vectorised(globs: list[list[str]], n_resamples: int) -> None:
    """Part 2, on the first configuration of the grid (task 0, backbone 0)."""
    from promptlottery.analysis.lottery.analyse import analyse
    from promptlottery.analysis.lottery.options import LotteryOptions
    from promptlottery.judging.grid import JudgmentGrid
    from promptlottery.metrics import bootstrap

    runs = [g.replace("_*", "_b0_*") for g in globs[0]]
    opts = LotteryOptions.from_dict({"runs": runs, "embeddings": "none", "n_resamples": n_resamples})
    times = {}
    batch_form = bootstrap._batch_form
    for mode in ("vectorised", "loop"):
        grid = JudgmentGrid.load(runs)  # a fresh grid each time: its matrices are built inside the timing
        if mode == "loop":
            bootstrap._batch_form = lambda stat: (None, {})
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                analyse(grid, opts)
                times[mode] = time.perf_counter() - t0
        finally:
            bootstrap._batch_form = batch_form
    print(
        f"bench=loop_vs_vectorised configurations=1 judgments={grid.n_judgments} n_resamples={n_resamples} "
        f"loop_s={times['loop']:.2f} vectorised_s={times['vectorised']:.2f} "
        f"speedup={times['loop'] / times['vectorised']:.1f}",
        flush=True,
    )


def growth(globs: list[list[str]], work: Path, plots: bool, n_jobs: int, extrapolate: int) -> None:
    """Part 3: the first 1, 2, 4, ... tasks analysed end to end."""
    from promptlottery.analysis.lottery.options import LotteryOptions
    from promptlottery.analysis.stage import run_lottery

    sizes = sorted({min(s, len(globs)) for s in (1, 2, 4, 8, 16, 33)} | {len(globs)})
    points = []
    for s in sizes:
        runs = [g for task in globs[:s] for g in task]
        opts = LotteryOptions.from_dict(
            {"runs": runs, "embeddings": "none", "plots": plots, "n_jobs": n_jobs}
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            res = run_lottery(opts, work / f"grid_{s}")
            seconds = time.perf_counter() - t0
        n, configs = res["n_judgments"], s * BACKBONES
        points.append((n, seconds))
        print(
            f"bench=paper_grid tasks={s} configurations={configs} judgments={n} n_jobs={n_jobs} plots={plots} "
            f"seconds={seconds:.1f} judgments_per_s={n / seconds:.0f} seconds_per_configuration={seconds / configs:.2f}",
            flush=True,
        )
    x, y = np.array(points, dtype=float).T
    slope, intercept = np.polyfit(x, y, 1) if len(x) > 1 else (y[0] / x[0], 0.0)
    print(
        f"bench=paper_grid_fit judgments_max={int(x[-1])} seconds_max={y[-1]:.1f} "
        f"seconds_per_1000_judgments={1000 * slope:.2f} fixed_seconds={intercept:.1f} "
        f"growth_ratio={(y[-1] / x[-1]) / (y[0] / x[0]):.2f} "
        f"extrapolated_judgments={extrapolate} extrapolated_minutes={(intercept + slope * extrapolate) / 60:.1f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="the paper's 33 tasks (else --tasks)")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--items", type=int, default=300, help="items of the judged one-configuration grid")
    ap.add_argument("--loop-resamples", type=int, default=100)
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--extrapolate", type=int, default=400_000)
    args = ap.parse_args(argv)
    n_tasks = 33 if args.full else args.tasks
    with tempfile.TemporaryDirectory(prefix="bench_analysis_") as tmp:
        work = Path(tmp)
        sweep = judge_vs_analysis(work, args.items)
        globs = paper_grid(sweep, work / "grid", n_tasks)
        loop_vs_vectorised(globs, args.loop_resamples)
        growth(globs, work / "out", not args.no_plots, args.n_jobs, args.extrapolate)
    return 0


if __name__ == "__main__":
    sys.exit(main())

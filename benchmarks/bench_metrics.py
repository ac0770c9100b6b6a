"""Benchmark: ``bootstrap_ci(kendall_tau, ...)`` against a plain loop over ``scipy.stats.kendalltau``.

    .venv/bin/python benchmarks/bench_metrics.py [--n 5000] [--n-resamples 1000] [--repeats 3]

Both sides get the same resample indices (``resample_indices(n, R, seed)``, drawn once and timed
on its own) and one core: BLAS is pinned to one thread below, as the SciPy loop is single-threaded.
Prints one ``key=value`` line per data set with both wall times (median of ``--repeats`` runs),
their ratio (and the ratio of CPU times, steadier on a shared machine), the same with the draw of
the indices included, and whether the point estimates and the intervals agree (to 1e-9).
Exits 1 if they do not.

Data sets, n paired scores each, shaped like this project's judge-vs-human data:

* ``likert_vs_mean``: a judge's 1-10 Likert label against a human mean of five 0-5 ratings
  (STS-B style) -- few distinct values on both sides, the common case;
* ``expected_vs_mean``: a judge's expected score (probability-weighted, continuous) against the
  same human means -- one side nearly without ties, the harder case for the vectorised path.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from promptlottery.metrics import bootstrap_ci, kendall_tau, resample_indices  # noqa: E402

TOL = 1e-9
LEVEL = 0.95


def make_data(kind: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0, 5, n)
    raters = np.clip(np.round(truth[:, None] + rng.normal(0, 0.8, (n, 5))), 0, 5)
    human = raters.mean(axis=1)  # multiples of 0.2 in [0, 5]
    if kind == "likert_vs_mean":
        judge = np.clip(np.round(2 * truth + rng.normal(0, 1.2, n)), 1, 10)
    elif kind == "expected_vs_mean":
        logits = -0.5 * (np.arange(1, 11)[None, :] - (2 * truth + rng.normal(0, 1.0, n))[:, None]) ** 2
        probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        judge = np.round(probs @ np.arange(1, 11), 4)
    else:
        raise ValueError(kind)
    return judge, human


def scipy_loop(x: np.ndarray, y: np.ndarray, idx: np.ndarray) -> tuple[float, float, float, np.ndarray]:
    """The plain way: one scipy.stats.kendalltau call per resample, then the percentile interval."""
    estimate = stats.kendalltau(x, y).statistic
    dist = np.array([stats.kendalltau(x[i], y[i]).statistic for i in idx])
    low, high = np.percentile(dist, [50 * (1 - LEVEL), 50 * (1 + LEVEL)])
    return float(estimate), float(low), float(high), dist


def timed(fn, repeats: int):
    """(median wall seconds, median CPU seconds of this process, last result)."""
    wall, cpu, out = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--n-resamples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    t_draw, _, idx = timed(lambda: resample_indices(args.n, args.n_resamples, seed=args.seed), args.repeats)
    print(f"bench=resample_indices n={args.n} n_resamples={args.n_resamples} seconds={t_draw:.4f}")
    ok_all = True
    for kind in ("likert_vs_mean", "expected_vs_mean"):
        x, y = make_data(kind, args.n, seed=args.seed)
        t_loop, c_loop, (est, low, high, dist) = timed(lambda x=x, y=y: scipy_loop(x, y, idx), args.repeats)
        t_fast, c_fast, res = timed(
            lambda x=x, y=y: bootstrap_ci(kendall_tau, x, y, indices=idx, level=LEVEL), args.repeats
        )
        t_seed, _, res_seed = timed(
            lambda x=x, y=y: bootstrap_ci(kendall_tau, x, y, n_resamples=args.n_resamples, seed=args.seed),
            args.repeats,
        )
        max_diff = float(np.max(np.abs(res.distribution - dist)))
        ok = (
            res.estimate == est
            and abs(res.low - low) <= TOL
            and abs(res.high - high) <= TOL
            and max_diff <= TOL
            and (res_seed.low, res_seed.high) == (res.low, res.high)
        )
        ok_all &= ok
        print(
            f"bench=bootstrap_kendall_tau data={kind} n={args.n} n_resamples={args.n_resamples} "
            f"distinct_x={len(np.unique(x))} distinct_y={len(np.unique(y))} "
            f"scipy_loop_s={t_loop:.4f} bootstrap_ci_s={t_fast:.4f} ratio={t_loop / t_fast:.1f} "
            f"cpu_ratio={c_loop / max(c_fast, 1e-9):.1f} "
            f"with_draw_scipy_loop_s={t_loop + t_draw:.4f} with_draw_bootstrap_ci_s={t_seed:.4f} "
            f"with_draw_ratio={(t_loop + t_draw) / t_seed:.1f} "
            f"estimate={res.estimate:.6f} low={res.low:.6f} high={res.high:.6f} "
            f"max_abs_diff={max_diff:.1e} identical={ok}"
        )
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())

"""Coverage of bootstrap intervals of Fleiss' kappa when the true kappa is 0 (the random judge).

    PYTHONPATH=src .venv/bin/python benchmarks/kappa_ci_coverage.py --seeds 1000 --resamples 1000

Each simulated configuration is an ``n items x r wordings`` matrix of labels drawn independently and
uniformly from ``k`` categories (what ``backbone.backend.behaviour=random`` gives), so the
population kappa is 0. Items are resampled as the lottery stage does (the rows of the matrix), and
for each 95% interval method the share of seeds whose interval contains 0 is printed (with its
binomial standard error), the misses on each side, the mean estimate (Fleiss' kappa is biased
below 0 at small n), the median width and the share of infinite intervals. Methods: ``percentile`` (what the stage reports by
default), ``basic`` (2 x estimate - percentiles), ``bca`` (Efron 1987: bias-corrected and
accelerated, jackknife acceleration; ``metrics.bootstrap.bca_bounds``) and ``studentized``
(bootstrap-t, a jackknife standard error inside every resample:
``metrics.kappa_interval.fleiss_studentized``, what ``analysis.kappa_interval=studentized`` reports); ``items_and_wordings``: the
percentile interval when the wordings are resampled too.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from promptlottery.metrics.bootstrap import bca_bounds
from promptlottery.metrics.kappa_interval import _kappa, fleiss_studentized, unit_tables


def one_config(rng, n: int, r: int, k: int, n_res: int, level: float, kappa: float = 0.0):
    labels = rng.integers(0, k, size=(n, r))
    if kappa > 0:  # each rating is the item's own label with probability sqrt(kappa): Fleiss' kappa = kappa
        own = rng.random((n, r)) < np.sqrt(kappa)
        labels = np.where(own, rng.integers(0, k, size=(n, 1)), labels)
    idx = rng.integers(0, n, size=(n_res, n))
    w = np.zeros((n_res, n))
    np.add.at(w, (np.repeat(np.arange(n_res), n), idx.ravel()), 1.0)
    stud = fleiss_studentized(labels, k, w, level=level)  # the stage's analysis.kappa_interval=studentized
    est, dist = stud.estimate, stud.distribution
    if not np.isfinite(est):
        return None
    q = np.percentile(dist[np.isfinite(dist)], [50 * (1 - level), 50 * (1 + level)])
    s_p, s_c, m, _ = unit_tables(labels, k)
    loo = _kappa(s_p.sum() - s_p, s_c.sum(axis=0) - s_c, m.sum() - m, r)
    out = {"estimate": est, "percentile": tuple(q), "basic": (2 * est - q[1], 2 * est - q[0])}
    out["bca"] = bca_bounds(est, dist, loo, level)
    out["studentized"] = (stud.low, stud.high)
    # items and wordings both resampled (wordings drawn with replacement: a repeated wording agrees
    # with itself, which is why the stage does not do it)
    cols = rng.integers(0, r, size=(n_res, r))
    lab = labels[idx[:, :, None], cols[:, None, :]]
    c2 = np.stack([(lab == c).sum(axis=2) for c in range(k)], axis=2).astype(float)
    pe = ((c2.sum(axis=1) / (n * r)) ** 2).sum(axis=1)
    pb = (((c2**2).sum(axis=2) - r) / (r * (r - 1))).mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        d2 = np.where(pe < 1 - 1e-12, (pb - pe) / (1 - pe), np.nan)
    out["items_and_wordings"] = tuple(np.percentile(d2[~np.isnan(d2)], [50 * (1 - level), 50 * (1 + level)]))
    return out


METHODS = ("percentile", "basic", "bca", "studentized", "items_and_wordings")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--items", default="8,16,32,64")
    ap.add_argument("--categories", default="2,3,5,10")
    ap.add_argument("--raters", type=int, default=5)
    ap.add_argument("--level", type=float, default=0.95)
    ap.add_argument("--kappa", type=float, default=0.0, help="the true kappa (0: the random judge)")
    a = ap.parse_args(argv)
    print(f"seeds={a.seeds} resamples={a.resamples} raters={a.raters} level={a.level} true_kappa={a.kappa}")
    print(
        "| items | categories | mean kappa | method | coverage of the true kappa (± se) | misses: interval above / below it "
        "| median width | infinite |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in a.items.split(",")):
        for k in (int(x) for x in a.categories.split(",")):
            rng = np.random.default_rng([n, k, a.raters])
            res = [
                c
                for c in (
                    one_config(rng, n, a.raters, k, a.resamples, a.level, a.kappa) for _ in range(a.seeds)
                )
                if c
            ]
            mean_est = np.mean([c["estimate"] for c in res])
            for method in METHODS:
                cis = np.array([c[method] for c in res], dtype=float)
                lo, hi = cis[:, 0], cis[:, 1]
                cover = float(np.mean((lo <= a.kappa) & (a.kappa <= hi)))
                se = np.sqrt(cover * (1 - cover) / len(cis))
                print(
                    f"| {n} | {k} | {mean_est:.3f} | {method} | {cover:.3f} ± {se:.3f} | "
                    f"{np.mean(lo > a.kappa):.3f} / {np.mean(hi < a.kappa):.3f} | {np.nanmedian(hi - lo):.3f} | "
                    f"{np.mean(~np.isfinite(hi - lo)):.3f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())

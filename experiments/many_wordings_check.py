"""The many-wordings study's check: the wording model fitted on a sparse grid against the empirical
per-wording human agreement of items judged under every wording (docs/sparse.md, "30 wordings").

    python experiments/many_wordings_check.py 'outputs/manywordings/sparse15b/*' \
        'outputs/manywordings/full15b_20/*' --human-range 0 5

The check items (the full grid's) must be among the sparse grid's items. The model's penalties are
tuned on validation items drawn from the **other** sparse items (never on the check items); the model
is then fitted on every sparse item's judged cells, and on the check items each wording's estimate is
the mean of its filled column (the check items' own sparse cells as judged, the rest predicted). The
empirical figure uses every cell of the check items. Intervals: the check items resampled (1,000 times,
the fit held fixed), for the empirical quantiles and for the estimate minus the empirical value.
No model call.
"""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import numpy as np

from promptlottery.analysis.budget.report import _human_hits
from promptlottery.analysis.budget.wording_model import QUANTILES, fit_wording_model
from promptlottery.analysis.budget.wording_model_report import _covariates
from promptlottery.analysis.budget.wording_model_simulation import tune_penalties
from promptlottery.judging.grid import JudgmentGrid


def _one(glob: str):
    configs = list(JudgmentGrid.load(glob, verdict="argmax", reference="P1"))
    if len(configs) != 1:
        raise SystemExit(f"{glob}: expected one configuration, found {len(configs)}")
    return configs[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sparse")
    ap.add_argument("full")
    ap.add_argument("--human-range", nargs=2, type=float, required=True)
    ap.add_argument("--embedding", default="minilm", choices=["minilm", "words", "none"])
    ap.add_argument("--validation-share", type=float, default=0.3)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    a = ap.parse_args()
    sparse, full = _one(a.sparse), _one(a.full)
    ls, lf = sparse.matrix("label"), full.matrix("label")
    lf = lf[list(ls.columns)]  # the same wordings, in the sparse grid's order
    missing = sorted(set(lf.index) - set(ls.index))
    if missing:
        raise SystemExit(f"{len(missing)} check items are not in the sparse grid, e.g. {missing[:3]}")
    if lf.isna().any().any():
        raise SystemExit(f"{a.full}: the check grid has unjudged cells")
    hr = tuple(a.human_range)
    ys, yf = _human_hits(sparse, ls, hr), _human_hits(full, lf, hr)
    variants = list(ls.columns)
    x, what = _covariates(sparse, variants, SimpleNamespace(model_embedding=a.embedding))
    check = np.array([ls.index.get_loc(i) for i in lf.index])
    others = np.setdiff1d(np.arange(len(ls)), check)
    rng = np.random.default_rng(a.seed)
    val = np.sort(rng.permutation(others)[: max(2, round(a.validation_share * len(ls)))])
    pen = tune_penalties(ys[val], x, rank=0, seed=a.seed)
    fit = fit_wording_model(ys, x, rank=0, lam=pen["lam"], lam_rank=pen["lam_rank"], seed=a.seed)
    est_cells, emp_cells = fit.filled[check], yf
    with np.errstate(invalid="ignore"):
        observed_cells = ys[check]
    est, emp = est_cells.mean(0), emp_cells.mean(0)
    obs = np.nanmean(np.where(np.isfinite(observed_cells), observed_cells, np.nan), axis=0)
    q = lambda v: np.quantile(v[np.isfinite(v)], QUANTILES)  # noqa: E731
    qe, qf, qo = q(est), q(emp), q(obs)
    boot_f, boot_d = [], []
    for _ in range(a.resamples):
        idx = rng.integers(0, len(check), len(check))
        f_, e_ = q(emp_cells[idx].mean(0)), q(est_cells[idx].mean(0))
        boot_f.append(f_)
        boot_d.append(e_ - f_)
    lo_f, hi_f = np.quantile(boot_f, [0.025, 0.975], axis=0)
    lo_d, hi_d = np.quantile(boot_d, [0.025, 0.975], axis=0)
    names = [f"q{round(100 * p):02d}" for p in QUANTILES]
    judged = np.isfinite(ys)
    print(
        f"sparse grid: {ls.shape[0]} items x {ls.shape[1]} wordings, {int(judged.sum())} judged cells "
        f"({100 * judged.mean():.1f}%); check items: {len(check)} (every wording judged); covariates: {what}"
    )
    print(
        f"penalty lam = {pen['lam']:g} (tuned: {pen['tuned']}, on {len(val)} validation items, none a check item)"
    )
    print(f"check items' own sparse cells: {int(judged[check].sum())} of {judged[check].size}")
    print(
        "| quantile over wordings | empirical, check items [95%] | model estimate | estimate - empirical [95%] | observed cells' means (no model) |"
    )
    print("|---|---|---|---|---|")
    for j, n in enumerate(names):
        print(
            f"| {n} | {qf[j]:.3f} [{lo_f[j]:.3f}, {hi_f[j]:.3f}] | {qe[j]:.3f} | {qe[j] - qf[j]:+.3f} "
            f"[{lo_d[j]:+.3f}, {hi_d[j]:+.3f}] | {qo[j]:.3f} |"
        )
    mae_e, mae_o = np.mean(np.abs(est - emp)), np.nanmean(np.abs(obs - emp))
    r = np.corrcoef(est, emp)[0, 1]
    print(
        f"per-wording MAE: model {mae_e:.3f}, observed means {mae_o:.3f}; Pearson(model, empirical) over wordings {r:.3f}"
    )
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "variants": variants,
                    "estimate": est.tolist(),
                    "empirical": emp.tolist(),
                    "observed": obs.tolist(),
                    "quantiles": names,
                    "q_est": qe.tolist(),
                    "q_emp": qf.tolist(),
                    "lam": pen["lam"],
                    "n_check": len(check),
                    "n_validation": len(val),
                },
                fh,
                indent=1,
            )


if __name__ == "__main__":
    main()

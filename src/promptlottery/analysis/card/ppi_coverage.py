"""Coverage of the human-corrected estimate on real human labels, with a simulated judge.

``python -m promptlottery.analysis.card.ppi_coverage --dataset summeval --criterion coherence`` takes every
item's human mean ``y`` from the dataset (the real labels) and a SIMULATED judge per wording ``w``:
``f = clip(round(y + b_w + b_ws + e), lo, hi)``, with a wording bias ``b_w``, a wording x system
bias ``b_ws ~ N(0, system_sd)`` (what makes wordings rank systems differently) and item noise
``e ~ N(0, noise_sd)``, all seeded. It then reports, per slice size ``n`` (25, 50, 100) over
``n_draws`` random slices, how often the PPI++, human-only and judge-only intervals cover the
all-human mean (:func:`~promptlottery.analysis.card.corrected.coverage`), and the share of system
pairs ordered oppositely by two wordings before and after PPI++ correction
(:func:`~promptlottery.analysis.card.corrected.rank_changes`). The judge is simulated, not a model:
every output says so. The real judge's version of these numbers is the judge card's.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import pandas as pd

from promptlottery.analysis.card.corrected import coverage, rank_changes
from promptlottery.atomic import atomic_write_text


def simulated_judges(
    y: np.ndarray,
    systems: np.ndarray,
    *,
    scale: tuple[float, float],
    biases=(0.6, 0.3, 0.0, -0.3, 0.9),
    system_sd: float = 0.3,
    noise_sd: float = 0.8,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """One simulated judge per wording ``P1..`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    lo, hi = scale
    sys_ids = pd.unique(systems)
    out = {}
    for k, b in enumerate(biases, start=1):
        per_sys = dict(zip(sys_ids, rng.normal(0, system_sd, len(sys_ids)), strict=True))
        bs = np.array([per_sys[s] for s in systems])
        out[f"P{k}"] = np.clip(np.round(y + b + bs + rng.normal(0, noise_sd, y.size)), lo, hi)
    return out


def run(
    dataset: str,
    criterion: str,
    *,
    data_dir=None,
    options=None,
    scale=(1.0, 5.0),
    slices=(25, 50, 100),
    n_draws: int = 1000,
    level: float = 0.9,
    share: float = 0.25,
    seed: int = 0,
) -> dict:
    from promptlottery.data.registry import load_items

    items = load_items(dataset, data_dir=data_dir, **(options or {}))
    rows = [(it.human_score(criterion), it.system) for it in items]
    rows = [(h, s) for h, s in rows if h is not None]
    if len(rows) < 2 * max(slices):
        from promptlottery.errors import UserError

        raise UserError(
            f"{dataset}/{criterion} has {len(rows)} labelled items; need {2 * max(slices)} (--criterion?)"
        )
    y = np.array([h for h, _ in rows], float)
    systems = np.array([s if s is not None else "all" for _, s in rows], dtype=object)
    judges = simulated_judges(y, systems, scale=scale, seed=seed)
    cov = {
        w: [coverage(y, f, n, n_draws=n_draws, level=level, seed=seed + n) for n in slices]
        for w, f in judges.items()
    }
    ranks = (
        rank_changes(y, judges, systems, share=share, n_draws=min(n_draws, 200), level=level, seed=seed)
        if len(pd.unique(systems)) > 1
        else {}
    )
    return {
        "dataset": dataset,
        "criterion": criterion,
        "judge": "SIMULATED (not a model)",
        "n_items": int(y.size),
        "n_systems": int(len(pd.unique(systems))),
        "level": level,
        "coverage": cov,
        "ranks": ranks,
    }


def table(res: dict) -> str:
    lines = [
        f"SIMULATED judge on the real human labels of {res['dataset']}/{res['criterion']} ({res['n_items']} items, "
        f"{res['n_systems']} systems); {int(100 * res['level'])}% intervals, coverage of the all-human mean",
        "",
        "| wording | n | PPI++ coverage | PPI++ width | human-only coverage | human-only width | judge-only covers | judge-only mean |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for w, rs in res["coverage"].items():
        for r in rs:
            lines.append(
                f"| {w} | {r['n']} | {r['ppi_coverage']:.3f} | {r['ppi_width']:.3f} | {r['human_coverage']:.3f} | "
                f"{r['human_width']:.3f} | {'yes' if r['judge_covers'] else 'no'} | {r['judge_mean']:.3f} |"
            )
    rk = res["ranks"]
    if "between_wordings_before" in rk:
        lines += [
            "",
            f"System pairs in opposite order between two wordings: {rk['between_wordings_before']:.3f} before, "
            f"{rk['between_wordings_after']:.3f} after PPI++ ({int(100 * rk['share_labelled'])}% of each system's items "
            f"human-labelled, {rk['draws']} slices); against the human ranking {rk['vs_humans_before']:.3f} before, "
            f"{rk['vs_humans_after']:.3f} after.",
        ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m promptlottery.analysis.card.ppi_coverage", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--criterion", required=True)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument(
        "--option", action="append", default=[], help="a loader option KEY=VALUE (e.g. subset=tc)"
    )
    ap.add_argument("--scale", default="1,5", help="the simulated judge's scale lo,hi (default 1,5)")
    ap.add_argument("--n-draws", type=int, default=1000)
    ap.add_argument("--out", default=None, help="write the result as JSON here")
    args = ap.parse_args(argv)
    try:
        options = dict(o.split("=", 1) for o in args.option)
        lo, hi = (float(x) for x in args.scale.split(","))
    except ValueError:
        print(
            f"error: --option must be KEY=VALUE and --scale lo,hi; got {args.option} {args.scale!r}",
            file=sys.stderr,
        )
        return 2
    from promptlottery.errors import UserError

    try:
        res = run(
            args.dataset,
            args.criterion,
            data_dir=args.data_dir,
            options=options,
            scale=(lo, hi),
            n_draws=args.n_draws,
        )
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(res))
    if args.out:  # the one file --out names, whole or not at all
        atomic_write_text(args.out, json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What a W&B offline run shows once synced, read from its files (no server, no network):

    .venv/bin/python scripts/wandb_offline_check.py outputs/lottery/runs/<time>/..   # or a wandb/ dir
    .venv/bin/python scripts/wandb_offline_check.py <dir> --expect-line lottery/curve/settled_by_k

Lists, for every offline run found (``<dir>``, ``<dir>/wandb/offline-run-*``, ``<dir>/offline-run-*``):
the run (name, group, job type), its config keys (resolved values: the analysed grid's dataset,
backbone and wordings), its summary scalars (each estimate with its interval on one line: what W&B's
run table and parallel coordinates sort), its native line plots (``wandb.plot.line``: x, y, the line
per ``stroke``, rows), its images and tables. Then one line per problem
(:func:`promptlottery.tracking.wandb_offline.run_problems`: no scalar, a default or unresolved config
value, an interval without its estimate, no native line plot, an expected one missing).
Exit status 1 when a run has a problem or no run is found; 2 on a bad argument.
"""

from __future__ import annotations

import argparse
import sys

from promptlottery.tracking.wandb_offline import (
    describe_run,
    find_offline_runs,
    format_listing,
    run_problems,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="an offline run folder, or a folder holding wandb/offline-run-*")
    ap.add_argument(
        "--expect-line", action="append", default=[], help="a line plot every run must hold (repeatable)"
    )
    ap.add_argument("--max-config", type=int, default=60, help="config keys to print a run (default 60)")
    args = ap.parse_args(argv)
    bad = 0
    for path in args.paths:
        runs = find_offline_runs(path)
        if not runs:
            print(f"{path}: no W&B offline run (offline-run-*/run-*.wandb) here", file=sys.stderr)
            bad += 1
        for run in runs:
            listing = describe_run(run)
            print(f"== {run}")
            print(format_listing(listing, max_config=args.max_config))
            problems = run_problems(listing, expect_lines=tuple(args.expect_line))
            for p in problems:
                print(f"PROBLEM {run.name}: {p}")
            print(f"{'ok' if not problems else 'NOT OK'}: {len(problems)} problems")
            bad += bool(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""The gate on whatever study configurations exist: run ``+gate=selective`` over them, time it, and write
the frontier table (Markdown, ready for experiments/README.md) to ``<out>/frontier_table.md``.

    nice -n 5 python experiments/gate_frontier.py                          # outputs/study_cpu/*/* -> outputs/gate_study_cpu
    python experiments/gate_frontier.py --runs '/tmp/h47/outputs/study_cpu/*/*' --out /tmp/h47/gate
    python experiments/gate_frontier.py --render-only --out outputs/gate_study_cpu   # the table of a finished run
    python experiments/gate_frontier.py -- gate.tune.n_trials=8              # extra Hydra overrides after --

The table holds every policy's calls per item, decisions recovered and agreement with the human label
with their intervals, the paper's headline row beside ours, the transfer rows (left-out configurations
and, where G15 judgments are among the runs, the held-out group) and the command's wall time.
"""

from __future__ import annotations

import argparse
import glob
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from promptlottery.gating.frontier_table import frontier_markdown  # noqa: E402


def configurations(pattern: str) -> list[str]:
    """The configurations (parent dirs) holding a job with judgments under ``pattern``."""
    jobs = [Path(p) for p in glob.glob(pattern) if (Path(p) / "judgments.parquet").exists()]
    return sorted({j.parent.name for j in jobs})


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="outputs/study_cpu/*/*", help="glob of the study's judging jobs")
    ap.add_argument("--out", default="outputs/gate_study_cpu", help="the gate's output dir")
    ap.add_argument("--transfer-config-share", default="0.3", help="gate.transfer_config_share (null: none)")
    ap.add_argument("--render-only", action="store_true", help="only write the table of a finished run")
    ap.add_argument("overrides", nargs="*", help="more Hydra overrides (after --)")
    a = ap.parse_args(argv)
    if not (Path.cwd() / "run.py").exists():
        print(f"run this from the repository root ({ROOT}): `python -m run` needs run.py", file=sys.stderr)
        return 2
    found = configurations(a.runs)
    if not found:
        print(f"no judgments.parquet under --runs={a.runs!r}", file=sys.stderr)
        return 2
    cmd = [
        sys.executable, "-m", "run", "+gate=selective", f"gate.runs={a.runs}",
        "gate.llm_baseline.enabled=false", f"gate.transfer_config_share={a.transfer_config_share}",
        "logger=none", f"hydra.run.dir={a.out}", *a.overrides,
    ]  # fmt: skip
    shown = "python " + " ".join(shlex.quote(c) for c in cmd[1:])
    out = Path(a.out)
    timing = out / "frontier_wall_s.json"
    if a.render_only:  # the timed run's own command and wall time
        timed = json.loads(timing.read_text()) if timing.exists() else {}
        wall, shown = timed.get("wall_s", float("nan")), timed.get("command", shown)
    else:
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        wall = time.perf_counter() - t0
        timing.write_text(json.dumps({"wall_s": wall, "command": shown}))
    rec = json.loads((out / "results.json").read_text())
    if rec.get("status") != "ok":
        print(f"{out / 'results.json'}: status={rec.get('status')!r}", file=sys.stderr)
        return 1
    md = frontier_markdown(rec, command=shown, wall_s=wall, runs=found)
    (out / "frontier_table.md").write_text(md + "\n")
    print(md)
    print(f"\nwritten: {out / 'frontier_table.md'} (the gate took {wall:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

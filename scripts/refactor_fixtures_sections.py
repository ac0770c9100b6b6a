"""Rebuild every analysis fixture output into one folder, to diff a refactor byte for byte.

    PYTHONPATH=src .venv/bin/python scripts/refactor_fixtures_sections.py OUT [--cpu-grid DIR] [--only NAME,...]
    PYTHONPATH=src .venv/bin/python scripts/refactor_fixtures_sections.py --diff REF NEW

Fixtures (one subfolder of OUT each): ``cpu_study`` (the lottery analysis of the CPU study's fake
rehearsal, the sweeps of ``BACKBONES=fake bash experiments/cpu_study.sh`` less SQuAD v2, :data:`CPU_SWEEPS`;
the judged grid is built once into ``--cpu-grid`` and reused, so only the analysis is rebuilt), ``pairwise_toy`` (tests/pairwise_toys.py's
toy alone, and beside the pointwise fixture of tests/test_analysis_fixtures.py), ``human_toy``
(docs/human_baseline.md's toy: ``+human=analyse`` and the lottery with ``analysis.human_ratings``),
``rubric_set1`` (``+experiment=rubric_asap_set1`` on the fake backbone, named smollm2 and gemma3_270m) and ``demo`` (the
demo's sweep on the fake backbone, its lottery analysis and the verdict printout).

Each fixture is built in ``$REFACTOR_FIXTURES_WORK`` (default /tmp/refactor_fixtures), so that
the paths report.md names are the same in every build, then copied into OUT. Every file's sha256 goes to ``OUT/manifest.tsv``; a ``results.json`` is compared without the fields
that hold a time, a process or a git commit (:data:`VOLATILE`), and the
job records ``.job.json`` / ``multirun.yaml`` (a pid, a start time, the cwd) are left out. ``--diff`` prints one
line per fixture file: ``identical`` or what differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = os.environ.get("PY", sys.executable)
#: every fixture is built here, then copied into OUT: two builds write the same paths into report.md
WORK = Path(os.environ.get("REFACTOR_FIXTURES_WORK", "/tmp/refactor_fixtures"))
#: results.json fields that differ between two runs of the same code: a time, a process, a git commit
VOLATILE = {
    "seconds",
    "seconds_by_backbone",
    "git_commit",
    "started",
    "finished",
    "pid",
    "host",
    "hostname",
    "timestamp",
    "wall_s",
}


#: files that record a process id, a start time or the working directory, never an analysis output
VOLATILE_FILES = (".job.json", "multirun.yaml")


def _run(args: list[str], log: Path, env: dict | None = None, cwd: Path = ROOT) -> str:
    full = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT), **(env or {})}
    proc = subprocess.run(args, cwd=cwd, env=full, capture_output=True, text=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"$ {' '.join(args)}\n{proc.stdout}\n{proc.stderr}\n")
    if proc.returncode:
        raise SystemExit(f"refactor_fixtures: `{' '.join(args)}` failed (exit {proc.returncode}); see {log}")
    return proc.stdout


#: experiments/cpu_study.sh's sweeps on the fake backbone (its rehearsal), less SQuAD v2, whose candidate
#: answers are predicted by SmolLM2 and gemma-3-270m (their weights are not needed by any other sweep)
CPU_SWEEPS = {
    "stsb_alignment/paraphrases": ["+experiment=stsb_alignment", "dataset.limit=24"],
    "tc_usr_engaging/paraphrases": ["+experiment=tc_usr_engaging", "dataset.limit=12"],
    "summeval_coherence/paraphrases": ["+experiment=summeval_coherence", "dataset.limit=1"],
    "mt_bench_quality/paraphrases": [
        "+experiment=mt_bench_quality",
        "dataset.limit=1",
        "dataset.options.systems=[alpaca-13b,claude-v1,gpt-3.5-turbo,gpt-4,llama-13b,vicuna-13b-v1.3]",
    ],
    "stsb_alignment/fixed_t07": ["+experiment=stsb_alignment", "dataset.limit=24", "judge.variant=P1",
                                 "n_samples=5", "decoding.temperature=0.7"],
    "stsb_alignment/fixed_greedy_batch": ["+experiment=stsb_alignment", "dataset.limit=24", "judge.variant=P1",
                                          "n_samples=5", "repeat_source=batch"],
}  # fmt: skip


def cpu_study(out: Path, grid: Path) -> None:
    for name, args in CPU_SWEEPS.items():
        if not (grid / name).is_dir():
            _run([PY, "-m", "run", "-m", "backbone=fake", "logger=none", *args, f"hydra.sweep.dir={grid / name}"],
                 grid.parent / "cpu_grid.log")  # fmt: skip
    _run(
        [PY, "-m", "run", "+analysis=lottery", f"analysis.runs={grid}/*/*", "logger=none",
         f"hydra.run.dir={out / 'analysis'}"],
        out / "log.txt",
    )  # fmt: skip


_TOY = """
import sys
from pathlib import Path
import pandas as pd
from promptlottery.analysis.options import LotteryOptions
from promptlottery.analysis.stage import run_lottery
from tests.pairwise_toys import toy_table
from tests.test_analysis_fixtures import default_judgments, fake_encode, write_sweep

out = Path(sys.argv[1])
for name, df in (("alone", toy_table()), ("beside_pointwise", pd.concat([default_judgments(), toy_table()],
                                                                        ignore_index=True))):
    runs = write_sweep(out / "runs" / name, df)
    opts = LotteryOptions.from_dict({"runs": str(runs / "*"), "n_resamples": 200, "n_permutations": 50,
                                     "plots": False})
    run_lottery(opts, out / name, encode=fake_encode)
"""


def pairwise_toy(out: Path) -> None:
    _run([PY, "-c", _TOY, str(out)], out / "log.txt")
    shutil.rmtree(out / "runs")


def human_toy(out: Path) -> None:
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    qa = work / "qa6.jsonl"
    qa.write_text("".join((ROOT / "examples/own_judge/qa_answers.jsonl").read_text().splitlines(True)[:6]))
    log = out / "log.txt"
    _run([PY, "-m", "run", "+human=import", "human.campaign=tests/data/human",
          "human.export=tests/data/human/export_*.json", f"hydra.run.dir={work / 'import'}"], log)  # fmt: skip
    q = ["dataset=table", f"dataset.path={qa}", "dataset.fields.id=id", "dataset.fields.response=answer",
         "dataset.fields.context=question", "dataset.fields.reference=gold", "dataset.fields.human=rating",
         "dataset.human_range=[1,5]", "judge=own", "judge.group_file=examples/own_judge/correctness.yaml",
         "backbone=fake", "decoding.temperature=0.7", "logger=none"]  # fmt: skip
    _run([PY, "-m", "run", *q, "judge.variant=P1", "n_samples=3", f"hydra.run.dir={work / 'judge/P1'}"], log)
    _run([PY, "-m", "run", *q, "judge.variant=P2", f"hydra.run.dir={work / 'judge/P2'}"], log)
    ratings = work / "import" / "human_ratings.parquet"
    _run([PY, "-m", "run", "+human=analyse", f"human.ratings={ratings}", f"human.runs={work}/judge/*",
          f"hydra.run.dir={out / 'human_analyse'}"], log)  # fmt: skip
    _run([PY, "-m", "run", "+analysis=lottery", f"analysis.runs={work}/judge/*", f"analysis.human_ratings={ratings}",
          "analysis.embeddings=none", "logger=none", f"hydra.run.dir={out / 'lottery'}"], log)  # fmt: skip
    shutil.rmtree(work)


def rubric_set1(out: Path) -> None:
    # the study's conditions on the fake backbone under both backbone names, with a cache of its own
    # (results.json counts the cache hits)
    fake = ["+backbone@rubric.backbones.fake=fake", "rubric.backbones.fake.prompt_format=completion",
            "rubric.backbones.smollm2=${rubric.backbones.fake}", "rubric.backbones.gemma3_270m=${rubric.backbones.fake}"]  # fmt: skip
    _run([PY, "-m", "run", "+experiment=rubric_asap_set1", "logger=none", *fake, f"paths.cache_dir={out / 'cache'}",
          f"hydra.run.dir={out / 'run'}"], out / "log.txt")  # fmt: skip
    shutil.rmtree(out / "cache")


def demo(out: Path) -> None:
    log = out / "log.txt"
    _run([PY, "-m", "run", "-m", "+experiment=demo", "backbone=fake", "logger=none",
          f"paths.output_dir={out / 'sweep'}", "analysis.embeddings=none",
          f"paths.cache_dir={out / 'cache'}"], log)  # fmt: skip
    shutil.rmtree(out / "cache")  # a cache of its own: judgments.parquet records each call's cache_hit
    sweep = out / "sweep" / "demo"
    printout = _run([PY, "-m", "promptlottery.analysis.verdict", str(sweep / "lottery")], log)
    (out / "printout.txt").write_text(printout.replace(str(out), "OUT"), encoding="utf-8")
    # the judged jobs' own files beyond judgments.parquet hold times and paths: keep the judgments
    for job in sweep.iterdir():
        if job.is_dir() and job.name != "lottery":
            for f in job.rglob("*"):
                if f.is_file() and f.name != "judgments.parquet":
                    f.unlink()


FIXTURES = {"cpu_study": cpu_study, "pairwise_toy": pairwise_toy, "human_toy": human_toy,
            "rubric_set1": rubric_set1, "demo": demo}  # fmt: skip


def _stable(obj):
    if isinstance(obj, dict):
        return {k: _stable(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_stable(v) for v in obj]
    return obj


def digest(path: Path) -> str:
    """The file's sha256; a results.json's without its :data:`VOLATILE` fields (key order kept)."""
    data = path.read_bytes()
    if path.name == "results.json":
        data = json.dumps(_stable(json.loads(data))).encode()
    return hashlib.sha256(data).hexdigest()


def manifest(out: Path) -> dict[str, str]:
    skip = (".hydra", "log.txt", "wandb", "cache", *VOLATILE_FILES)
    rows = {}
    for f in sorted(out.rglob("*")):
        rel = f.relative_to(out)
        if (
            f.is_file()
            and not any(p in skip or p.endswith(".log") for p in rel.parts)
            and rel.name != "manifest.tsv"
        ):
            rows[str(rel)] = digest(f)
    return rows


def diff(ref: Path, new: Path) -> int:
    a, b = manifest(ref), manifest(new)
    bad = 0
    for fixture in FIXTURES:
        keys = sorted(k for k in set(a) | set(b) if k.split("/")[0] == fixture)
        if not keys:
            print(f"{fixture}: not built")
            continue
        wrong = [k for k in keys if a.get(k) != b.get(k)]
        print(f"{fixture}: {len(keys)} files, " + ("identical" if not wrong else f"{len(wrong)} differ"))
        for k in wrong:
            why = "missing in new" if k not in b else "missing in ref" if k not in a else "differs"
            print(f"  {k}: {why}")
        bad += len(wrong)
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--cpu-grid", default=None, help="the judged rehearsal grid (built there when missing)")
    ap.add_argument("--only", default=",".join(FIXTURES))
    ap.add_argument("--diff", nargs=2, metavar=("REF", "NEW"))
    a = ap.parse_args()
    if a.diff:
        return diff(Path(a.diff[0]), Path(a.diff[1]))
    out = Path(a.out).resolve()
    for name in a.only.split(","):
        # built where every build writes (report.md and results.json name the paths they read)
        target = WORK / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        if name == "cpu_study":
            cpu_study(target, Path(a.cpu_grid or out / "cpu_grid").resolve())
        else:
            FIXTURES[name](target)
        shutil.rmtree(out / name, ignore_errors=True)
        shutil.copytree(target, out / name)
        print(f"{name}: built", flush=True)
    (out / "manifest.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in manifest(out).items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

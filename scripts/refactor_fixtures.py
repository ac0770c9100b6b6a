"""Rebuild the outputs a refactor must leave byte-identical into one folder, and compare two folders.

    PYTHONPATH=src .venv/bin/python scripts/refactor_fixtures.py build OUT [--only NAME,...] [--cpu-grid DIR]
    PYTHONPATH=src .venv/bin/python scripts/refactor_fixtures.py diff REF NEW

Fixtures, each in a subfolder of OUT, all on the fake backbone (offline, no model), each with a call
cache of its own (so every call goes through the call loop; judgments.parquet records each call's
``cache_hit``). ``--only`` picks some; the default is every one but ``cpu_study`` (minutes):

* ``grids``: STS-B (8 items) x semantic_alignment P1-P3 (``pointwise``) and LLMBar Natural (6 pairs)
  x G17 P1-P3, both orders (``pairwise``), each under the ``hash`` and ``oracle`` behaviours: each
  job's judgments.parquet as the judge stage wrote it (the fake backend's ``latency_s`` is 0), as
  ``judgments.csv`` and its dtypes; the dry-run printout of one job of each mode (``*_dry``); the
  lottery report of each ``hash`` grid (``*_lottery``: report.md and tables, the build's folder
  written ``<work>``);
* ``demo``: the demo's sweep, its lottery analysis and the verdict printout;
* ``pairwise_toy``: the lottery on tests/pairwise_toys.py's toy, alone and beside the pointwise
  fixture of tests/test_analysis_fixtures.py;
* ``human_toy``: docs/human_baseline.md's toy, ``+human=analyse`` and the lottery with
  ``analysis.human_ratings``;
* ``rubric_set1``: ``+experiment=rubric_asap_set1``, its backbones named smollm2 and gemma3_270m;
* ``paraphrase``: the paraphrase stage's group file and the validate_prompts stage's table;
* ``cpu_study``: the lottery analysis of the CPU study's fake rehearsal (the sweeps of
  ``BACKBONES=fake bash experiments/cpu_study.sh`` less SQuAD v2, :data:`CPU_SWEEPS`), the judged
  grid built once into ``--cpu-grid`` (default OUT/cpu_grid) and reused.

Each fixture is built in ``$REFACTOR_FIXTURES_WORK/<name>`` (default /tmp/refactor_fixtures), so
that the paths report.md names are the same in every build, then copied into OUT. Every file's
sha256 goes to ``OUT/manifest.tsv``: a ``results.json`` without the fields that hold a time, a
process or a git commit (:data:`VOLATILE`); the job records (:data:`VOLATILE_FILES`), logs, Hydra's
config copies and the caches are left out. ``diff`` prints, per fixture, ``identical`` or the files
that differ, and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]
PY = os.environ.get("PY", sys.executable)
#: every fixture is built here, then copied into OUT: two builds write the same paths into report.md
WORK = Path(os.environ.get("REFACTOR_FIXTURES_WORK", "/tmp/refactor_fixtures"))
#: results.json fields that differ between two runs of the same code: a time, a process, a git commit
VOLATILE = {"seconds", "seconds_by_backbone", "git_commit", "started", "finished", "pid", "host",
            "hostname", "timestamp", "wall_s"}  # fmt: skip
#: files that record a process id, a start time or the working directory, never an output
VOLATILE_FILES = (".job.json", "multirun.yaml")


def _run(args: list[str], log: Path, env: dict | None = None) -> str:
    full = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT), **(env or {})}
    proc = subprocess.run(args, cwd=ROOT, env=full, capture_output=True, text=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"$ {' '.join(args)}\n{proc.stdout}\n{proc.stderr}\n")
    if proc.returncode:
        raise SystemExit(f"refactor_fixtures: `{' '.join(args)}` failed (exit {proc.returncode}); see {log}")
    return proc.stdout


# --- grids: the judge stage's own outputs, in process -------------------------------------------

GRIDS = {
    "pointwise": ["dataset=stsb", "dataset.limit=8", "judge=semantic_alignment"],
    "pairwise": ["+experiment=llmbar_natural_pairwise", "dataset.limit=6", "stage=judge"],
}


def _judge_grid(name: str, behaviour: str, work: Path, out: Path) -> Path:
    import pandas as pd
    from tests.conftest import compose

    from promptlottery.stages import run_stage

    runs = work / f"{name}_{behaviour}" / "runs"
    for v in ("P1", "P2", "P3"):
        over = [
            "backbone=fake",
            f"backbone.backend.behaviour={behaviour}",
            *GRIDS[name],
            f"judge.variant={v}",
        ]
        run_stage(compose(over, tmp_path=work / f"{name}_{behaviour}"), runs / v)
        df = pd.read_parquet(runs / v / "judgments.parquet")
        dest = out / f"{name}_{behaviour}" / v
        dest.mkdir(parents=True, exist_ok=True)
        df.assign(latency_s=0.0).to_csv(dest / "judgments.csv", index=False)
        if not df["latency_s"].any():  # the fake backend's calls take no time: the file itself compares
            shutil.copyfile(runs / v / "judgments.parquet", dest / "judgments.parquet")
        (dest / "columns.json").write_text(json.dumps([f"{c}:{t}" for c, t in df.dtypes.astype(str).items()]))
    return runs


def _dry_run(name: str, work: Path, out: Path) -> None:
    from tests.conftest import compose

    from promptlottery.stages import run_stage

    cfg = compose(["backbone=fake", *GRIDS[name], "dry_run=true"], tmp_path=work / f"{name}_dry")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        run_stage(cfg, work / f"{name}_dry" / "job")
    (out / f"{name}_dry").mkdir(parents=True, exist_ok=True)
    (out / f"{name}_dry" / "printout.txt").write_text(buf.getvalue())


def _grid_lottery(name: str, runs: Path, work: Path, out: Path) -> None:
    from promptlottery.analysis.stage import LotteryOptions, run_lottery

    opts = {
        "runs": str(runs / "*"),
        "plots": False,
        "embeddings": "none",
        "n_resamples": 40,
        "n_permutations": 40,
    }
    run_lottery(LotteryOptions.from_dict(opts), work / f"{name}_lottery")
    for p in sorted((work / f"{name}_lottery").rglob("*")):
        if p.is_file() and p.suffix in (".md", ".csv", ".tsv"):
            target = out / f"{name}_lottery" / p.relative_to(work / f"{name}_lottery")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(p.read_text().replace(str(work), "<work>"))


def grids(out: Path) -> None:
    # a fresh temporary folder (not WORK): the lottery's texts name it, written <work>
    with tempfile.TemporaryDirectory() as tmp:
        for name in GRIDS:
            for behaviour in ("hash", "oracle"):
                runs = _judge_grid(name, behaviour, Path(tmp), out)
                if behaviour == "hash":
                    _grid_lottery(name, runs, Path(tmp), out)
            _dry_run(name, Path(tmp), out)


# --- the analysis fixtures, each run as the user runs it ------------------------------------------


def demo(out: Path) -> None:
    log = out / "log.txt"
    _run([PY, "-m", "run", "-m", "+experiment=demo", "backbone=fake", "logger=none",
          f"paths.output_dir={out / 'sweep'}", "analysis.embeddings=none", f"paths.cache_dir={out / 'cache'}"], log)  # fmt: skip
    shutil.rmtree(out / "cache")
    sweep = out / "sweep" / "demo"
    printout = _run([PY, "-m", "promptlottery.analysis.lottery.verdict", str(sweep / "lottery")], log)
    (out / "printout.txt").write_text(printout.replace(str(out), "OUT"), encoding="utf-8")
    # the judged jobs' own files beyond judgments.parquet hold times and paths: keep the judgments
    for job in sweep.iterdir():
        if job.is_dir() and job.name != "lottery":
            for f in job.rglob("*"):
                if f.is_file() and f.name != "judgments.parquet":
                    f.unlink()


_TOY = """
import sys
from pathlib import Path
import pandas as pd
from promptlottery.analysis.lottery.options import LotteryOptions
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
    work, log = out / "work", out / "log.txt"
    work.mkdir(parents=True, exist_ok=True)
    qa = work / "qa6.jsonl"
    qa.write_text("".join((ROOT / "examples/own_judge/qa_answers.jsonl").read_text().splitlines(True)[:6]))
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
    fake = ["+backbone@rubric.backbones.fake=fake", "rubric.backbones.fake.prompt_format=completion",
            "rubric.backbones.smollm2=${rubric.backbones.fake}", "rubric.backbones.gemma3_270m=${rubric.backbones.fake}"]  # fmt: skip
    _run([PY, "-m", "run", "+experiment=rubric_asap_set1", "logger=none", *fake, f"paths.cache_dir={out / 'cache'}",
          f"hydra.run.dir={out / 'run'}"], out / "log.txt")  # fmt: skip
    shutil.rmtree(out / "cache")


def paraphrase(out: Path) -> None:
    """The paraphrase stage's group file (its inputs removed) and the validate_prompts stage's table."""
    from tests.conftest import compose
    from tests.test_paraphrase_generate import _inputs

    from promptlottery.stages import run_stage

    work = out / "paraphrase"
    work.mkdir(parents=True)
    group = work / "generated.yaml"
    over = [
        "+paraphrase=generate",
        "backbone=fake",
        *_inputs(work),
        "paraphrase.n=1",
        f"paraphrase.out={group}",
    ]
    run_stage(compose(over, tmp_path=work), work / "job")
    group.write_text(group.read_text().replace(str(work), "WORK"))
    for p in work.iterdir():  # the inputs _inputs wrote: not outputs
        if p.suffix in (".j2", ".jsonl") or p.name == "replies.yaml":
            p.unlink()
    val = out / "validation"
    val.mkdir()
    over = [
        "+experiment=validate_prompts",
        "backbone=fake",
        "validation.equivalence=true",
        "validation.groups=[G1,G12]",
    ]
    run_stage(compose(over, tmp_path=val), val / "job")


#: experiments/cpu_study.sh's sweeps on the fake backbone at its first-look sizes (STSB=24 TC=12 SUMMEVAL=1
#: MTBENCH=1; the script's defaults are now the >= 100-item sizes, and it names a sweep <kind>_<backbone>: the
#: fixture keeps its own names so that manifests stay comparable), less SQuAD v2, whose candidate answers are
#: predicted by SmolLM2 and gemma-3-270m (their weights are not needed by any other sweep)
CPU_SWEEPS = {
    "stsb_alignment/paraphrases": ["+experiment=stsb_alignment", "dataset.limit=24"],
    "tc_usr_engaging/paraphrases": ["+experiment=tc_usr_engaging", "dataset.limit=12"],
    "summeval_coherence/paraphrases": ["+experiment=summeval_coherence", "dataset.limit=1"],
    "mt_bench_quality/paraphrases": ["+experiment=mt_bench_quality", "dataset.limit=1",
        "dataset.options.systems=[alpaca-13b,claude-v1,gpt-3.5-turbo,gpt-4,llama-13b,vicuna-13b-v1.3]"],
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
    _run([PY, "-m", "run", "+analysis=lottery", f"analysis.runs={grid}/*/*", "logger=none",
          f"hydra.run.dir={out / 'analysis'}"], out / "log.txt")  # fmt: skip


FIXTURES = {"grids": grids, "demo": demo, "pairwise_toy": pairwise_toy, "human_toy": human_toy,
            "rubric_set1": rubric_set1, "paraphrase": paraphrase, "cpu_study": cpu_study}  # fmt: skip


# --- the manifest and the comparison --------------------------------------------------------------


def _stable(obj):
    if isinstance(obj, dict):
        return {k: _stable(v) for k, v in obj.items() if k not in VOLATILE}
    return [_stable(v) for v in obj] if isinstance(obj, list) else obj


def digest(path: Path) -> str:
    """The file's sha256; a results.json's without its :data:`VOLATILE` fields (key order kept)."""
    data = path.read_bytes()
    if path.name == "results.json":
        data = json.dumps(_stable(json.loads(data))).encode()
    return hashlib.sha256(data).hexdigest()


def manifest(out: Path) -> dict[str, str]:
    skip = {".hydra", "log.txt", "wandb", "cache", "__pycache__", *VOLATILE_FILES}
    rows = {}
    for f in sorted(out.rglob("*")):
        rel = f.relative_to(out)
        if (
            f.is_file()
            and rel.name != "manifest.tsv"
            and not any(
                p in skip or p.endswith((".log", ".sqlite", ".sqlite-wal", ".sqlite-shm", ".lock"))
                for p in rel.parts
            )
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
            print(
                f"  {k}: "
                + ("missing in new" if k not in b else "missing in ref" if k not in a else "differs")
            )
        bad += len(wrong)
    return 1 if bad else 0


def build(out: Path, only: list[str], cpu_grid: Path | None) -> None:
    unknown = sorted(set(only) - set(FIXTURES))
    if unknown:
        raise SystemExit(f"refactor_fixtures: unknown fixture(s) {unknown} (known: {', '.join(FIXTURES)})")
    for name in only:
        target = WORK / name  # built where every build writes (report.md names the paths it read)
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        if name == "cpu_study":
            cpu_study(target, (cpu_grid or out / "cpu_grid").resolve())
        else:
            FIXTURES[name](target)
        shutil.rmtree(out / name, ignore_errors=True)
        shutil.copytree(target, out / name)
        print(f"{name}: built", flush=True)
    (out / "manifest.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in manifest(out).items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="rebuild the fixtures into OUT")
    b.add_argument("out", type=Path)
    b.add_argument("--only", default=",".join(n for n in FIXTURES if n != "cpu_study"))
    b.add_argument(
        "--cpu-grid", type=Path, default=None, help="the judged rehearsal grid (built there when missing)"
    )
    d = sub.add_parser("diff", help="compare two builds file by file")
    d.add_argument("ref", type=Path)
    d.add_argument("new", type=Path)
    a = ap.parse_args()
    if a.command == "diff":
        return diff(a.ref, a.new)
    build(a.out.resolve(), a.only.split(","), a.cpu_grid)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

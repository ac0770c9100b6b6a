"""Rebuild the outputs a refactor must leave byte-identical, into one folder, and compare two folders.

    PYTHONPATH=src .venv/bin/python scripts/refactor_fixtures.py build OUT [--cpu-study]
    PYTHONPATH=src .venv/bin/python scripts/refactor_fixtures.py cpu-study OUT   # the rehearsal alone
    PYTHONPATH=src .venv/bin/python scripts/refactor_fixtures.py diff REF NEW

``build`` writes, each from a fresh call cache under OUT/cache (so every call goes through the call
loop, not an earlier cache): a fake judge grid's ``judgments.parquet`` and its lottery report (the
demo on the fake backend, with the verdict printout), the pairwise toy's report and tables, the
human toy's report and tables (the recorded Label Studio export), rubric set 1's tables on the
synthetic ASAP fixture with the tests' oracle/hash judges, the paraphrase stage's group file and
the validate_prompts stage's table (fake backbone). ``--cpu-study`` adds the CPU study's fake
rehearsal (experiments/cpu_study.sh with BACKBONES=fake; minutes). ``diff`` compares every file
by sha256 and prints one line per file: identical, differs, or only in one folder. Files whose
bytes hold a path or a time of the run (logs, Hydra's own config copies, results.json) are left out.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))

#: names whose bytes carry the run's own paths or times, not its results
SKIPPED_NAMES = {"results.json", "config.yaml", "hydra.yaml", "overrides.yaml", "run.log", "job.log"}
SKIPPED_SUFFIXES = (".log", ".sqlite", ".sqlite-wal", ".sqlite-shm", ".lock")
SKIPPED_PARTS = {"cache", ".hydra", "__pycache__", "wandb"}


def _run(args: list[str], env: dict, log: Path) -> None:
    with open(log, "w") as f:
        proc = subprocess.run(args, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT, check=False)
    if proc.returncode:
        raise SystemExit(f"{' '.join(args)} failed (rc {proc.returncode}): see {log}")


def _env(out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), PROMPTLOTTERY_CACHE_DIR=str(out / "cache"))
    env.setdefault("PROMPTLOTTERY_MODEL_DIR", str(REPO / ".cache" / "promptlottery"))
    env.setdefault("PROMPTLOTTERY_DATA_DIR", str(REPO.parent / "shared" / "data"))
    return env


def demo_fake(out: Path) -> None:
    """The demo's grid and lottery on the fake backbone, and the verdict printout."""
    env, py = _env(out), str(REPO / ".venv" / "bin" / "python")
    sweep = out / "demo_fake"
    _run(
        [py, "-m", "run", "-m", "+experiment=demo", "backbone=fake", f"hydra.sweep.dir={sweep}"],
        env,
        out / "demo.log",
    )
    proc = subprocess.run(
        [py, "-m", "promptlottery.analysis.verdict", str(sweep / "lottery")],
        cwd=REPO, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    (out / "demo_verdict_printout.txt").write_text(proc.stdout.replace(str(out), "OUT"))


def pairwise_toy(out: Path) -> None:
    from tests.pairwise_toys import toy_table
    from tests.test_pairwise_analysis import BOOT

    from promptlottery.analysis.analyse import analyse
    from promptlottery.analysis.options import LotteryOptions
    from promptlottery.analysis.render import write_outputs
    from promptlottery.judging.grid import JudgmentGrid

    opts = LotteryOptions.from_dict({"runs": "unused", "embeddings": "none", "plots": False, **BOOT})
    grid = JudgmentGrid.from_frame(toy_table())
    write_outputs(analyse(grid, opts), grid, opts, out / "pairwise_toy", [])


def human_toy(out: Path) -> None:
    from tests.conftest import compose
    from tests.test_human_ratings import EXPORTS, _import

    from promptlottery.analysis.options import LotteryOptions
    from promptlottery.analysis.stage import run_lottery
    from promptlottery.stages import run_stage

    work = out / "human_toy"
    work.mkdir(parents=True)
    ratings = work / "human_ratings.parquet"
    _import(export=EXPORTS).to_parquet(ratings)
    data = [
        "dataset=table", f"dataset.path={REPO}/examples/own_judge/qa_answers.jsonl", "dataset.fields.id=id",
        "dataset.fields.response=answer", "dataset.fields.context=question", "dataset.fields.reference=gold",
        "dataset.fields.system=system", "dataset.fields.human=rating", "judge=own",
        f"judge.group_file={REPO}/examples/own_judge/correctness.yaml", "backbone=fake",
        "decoding.temperature=0.7",
    ]  # fmt: skip
    run_stage(compose([*data, "judge.variant=P1", "n_samples=3"], tmp_path=work), work / "runs" / "P1")
    run_stage(compose([*data, "judge.variant=P2"], tmp_path=work), work / "runs" / "P2")
    base = dict(
        runs=str(work / "runs" / "*"), embeddings="none", plots=False, n_resamples=30, n_permutations=10
    )
    run_lottery(LotteryOptions(**base, human_ratings=str(ratings)), work / "lottery")


def rubric_set1(out: Path) -> None:
    from tests.test_rubric_study import asap_run

    work = out / "rubric_set1"
    work.mkdir(parents=True)
    asap_run(work)


def paraphrase_and_validation(out: Path) -> None:
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
    text = group.read_text().replace(str(work), "WORK")
    group.write_text(text)
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


def cpu_study(out: Path) -> None:
    env = dict(
        _env(out), BACKBONES="fake", OUT=str(out / "cpu_study"), PY=str(REPO / ".venv" / "bin" / "python")
    )
    _run(["bash", "experiments/cpu_study.sh"], env, out / "cpu_study.log")


def build(out: Path, with_cpu_study: bool) -> None:
    """Every fixture into ``out``. The outputs hold their run directories' paths (report.md's "Runs:",
    judgments.parquet's group_file), so every build runs in one fixed scratch folder and is then moved."""
    scratch = Path(os.environ.get("FIXTURE_SCRATCH", "/tmp/promptlottery-fixtures"))
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    steps = [demo_fake, pairwise_toy, human_toy, rubric_set1, paraphrase_and_validation]
    steps += [cpu_study] if with_cpu_study else []
    for step in steps:
        print(f"== {step.__name__}", flush=True)
        step(scratch)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(scratch), str(out))


def _files(root: Path) -> dict[str, str]:
    found = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if not p.is_file() or SKIPPED_PARTS & set(rel.parts) or p.name in SKIPPED_NAMES:
            continue
        if p.name.endswith(SKIPPED_SUFFIXES):
            continue
        found[str(rel)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return found


def diff(ref: Path, new: Path) -> int:
    a, b = _files(ref), _files(new)
    bad = 0
    for rel in sorted(set(a) | set(b)):
        state = "identical" if a.get(rel) == b.get(rel) else ("differs" if rel in a and rel in b else "")
        if not state:
            state = f"only in {ref if rel in a else new}"
        bad += state != "identical"
        print(f"{state:12s} {rel}")
    print(f"{len(set(a) | set(b))} files, {bad} not identical")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "build":
        build(Path(sys.argv[2]).resolve(), "--cpu-study" in sys.argv[3:])
    elif len(sys.argv) == 3 and sys.argv[1] == "cpu-study":
        out = Path(sys.argv[2]).resolve()
        out.mkdir(parents=True, exist_ok=True)
        cpu_study(out)
    elif len(sys.argv) == 4 and sys.argv[1] == "diff":
        raise SystemExit(diff(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        raise SystemExit(__doc__)

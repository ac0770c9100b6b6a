"""Rebuild the judge-mode refactor's fixture outputs into a folder, to compare two commits byte for byte.

    PYTHONPATH=src .venv/bin/python scripts/refactor_fixtures.py OUT_DIR
    (then on another commit into OTHER_DIR, and: cd OUT_DIR && sha256sum -c OTHER_DIR/SHA256SUMS)

Fixtures, all on the fake backbone (no model, offline, a fresh call cache per fixture):

* ``pointwise``: STS-B (8 items) x semantic_alignment P1-P3 (``hash`` and ``oracle`` behaviours);
* ``pairwise``: LLMBar Natural (6 pairs) x G17 P1-P3, both orders (``hash`` and ``oracle``);
* ``*_dry``: the dry-run printout of one job of each mode;
* ``*_lottery``: the lottery analysis of each grid (report.md, tables, results.json without its
  timings and paths).

Each judgments.parquet is written by the judge stage itself and compared as it is (the fake
backend's ``latency_s`` is 0), and as ``judgments.csv`` (the rows read back, ``latency_s`` zeroed
should a backend take time). ``SHA256SUMS`` lists every compared file.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.conftest import compose  # noqa: E402

FIXTURES = {
    "pointwise": ["dataset=stsb", "dataset.limit=8", "judge=semantic_alignment"],
    "pairwise": ["+experiment=llmbar_natural_pairwise", "dataset.limit=6", "stage=judge"],
}
VARIANTS = ("P1", "P2", "P3")
BEHAVIOURS = ("hash", "oracle")
#: columns that are not results (the wall time of a call)
VOLATILE = ("latency_s",)


def judge_grid(name: str, behaviour: str, work: Path, out: Path) -> Path:
    from promptlottery.stages import run_stage

    runs = work / f"{name}_{behaviour}" / "runs"
    for v in VARIANTS:
        cfg = compose(
            [
                "backbone=fake",
                f"backbone.backend.behaviour={behaviour}",
                *FIXTURES[name],
                f"judge.variant={v}",
            ],
            tmp_path=work / f"{name}_{behaviour}",
        )
        run_stage(cfg, runs / v)
        df = pd.read_parquet(runs / v / "judgments.parquet")
        dest = out / f"{name}_{behaviour}" / v
        dest.mkdir(parents=True, exist_ok=True)
        df.assign(**{c: 0.0 for c in VOLATILE if c in df.columns}).to_csv(dest / "judgments.csv", index=False)
        # the fake backend's calls take no time: the file itself compares
        if not df[list(VOLATILE)].any().any():
            shutil.copyfile(runs / v / "judgments.parquet", dest / "judgments.parquet")
        (dest / "columns.json").write_text(json.dumps([f"{c}:{t}" for c, t in df.dtypes.astype(str).items()]))
    return runs


def dry_run(name: str, work: Path, out: Path) -> None:
    from promptlottery.stages import run_stage

    cfg = compose(["backbone=fake", *FIXTURES[name], "dry_run=true"], tmp_path=work / f"{name}_dry")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        run_stage(cfg, work / f"{name}_dry" / "job")
    (out / f"{name}_dry").mkdir(parents=True, exist_ok=True)
    (out / f"{name}_dry" / "printout.txt").write_text(buf.getvalue())


def lottery(name: str, runs: Path, work: Path, out: Path) -> None:
    from promptlottery.analysis.stage import LotteryOptions, run_lottery

    opts = LotteryOptions.from_dict(
        {
            "runs": str(runs / "*"),
            "plots": False,
            "embeddings": "none",
            "n_resamples": 40,
            "n_permutations": 40,
        }
    )
    res_dir = work / f"{name}_lottery"
    run_lottery(opts, res_dir)
    dest = out / f"{name}_lottery"
    for p in sorted(res_dir.rglob("*")):
        if p.is_file() and p.suffix in (".md", ".csv", ".tsv"):
            target = dest / p.relative_to(res_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            text = p.read_text().replace(str(work), "<work>")
            target.write_text(text)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in FIXTURES:
            for behaviour in BEHAVIOURS:
                runs = judge_grid(name, behaviour, work, out)
                if behaviour == "hash":
                    lottery(name, runs, work, out)
            dry_run(name, work, out)
        shutil.rmtree(work, ignore_errors=True)
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name != "SHA256SUMS")
    sums = "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(out)}\n" for p in files)
    (out / "SHA256SUMS").write_text(sums)
    print(f"{len(files)} fixture files in {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "fixtures-out"))

"""Put two or more runs side by side: config diff + metric deltas, without the W&B server.

A run is any of:

* a job or analysis directory with a ``results.json`` (or the file itself): its ``config`` and its
  numeric ``metrics`` (and ``calls``);
* a W&B offline run directory (``wandb/offline-run-*``): ``files/config.yaml`` and
  ``files/wandb-summary.json`` when present, else the config and summary records read from the
  run's ``run-*.wandb`` log (what ``wandb sync`` would upload);
* a directory holding W&B offline runs (``<dir>/wandb/offline-run-*`` or ``<dir>/offline-run-*``):
  every one of them.

    python -m promptlottery.analysis.compare.runs outputs/a outputs/b [--out DIR]
    python -m run +analysis=compare analysis.runs='[outputs/a,outputs/b]'
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.common.report import CSV_FLOAT, markdown_table
from promptlottery.tracking.wandb_offline import read_wandb_log

#: config keys that differ between any two runs without meaning anything
IGNORED_PREFIXES = ("_wandb", "hydra", "paths.", "logger.")


@dataclass
class Run:
    name: str
    source: str  # "results.json" | "wandb-files" | "wandb-log"
    path: str
    config: dict[str, Any]
    metrics: dict[str, float]


def flatten(d: Any, prefix: str = "", sep: str = ".") -> dict[str, Any]:
    """Nested dicts to ``{"a.b.c": value}``; lists are kept as values."""
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            key = f"{prefix}{sep}{k}" if prefix else str(k)
            if isinstance(v, dict) and v:
                out.update(flatten(v, key, sep))
            else:
                out[key] = v
    return out


def _numeric(d: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def load_results_json(path: Path) -> Run:
    """A finished run's record; a failed, dry-run or unfinished one is refused (its numbers are not results)."""
    try:
        rec = json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"{path}: unreadable results.json ({exc})") from None
    if rec.get("status") != "ok":
        raise ValueError(
            f"{path}: status={rec.get('status')!r}"
            + (f" ({rec['error']})" if rec.get("error") else "")
            + "; compare reads only runs whose results.json says ok"
        )
    if rec.get("stage") == "lottery":  # an analysis: every table and figure as results.json names it
        from promptlottery.tracking.staging import check_outputs

        check_outputs(path.parent, reader="compare")
    want = (rec.get("judgments") or {}).get("sha256")
    if want:
        from promptlottery.tracking.jobdir import file_sha256

        parquet = path.parent / rec["judgments"].get("file", "judgments.parquet")
        if not parquet.exists() or file_sha256(parquet) != want:
            raise ValueError(f"{path}: {parquet.name} is missing or not the one results.json describes")
    metrics = {
        **_numeric(flatten(rec.get("metrics") or {}, "metrics", "/")),
        **_numeric(flatten(rec.get("calls") or {}, "calls", "/")),
    }
    name = path.parent.name
    return Run(
        name=name,
        source="results.json",
        path=str(path.parent),
        config=rec.get("config") or {},
        metrics=metrics,
    )


def _wandb_config(raw: dict) -> dict:
    """W&B's config.yaml / config records wrap each value as ``{"value": ..., "desc": ...}``."""
    out = {}
    for k, v in raw.items():
        if k.startswith("_wandb") or k == "wandb_version":
            continue
        out[k] = v["value"] if isinstance(v, dict) and "value" in v else v
    return out


def load_wandb_run(run_dir: Path) -> Run:
    files = run_dir / "files"
    summary_file, config_file = files / "wandb-summary.json", files / "config.yaml"
    if summary_file.exists() or config_file.exists():
        import yaml

        summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
        config = yaml.safe_load(config_file.read_text()) if config_file.exists() else {}
        source = "wandb-files"
    else:
        logs = sorted(run_dir.glob("run-*.wandb"))
        if not logs:
            raise FileNotFoundError(
                f"{run_dir}: no files/wandb-summary.json, files/config.yaml or run-*.wandb"
            )
        config, summary = read_wandb_log(logs[0])
        source = "wandb-log"
    config = _wandb_config(config or {})
    flat = flatten(_drop_media(summary), "", "/")
    media = tuple(k[: -len("_type")] for k in flat if k.endswith("/_type"))  # logged tables / images
    metrics = {k: v for k, v in _numeric(flat).items() if not k.startswith(("_", *media) if media else "_")}
    name = f"{run_dir.name}"
    return Run(name=name, source=source, path=str(run_dir), config=config, metrics=metrics)


def _drop_media(d: Any) -> Any:
    """Summary entries of logged tables and images (``{"_type": "table-file", ...}``) are no metrics."""
    if isinstance(d, dict):
        return {k: _drop_media(v) for k, v in d.items() if not (isinstance(v, dict) and "_type" in v)}
    return d


def _is_wandb_run(p: Path) -> bool:
    return p.is_dir() and (
        p.name.startswith(("offline-run-", "run-")) and ((p / "files").is_dir() or any(p.glob("run-*.wandb")))
    )


def load_runs(paths: list[str]) -> list[Run]:
    runs: list[Run] = []
    for pattern in paths:
        matches = sorted(glob.glob(str(pattern))) or [str(pattern)]
        for m in matches:
            p = Path(m)
            if p.is_file() and p.name == "results.json":
                runs.append(load_results_json(p))
            elif _is_wandb_run(p):
                runs.append(load_wandb_run(p))
            elif p.is_dir() and (p / "results.json").exists():
                runs.append(load_results_json(p / "results.json"))
            elif p.is_dir() and any((p / f).exists() for f in ("tables", "report.md")):  # unfinished analysis
                from promptlottery.tracking.staging import check_outputs

                check_outputs(p, reader="compare")
            elif p.is_dir() and (found := sorted([*p.glob("wandb/offline-run-*"), *p.glob("offline-run-*")])):
                runs.extend(load_wandb_run(q) for q in found)
            else:
                raise FileNotFoundError(f"{m}: not a results.json, a job directory or a W&B offline run")
    if len(runs) < 2:
        raise ValueError(f"compare needs at least two runs, found {len(runs)} in {paths}")
    # unique, readable column names
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.name] = seen.get(r.name, 0) + 1
    for r in runs:
        if seen[r.name] > 1:
            r.name = r.path
    return runs


def config_diff(runs: list[Run]) -> pd.DataFrame:
    """Keys whose value differs between the runs (flattened, sorted); missing keys show as ``-``."""
    flat = [flatten(r.config) for r in runs]
    keys = sorted({k for f in flat for k in f if not k.startswith(IGNORED_PREFIXES)})
    rows = []
    for k in keys:
        vals = [json.dumps(f[k], sort_keys=True, default=str) if k in f else "-" for f in flat]
        if len(set(vals)) > 1:
            rows.append({"key": k, **{r.name: v for r, v in zip(runs, vals)}})
    return pd.DataFrame(rows, columns=["key", *[r.name for r in runs]])


def metric_order(keys) -> list[str]:
    """The estimates among ``keys`` (``x`` of every ``x`` / ``x_lo`` / ``x_hi``; an interval bound
    without its estimate is a metric of its own), the paper's headline rows first in report order
    (:func:`~promptlottery.analysis.lottery.headlines.paper_keys`; a key matches with or without a
    ``<prefix>/``), then our other headline rows, then the rest alphabetically."""
    from promptlottery.analysis.lottery.headlines import HEADLINES, paper_keys

    keys = set(keys)
    estimates = {k for k in keys if not (k.endswith(("_lo", "_hi")) and k[:-3] in keys)}
    paper, ours = paper_keys(), [h.key for h in HEADLINES]

    def rank(k: str) -> tuple:
        bare = k.rsplit("/", 1)[-1]
        if bare in paper:
            return (0, paper.index(bare), k)
        if bare in ours:
            return (1, ours.index(bare), k)
        return (2, 0, k)

    return sorted(estimates, key=rank)


def metric_deltas(runs: list[Run]) -> pd.DataFrame:
    """Every numeric metric of any run (:func:`metric_order`): each run's estimate, its interval
    (``<run> lo`` / ``<run> hi``, when the run has ``x_lo`` / ``x_hi``) and the estimate's delta to
    the first run, one row per estimate."""
    nan = float("nan")
    keys = metric_order(k for r in runs for k in r.metrics)
    base = runs[0]
    rows = []
    for k in keys:
        row: dict[str, Any] = {"metric": k}
        for r in runs:
            row[r.name] = r.metrics.get(k, nan)
            row[f"{r.name} lo"], row[f"{r.name} hi"] = (
                r.metrics.get(f"{k}_lo", nan),
                r.metrics.get(f"{k}_hi", nan),
            )
        for r in runs[1:]:
            a, b = base.metrics.get(k), r.metrics.get(k)
            row[f"delta {r.name}"] = (b - a) if a is not None and b is not None else nan
        rows.append(row)
    cols = ["metric", *[c for r in runs for c in (r.name, f"{r.name} lo", f"{r.name} hi")]]
    return pd.DataFrame(rows, columns=[*cols, *[f"delta {r.name}" for r in runs[1:]]])


def _shown(deltas: pd.DataFrame, runs: list[Run]) -> pd.DataFrame:
    """The metrics table as compare.md prints it: each run's estimate with its interval in one cell."""
    from promptlottery.tracking import tables

    out = deltas[["metric"]].copy()
    for r in runs:
        out[r.name] = [
            tables.ci(e, lo, hi) if np.isfinite(lo) or np.isfinite(hi) else tables.fmt(e)
            for e, lo, hi in zip(deltas[r.name], deltas[f"{r.name} lo"], deltas[f"{r.name} hi"])
        ]
    for r in runs[1:]:
        out[f"delta {r.name}"] = deltas[f"delta {r.name}"]
    return out


def compare(paths: list[str], out_dir: str | Path | None = None) -> dict[str, Any]:
    """Load the runs, diff them; write ``compare.md``, ``config_diff.csv`` and ``metrics.csv`` to ``out_dir``."""
    runs = load_runs(paths)
    diff, deltas = config_diff(runs), metric_deltas(runs)
    lines = ["# Run comparison", "", "| run | source | path |", "|---|---|---|"]
    lines += [f"| {r.name} | {r.source} | {r.path} |" for r in runs]
    lines += [
        "",
        "## Config differences",
        "",
        markdown_table(diff) if not diff.empty else "n/a: the configs are identical (ignoring paths, hydra)",
        "",
        f"## Metrics (delta = run - {runs[0].name})",
        "",
        "The paper's headline rows first; each estimate with its interval [lo, hi] where the run has one.",
        "",
        markdown_table(_shown(deltas, runs)) if not deltas.empty else "n/a: no numeric metric in any run",
        "",
    ]
    text = "\n".join(lines)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(text, encoding="utf-8")
        diff.to_csv(out / "config_diff.csv", index=False, lineterminator="\n")
        deltas.to_csv(out / "metrics.csv", index=False, float_format=CSV_FLOAT, lineterminator="\n")
    return {"runs": runs, "config_diff": diff, "metrics": deltas, "markdown": text}


def _compare_cli(runs: list[str], out: str | None) -> dict[str, Any]:
    """:func:`compare`, its files (``--out``; none without it) through the one writer: staged, then moved
    into place together (the folder keeps no results.json of its own, and one already there is left alone)."""
    from contextlib import nullcontext

    from promptlottery.tracking.staging import staged_outputs

    with nullcontext() if out is None else staged_outputs(out, results=False) as staging:
        return compare(runs, staging)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m promptlottery.analysis.compare.runs", description=__doc__.split("\n")[0]
    )
    ap.add_argument(
        "runs", nargs="+", help="run directories, results.json files or W&B offline run dirs (globs ok)"
    )
    ap.add_argument("--out", default=None, help="also write compare.md, config_diff.csv, metrics.csv here")
    args = ap.parse_args(argv)
    try:
        res = _compare_cli(args.runs, args.out)
    except (FileNotFoundError, ValueError) as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    print(res["markdown"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

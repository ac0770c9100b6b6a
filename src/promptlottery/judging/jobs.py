"""Which judging jobs the analyses may read: finished ones whose results.json vouches for the parquet.

A job directory counts only when its ``results.json`` says ``status: ok``, is a judging record, and
describes the ``judgments.parquet`` next to it (the sha256 the job recorded, or for older records
the same condition, variant, backbone and dataset). Everything else is a *problem*, with a reason:
a failed job, a parquet without results.json (killed between the two writes), a stale parquet next
to a failed re-run, a job dir without results (killed), a planned job that never ran
(``sweep_plan.json``). A configuration with a problem is incomplete: it is left out of the analyses
(reported as ``n/a: P2 missing: job failed: ...``) together with the other backbones' configurations
of the same dataset and judge, unless ``allow_partial`` asks to analyse what there is.
"""

from __future__ import annotations

import glob
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

logger = logging.getLogger(__name__)

JUDGMENTS = "judgments.parquet"
PROBLEM_COLUMNS = ("config_id", "base_id", "variant", "backbone", "job", "reason")


@dataclass
class JobScan:
    frames: list[pd.DataFrame]  # the valid jobs' judgments, with run_dir, model, backend identity, dtype
    files: list[str]  # their parquet files
    problems: pd.DataFrame  # one row per missing (configuration, variant): PROBLEM_COLUMNS


def _read_json(path: Path) -> dict | None:
    try:
        r = json.loads(path.read_text())
        return r if isinstance(r, dict) else None
    except (OSError, ValueError):
        return None


def _hydra_config(job_dir: Path) -> dict:
    import yaml

    try:
        return yaml.safe_load((job_dir / ".hydra" / "config.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return {}


def is_judging_config(cfg: dict) -> bool:
    stage = cfg.get("stage") or "judge"
    analysis = cfg.get("analysis") or {}
    return stage == "judge" or (stage == "lottery" and not analysis.get("runs"))


def config_parts(cfg: dict) -> dict[str, str]:
    """The configuration (dataset x judge x backbone) and variant a job's config describes."""
    ds, judge, bb = (cfg.get(k) or {} for k in ("dataset", "judge", "backbone"))
    return {
        "dataset": str(ds.get("name", "")),
        "judge_family": str(judge.get("family", "")),
        "prompt_group": str(judge.get("prompt_group", "")),
        "criterion": str(judge.get("criterion", "") or ""),
        "rubric": "",
        "backbone": str(bb.get("name", "")),
        "variant": str(judge.get("variant", "")),
    }


def _parquet_parts(path: Path) -> dict[str, str]:
    """The configuration of a parquet whose job left no config (killed before results.json)."""
    try:
        row = pd.read_parquet(path).iloc[0]
    except Exception:  # noqa: BLE001 - unreadable or empty: nothing to attribute it to
        return config_parts({})
    keys = ("dataset", "judge_family", "prompt_group", "criterion", "rubric", "backbone", "variant")
    return {k: "" if k not in row or pd.isna(row[k]) else str(row[k]) for k in keys}


def _ids(parts: dict[str, str]) -> tuple[str, str]:
    base = [parts[k] for k in ("dataset", "judge_family", "prompt_group", "criterion", "rubric")]
    return "/".join(p for p in [*base, parts["backbone"]] if p), "/".join(p for p in base if p)


def find_job_dirs(runs: str | Iterable[str]) -> tuple[list[Path], list[Path]]:
    """Job dirs (a judgments.parquet, a results.json or Hydra's .hydra/) and sweep dirs under ``runs``."""
    patterns = [str(runs)] if isinstance(runs, (str, Path)) else [str(r) for r in runs]
    jobs: set[Path] = set()
    sweeps: set[Path] = set()
    for pattern in patterns:
        for m in sorted(glob.glob(pattern)) or ([pattern] if Path(pattern).exists() else []):
            p = Path(m).resolve()
            if p.is_file():
                if p.name.endswith(".parquet"):
                    jobs.add(p.parent)
                elif p.name == "sweep_plan.json":  # a glob over a sweep's entries (`sweep/*`)
                    sweeps.add(p.parent)
                continue
            for marker in ("judgments.parquet", "results.json", ".hydra"):
                jobs.update(q.parent for q in p.rglob(marker) if q.parent.name != ".hydra")
            sweeps.update(q.parent for q in p.rglob("sweep_plan.json"))
            if (p / "sweep_plan.json").exists():
                sweeps.add(p)
    return sorted(jobs), sorted(sweeps)


def _identity(rec: dict) -> dict:
    return rec.get("backend") or {}


def check_job(job_dir: Path) -> tuple[pd.DataFrame | None, dict, str | None]:
    """``(judgments, job config, None)`` for a valid job, ``(None, config, reason)`` otherwise."""
    from promptlottery.tracking.jobdir import file_sha256

    rec = _read_json(job_dir / "results.json")
    parquet = job_dir / JUDGMENTS
    cfg = (rec or {}).get("config") or _hydra_config(job_dir)
    if rec is None:
        what = "a judgments.parquet without results.json" if parquet.exists() else "no results.json"
        return None, cfg, f"job did not finish ({what}: killed or still running)"
    if rec.get("status") != "ok":
        return None, cfg, f"job {rec.get('status')}: {rec.get('error') or 'no error recorded'}"
    if not parquet.exists():
        return None, cfg, "results.json says ok but judgments.parquet is missing"
    want = rec.get("judgments") or {}
    if want.get("sha256") and file_sha256(parquet) != want["sha256"]:
        return None, cfg, "judgments.parquet is not the one results.json describes (stale or overwritten)"
    df = pd.read_parquet(parquet)
    parts = config_parts(cfg)
    for col in ("variant", "backbone", "dataset"):
        if col in df.columns and parts[col] and set(df[col].astype(str)) != {parts[col]}:
            return (
                None,
                cfg,
                f"judgments.parquet's {col} {sorted(set(df[col].astype(str)))} != results.json's {parts[col]!r}",
            )
    ident = _identity(rec)
    df["run_dir"] = str(job_dir)
    df["model"] = ident.get("model") or ident.get("name") or None
    df["backend_identity"] = json.dumps(ident, sort_keys=True) if ident else ""
    df["dtype"] = str(ident.get("dtype", "")) if ident else ""
    return df, cfg, None


def _is_variant(override: str) -> bool:
    return override.split("=", 1)[0].lstrip("+~").endswith("variant")


def _planned_missing(sweep: Path, configs: dict[Path, dict]) -> list[dict[str, str]]:
    """Problems for planned jobs of ``sweep`` that have no job dir at all."""
    from promptlottery.tracking.callbacks import job_overrides, read_plan, redact_overrides

    plan = read_plan(sweep) or []
    have = {}
    for d in sweep.iterdir():
        ov = job_overrides(d) if d.is_dir() else None
        if ov is not None:
            have[redact_overrides(ov)] = d
    out = []
    for job in plan:
        ov = redact_overrides(job["overrides"])
        if ov in have:
            continue
        rest = {o for o in ov if not _is_variant(o)}
        variant = next((o.split("=", 1)[1] for o in ov if _is_variant(o)), "")
        sibling = next((d for o, d in have.items() if {x for x in o if not _is_variant(x)} == rest), None)
        reason = f"job never ran ({sweep.name} #{job['num']}: {' '.join(ov)})"
        if sibling is not None and variant:
            parts = {**config_parts(configs.get(sibling, {})), "variant": variant}
            out.append({**parts, "job": f"{sweep}#{job['num']}", "reason": reason})
        else:  # a backbone / dataset that never ran: every configuration of the sweep is incomplete
            out.append({"sweep": str(sweep), "job": f"{sweep}#{job['num']}", "reason": reason})
    return out


def scan_jobs(runs: str | Iterable[str]) -> JobScan:
    job_dirs, sweeps = find_job_dirs(runs)
    frames, files, problems, configs = [], [], [], {}
    for d in job_dirs:
        rec = _read_json(d / "results.json")
        if rec is not None and rec.get("stage"):
            continue  # an analysis / compare record (judging records carry no stage field)
        df, cfg, reason = check_job(d)
        if not cfg and df is None and not (d / JUDGMENTS).exists():
            continue
        if cfg and not is_judging_config(cfg):
            continue  # an analysis, gate or rubric dir under the same glob
        configs[d] = cfg
        if reason is None:
            frames.append(df)
            files.append(str(d / JUDGMENTS))
        else:
            parts = config_parts(cfg) if cfg else _parquet_parts(d / JUDGMENTS)
            problems.append({**parts, "job": str(d), "reason": reason})
    for s in sweeps:
        for p in _planned_missing(s, configs):
            if "sweep" not in p:
                problems.append(p)
                continue
            for d, cfg in configs.items():  # every configuration of that sweep
                if d.parent == s:
                    problems.append({**config_parts(cfg), "job": p["job"], "reason": p["reason"]})
    rows = []
    for p in problems:
        cid, base = _ids(p)
        rows.append(
            {
                "config_id": cid,
                "base_id": base,
                **{k: p.get(k, "") for k in ("variant", "backbone", "job", "reason")},
            }
        )
    table = pd.DataFrame(rows, columns=list(PROBLEM_COLUMNS)).drop_duplicates(
        ["config_id", "variant", "reason"]
    )
    for r in table.itertuples():
        logger.warning(
            "job left out config=%s variant=%s job=%s reason=%s", r.config_id, r.variant, r.job, r.reason
        )
    return JobScan(frames=frames, files=files, problems=table.reset_index(drop=True))


def problem_notes(problems: pd.DataFrame, *, partial: bool) -> dict[str, str]:
    """``config_id -> "n/a: P2 missing: job failed: ..."`` (or ``partial: ...`` when analysed anyway)."""
    out: dict[str, str] = {}
    head = "partial" if partial else "n/a"
    for cid, g in problems.groupby("config_id", sort=True):
        parts = [f"{r.variant or 'all variants'} missing: {r.reason}" for r in g.itertuples()]
        out[cid] = f"{head}: " + "; ".join(parts)
    return out


def excluded_configs(config_ids: Iterable[str], problems: pd.DataFrame) -> dict[str, str]:
    """Configurations to leave out (strict mode): incomplete ones and their other backbones."""
    notes = problem_notes(problems, partial=False)
    bad_bases = dict(zip(problems["base_id"], problems["config_id"]))
    out = dict(notes)
    for cid in config_ids:
        if cid in out:
            continue
        for base, other in bad_bases.items():
            if base and cid.startswith(base + "/"):
                out[cid] = f"n/a: another backbone of {base} is incomplete ({notes.get(other, other)})"
    return out

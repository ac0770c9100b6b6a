"""Which judging jobs the analyses may read: finished ones whose results.json vouches for the parquet.

A job directory counts only when its ``results.json`` says ``status: ok``, is a judging record, and
describes the ``judgments.parquet`` next to it (the sha256 the job recorded, or for older records
the same condition, variant, backbone and dataset). Everything else is a *problem*, with a reason:
a failed job, a parquet without results.json (killed between the two writes), a stale parquet next
to a failed re-run, a job dir without results (killed), a planned job that never ran
(``sweep_plan.json``). A configuration with a problem is incomplete: it is left out of the analyses
(reported as ``n/a: P2 missing: job failed: ...``) together with the other backbones' configurations
of the same dataset and judge, unless ``allow_partial`` asks to analyse what there is.

A problem is filed under the configuration its job would have written (:func:`job_configuration`),
the same for every kind of job (a built-in group, your own group or template, your own pairwise
judge): the configuration of a finished job of the same sweep with the same overrides but the
variant, else the one the job's config names, its prompt group read from ``judge.group_file`` /
``judge.template`` as the judge stage reads it. A job that cannot be placed (its group file gone,
its parquet unreadable) makes every configuration of its sweep incomplete (of the whole scan,
outside a sweep).
"""

from __future__ import annotations

import glob
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from promptlottery.data.registry import dataset_id

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


def config_parts(cfg: dict, *, cwd: str | Path | None = None) -> dict[str, str] | None:
    """The configuration (dataset x judge x backbone) and variant a job's config describes, as the
    judge stage names its judgments (``build_condition``): a prompt group judged from a file (or your
    own judge's mode's built-in group) by the group's own family and id. None when that group cannot
    be read; a relative ``judge.group_file`` / ``judge.template`` is also looked up under ``cwd`` (the
    directory the job ran in)."""
    from promptlottery.modes import default_group
    from promptlottery.prompts.groups import PromptError, own_default_group, resolve_group

    ds, judge, bb = (cfg.get(k) or {} for k in ("dataset", "judge", "backbone"))
    family, group = judge.get("family", ""), judge.get("prompt_group", "")
    builtin = default_group(judge)
    if judge.get("group_file") or judge.get("template") or own_default_group(judge, builtin):
        judge = dict(judge)
        for key in ("group_file", "template"):
            path = judge.get(key)
            if path and cwd is not None and not Path(path).is_absolute() and not Path(path).exists():
                judge[key] = str(Path(cwd) / path)
        try:
            resolved = resolve_group(judge, builtin)
        except (PromptError, OSError) as exc:
            logger.warning("job not placed: its prompt group cannot be read error=%s", exc)
            return None
        family, group = resolved.judge_family, resolved.id
    return {
        "dataset": dataset_id(ds),
        "judge_family": str(family),
        "prompt_group": str(group),
        "criterion": str(judge.get("criterion", "") or ""),
        "rubric": "",
        "backbone": str(bb.get("name", "")),
        "variant": str(judge.get("variant", "")),
    }


PART_KEYS = ("dataset", "judge_family", "prompt_group", "criterion", "rubric", "backbone", "variant")


def _frame_parts(df: pd.DataFrame) -> dict[str, str]:
    row = df.iloc[0]
    return {k: "" if k not in row or pd.isna(row[k]) else str(row[k]) for k in PART_KEYS}


def _parquet_parts(path: Path) -> dict[str, str] | None:
    """The configuration of a parquet whose job left no readable config; None if unreadable."""
    try:
        return _frame_parts(pd.read_parquet(path))
    except Exception:  # noqa: BLE001 - unreadable or empty: nothing to attribute it to
        return None


def _job_cwd(job_dir: Path) -> str | None:
    import yaml

    try:
        hydra = yaml.safe_load((job_dir / ".hydra" / "hydra.yaml").read_text()) or {}
        return hydra["hydra"]["runtime"]["cwd"]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return None


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
    judge, bb, ds = (cfg.get(k) or {} for k in ("judge", "backbone", "dataset"))
    parts = {"variant": str(judge.get("variant", "")), "backbone": str(bb.get("name", ""))}
    parts["dataset"] = dataset_id(ds)
    # a job of a config that shares its loader, judged before dataset.id: its rows say the loader's name
    named = {parts["dataset"], str(ds.get("name", ""))}
    for col in ("variant", "backbone", "dataset"):
        seen = set(df[col].astype(str)) if col in df.columns else set()
        if seen and parts[col] and not (seen == {parts[col]} or (col == "dataset" and seen <= named)):
            return (
                None,
                cfg,
                f"judgments.parquet's {col} {sorted(set(df[col].astype(str)))} != results.json's {parts[col]!r}",
            )
    if "dataset" in df.columns and parts["dataset"]:
        df["dataset"] = parts["dataset"]  # the configuration the job judged, never just its loader
    ident = _identity(rec)
    df["run_dir"] = str(job_dir)
    df["model"] = ident.get("model") or ident.get("name") or None
    df["backend_identity"] = json.dumps(ident, sort_keys=True) if ident else ""
    df["dtype"] = str(ident.get("dtype", "")) if ident else ""
    return df, cfg, None


def _is_variant(override: str) -> bool:
    return override.split("=", 1)[0].lstrip("+~").endswith("variant")


def _split_overrides(overrides: Iterable[str]) -> tuple[frozenset[str], str]:
    """A sweep job's overrides without the variant (its configuration) and its variant."""
    rest = frozenset(o for o in overrides if not _is_variant(o))
    return rest, next((o.split("=", 1)[1] for o in overrides if _is_variant(o)), "")


def _sweep_jobs(sweep: Path) -> dict[Path, tuple[str, ...]]:
    """``{job dir: its (redacted) overrides}`` for the job dirs of ``sweep``."""
    from promptlottery.tracking.callbacks import job_overrides, redact_overrides

    out = {}
    for d in sorted(sweep.iterdir()):
        ov = job_overrides(d) if d.is_dir() else None
        if ov is not None:
            out[d.resolve()] = redact_overrides(ov)
    return out


def job_configuration(
    rest: frozenset[str] | None,
    variant: str,
    siblings: dict[frozenset[str], dict[str, str]],
    cfg: dict | None,
    job_dir: Path | None = None,
) -> dict[str, str] | None:
    """The configuration (and variant) a job that wrote no valid judgments would have filed them
    under, the one rule for every kind of job: a finished job of its sweep with the same overrides
    but the variant (``rest``) names it (what its judgments say); else the job's config
    (:func:`config_parts`); else a parquet it left; None when nothing places it."""
    if rest is not None and rest in siblings:
        return {**siblings[rest], "variant": variant or siblings[rest]["variant"]}
    parts = config_parts(cfg, cwd=_job_cwd(job_dir) if job_dir else None) if cfg else None
    if parts is None and job_dir is not None and (job_dir / JUDGMENTS).exists():
        parts = _parquet_parts(job_dir / JUDGMENTS)
    if parts is not None and variant:
        parts["variant"] = variant
    return parts


def scan_jobs(runs: str | Iterable[str]) -> JobScan:
    """Every judging job under ``runs``: the valid ones' judgments, and one problem per planned
    (configuration, variant) that has none, each filed by :func:`job_configuration`."""
    from promptlottery.tracking.callbacks import read_plan, redact_overrides

    job_dirs, sweeps = find_job_dirs(runs)
    frames, files, failed, done = [], [], [], {}
    for d in job_dirs:
        rec = _read_json(d / "results.json")
        if rec is not None and rec.get("stage"):
            continue  # an analysis / compare record (judging records carry no stage field)
        df, cfg, reason = check_job(d)
        if not cfg and df is None and not (d / JUDGMENTS).exists():
            continue
        if cfg and not is_judging_config(cfg):
            continue  # an analysis, gate or rubric dir under the same glob
        if reason is None:
            frames.append(df)
            files.append(str(d / JUDGMENTS))
            done[d] = _frame_parts(df)
        else:
            failed.append((d, cfg, reason))
    in_sweep: dict[Path, tuple[Path, tuple[str, ...]]] = {}
    siblings: dict[Path, dict[frozenset[str], dict[str, str]]] = {}
    for s in sweeps:
        jobs = _sweep_jobs(s)
        in_sweep.update({d: (s, ov) for d, ov in jobs.items()})
        siblings[s] = {_split_overrides(ov)[0]: done[d] for d, ov in jobs.items() if d in done}
    problems, unplaced = [], []
    for d, cfg, reason in failed:
        sweep, ov = in_sweep.get(d, (None, None))
        rest, variant = _split_overrides(ov) if ov is not None else (None, "")
        parts = job_configuration(rest, variant, siblings.get(sweep, {}), cfg, d)
        if parts is None:
            unplaced.append((sweep, str(d), f"{reason} (the job's configuration cannot be read)"))
            continue
        problems.append({**parts, "job": str(d), "reason": reason})
        if sweep is not None:  # places the planned jobs of its configuration that never ran
            siblings[sweep].setdefault(rest, parts)
    for s in sweeps:
        have = set(_sweep_jobs(s).values())
        for job in read_plan(s) or []:
            ov = redact_overrides(job["overrides"])
            if ov in have:
                continue
            rest, variant = _split_overrides(ov)
            reason = f"job never ran ({s.name} #{job['num']}: {' '.join(ov)})"
            parts = job_configuration(rest, variant, siblings[s], None) if variant else None
            if parts is None:  # a backbone / dataset that never ran: the whole sweep is incomplete
                unplaced.append((s, f"{s}#{job['num']}", reason))
            else:
                problems.append({**parts, "job": f"{s}#{job['num']}", "reason": reason})
    for sweep, job, reason in unplaced:  # every configuration of that sweep (of the scan, outside one)
        for d, parts in done.items():
            if sweep is None or in_sweep.get(d, (None,))[0] == sweep:
                problems.append({**parts, "variant": "", "job": job, "reason": reason})
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

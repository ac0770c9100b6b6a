"""Reading the judging jobs back: every finished job's ``judgments.parquet`` under a run pattern in
one table, its columns defaulted and typed, incomplete configurations left out (or named), one
backend identity per backbone name, duplicate judgments kept once."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.judging import jobs
from promptlottery.judging.table import CONFIG_KEYS, AnalysisError, config_ids

logger = logging.getLogger(__name__)

_REQUIRED = ("item_id", "variant", "backbone", "dataset", "judge_family", "prompt_group", "scale")
_DEFAULTS: dict[str, Any] = {
    "criterion": "",
    "rubric": "",
    "system": None,
    "sample_index": 0,
    "repeat_source": "none",
    "batch_plan": "",
    "temperature": 1e-5,
    "seed": 0,
    "human": np.nan,
    "argmax_label": None,
    "parsed_label": None,
    "weighted_score": np.nan,
}


def _patterns(runs: str | Iterable[str]) -> list[str]:
    if isinstance(runs, (str, Path)):
        return [str(runs)]
    return [str(r) for r in runs]


def load_judgments(
    runs: str | Iterable[str] | pd.DataFrame,
    *,
    allow_partial: bool = False,
    allow_mixed_dtypes: bool = False,
    problems: list | None = None,
) -> pd.DataFrame:
    """The judgments of every finished job under ``runs`` in one table (a DataFrame passes through).

    Only jobs whose results.json says ``ok`` and vouches for their parquet are read
    (:mod:`promptlottery.judging.jobs`); an incomplete configuration (a failed, killed or never
    run job) is left out with the other backbones of its dataset and judge, unless
    ``allow_partial``. ``problems``, when given, receives ``{config_id: "n/a: P2 missing: ..."}``
    (what was left out; ``partial: ...`` for what was analysed anyway). One backbone name must mean one backend identity (dtypes may differ only with
    ``allow_mixed_dtypes``). Adds ``run_dir``, ``model`` (the backend's model id), ``backend_identity``
    and ``dtype``. Duplicate judgments (the same item, variant, backend, temperature, seed and
    sample in two runs, e.g. P1 sample 0 in both the paraphrase sweep and the fixed-prompt
    baseline) are kept once.
    """
    table = pd.DataFrame(columns=list(jobs.PROBLEM_COLUMNS))
    if isinstance(runs, pd.DataFrame):
        frames = [runs.copy()]
    else:
        scan = jobs.scan_jobs(runs)
        table = scan.problems
        frames = scan.frames
        if not frames:
            if not scan.files and table.empty:
                raise AnalysisError(f"no judgments.parquet found under {_patterns(runs)}")
            first = table.iloc[0] if len(table) else None
            raise AnalysisError(
                f"no finished judging job under {_patterns(runs)}"
                + (f"; e.g. {first['job']}: {first['reason']}" if first is not None else "")
            )
    df = _typed(pd.concat(frames, ignore_index=True))
    check_identities(df, allow_mixed_dtypes=allow_mixed_dtypes)
    check_one_text(df)
    notes: dict[str, str] = {}
    if not table.empty:
        df, notes = _without_incomplete(df, table, allow_partial=allow_partial)
    if problems is not None:
        problems.append(notes)
    return _deduplicated(df, allow_mixed_dtypes=allow_mixed_dtypes)


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    """The required columns checked, the optional ones defaulted, the key columns typed."""
    missing = [c for c in _REQUIRED if c not in df.columns]
    if missing:
        raise AnalysisError(f"judgments lack required columns {missing}")
    for col, default in _DEFAULTS.items():
        if col not in df.columns:
            df[col] = default
    for col, default in (("run_dir", ""), ("backend_identity", ""), ("dtype", "")):
        if col not in df.columns:
            df[col] = default
    if "model" not in df.columns:
        df["model"] = df["backbone"]
    df["model"] = df["model"].fillna(df["backbone"])
    for col in ("criterion", "rubric"):
        df[col] = df[col].fillna("").astype(str)
    df["temperature"] = df["temperature"].astype(float)
    df["sample_index"] = df["sample_index"].astype(int)
    df["repeat_source"] = df["repeat_source"].fillna("none").astype(str)
    df["seed"] = df["seed"].fillna(0).astype(int)
    df["item_id"] = df["item_id"].astype(str)
    return df


def _without_incomplete(
    df: pd.DataFrame, table: pd.DataFrame, *, allow_partial: bool
) -> tuple[pd.DataFrame, dict[str, str]]:
    """The rows of the complete configurations (all rows with ``allow_partial``) and the notes on
    what was left out or analysed anyway."""
    ids = pd.Series(config_ids(df), index=df.index)
    if allow_partial:
        logger.warning("analysing a partial grid (allow_partial): %d problem(s)", len(table))
        return df, jobs.problem_notes(table, partial=True)
    notes = jobs.excluded_configs(ids.unique(), table)
    out = ids.isin(list(notes))
    notes = {
        cid: note + _judged(df[out & (ids == cid)], table[table["config_id"] == cid])
        for cid, note in notes.items()
    }
    df = df[~out]
    if df.empty:
        raise AnalysisError(
            "every configuration is incomplete: "
            + "; ".join(f"{k}: {v}" for k, v in sorted(notes.items()))
            + " (analysis.allow_partial=true analyses what there is)"
        )
    return df, notes


def _judged(rows: pd.DataFrame, problems: pd.DataFrame) -> str:
    """What an incomplete configuration had judged (and the analysis leaves out), and where (its sweep
    dir), for its note; ``problems``: its rows of the problem table."""
    dirs = {str(Path(d).parent) for d in rows["run_dir"] if d}
    if not dirs:
        dirs = {j.split("#")[0] if "#" in j else str(Path(j).parent) for j in problems["job"].astype(str)}
    where = f" in {', '.join(sorted(dirs))}" if dirs else ""
    if rows.empty:
        return f"; judged: nothing{where}"
    variants = ", ".join(sorted(rows["variant"].astype(str).unique()))
    return (
        f"; judged: {variants} ({len(rows)} judgments, {rows['item_id'].nunique()} items){where}, "
        "left out of the analysis"
    )


def _deduplicated(df: pd.DataFrame, *, allow_mixed_dtypes: bool) -> pd.DataFrame:
    """One row per judgment: one backbone name is one backend identity (checked before), so the
    identity, not the name, de-duplicates."""
    ident = df["backend_identity"] if not allow_mixed_dtypes else df["backend_identity"].map(_without_dtype)
    df = df.assign(_ident=ident)
    key = [
        *CONFIG_KEYS,
        "_ident",
        "variant",
        "temperature",
        "seed",
        "repeat_source",
        "sample_index",
        "item_id",
        *(["order"] if "order" in df.columns else []),  # a pairwise judge: both orders of a pair
    ]
    df = df.sort_values([*key, "run_dir"], kind="mergesort").drop_duplicates(key, keep="first")
    return df.drop(columns="_ident").reset_index(drop=True)


def _runs(g: pd.DataFrame) -> str:
    dirs = sorted({str(Path(d).parent.name + "/" + Path(d).name) if d else "?" for d in g["run_dir"]})
    return ", ".join(dirs[:2]) + (f" and {len(dirs) - 2} more" if len(dirs) > 2 else "")


def check_one_text(df: pd.DataFrame) -> None:
    """One analysis reads one table per dataset name and one text per wording: two runs of
    ``dataset=table`` on different files (``table_sha256``), or of one variant whose text changed
    between them (``wording_sha``, ``text_version``), would be merged into one configuration or
    de-duplicated by item id. Refused in one line naming the runs of each side."""
    for col, what in (("table_sha256", "table"), ("wording_sha", "text"), ("text_version", "version")):
        if col not in df.columns:
            continue
        known = df[df[col].notna() & (df[col].astype(str) != "")]
        keys = ["dataset"] if col == "table_sha256" else [*CONFIG_KEYS, "variant"]
        for key, g in known.groupby(keys, sort=True):
            sides = list(g.groupby(g[col].astype(str), sort=True))
            if len(sides) < 2:
                continue
            (va, ga), (vb, gb) = sides[:2]
            name = key[0] if isinstance(key, tuple) and col == "table_sha256" else key
            if col == "table_sha256":
                raise AnalysisError(
                    f"analysis.runs holds two different tables for dataset {name}: the runs {_runs(ga)} judged one "
                    f"(sha256 {va[:12]}), the runs {_runs(gb)} another ({vb[:12]}); analyse each table's runs on "
                    "their own (analysis.runs=<their dirs>)"
                )
            k = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
            raise AnalysisError(
                f"analysis.runs holds two {what}s of wording {k['variant']} of prompt group {k['prompt_group']} "
                f"({k['dataset']}, {k['backbone']}): the runs {_runs(ga)} judged one ({va[:12]}), the runs "
                f"{_runs(gb)} another ({vb[:12]}); analyse the runs of one text (analysis.runs=<their dirs>)"
            )


def check_identities(df: pd.DataFrame, *, allow_mixed_dtypes: bool = False) -> None:
    """One backend identity per backbone name; dtypes mixed only when ``allow_mixed_dtypes``.

    Raises AnalysisError naming both identities (and a run dir of each).
    """
    if "backend_identity" not in df.columns:
        return
    for bb, g in df.groupby("backbone", sort=True):
        seen = g.drop_duplicates("backend_identity")[["backend_identity", "run_dir"]]
        if len(seen) < 2:
            continue
        (a, da), (b, db) = seen.head(2).itertuples(index=False, name=None)
        ia, ib = (json.loads(x) if x else {} for x in (a, b))
        if {k: v for k, v in ia.items() if k != "dtype"} == {k: v for k, v in ib.items() if k != "dtype"}:
            if allow_mixed_dtypes:
                logger.warning(
                    "backbone=%s mixes dtypes %s and %s (allowed)", bb, ia.get("dtype"), ib.get("dtype")
                )
                continue
            raise AnalysisError(
                f"backbone {bb!r} mixes dtypes {ia.get('dtype')} ({da}) and {ib.get('dtype')} ({db}): the same config "
                "judges differently in each; set analysis.allow_mixed_dtypes=true to analyse them together"
            )
        raise AnalysisError(
            f"backbone name {bb!r} stands for two backends: {a} ({da}) and {b} ({db}); give each its own "
            "backbone.name"
        )


def _without_dtype(identity: str) -> str:
    if not identity:
        return identity
    d = json.loads(identity)
    d.pop("dtype", None)
    return json.dumps(d, sort_keys=True)

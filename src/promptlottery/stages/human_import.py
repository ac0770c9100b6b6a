"""The ``human_import`` stage: a Label Studio export or a plain table of ratings, checked against
the campaign, into ``human_ratings.parquet`` (the options: :class:`~promptlottery.stages.human.HumanOptions`).

    python -m run +human=import human.campaign=DIR human.export='DIR/export_*.json'   # or human.table=FILE
"""

from __future__ import annotations

import glob
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from promptlottery.errors import ConfigError
from promptlottery.stages.human import HumanOptions, options_of
from promptlottery.tracking.job import StageJob
from promptlottery.tracking.staging import staged_outputs

logger = logging.getLogger(__name__)


def human_import(cfg, job: StageJob, **_kw) -> dict[str, Any]:
    """``stage: human_import``: a Label Studio export or a plain table -> ``human_ratings.parquet``."""
    opts, config = options_of(cfg)
    return _import(opts, job)


def _paths(spec: Any) -> list[str]:
    specs = [spec] if isinstance(spec, str) else list(spec or [])
    out = []
    for s in specs:
        found = sorted(glob.glob(str(s)))
        if not found:
            from promptlottery.human.ratings import RatingsError

            raise RatingsError(f"human.export={s}: no such file")
        out.extend(found)
    return out


@dataclass
class Imported:
    """The checked ratings and what the import found: who (``attribution_checked``), the order each
    annotator labelled in (``order``), the plan against what came back (``coverage``; None without a plan)."""

    ratings: pd.DataFrame
    attribution_checked: bool
    order: pd.DataFrame
    coverage: dict[str, Any] | None


def import_ratings(opts: HumanOptions) -> pd.DataFrame:
    """The checked ratings of ``opts.export`` or ``opts.table`` against ``opts.campaign``."""
    return import_checked(opts).ratings


def import_checked(opts: HumanOptions) -> Imported:
    """:func:`import_ratings` with the import's checks (:mod:`promptlottery.human.checks`): a rating
    completed by another Label Studio user than its annotator's is a one-line RatingsError."""
    from promptlottery.human.campaign import load_campaign
    from promptlottery.human.checks import check_attribution, coverage, served_order
    from promptlottery.human.ratings import Known, RatingsError, check_ratings, read_label_studio, read_table

    if bool(opts.export) == bool(opts.table):
        raise ConfigError(
            "human_import needs exactly one of human.export=<Label Studio JSON export(s)> or human.table=<file>"
        )
    if not opts.campaign:
        raise ConfigError(
            "human_import needs human.campaign=<the campaign directory> (its items, wordings, annotators, scale)"
        )
    camp = load_campaign(opts.campaign)
    known = Known(
        labels=tuple(camp["labels"]),
        items=frozenset(camp["items"]),
        wordings=frozenset(camp["wordings"]),
        annotators=frozenset(camp["annotators"]),
    )
    raw = read_label_studio(_paths(opts.export)) if opts.export else read_table(opts.table)
    cancelled = raw["cancelled"] if "cancelled" in raw.columns else pd.Series(False, index=raw.index)
    done = raw[~cancelled.astype(bool)].drop(columns="cancelled", errors="ignore")
    if done.empty:
        raise RatingsError(f"{opts.export or opts.table}: no rating (no completed annotation)")
    # who first: another person's rating in a project reads as a task rated twice otherwise
    attributed = check_attribution(raw, camp.get("label_studio_users"))
    df = check_ratings(done, known)
    order = served_order(_typed(raw))
    plan_path = (
        Path(opts.campaign if Path(opts.campaign).is_dir() else Path(opts.campaign).parent) / "assignment.csv"
    )
    cov = None
    if plan_path.exists():
        plan = pd.read_csv(plan_path, dtype=str)
        cov = coverage(
            raw.assign(cancelled=cancelled.astype(bool)),
            plan,
            raters_per_task=camp["design"]["raters_per_task"],
        )
    df = df.assign(
        campaign=camp["name"], dataset=camp["dataset"], prompt_group=camp["prompt_group"], scale=camp["scale"]
    )
    return Imported(df, attributed, order, cov)


def _typed(raw: pd.DataFrame) -> pd.DataFrame:
    return raw.assign(
        created_at=pd.to_datetime(raw["created_at"], utc=True, errors="coerce", format="ISO8601")
    )


def _import(opts: HumanOptions, job: StageJob) -> dict[str, Any]:
    from promptlottery.analysis.common import report as rp

    imp = import_checked(opts)
    df = imp.ratings
    order = imp.order
    checks: dict[str, Any] = {
        "attribution": "every annotation completed by its annotator's Label Studio user"
        if imp.attribution_checked
        else "not checked (no Label Studio user mapping in campaign.json, or a plain table)",
        "back_to_back": int(order["back_to_back"].sum()) if len(order) else None,
        "annotators_back_to_back": order.loc[order["back_to_back"] > 0, "annotator"].tolist(),
        "annotators_out_of_plan": order.loc[order["out_of_plan"] > 0, "annotator"].tolist(),
    }
    cov = imp.coverage
    if cov is not None:
        checks["coverage"] = {k: v for k, v in cov.items() if k != "per_annotator"}
    R = rp.Report("Human ratings import")
    R.p(f"{len(df)} ratings of {df['annotator'].nunique()} annotators; attribution: {checks['attribution']}.")
    if len(order):
        R.h("Order of labelling (by created_at)", 3)
        R.p(
            f"{checks['back_to_back']} pair(s) of consecutive annotations on one item (the back-to-back rule "
            "forbids them); out of plan = annotations not at their place in the planned queue (a re-sorted "
            "Data Manager, or tasks picked by hand)."
        )
        R.table(order, {c: c.replace("_", " ") for c in order.columns})
    else:
        R.p("Order of labelling: not checked (no created_at: a plain table).")
    if cov is not None:
        R.h("Coverage against the plan (assignment.csv)", 3)
        R.p(
            f"{cov['rated']} of {cov['planned']} planned tasks rated, {cov['skipped']} skipped (cancelled), "
            f"{cov['not_done']} not done; annotators with no rating: {', '.join(cov['annotators_missing']) or 'none'}; "
            f"{cov['cells_short']} of {cov['cells']} (item, wording) cells have fewer than their raters."
        )
        R.table(cov["per_annotator"], {c: c.replace("_", " ") for c in cov["per_annotator"].columns})
    path = job.output_dir / "human_ratings.parquet"
    with staged_outputs(job.output_dir) as staging:  # the one writer: staged, then published together
        df.to_parquet(staging / path.name, index=False)
        (staging / "import_report.md").write_text(R.text(), encoding="utf-8")
    for line in _warnings(checks):
        logger.warning(line)
    job.note(ratings=len(df), annotators=df["annotator"].nunique())
    return job.ok(
        ratings=str(path),
        n_ratings=len(df),
        n_items=int(df["item_id"].nunique()),
        n_wordings=int(df["wording"].nunique()),
        n_annotators=int(df["annotator"].nunique()),
        checks=checks,
        report=str(job.output_dir / "import_report.md"),
    )


def _warnings(checks: dict[str, Any]) -> list[str]:
    out = []
    if checks["back_to_back"]:
        out.append(
            f"human import: {checks['back_to_back']} back-to-back pair(s) (annotators "
            f"{', '.join(checks['annotators_back_to_back'])}): the same item on consecutive tasks"
        )
    cov = checks.get("coverage")
    if cov and (cov["annotators_missing"] or cov["skipped"] or cov["not_done"]):
        out.append(
            f"human import: {cov['rated']} of {cov['planned']} planned tasks rated ({cov['skipped']} skipped, "
            f"{cov['not_done']} not done; no rating from {cov['annotators_missing'] or 'none'})"
        )
    return out

"""The study page: one report across every configuration of a study, from the lottery tables.

``study.md`` (+ ``tables/study_by_backbone.csv``, ``tables/study_by_family.csv``) is written beside the
lottery report of a whole study dir (``+analysis=study``). It reads the tables the lottery analysis
wrote (``headlines.csv``: the paper's rows with ours, interval, n and definition; ``verdict.csv``:
each configuration's verdict; ``configurations.csv``: what each configuration is) and adds the
breakdowns per backbone and per judge family: configurations, the median of their agreement across
wordings (the verdict table's ``kappa``, its definition in verdict.csv's sentence) and how many fall
in each band (robust >= ``analysis.thresholds.robust``, usable >= ``.usable``, below); the paper's
§4.2 breakdowns beside ours (:func:`paper_breakdown`); and one line per configuration left out as
incomplete (:func:`not_analysed`). A fake judge's study says so in its first line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from promptlottery.analysis.common.report import mark_fake

BANDS = ("robust", "usable", "below usable")


def _band_counts(bands: pd.Series) -> dict[str, int]:
    b = bands.fillna("n/a").astype(str)
    return {band: int((b == band).sum()) for band in BANDS} | {"n/a": int((~b.isin(BANDS)).sum())}


def breakdown(verdict: pd.DataFrame, configurations: pd.DataFrame, by: str) -> pd.DataFrame:
    """Per value of ``by`` (``backbone`` or ``judge_family``): configurations, judged items, the
    median agreement across wordings (``kappa``) with its range, the median share of items whose
    verdict a paraphrase changes, and the configurations in each band."""
    df = verdict.merge(configurations[["config_id", "backbone", "judge_family"]], on="config_id", how="left")
    rows = []
    for key, g in df.groupby(by, sort=True):
        kappa = pd.to_numeric(g["kappa"], errors="coerce")
        changed = pd.to_numeric(g.get("changed"), errors="coerce")
        rows.append(
            {
                by: key,
                "configurations": len(g),
                "items": int(pd.to_numeric(g["n_items"], errors="coerce").fillna(0).sum()),
                "kappa_median": float(np.nanmedian(kappa)) if kappa.notna().any() else np.nan,
                "kappa_min": float(kappa.min()) if kappa.notna().any() else np.nan,
                "kappa_max": float(kappa.max()) if kappa.notna().any() else np.nan,
                "changed_median": float(np.nanmedian(changed)) if changed.notna().any() else np.nan,
                **_band_counts(g.get("band", pd.Series(dtype=str))),
            }
        )
    return pd.DataFrame(rows)


def not_analysed(tables: Path) -> list[str]:
    """One line per configuration the analysis left out (an incomplete sweep: a wording whose job
    failed, was killed or never ran), from ``incomplete_configurations.csv``: its id, what is missing,
    what it had judged (judgments, items) and its directory."""
    path = Path(tables) / "incomplete_configurations.csv"
    table = pd.read_csv(path) if path.exists() and path.stat().st_size else pd.DataFrame()
    if table.empty:
        return []
    return [f"{cid}: {status}" for cid, status in zip(table["config_id"], table["status"])]


def not_analysed_lines(tables: Path) -> list[str]:
    """The study page's section on the configurations left out (empty: none was)."""
    left = not_analysed(tables)
    if not left:
        return ["Every configuration found under analysis.runs was complete and is analysed."]
    return [
        f"## Not analysed: {len(left)} incomplete configuration(s)",
        "",
        "Each was left out whole (its wordings would not be comparable); re-run its missing jobs "
        "(the call cache answers the rest) or analyse it as it is with analysis.allow_partial=true.",
        "",
        *(f"- {line}" for line in left),
    ]


#: the paper's words beside each grouping of ``agreement_by_task_type.csv`` (its Tables 2-3 are not in
#: ../shared/papers: the summary there prints their claims, with numbers only for the family types)
PAPER_BY_GROUP = {
    ("task type", "binary"): "higher raw overlap, lower chance-corrected reliability than non-binary (§4.2)",
    ("task type", "likert"): "lower raw overlap, higher chance-corrected reliability than binary (§4.2)",
    ("judge family type", "objective"): "Fleiss' kappa 0.47-0.69 (§C.3; objective judges more stable, §4.2)",
    ("judge family type", "subjective"): "Fleiss' kappa 0.26-0.28 (§C.3)",
}
PAPER_BACKBONE = "sensitivity varies by backbone (§4.2; no number in the summary)"


def paper_breakdown(tables: Path) -> pd.DataFrame:
    """The paper's §4.2 breakdowns beside ours: per task type (binary vs Likert), judge family type
    (objective vs subjective) and backbone, from ``agreement_by_task_type.csv``.

    The paper (§4.2): "Binary tasks had higher raw overlap than non-binary tasks, but lower
    chance-corrected reliability; objective judges were more stable than subjective and open-ended
    judges. Sensitivity varied by backbone"; §C.3: "Objective tasks show greater invariance
    (κ = 0.47–0.69) than subjective tasks (κ = 0.26–0.28)". Ours, each with its bootstrap interval:
    the raw overlap and Fleiss' kappa across the paraphrases (the paper's measure, §3.2), each the
    mean over the group's configurations where it is defined (``n``)."""
    path = Path(tables) / "agreement_by_task_type.csv"
    if not path.exists() or not path.stat().st_size:
        return pd.DataFrame()
    t = pd.read_csv(path)
    t = t[t["grouping"].isin(["task type", "judge family type", "backbone"])]
    if t.empty:
        return pd.DataFrame()

    def ci(row, m):
        return "n/a" if pd.isna(row[m]) else f"{row[m]:.3f} [{_fmt(row[m + '_lo'])}, {_fmt(row[m + '_hi'])}]"

    return pd.DataFrame(
        {
            "grouping": t["grouping"],
            "group": t["group"],
            "paper": [
                PAPER_BACKBONE if g == "backbone" else PAPER_BY_GROUP.get((g, str(k)), "(not reported)")
                for g, k in zip(t["grouping"], t["group"])
            ],
            "configurations": t["n_configs"],
            "overlap": [ci(r, "overlap") for _, r in t.iterrows()],
            "fleiss_kappa": [ci(r, "fleiss_kappa") for _, r in t.iterrows()],
            "n": t["fleiss_kappa_n"],
        }
    )


#: the §4.2 groupings of ``agreement_by_task_type.csv`` as W&B scalar prefixes, and the measures kept
PAPER_GROUPINGS = {"task type": "task_type", "judge family type": "family_type", "backbone": "backbone"}
PAPER_MEASURES = ("fleiss_kappa", "overlap")
BREAKDOWN_MEASURES = ("configurations", "items", "kappa_median", "changed_median")


def _finite(values: dict[str, object]) -> dict[str, float]:
    out = {}
    for k, v in values.items():
        x = pd.to_numeric(v, errors="coerce")
        if pd.notna(x) and np.isfinite(x):
            out[k] = float(x)
    return out


def study_metrics(tables: Path) -> dict[str, float]:
    """The study page's numbers as flat scalars (W&B's run table and parallel coordinates sort them
    across study runs): the §4.2 breakdowns, ``<grouping>/<group>/{fleiss_kappa,overlap}`` with
    ``_lo`` / ``_hi`` (an estimate beside its interval); the per-backbone and per-judge-family
    breakdowns, ``by_backbone/<b>/kappa_median`` etc.; and the configurations analysed and left out.
    Undefined values are left out. Written after :func:`write_study_page`, from its tables."""
    tables = Path(tables)
    out: dict[str, float] = {}
    path = tables / "agreement_by_task_type.csv"
    if path.exists() and path.stat().st_size:
        t = pd.read_csv(path)
        for row in t[t["grouping"].isin(list(PAPER_GROUPINGS))].to_dict("records"):
            key = f"{PAPER_GROUPINGS[row['grouping']]}/{row['group']}"
            cols = [f"{m}{s}" for m in PAPER_MEASURES for s in ("", "_lo", "_hi") if f"{m}{s}" in row]
            out.update(_finite({f"{key}/{c}": row[c] for c in cols}))
    for by in ("backbone", "family"):
        path = tables / f"study_by_{by}.csv"
        if not path.exists() or not path.stat().st_size:
            continue
        t = pd.read_csv(path)
        for row in t.to_dict("records"):
            key = f"by_{by}/{row['backbone' if by == 'backbone' else 'judge_family']}"
            out.update(_finite({f"{key}/{m}": row.get(m) for m in BREAKDOWN_MEASURES}))
    configs = pd.read_csv(tables / "configurations.csv")
    out["analysed"] = float(len(configs))
    out["not_analysed"] = float(len(not_analysed(tables)))
    return out


def _fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "n/a"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _md(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in df.itertuples(index=False, name=None)]
    return "\n".join(lines)


def write_study_page(lottery_dir: str | Path, *, fake: bool = False) -> Path:
    """``study.md`` and the two breakdown tables, from the lottery tables in ``lottery_dir``."""
    out = Path(lottery_dir)
    tables = out / "tables"
    verdict = pd.read_csv(tables / "verdict.csv")
    configs = pd.read_csv(tables / "configurations.csv")
    heads = pd.read_csv(tables / "headlines.csv") if (tables / "headlines.csv").exists() else pd.DataFrame()
    by_backbone = breakdown(verdict, configs, "backbone")
    by_family = breakdown(verdict, configs, "judge_family")
    mark_fake(by_backbone, fake).to_csv(tables / "study_by_backbone.csv", index=False)
    mark_fake(by_family, fake).to_csv(tables / "study_by_family.csv", index=False)
    n_cfg = configs["config_id"].map(lambda c: c.rsplit("/", 1)[0]).nunique()
    lines = []
    if fake:
        lines += ["**FAKE JUDGE**: every verdict below comes from `backbone=fake`, not a model.", ""]
    lines += [
        "# The study",
        "",
        f"{n_cfg} configurations x {configs['backbone'].nunique()} backbones: {len(configs)} analysed "
        f"(configuration x backbone), {int(configs['n_judgments'].sum()):,} judgments. Each configuration "
        "is kept separate (dataset config x judge family x prompt group x criterion; docs/study.md).",
        "",
        "## The paper's rows",
        "",
    ]
    if len(heads):
        rows = pd.DataFrame(
            {
                "finding": heads["finding"],
                "paper": heads["paper"],
                "ours": [
                    "n/a" if pd.isna(o) else f"{float(o):.3f} [{_fmt(lo)}, {_fmt(hi)}]"
                    for o, lo, hi in zip(heads["ours"], heads["ours_lo"], heads["ours_hi"])
                ],
                "n": heads["n"],
                "definition": heads["definition"],
            }
        )
        lines.append(_md(rows))
    else:
        lines.append("(no headlines table)")
    beside = paper_breakdown(tables)
    lines += ["", "## Beside the paper's §4.2: task type, judge family type, backbone", ""]
    lines += [
        _md(beside) if len(beside) else "(no agreement_by_task_type table)",
        "",
        "overlap and fleiss_kappa: across the paraphrases, mean over the group's configurations with its "
        "bootstrap interval; n: configurations where Fleiss' kappa is defined. **Missing:** the paper's "
        "Tables 2-3 cell by cell (../shared/papers holds its summary, which prints these claims only).",
    ]
    lines += ["", *not_analysed_lines(tables)]
    lines += ["", "## Per backbone", "", _md(by_backbone), "", "## Per judge family", "", _md(by_family)]
    lines += ["", "## Per configuration", ""]
    keep = [
        c
        for c in ("config_id", "n_items", "kappa", "kappa_lo", "kappa_hi", "band", "changed")
        if c in verdict
    ]
    lines.append(_md(verdict[keep]))
    lines += [
        "",
        "kappa: the verdict table's agreement across the wordings (mean pairwise Cohen's kappa, "
        "verdict.csv's sentence); changed: the share of items whose verdict at least one paraphrase "
        "changes. The full lottery report of the same study is report.md beside this page.",
    ]
    path = out / "study.md"
    path.write_text("\n".join(lines) + "\n")
    return path

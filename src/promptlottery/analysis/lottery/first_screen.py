"""What a written lottery analysis shows first, read back from its tables: the finding in plain words,
the paper's headline rows with a value, and where the report is.

    python -m promptlottery.analysis.lottery.verdict <lottery output dir>

:func:`show` is that screen (only for a finished analysis: its results.json vouches for the files);
:func:`finding` its plain-words lines per configuration; :func:`verdict_sentences` the verdict
sentences a sweep prints at its end. The numbers are :mod:`promptlottery.analysis.lottery.verdict`'s,
as written to ``tables/verdict.csv`` and ``tables/variant_human_correlation.csv``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from promptlottery.analysis.common import report as rp
from promptlottery.analysis.lottery import table_names as lt
from promptlottery.analysis.lottery.headlines import paper_keys
from promptlottery.tracking import tables


def verdict_sentences(lottery_dir: str | Path) -> list[str]:
    """The verdict sentences of a written analysis (``tables/verdict.csv``), one per configuration."""
    t = _read(Path(lottery_dir), lt.VERDICT)
    return t["sentence"].tolist() if "sentence" in t.columns else []


def _read(d: Path, name: str) -> pd.DataFrame:
    """A written table; only empty cells are missing (a written "n/a", e.g. the band, stays text)."""
    try:
        return pd.read_csv(d / "tables" / f"{name}.csv", keep_default_na=False, na_values=[""])
    except (OSError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def _tracking(corr: pd.DataFrame, cid: str, reference: str) -> str | None:
    """How well the judge's weighted score tracks the human labels (Pearson, P1 and the other wordings)."""
    if corr.empty or "cont_pearson" not in corr.columns:
        return None
    g = corr[corr["config_id"] == cid]
    ref = g[g["variant"] == reference]
    if ref.empty or not np.isfinite(float(ref["cont_pearson"].iloc[0])):
        return None
    r = ref.iloc[0]
    others = pd.to_numeric(g.loc[g["variant"] != reference, "cont_pearson"], errors="coerce").dropna()
    rest = f" ({others.min():.2f} to {others.max():.2f} with the other wordings)" if len(others) else ""
    lo = float(r["cont_pearson_lo"]) if np.isfinite(float(r["cont_pearson_lo"])) else float(r["cont_pearson"])
    how = (
        "the judge tracks the human labels"
        if lo >= 0.5
        else "the judge tracks the human labels weakly"
        if lo > 0
        else "the judge is not shown to track the human labels"
    )
    return (
        f"{how}: Pearson r = {tables.ci(r['cont_pearson'], r['cont_pearson_lo'], r['cont_pearson_hi'])} "
        f"between its logprob-weighted score and the labels with {reference}{rest}"
        + ("; its instability says little about a judge you would use" if lo <= 0 else "")
    )


def finding(lottery_dir: str | Path, *, reference: str = "P1") -> list[str]:
    """The finding in plain words (at most six lines per configuration): how well the judge tracks the
    humans, how stable it is across wordings, how many verdicts change, whether the ranking flips, how
    many wordings an item needs. Numbers from the written tables (verdict.csv, variant_human_correlation.csv)."""
    d = Path(lottery_dir)
    t, corr = _read(d, lt.VERDICT), _read(d, lt.VARIANT_HUMAN_CORRELATION)
    if t.empty:
        return ["n/a: no configuration with paraphrase verdicts"]
    lines = []
    for rec in t.to_dict("records"):
        if pd.isna(rec.get("n_variants")):  # a pairwise configuration: its sentence is the finding
            lines += [f"{rec['config_id']}:", f"  - {rec['sentence']}"]
            continue
        n_var = int(rec["n_variants"])
        band = {
            "robust": "stable across wordings",
            "usable": "usable, but the wording matters for some items",
            "inconclusive": "of uncertain stability across wordings",
            "below usable": "not stable across wordings",
            "n/a": "of unknown stability across wordings",
        }.get(str(rec["band"]), str(rec["band"]))
        lines.append(f"{rec['config_id']}:")
        if track := _tracking(corr, rec["config_id"], reference):
            lines.append(f"  - {track[0].upper()}{track[1:]}.")
        kappa = tables.ci(rec["kappa"], rec["kappa_lo"], rec["kappa_hi"])
        if np.isfinite(float(rec["kappa"])):
            lines.append(
                f"  - It is {band}: mean pairwise Cohen's kappa {kappa} across {n_var} wordings of one prompt."
            )
        else:
            why = str(rec.get("kappa_note") or "").split(";")[0]  # the kappa note says why it is undefined
            why = why.split("n/a: ", 1)[1] if "n/a: " in why else (why or "no note")
            lines.append(
                f"  - Its stability across wordings cannot be measured ({why}): mean pairwise Cohen's kappa "
                f"is undefined across {n_var} wordings of one prompt."
            )
        lines.append(
            f"  - {tables.pct_ci(rec['changed'], rec['changed_lo'], rec['changed_hi'])} of {int(rec['n_items'])} items get "
            "a different verdict from at least one wording; the wordings' majority overrides "
            f"{reference} on {tables.pct_ci(rec['majority_differs'], rec['majority_differs_lo'], rec['majority_differs_hi'])}."
        )
        if int(rec.get("n_systems", 0) or 0) >= 2 and np.isfinite(float(rec.get("flip_share", np.nan))):
            swaps = tables.pct_ci(rec["flip_share"], rec["flip_share_lo"], rec["flip_share_hi"])
            changes = f"{rec['rank_change_share']:.0%} of the systems change rank"
            if rec["flip_share"] > 0:
                state = f"flips: between two wordings {swaps} of system pairs swap order, {changes}."
            elif rec["rank_change_share"] > 0:
                # a rank moves without a strict swap: two systems tied under one wording, not under another
                state = f"moves only through ties: no system pair swaps order between two wordings ({swaps}), yet {changes} (tied under one wording, not under another)."
            else:
                state = f"holds: between two wordings {swaps} of system pairs swap order, {changes}."
            lines.append(f"  - The ranking of {int(rec['n_systems'])} systems {state}")
        km = float(rec["k_most"])
        lines.append(
            f"  - Most items need {int(km)} wording{'s' if km != 1 else ''} for a stable majority."
            if np.isfinite(km)
            else "  - Most items never reach a stable majority of the wordings."
        )
    return lines


def show(lottery_dir: str | Path) -> str:
    """The first screen of a written analysis: a fake judge's warning (if any), the finding in plain
    words, the paper's headline rows that have a value (at most :data:`FIRST_SCREEN_ROWS`, one interval
    each; the others folded into one line saying what would measure them; our variants and the notes
    stay in report.md), and the report's path.

    Only a finished analysis is shown: :class:`~promptlottery.tracking.staging.OutputsError` when
    its results.json is missing, not ``ok`` or does not vouch for the files (their sha256)."""
    from promptlottery.tracking.staging import check_outputs

    d = Path(lottery_dir)
    check_outputs(d, reader="verdict")
    hl = pd.read_csv(d / "tables" / f"{lt.HEADLINES}.csv")
    hl["note"] = hl["note"].fillna("")
    hl = hl[hl["key"].isin(paper_keys())]  # the paper's measures; our variants stay in report.md
    measured = hl[pd.to_numeric(hl["ours"], errors="coerce").notna()].copy()
    missing = hl[pd.to_numeric(hl["ours"], errors="coerce").isna()]
    measured["ours"] = [
        tables.pct_ci(e, lo, hi) if p else tables.ci(e, lo, hi)
        for e, lo, hi, p in zip(measured["ours"], measured["ours_lo"], measured["ours_hi"], measured["pct"])
    ]
    report = d / "report.md"
    head = report.read_text(encoding="utf-8").splitlines()[:4] if report.is_file() else []
    fake = [ln.replace("**", "") for ln in head if ln.startswith("**Fake judge**")]  # render.fake_judge_line
    lines = [*fake, "The finding:", *finding(d), ""]
    shown = measured.head(FIRST_SCREEN_ROWS)
    lines += ["The paper's measures vs ours", rp.markdown_table(shown, HEADLINE_COLUMNS)]
    if len(measured) > len(shown):
        lines.append(f"({len(measured) - len(shown)} more measured rows in report.md)")
    if len(missing):
        hints = list(dict.fromkeys(n.removeprefix("n/a: ") for n in missing["note"] if n))
        lines.append(
            f"Not measured on this run ({len(missing)} rows, see report.md): {'; '.join(hints) or 'no data'}."
        )
    lines += ["", f"Report: {d / 'report.md'}", f"Verdict map: {d / 'figures' / 'verdict_map.png'}"]
    lines.append(f"Items by instability: {d / 'unstable_items.csv'}")
    from promptlottery.analysis.card.build import headlines  # the judge cards beside the lottery, if written

    if cards := headlines(d.parent / "card"):
        lines += ["", "Judge cards:", *(f"  - {h}" for h in cards), f"Cards: {d.parent / 'card'}"]
    return "\n".join(lines)


#: the first screen's table: one interval per row (the notes, with our variants' intervals, are in report.md)
HEADLINE_COLUMNS = {"finding": "finding", "paper": "paper", "ours": "ours [95% CI]", "n": "n"}
FIRST_SCREEN_ROWS = 10


def main(argv: list[str]) -> None:
    """``python -m promptlottery.analysis.lottery.verdict DIR``: :func:`show`, or one line (exit 2)."""
    import sys

    from promptlottery.errors import UserError

    if len(argv) != 1:
        sys.exit("usage: python -m promptlottery.analysis.lottery.verdict <lottery output dir>")
    try:
        text = show(argv[0])
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(text)

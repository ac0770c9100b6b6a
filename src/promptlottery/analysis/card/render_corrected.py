"""The judge card's human-corrected section as Markdown (:func:`promptlottery.analysis.card.render.markdown`)."""

from __future__ import annotations

from promptlottery.analysis.card.render_common import ci_text, fmt_num, md_table, section_text

COVERAGE_HEADER = [
    "wording",
    "n labelled",
    "N",
    "PPI++ coverage",
    "PPI++ width",
    "human-only coverage",
    "human-only width",
    "judge-only covers",
    "judge-only mean",
]


def _coverage(cor: dict) -> str:
    rows = [
        [
            w,
            str(r["n"]),
            str(r["N"]),
            fmt_num(r["ppi_coverage"]),
            fmt_num(r["ppi_width"], 3),
            fmt_num(r["human_coverage"]),
            fmt_num(r["human_width"], 3),
            "yes" if r["judge_covers"] else "no",
            fmt_num(r["judge_mean"], 3),
        ]
        for w, rs in cor["per_wording"].items()
        for r in rs
    ]
    draws = next(iter(cor["per_wording"].values()))[0]["draws"]
    return (
        f"All-human mean {fmt_num(cor['all_human_mean'], 3)} over {cor['n_items']} items ({cor['unit']}); "
        f"{int(100 * cor['level'])}% intervals, coverage over {draws} random slices per size.\n\n"
        + md_table(COVERAGE_HEADER, rows)
    )


def _ranks(rk: dict) -> str:
    if "between_wordings_before" not in rk:
        return f"\n\nRank changes: missing ({rk.get('missing', '')})."
    return (
        f"\n\nRanking of {rk['n_systems']} systems: system pairs in opposite order between two wordings, before "
        f"correction {fmt_num(rk['between_wordings_before'], 3)}, after PPI++ with {int(100 * rk['share_labelled'])}% of "
        f"each system's {rk.get('unit', 'items')} labelled {fmt_num(rk['between_wordings_after'], 3)} (mean over "
        f"{rk['draws']} slices); against the human ranking {fmt_num(rk['vs_humans_before'], 3)} before, "
        f"{fmt_num(rk['vs_humans_after'], 3)} after."
    )


def _per_system(ps: dict, level: float) -> str:
    if "per_wording" not in ps:
        return ""
    rows = [
        [
            w,
            s,
            fmt_num(v["judge_only"], 3),
            fmt_num(v["ppi"], 3),
            ci_text(v["ci"], 3),
            f"{v['n_labelled']}/{v['n']}",
            fmt_num(v["human"], 3),
        ]
        for w, sys_rows in ps["per_wording"].items()
        for s, v in sys_rows.items()
    ]
    return (
        f"\n\nPer system ({ps.get('estimand', 'mean score')}; {int(100 * ps['share_labelled'])}% of each system's "
        f"{ps.get('unit', 'items')} human-labelled, one seeded slice, {int(100 * level)}% CLT intervals, which are "
        "not to be trusted below about 10 labels a system):\n\n"
        + md_table(["wording", "system", "judge-only", "PPI++", "CI", "labelled", "all-human"], rows)
    )


def _rogan_gladen(rg: dict) -> str:
    if "per_wording" not in rg:
        return ""
    rows = [
        [
            w,
            str(v["n"]),
            fmt_num(v["coverage"]),
            fmt_num(v["mean_estimate"], 3),
            fmt_num(v["judge_share"], 3),
            f"{v['defined_draws']}/{rg['draws']}",
        ]
        for w, v in rg["per_wording"].items()
    ]
    return (
        f"\n\nRogan-Gladen (binary verdicts; {rg['source']}): all-human share {fmt_num(rg['human_share'], 3)}.\n\n"
        + md_table(
            ["wording", "n labelled", "coverage", "mean estimate", "judge share", "defined draws"], rows
        )
    )


def _bradley_terry(bt: dict) -> str:
    if not bt:
        return ""
    if "per_wording" not in bt:
        return f"\n\nCorrected Bradley-Terry ranking: missing ({bt.get('missing', '')})."
    rows = [
        [w, s, fmt_num(v["judge_only"], 2), fmt_num(v["ppi"], 2), ci_text(v["ci"], 2), fmt_num(v["human"], 2)]
        for w, sys_rows in bt["per_wording"].items()
        for s, v in sys_rows.items()
    ]
    return (
        f"\n\nBradley-Terry strengths (log-odds against {bt['reference']}; {bt['n_labelled']} of {bt['n_pairs']} pairs "
        f"human-labelled, seeded slice {bt['shown_slice']} (the first with a finite fit); {int(100 * bt['level'])}% "
        f"intervals; {bt['estimator']}). System pairs in opposite order between two wordings: "
        f"{fmt_num(bt['between_wordings_before'], 3)} judge-only, {fmt_num(bt['between_wordings_after'], 3)} corrected (mean over "
        f"the {bt['defined_draws']} of {bt['draws']} slices with a finite fit); against the all-human fit "
        f"{fmt_num(bt['vs_humans_before'], 3)} and {fmt_num(bt['vs_humans_after'], 3)}.\n\n"
        + md_table(["wording", "system", "judge-only", "PPI++", "CI", "all-human"], rows)
    )


def corrected(card: dict) -> str:
    cor = card["corrected"]
    body = ""
    if "per_wording" in cor:
        body = (
            _coverage(cor)
            + _ranks(cor.get("ranks", {}))
            + _per_system(cor.get("per_system", {}), cor["level"])
            + _rogan_gladen(cor.get("rogan_gladen", {}))
            + _bradley_terry(cor.get("bradley_terry", {}))
        )
    return section_text("The human-corrected estimate", cor, body)

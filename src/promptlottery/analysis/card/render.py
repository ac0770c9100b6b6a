"""The judge card as a Markdown page and a figure (:mod:`promptlottery.analysis.card.build`)."""

from __future__ import annotations

from pathlib import Path

from promptlottery.analysis.card.kind import card_kind
from promptlottery.analysis.card.render_common import ci_text, fmt_num, md_table, section_text
from promptlottery.analysis.card.render_corrected import corrected


def _lottery(card: dict) -> str:
    lot = card["lottery"]
    if "per_wording" in lot:
        metric = "spearman" if "spearman" in next(iter(lot["per_wording"].values()), {}) else "agreement"
        rows = [[w, fmt_num(v[metric]), ci_text(v["ci"]), str(v["n"])] for w, v in lot["per_wording"].items()]
        body = (
            f"Items whose verdict changes between two paraphrases: **{fmt_num(100 * lot['changed'], 0)}%** "
            f"{ci_text([100 * c for c in lot['changed_ci']], 0)}, n={lot['n']}.\n\n"
            + md_table(["wording", metric, "95% CI", "n"], rows)
        )
    else:
        body = ""
    return section_text("The lottery", lot, body)


def _position(card: dict) -> str:
    pos = card["position"]
    body = md_table(
        ["wording", "inconsistent", "95% CI", "first-position rate", "95% CI", "n"],
        [
            [
                w,
                fmt_num(v["inconsistent"]),
                ci_text(v["inconsistent_ci"]),
                fmt_num(v["first_rate"]),
                ci_text(v["first_rate_ci"]),
                str(v["n"]),
            ]
            for w, v in pos.get("per_wording", {}).items()
        ],
    )
    return section_text("Position bias", pos, body)


def _length(card: dict) -> str:
    ln = card["length"]
    if "per_wording" in ln and "slope" in next(iter(ln["per_wording"].values())):
        body = f"Unit: {ln['unit']}.\n\n" + md_table(
            ["wording", "slope", "95% CI", "n", "sd of length (chars)"],
            [
                [
                    w,
                    fmt_num(v["slope"], 3),
                    ci_text(v["ci"], 3),
                    str(v["n"]),
                    fmt_num(v["sd_length_chars"], 0),
                ]
                for w, v in ln["per_wording"].items()
            ],
        )
    else:
        body = md_table(
            [
                "wording",
                "LC win rate (1)",
                "95% CI",
                "raw win rate (1)",
                "phi",
                "95% CI",
                "longer wins: judge",
                "humans",
                "n",
            ],
            [
                [
                    w,
                    fmt_num(v["lc_win_rate_1"]),
                    ci_text(v["ci"]),
                    fmt_num(v["win_rate_1"]),
                    fmt_num(v["phi"]),
                    ci_text(v["phi_ci"]),
                    fmt_num(v["longer_wins_judge"]),
                    fmt_num(v["longer_wins_humans"]),
                    str(v["n"]),
                ]
                for w, v in ln.get("per_wording", {}).items()
            ],
        )
    return section_text("Length bias", ln, body)


def _controls(card: dict) -> str:
    ctl = card["controls"]
    if "verdict" in ctl:
        body = (
            f"Verdict: **{ctl['verdict']}**. Signal {fmt_num(ctl['signal'])} {ci_text(ctl['signal_ci'])}, paraphrase noise "
            f"{fmt_num(ctl['noise'])} {ci_text(ctl['noise_ci'])}, margin {fmt_num(ctl['margin'])} {ci_text(ctl['margin_ci'])}, ratio "
            f"{fmt_num(ctl['ratio'])} {ci_text(ctl['ratio_ci'])}; n={ctl.get('n_text') or str(ctl['n']) + ' items'}, controls {', '.join(ctl['controls'])}.\n\n"
            + md_table(
                ["direction", "mean shift"], [[d, fmt_num(v)] for d, v in ctl["per_direction"].items()]
            )
        )
    else:
        body = ""
    return section_text("Control sensitivity (stable, or deaf?)", ctl, body)


def _alt_test(card: dict) -> str:
    alt = card["alt_test"]
    if "per_wording" in alt:
        body = (
            f"epsilon = {alt['epsilon']} ({alt['epsilon_reason']}); alignment: {alt['scoring']}."
            + (f" Note: {alt['note']}." if alt.get("note") else "")
            + " The rho interval resamples items (ours; the paper gives none).\n\n"
            + md_table(
                [
                    "wording",
                    "winning rate omega",
                    "advantage prob. rho",
                    "rho 95% CI",
                    "passed",
                    "items",
                    "annotators",
                ],
                [
                    [
                        w,
                        fmt_num(v["winning_rate"]),
                        fmt_num(v["advantage_probability"]),
                        ci_text(v.get("rho_ci", [float("nan")] * 2)),
                        "yes" if v["passed"] else "no",
                        str(v["n_items"]),
                        str(v["n_annotators"]),
                    ]
                    for w, v in alt["per_wording"].items()
                ],
            )
        )
    else:
        body = ""
    return section_text("Alt-test: can it replace the annotators?", alt, body)


def markdown(card: dict) -> str:
    """The card as one Markdown page: its headline, its verdict and a section per measure."""
    k = card["key"]
    fake = "FAKE judge (fake backend): " if card["fake"] else ""
    lines = [
        f"# Judge card: {fake}{k['backbone']} x {k['prompt_group']} on {k['dataset']} / {k['criterion']}",
        "",
        f"**{card['headline']}**",
        "",
        *(
            [f"Partial grid (analysed anyway): {'; '.join(card['partial'])}", ""]
            if card.get("partial")
            else []
        ),
        card["verdict_text"],
        "",
        f"Verdict kind: `{card['verdict']}` (argmax: the most probable label's score; weighted: the logprob-weighted "
        f"score rounded to a label); the length slope uses the unrounded logprob-weighted score"
        + card_kind(card["key"]["judge_mode"]).verdict_note
        + f". Scale `{card['scale']}`, "
        f"{card['n_items']} items, wordings {', '.join(card['wordings'])}; controls judged: "
        f"{', '.join(card['controls_judged']) or 'none'}. Intervals: 95% bootstrap unless said otherwise.",
        "",
    ]
    lines += [f(card) for f in (_lottery, _position, _length, _controls, _alt_test, corrected)]
    lines.append("Figure: card.png")
    return "\n".join(lines) + "\n"


def figure(card: dict, path: Path) -> None:
    """The card's figure (``card.png``): :func:`promptlottery.analysis.card.figure.figure`."""
    from promptlottery.analysis.card.figure import figure as draw

    draw(card, path)

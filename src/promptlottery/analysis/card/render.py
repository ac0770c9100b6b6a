"""The judge card as a Markdown page and a figure (:mod:`promptlottery.analysis.card.build`)."""

from __future__ import annotations

from pathlib import Path

from promptlottery.analysis.card.render_common import _ci, _f, _section, _table
from promptlottery.analysis.card.render_corrected import corrected


def _lottery(card: dict) -> str:
    lot = card["lottery"]
    if "per_wording" in lot:
        metric = "spearman" if "spearman" in next(iter(lot["per_wording"].values()), {}) else "agreement"
        rows = [[w, _f(v[metric]), _ci(v["ci"]), str(v["n"])] for w, v in lot["per_wording"].items()]
        body = (
            f"Items whose verdict changes between two paraphrases: **{_f(100 * lot['changed'], 0)}%** "
            f"{_ci([100 * c for c in lot['changed_ci']], 0)}, n={lot['n']}.\n\n"
            + _table(["wording", metric, "95% CI", "n"], rows)
        )
    else:
        body = ""
    return _section("The lottery", lot, body)


def _position(card: dict) -> str:
    pos = card["position"]
    body = _table(
        ["wording", "inconsistent", "95% CI", "first-position rate", "95% CI", "n"],
        [
            [
                w,
                _f(v["inconsistent"]),
                _ci(v["inconsistent_ci"]),
                _f(v["first_rate"]),
                _ci(v["first_rate_ci"]),
                str(v["n"]),
            ]
            for w, v in pos.get("per_wording", {}).items()
        ],
    )
    return _section("Position bias", pos, body)


def _length(card: dict) -> str:
    ln = card["length"]
    if "per_wording" in ln and "slope" in next(iter(ln["per_wording"].values())):
        body = f"Unit: {ln['unit']}.\n\n" + _table(
            ["wording", "slope", "95% CI", "n", "sd of length (chars)"],
            [
                [w, _f(v["slope"], 3), _ci(v["ci"], 3), str(v["n"]), _f(v["sd_length_chars"], 0)]
                for w, v in ln["per_wording"].items()
            ],
        )
    else:
        body = _table(
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
                    _f(v["lc_win_rate_1"]),
                    _ci(v["ci"]),
                    _f(v["win_rate_1"]),
                    _f(v["phi"]),
                    _ci(v["phi_ci"]),
                    _f(v["longer_wins_judge"]),
                    _f(v["longer_wins_humans"]),
                    str(v["n"]),
                ]
                for w, v in ln.get("per_wording", {}).items()
            ],
        )
    return _section("Length bias", ln, body)


def _controls(card: dict) -> str:
    ctl = card["controls"]
    if "verdict" in ctl:
        body = (
            f"Verdict: **{ctl['verdict']}**. Signal {_f(ctl['signal'])} {_ci(ctl['signal_ci'])}, paraphrase noise "
            f"{_f(ctl['noise'])} {_ci(ctl['noise_ci'])}, margin {_f(ctl['margin'])} {_ci(ctl['margin_ci'])}, ratio "
            f"{_f(ctl['ratio'])} {_ci(ctl['ratio_ci'])}; n={ctl.get('n_text') or str(ctl['n']) + ' items'}, controls {', '.join(ctl['controls'])}.\n\n"
            + _table(["direction", "mean shift"], [[d, _f(v)] for d, v in ctl["per_direction"].items()])
        )
    else:
        body = ""
    return _section("Control sensitivity (stable, or deaf?)", ctl, body)


def _alt_test(card: dict) -> str:
    alt = card["alt_test"]
    if "per_wording" in alt:
        body = (
            f"epsilon = {alt['epsilon']} ({alt['epsilon_reason']}); alignment: {alt['scoring']}."
            + (f" Note: {alt['note']}." if alt.get("note") else "")
            + " The rho interval resamples items (ours; the paper gives none).\n\n"
            + _table(
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
                        _f(v["winning_rate"]),
                        _f(v["advantage_probability"]),
                        _ci(v.get("rho_ci", [float("nan")] * 2)),
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
    return _section("Alt-test: can it replace the annotators?", alt, body)


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
        + (
            "; pairwise, every number uses the argmax preference"
            if card["key"]["judge_mode"] == "pairwise"
            else ""
        )
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

"""The judge card as a Markdown page and a figure (:mod:`promptlottery.analysis.card`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _f(x, d: int = 2) -> str:
    if x is None:
        return "n/a"
    x = float(x)
    if np.isnan(x):
        return "n/a"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{d}f}"


def _ci(c, d: int = 2) -> str:
    return f"[{_f(c[0], d)}, {_f(c[1], d)}]"


def _table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _section(title: str, sec: dict, body: str) -> str:
    if "missing" in sec:
        return f"## {title}\n\nMissing: {sec['missing']}\n"
    return f"## {title}\n\n{body}\n\nSource: {sec.get('source', '')}\n"


def markdown(card: dict) -> str:
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
        f"score rounded to a label); the length slope uses the unrounded logprob-weighted score. Scale `{card['scale']}`, "
        f"{card['n_items']} items, wordings {', '.join(card['wordings'])}; controls judged: "
        f"{', '.join(card['controls_judged']) or 'none'}. Intervals: 95% bootstrap unless said otherwise.",
        "",
    ]
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
    lines.append(_section("The lottery", lot, body))
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
    lines.append(_section("Position bias", pos, body))
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
    lines.append(_section("Length bias", ln, body))
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
    lines.append(_section("Control sensitivity (stable, or deaf?)", ctl, body))
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
    lines.append(_section("Alt-test: can it replace the annotators?", alt, body))
    cor = card["corrected"]
    if "per_wording" in cor:
        rows = []
        for w, rs in cor["per_wording"].items():
            for r in rs:
                rows.append(
                    [
                        w,
                        str(r["n"]),
                        str(r["N"]),
                        _f(r["ppi_coverage"]),
                        _f(r["ppi_width"], 3),
                        _f(r["human_coverage"]),
                        _f(r["human_width"], 3),
                        "yes" if r["judge_covers"] else "no",
                        _f(r["judge_mean"], 3),
                    ]
                )
        body = (
            f"All-human mean {_f(cor['all_human_mean'], 3)} over {cor['n_items']} items ({cor['unit']}); {int(100 * cor['level'])}% "
            f"intervals, coverage over {next(iter(cor['per_wording'].values()))[0]['draws']} random slices per size.\n\n"
            + _table(
                [
                    "wording",
                    "n labelled",
                    "N",
                    "PPI++ coverage",
                    "PPI++ width",
                    "human-only coverage",
                    "human-only width",
                    "judge-only covers",
                    "judge-only mean",
                ],
                rows,
            )
        )
        rk = cor.get("ranks", {})
        if "between_wordings_before" in rk:
            body += (
                f"\n\nRanking of {rk['n_systems']} systems: system pairs in opposite order between two wordings, before "
                f"correction {_f(rk['between_wordings_before'], 3)}, after PPI++ with {int(100 * rk['share_labelled'])}% of each "
                f"system's items labelled {_f(rk['between_wordings_after'], 3)} (mean over {rk['draws']} slices); against the "
                f"human ranking {_f(rk['vs_humans_before'], 3)} before, {_f(rk['vs_humans_after'], 3)} after."
            )
        else:
            body += f"\n\nRank changes: missing ({rk.get('missing', '')})."
        ps = cor.get("per_system", {})
        if "per_wording" in ps:
            rows = [
                [
                    w,
                    s,
                    _f(v["judge_only"], 3),
                    _f(v["ppi"], 3),
                    _ci(v["ci"], 3),
                    f"{v['n_labelled']}/{v['n']}",
                    _f(v["human"], 3),
                ]
                for w, sys_rows in ps["per_wording"].items()
                for s, v in sys_rows.items()
            ]
            body += (
                f"\n\nPer system ({int(100 * ps['share_labelled'])}% of each system's items human-labelled, one seeded slice, "
                f"{int(100 * cor['level'])}% CLT intervals, which are not to be trusted below about 10 labels a system):\n\n"
                + _table(
                    ["wording", "system", "judge-only mean", "PPI++", "CI", "labelled", "all-human mean"],
                    rows,
                )
            )
        rg = cor.get("rogan_gladen", {})
        if "per_wording" in rg:
            body += (
                f"\n\nRogan-Gladen (binary verdicts; {rg['source']}): all-human share {_f(rg['human_share'], 3)}.\n\n"
                + _table(
                    ["wording", "n labelled", "coverage", "mean estimate", "judge share", "defined draws"],
                    [
                        [
                            w,
                            str(v["n"]),
                            _f(v["coverage"]),
                            _f(v["mean_estimate"], 3),
                            _f(v["judge_share"], 3),
                            f"{v['defined_draws']}/{rg['draws']}",
                        ]
                        for w, v in rg["per_wording"].items()
                    ],
                )
            )
    else:
        body = ""
    lines.append(_section("The human-corrected estimate", cor, body))
    lines.append("Figure: card.png")
    return "\n".join(lines) + "\n"


def figure(card: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    k = card["key"]
    fig.suptitle(
        ("FAKE judge: " if card["fake"] else "")
        + f"{k['backbone']} x {k['prompt_group']} on {k['dataset']}/{k['criterion']} ({card['verdict']})"
    )

    def bars(ax, names, est, ci, title, ylabel, ref=None):
        est = np.asarray(est, float)
        lo = np.asarray([c[0] for c in ci], float)
        hi = np.asarray([c[1] for c in ci], float)
        x = np.arange(len(names))
        ax.bar(x, np.nan_to_num(est), color="#4c72b0")
        ax.errorbar(
            x,
            np.nan_to_num(est),
            yerr=[np.nan_to_num(est - lo), np.nan_to_num(hi - est)],
            fmt="none",
            ecolor="k",
            capsize=3,
        )
        ax.set_xticks(x, names, rotation=30, fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel, fontsize=8)
        if ref is not None:
            ax.axhline(ref, color="grey", lw=0.8, ls="--")

    def missing(ax, title, sec):
        ax.set_title(title, fontsize=10)
        ax.text(
            0.5,
            0.5,
            "missing:\n"
            + "\n".join(
                sec.get("missing", "")[i : i + 40] for i in range(0, len(sec.get("missing", "")), 40)
            ),
            ha="center",
            va="center",
            fontsize=8,
            transform=ax.transAxes,
        )
        ax.set_axis_off()

    lot = card["lottery"]
    if "per_wording" in lot:
        m = "spearman" if "spearman" in next(iter(lot["per_wording"].values()), {}) else "agreement"
        bars(
            axes[0, 0],
            list(lot["per_wording"]),
            [v[m] for v in lot["per_wording"].values()],
            [v["ci"] for v in lot["per_wording"].values()],
            f"lottery: {m} with humans per wording\n(changed {100 * lot['changed']:.0f}% of items)",
            m,
        )
    else:
        missing(axes[0, 0], "lottery", lot)
    pos, ln = card["position"], card["length"]
    if "per_wording" in pos:
        bars(
            axes[0, 1],
            list(pos["per_wording"]),
            [v["first_rate"] for v in pos["per_wording"].values()],
            [v["first_rate_ci"] for v in pos["per_wording"].values()],
            "position: first-shown answer wins",
            "rate",
            ref=0.5,
        )
    elif "per_wording" in ln and "slope" in next(iter(ln["per_wording"].values())):
        bars(
            axes[0, 1],
            list(ln["per_wording"]),
            [v["slope"] for v in ln["per_wording"].values()],
            [v["ci"] for v in ln["per_wording"].values()],
            "length: score per sd of length\n(human label fixed)",
            "slope",
            ref=0,
        )
    else:
        missing(axes[0, 1], "position / length", pos)
    if "per_wording" in ln and "phi" in next(iter(ln["per_wording"].values())):
        bars(
            axes[0, 2],
            list(ln["per_wording"]),
            [v["phi"] for v in ln["per_wording"].values()],
            [v["phi_ci"] for v in ln["per_wording"].values()],
            "length: AlpacaEval phi (<0: longer favoured)",
            "phi",
            ref=0,
        )
    else:
        ctl = card["controls"]
        if "signal" in ctl:
            bars(
                axes[0, 2],
                ["signal", "noise", "margin"],
                [ctl["signal"], ctl["noise"], ctl["margin"]],
                [ctl["signal_ci"], ctl["noise_ci"], ctl["margin_ci"]],
                f"controls: {ctl['verdict']}",
                "shift on [0, 1]",
                ref=0,
            )
        else:
            missing(axes[0, 2], "controls", ctl)
    alt = card["alt_test"]
    if "per_wording" in alt:
        names = list(alt["per_wording"])
        bars(
            axes[1, 0],
            names,
            [v["advantage_probability"] for v in alt["per_wording"].values()],
            [v.get("rho_ci", [np.nan, np.nan]) for v in alt["per_wording"].values()],
            f"alt-test: rho (omega: {', '.join(_f(v['winning_rate']) for v in alt['per_wording'].values())})",
            "advantage probability",
            ref=0.5,
        )
    else:
        missing(axes[1, 0], "alt-test", alt)
    cor = card["corrected"]
    if "per_wording" in cor:
        ax = axes[1, 1]
        for w, rs in cor["per_wording"].items():
            ax.plot([r["n"] for r in rs], [r["ppi_coverage"] for r in rs], marker="o", label=f"PPI++ {w}")
        rs0 = next(iter(cor["per_wording"].values()))
        ax.plot(
            [r["n"] for r in rs0],
            [r["human_coverage"] for r in rs0],
            marker="s",
            ls="--",
            color="k",
            label="human-only",
        )
        ax.axhline(cor["level"], color="grey", lw=0.8, ls=":")
        ax.set_ylim(0, 1.02)
        ax.set_title("coverage of the all-human mean", fontsize=10)
        ax.set_xlabel("human labels n", fontsize=8)
        ax.legend(fontsize=6)
        ax = axes[1, 2]
        for w, rs in cor["per_wording"].items():
            ax.plot([r["n"] for r in rs], [r["ppi_width"] for r in rs], marker="o", label=f"PPI++ {w}")
        ax.plot(
            [r["n"] for r in rs0],
            [r["human_width"] for r in rs0],
            marker="s",
            ls="--",
            color="k",
            label="human-only",
        )
        ax.set_title("interval width", fontsize=10)
        ax.set_xlabel("human labels n", fontsize=8)
        ax.legend(fontsize=6)
    else:
        missing(axes[1, 1], "corrected estimate", cor)
        axes[1, 2].set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)

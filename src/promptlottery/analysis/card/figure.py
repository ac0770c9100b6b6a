"""The judge card's figure (``card.png``): the lottery, position or length, length or controls, the
alt-test and the corrected estimate's coverage and width, one panel each."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from promptlottery.analysis.card.render_common import fmt_num


def bars(ax, names, est, ci, title, ylabel, ref=None) -> None:
    """Bars with their intervals; ``ref`` a dashed reference line."""
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


def missing(ax, title: str, sec: dict) -> None:
    """A panel that says what is missing and why."""
    why = sec.get("missing", "")
    ax.set_title(title, fontsize=10)
    ax.text(
        0.5,
        0.5,
        "missing:\n" + "\n".join(why[i : i + 40] for i in range(0, len(why), 40)),
        ha="center",
        va="center",
        fontsize=8,
        transform=ax.transAxes,
    )
    ax.set_axis_off()


def _per_wording_bars(ax, sec: dict, key: str, ci_key: str, title: str, ylabel: str, ref=None) -> None:
    per = sec["per_wording"]
    bars(ax, list(per), [v[key] for v in per.values()], [v[ci_key] for v in per.values()], title, ylabel, ref)


def _first(sec: dict) -> dict:
    return next(iter(sec.get("per_wording", {}).values()), {})


def _lottery(ax, lot: dict) -> None:
    if "per_wording" not in lot:
        return missing(ax, "lottery", lot)
    m = "spearman" if "spearman" in _first(lot) else "agreement"
    title = f"lottery: {m} with humans per wording\n(changed {100 * lot['changed']:.0f}% of items)"
    _per_wording_bars(ax, lot, m, "ci", title, m)


def _position_or_length(ax, pos: dict, ln: dict) -> None:
    if "per_wording" in pos:
        _per_wording_bars(
            ax, pos, "first_rate", "first_rate_ci", "position: first-shown answer wins", "rate", ref=0.5
        )
    elif "slope" in _first(ln):
        title = "length: score per sd of length\n(human label fixed)"
        _per_wording_bars(ax, ln, "slope", "ci", title, "slope", ref=0)
    else:
        missing(ax, "position / length", pos)


def _controls(ax, ctl: dict) -> None:
    if "signal" not in ctl:
        return missing(ax, "controls", ctl)
    bars(
        ax,
        ["signal", "noise", "margin"],
        [ctl["signal"], ctl["noise"], ctl["margin"]],
        [ctl["signal_ci"], ctl["noise_ci"], ctl["margin_ci"]],
        f"controls: {ctl['verdict']}",
        "shift on [0, 1]",
        ref=0,
    )


def _length_phi_or_controls(ax, ln: dict, ctl: dict) -> None:
    if "phi" in _first(ln) and "signal" not in ctl:
        _per_wording_bars(
            ax, ln, "phi", "phi_ci", "length: AlpacaEval phi (<0: longer favoured)", "phi", ref=0
        )
    else:
        _controls(ax, ctl)


def _alt_test(ax, alt: dict) -> None:
    if "per_wording" not in alt:
        return missing(ax, "alt-test", alt)
    per = alt["per_wording"]
    bars(
        ax,
        list(per),
        [v["advantage_probability"] for v in per.values()],
        [v.get("rho_ci", [np.nan, np.nan]) for v in per.values()],
        f"alt-test: rho (omega: {', '.join(fmt_num(v['winning_rate']) for v in per.values())})",
        "advantage probability",
        ref=0.5,
    )


def _coverage_and_width(ax_cov, ax_width, cor: dict) -> None:
    if "per_wording" not in cor:
        missing(ax_cov, "corrected estimate", cor)
        ax_width.set_axis_off()
        return
    rs0 = next(iter(cor["per_wording"].values()))
    for ax, key, title in (
        (ax_cov, "coverage", "coverage of the all-human mean"),
        (ax_width, "width", "interval width"),
    ):
        for w, rs in cor["per_wording"].items():
            ax.plot([r["n"] for r in rs], [r[f"ppi_{key}"] for r in rs], marker="o", label=f"PPI++ {w}")
        ax.plot(
            [r["n"] for r in rs0],
            [r[f"human_{key}"] for r in rs0],
            marker="s",
            ls="--",
            color="k",
            label="human-only",
        )
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("human labels n", fontsize=8)
        ax.legend(fontsize=6)
    ax_cov.axhline(cor["level"], color="grey", lw=0.8, ls=":")
    ax_cov.set_ylim(0, 1.02)


def figure(card: dict, path: Path) -> None:
    """Six panels: lottery, position (pairwise) or length slope, length phi (pairwise without controls)
    or controls, alt-test, PPI++ coverage, interval width."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    k = card["key"]
    fig.suptitle(
        ("FAKE judge: " if card["fake"] else "")
        + f"{k['backbone']} x {k['prompt_group']} on {k['dataset']}/{k['criterion']} ({card['verdict']})"
    )
    _lottery(axes[0, 0], card["lottery"])
    _position_or_length(axes[0, 1], card["position"], card["length"])
    _length_phi_or_controls(axes[0, 2], card["length"], card["controls"])
    _alt_test(axes[1, 0], card["alt_test"])
    _coverage_and_width(axes[1, 1], axes[1, 2], card["corrected"])
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)

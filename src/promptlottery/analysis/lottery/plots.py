"""Figures of the prompt-lottery analysis, drawn from its tables (in memory or read back from CSV).

Every ``plot_*`` function takes the table(s) it needs and a PNG path, and returns the path, or
``None`` when the table has nothing to draw. :func:`draw_all` draws every figure from the dict of
tables written by the analysis stage (the notebook calls it on the CSVs). The verdict map is drawn
in :mod:`promptlottery.analysis.lottery.plots_verdict`, the shared style in :mod:`promptlottery.analysis.common.plots`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from promptlottery.analysis.common.plots import as_numbers, error_bars, plt, save_figure, short_config
from promptlottery.analysis.lottery import table_names as lt
from promptlottery.analysis.lottery.plots_verdict import plot_verdict_map
from promptlottery.registry import Registry


def _slots(n_slots: int, n_series: int) -> tuple[float, list[np.ndarray]]:
    """Width and x positions of ``n_series`` series drawn side by side in each of ``n_slots`` slots."""
    width = 0.8 / max(1, n_series)
    return width, [np.arange(n_slots) + (i - (n_series - 1) / 2) * width for i in range(n_series)]


def _grouped_bars(ax, series, n_slots: int, *, capsize: float = 2) -> list[tuple[np.ndarray, np.ndarray]]:
    """One bar with its CI per slot for every ``(label, est, lo, hi)`` of ``series``; returns ``(x, est)``s."""
    width, xs = _slots(n_slots, len(series))
    for x, (label, est, lo, hi) in zip(xs, series):
        ax.bar(x, np.nan_to_num(est), width, label=label, yerr=error_bars(est, lo, hi), capsize=capsize)
    return [(x, est) for x, (_, est, _, _) in zip(xs, series)]


def _ci(table: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The estimate of ``column`` and its ``_lo`` / ``_hi`` bounds."""
    return as_numbers(table[column]), as_numbers(table[f"{column}_lo"]), as_numbers(table[f"{column}_hi"])


def _config_series(table: pd.DataFrame, by: str, measure: str) -> tuple[list, list[tuple]]:
    """The configurations (in table order) and, per value of ``by``, ``(value, est, lo, hi)`` over them."""
    configs = list(dict.fromkeys(table["config_id"]))
    series = [
        (v, *_ci(table[table[by] == v].set_index("config_id").reindex(configs), measure))
        for v in dict.fromkeys(table[by])
    ]
    return configs, series


def _category_axis(ax, labels, *, ylabel: str, title: str) -> None:
    """One slanted tick label per slot, the y label and the title."""
    ax.set_xticks(np.arange(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)


def plot_agreement_collapse(
    collapse: pd.DataFrame, path, *, thresholds: dict | None = None, measure: str = "mean_kappa"
) -> Path | None:
    """Kappa among the paraphrases vs the fixed-prompt baselines per configuration, with CIs."""
    if collapse is None or collapse.empty:
        return None
    th = thresholds or {"robust": 0.80, "usable": 0.61}
    configs, series = _config_series(collapse, "setting", measure)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(configs) + 2), 4.2))
    for x, est in _grouped_bars(ax, series, len(configs), capsize=3):
        for xi, e in zip(x, est):
            if not np.isfinite(e):
                ax.text(xi, 0.02, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
    ax.axhline(th["robust"], color="green", ls="--", lw=1, label=f"robust ({th['robust']:.2f})")
    ax.axhline(th["usable"], color="orange", ls="--", lw=1, label=f"usable ({th['usable']:.2f})")
    ax.axhline(0, color="black", lw=0.5)
    _category_axis(
        ax,
        [short_config(c) for c in configs],
        ylabel="mean pairwise Cohen's kappa",
        title="Agreement: five paraphrases vs a fixed prompt",
    )
    ax.set_ylim(min(-0.2, np.nanmin(np.r_[as_numbers(collapse[f"{measure}_lo"]), 0]) - 0.05), 1.05)
    ax.legend(fontsize=7, loc="upper right")
    return save_figure(fig, path)


def plot_task_types(by_task: pd.DataFrame, path) -> Path | None:
    """Raw overlap vs chance-corrected agreement by task type, family type and backbone."""
    if by_task is None or by_task.empty:
        return None
    sub = by_task[by_task["grouping"] != "task type x family type x backbone"]
    labels = [f"{g}: {v}" for g, v in zip(sub["grouping"], sub["group"])]
    measures = [
        ("overlap", "overlap"),
        ("mean_kappa", "mean kappa"),
        ("fleiss_kappa", "Fleiss"),
        ("alpha_nominal", "alpha (nominal)"),
    ]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(labels) + 2), 4.2))
    _grouped_bars(ax, [(name, *_ci(sub, m)) for m, name in measures], len(labels))
    ax.axhline(0, color="black", lw=0.5)
    _category_axis(
        ax,
        labels,
        ylabel="agreement among the paraphrases",
        title="Raw overlap vs chance-corrected agreement",
    )
    ax.legend(fontsize=7)
    return save_figure(fig, path)


def plot_variant_correlations(corr: pd.DataFrame, path, *, measure: str = "kendall") -> Path | None:
    """Each variant's correlation with the human labels, per configuration, with CIs."""
    if corr is None or corr.empty or not np.isfinite(as_numbers(corr[measure])).any():
        return None
    configs, series = _config_series(corr, "variant", measure)
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(configs) + 2), 4.2))
    for (v, est, lo, hi), x in zip(series, _slots(len(configs), len(series))[1]):
        ax.errorbar(x, est, yerr=error_bars(est, lo, hi), fmt="o", capsize=2, label=v, ms=4)
    ax.axhline(0, color="black", lw=0.5)
    _category_axis(
        ax,
        [short_config(c) for c in configs],
        ylabel=f"{measure} with human labels",
        title="No prompt wins: correlation with humans per variant",
    )
    ax.legend(fontsize=7, ncol=min(5, len(series)))
    return save_figure(fig, path)


def plot_similarity_stability(
    points: pd.DataFrame, path, *, column: str = "kappa_with_others"
) -> Path | None:
    """Similarity to P1 vs agreement with the other variants, one point per configuration x variant."""
    if points is None or points.empty:
        return None
    x, y = as_numbers(points["similarity_to_ref"]), as_numbers(points[column])
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        return None
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    for cid in dict.fromkeys(points["config_id"]):
        m = (points["config_id"] == cid).to_numpy() & ok
        ax.scatter(x[m], y[m], s=25, label=short_config(cid))
        for xi, yi, v in zip(x[m], y[m], points.loc[m, "variant"]):
            ax.annotate(str(v), (xi, yi), fontsize=6, xytext=(2, 2), textcoords="offset points")
    if ok.sum() >= 2 and np.ptp(x[ok]) > 0:
        b, a = np.polyfit(x[ok], y[ok], 1)
        xs = np.linspace(x[ok].min(), x[ok].max(), 10)
        ax.plot(xs, a + b * xs, color="gray", lw=1, ls="--")
    ax.set_xlabel("embedding similarity to P1 (all-MiniLM-L6-v2 cosine)")
    ax.set_ylabel(column.replace("_", " "))
    ax.set_title("Similarity vs stability")
    ax.legend(fontsize=6)
    return save_figure(fig, path)


def plot_wording_dimensions(dims: pd.DataFrame, path) -> Path | None:
    """Eta-squared of agreement by wording dimension next to the permutation null's upper quantile."""
    if dims is None or dims.empty or not np.isfinite(as_numbers(dims["eta_squared"])).any():
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(dims))
    ax.bar(x - 0.2, np.nan_to_num(as_numbers(dims["eta_squared"])), 0.4, label="observed eta^2")
    ax.bar(
        x + 0.2,
        np.nan_to_num(as_numbers(dims["null_hi"])),
        0.4,
        label="null (upper quantile)",
        color="lightgray",
    )
    for xi, p in zip(x, as_numbers(dims["p"])):
        if np.isfinite(p):
            ax.text(xi - 0.2, 0.005, f"p={p:.2f}", rotation=90, fontsize=7, va="bottom", ha="center")
    ax.set_xticks(x)
    ax.set_xticklabels(dims["dimension"], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("eta^2 of agreement")
    ax.set_title("Wording dimensions vs a permutation null")
    ax.legend(fontsize=7)
    return save_figure(fig, path)


def plot_rank_trajectories(traj: pd.DataFrame, path, *, max_configs: int = 6) -> Path | None:
    """Rank of every system under every variant (systems x variants), one panel per configuration."""
    if traj is None or traj.empty:
        return None
    configs = list(dict.fromkeys(traj["config_id"]))[:max_configs]
    ncol = min(3, len(configs))
    nrow = int(np.ceil(len(configs) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.4 * nrow), squeeze=False)
    for ax, cid in zip(axes.ravel(), configs):
        sub = traj[traj["config_id"] == cid]
        variants = list(dict.fromkeys(sub["variant"]))
        n_sys = sub["system"].nunique()
        for system, g in sub.groupby("system", sort=True):
            g = g.set_index("variant").reindex(variants)
            ax.plot(range(len(variants)), as_numbers(g["rank"]), marker="o", ms=3, lw=1, label=str(system))
        ax.set_xticks(range(len(variants)))
        ax.set_xticklabels(variants, fontsize=8)
        ax.set_ylim(n_sys + 0.5, 0.5)
        ax.set_ylabel("rank (1 = best)")
        ax.set_title(short_config(cid), fontsize=8)
        if n_sys <= 8:
            ax.legend(fontsize=6)
    for ax in axes.ravel()[len(configs) :]:
        ax.axis("off")
    fig.suptitle("Rank trajectories of the evaluated systems across variants", fontsize=10)
    return save_figure(fig, path)


def plot_aggregation(agg: pd.DataFrame, path, *, measure: str = "kendall") -> Path | None:
    """Correlation with humans of P1 alone and of each aggregate of the variants."""
    if agg is None or agg.empty or not np.isfinite(as_numbers(agg[measure])).any():
        return None
    configs, series = _config_series(agg, "method", measure)
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(configs) + 2), 4.2))
    _grouped_bars(ax, series, len(configs))
    ax.axhline(0, color="black", lw=0.5)
    _category_axis(
        ax,
        [short_config(c) for c in configs],
        ylabel=f"{measure} with human labels",
        title="Aggregating the variants vs the single prompt P1",
    )
    ax.legend(fontsize=7)
    return save_figure(fig, path)


def plot_convergence(conv: pd.DataFrame, path) -> Path | None:
    """Incremental shares of items whose cluster is reached by the 3rd / 5th call or never; P1 = cluster."""
    if conv is None or conv.empty:
        return None
    sub = conv[conv["n_items"].astype(float) > 0]
    if sub.empty:
        return None
    cols = [
        ("converged_by_3", "by 3rd call"),
        ("converged_by_5", "4th-5th call"),
        ("never_converged", "never"),
        ("p1_match", "P1 = cluster"),
    ]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(sub) + 2), 4.2))
    _grouped_bars(ax, [(name, *_ci(sub, c)) for c, name in cols], len(sub))
    _category_axis(
        ax,
        [short_config(g) for g in sub["group"]],
        ylabel="share of items",
        title="Convergence of the plurality (judges in the recorded order)",
    )
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7)
    return save_figure(fig, path)


def plot_label_distributions(labels: pd.DataFrame, path) -> Path | None:
    """Stacked label shares per configuration and setting (shows where the verdicts collapse)."""
    if labels is None or labels.empty:
        return None
    rows = []
    for _, r in labels.iterrows():
        dist = {}
        for tok in str(r["distribution"]).split():
            if ":" in tok:
                k, _, v = tok.rpartition(":")
                dist[k] = float(v)
        rows.append((f"{short_config(r['config_id'])} | {r['setting']}", dist))
    all_labels = sorted({k for _, d in rows for k in d}, key=lambda s: (len(s), s))
    if not all_labels:
        return None
    fig, ax = plt.subplots(figsize=(7, max(3, 0.35 * len(rows) + 1)))
    left = np.zeros(len(rows))
    for lab in all_labels:
        w = np.array([d.get(lab, 0.0) for _, d in rows])
        ax.barh(range(len(rows)), w, left=left, label=lab)
        left += w
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([n for n, _ in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of verdicts")
    ax.set_title("Verdict label distributions")
    ax.legend(fontsize=7, ncol=min(5, len(all_labels)), loc="lower right")
    return save_figure(fig, path)


#: the figures :func:`draw_all` draws, in order: name -> (function, the tables it reads)
FIGURES: Registry[tuple[Callable[..., Path | None], tuple[str, ...]]] = Registry("figure")
FIGURES.register("verdict_map", (plot_verdict_map, (lt.UNSTABLE_ITEMS,)))
FIGURES.register("label_distributions", (plot_label_distributions, (lt.LABEL_DISTRIBUTIONS,)))
FIGURES.register("agreement_collapse", (plot_agreement_collapse, (lt.AGREEMENT_COLLAPSE,)))
FIGURES.register("agreement_by_task_type", (plot_task_types, (lt.AGREEMENT_BY_TASK_TYPE,)))
FIGURES.register("variant_human_correlation", (plot_variant_correlations, (lt.VARIANT_HUMAN_CORRELATION,)))
FIGURES.register("similarity_stability", (plot_similarity_stability, (lt.SIMILARITY_POINTS,)))
FIGURES.register("wording_dimensions", (plot_wording_dimensions, (lt.WORDING_DIMENSIONS,)))
FIGURES.register("rank_trajectories", (plot_rank_trajectories, (lt.RANK_TRAJECTORIES,)))
FIGURES.register("aggregation", (plot_aggregation, (lt.AGGREGATION_VS_HUMANS,)))
FIGURES.register("convergence", (plot_convergence, (lt.CONVERGENCE_SUMMARY,)))


def draw_all(
    tables: dict[str, pd.DataFrame], figures_dir, *, thresholds: dict | None = None
) -> dict[str, Path]:
    """Every figure that has data, as ``{name: png path}``."""
    out = {}
    for name, (fn, needs) in FIGURES.items():
        data = [tables.get(k) for k in needs]
        if any(d is None for d in data):
            continue
        kwargs = {"thresholds": thresholds} if name == "agreement_collapse" and thresholds else {}
        path = fn(*data, Path(figures_dir) / f"{name}.png", **kwargs)
        if path is not None:
            out[name] = path
    return out

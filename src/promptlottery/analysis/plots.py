"""Figures of the prompt-lottery analysis, drawn from its tables (in memory or read back from CSV).

Every ``plot_*`` function takes the table(s) it needs and a PNG path, and returns the path, or
``None`` when the table has nothing to draw. :func:`draw_all` draws every figure from the dict of
tables written by the analysis stage (the notebook calls it on the CSVs).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from promptlottery.analysis import lottery_tables as lt  # noqa: E402

DPI = 110
_META = {"Software": None}  # no version string in the PNG: byte-stable across matplotlib patch releases


def _num(s: pd.Series) -> np.ndarray:
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)


def _err(est: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    lo = np.where(np.isfinite(lo), lo, est)
    hi = np.where(np.isfinite(hi), hi, est)
    return np.vstack([np.clip(est - lo, 0, None), np.clip(hi - est, 0, None)])


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, metadata=_META)
    plt.close(fig)
    return path


def _short(cid: str) -> str:
    parts = str(cid).split("/")
    return f"{parts[0]}/{parts[2]}/{parts[-1]}" if len(parts) >= 4 else str(cid)


def _slots(n_slots: int, n_series: int) -> tuple[float, list[np.ndarray]]:
    """Width and x positions of ``n_series`` series drawn side by side in each of ``n_slots`` slots."""
    width = 0.8 / max(1, n_series)
    return width, [np.arange(n_slots) + (i - (n_series - 1) / 2) * width for i in range(n_series)]


def _grouped_bars(ax, series, n_slots: int, *, capsize: float = 2) -> list[tuple[np.ndarray, np.ndarray]]:
    """One bar with its CI per slot for every ``(label, est, lo, hi)`` of ``series``; returns ``(x, est)``s."""
    width, xs = _slots(n_slots, len(series))
    for x, (label, est, lo, hi) in zip(xs, series):
        ax.bar(x, np.nan_to_num(est), width, label=label, yerr=_err(est, lo, hi), capsize=capsize)
    return [(x, est) for x, (_, est, _, _) in zip(xs, series)]


def _ci(table: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The estimate of ``column`` and its ``_lo`` / ``_hi`` bounds."""
    return _num(table[column]), _num(table[f"{column}_lo"]), _num(table[f"{column}_hi"])


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
        [_short(c) for c in configs],
        ylabel="mean pairwise Cohen's kappa",
        title="Agreement: five paraphrases vs a fixed prompt",
    )
    ax.set_ylim(min(-0.2, np.nanmin(np.r_[_num(collapse[f"{measure}_lo"]), 0]) - 0.05), 1.05)
    ax.legend(fontsize=7, loc="upper right")
    return _save(fig, path)


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
    return _save(fig, path)


def plot_variant_correlations(corr: pd.DataFrame, path, *, measure: str = "kendall") -> Path | None:
    """Each variant's correlation with the human labels, per configuration, with CIs."""
    if corr is None or corr.empty or not np.isfinite(_num(corr[measure])).any():
        return None
    configs, series = _config_series(corr, "variant", measure)
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(configs) + 2), 4.2))
    for (v, est, lo, hi), x in zip(series, _slots(len(configs), len(series))[1]):
        ax.errorbar(x, est, yerr=_err(est, lo, hi), fmt="o", capsize=2, label=v, ms=4)
    ax.axhline(0, color="black", lw=0.5)
    _category_axis(
        ax,
        [_short(c) for c in configs],
        ylabel=f"{measure} with human labels",
        title="No prompt wins: correlation with humans per variant",
    )
    ax.legend(fontsize=7, ncol=min(5, len(series)))
    return _save(fig, path)


def plot_similarity_stability(
    points: pd.DataFrame, path, *, column: str = "kappa_with_others"
) -> Path | None:
    """Similarity to P1 vs agreement with the other variants, one point per configuration x variant."""
    if points is None or points.empty:
        return None
    x, y = _num(points["similarity_to_ref"]), _num(points[column])
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        return None
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    for cid in dict.fromkeys(points["config_id"]):
        m = (points["config_id"] == cid).to_numpy() & ok
        ax.scatter(x[m], y[m], s=25, label=_short(cid))
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
    return _save(fig, path)


def plot_wording_dimensions(dims: pd.DataFrame, path) -> Path | None:
    """Eta-squared of agreement by wording dimension next to the permutation null's upper quantile."""
    if dims is None or dims.empty or not np.isfinite(_num(dims["eta_squared"])).any():
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(dims))
    ax.bar(x - 0.2, np.nan_to_num(_num(dims["eta_squared"])), 0.4, label="observed eta^2")
    ax.bar(
        x + 0.2, np.nan_to_num(_num(dims["null_hi"])), 0.4, label="null (upper quantile)", color="lightgray"
    )
    for xi, p in zip(x, _num(dims["p"])):
        if np.isfinite(p):
            ax.text(xi - 0.2, 0.005, f"p={p:.2f}", rotation=90, fontsize=7, va="bottom", ha="center")
    ax.set_xticks(x)
    ax.set_xticklabels(dims["dimension"], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("eta^2 of agreement")
    ax.set_title("Wording dimensions vs a permutation null")
    ax.legend(fontsize=7)
    return _save(fig, path)


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
            ax.plot(range(len(variants)), _num(g["rank"]), marker="o", ms=3, lw=1, label=str(system))
        ax.set_xticks(range(len(variants)))
        ax.set_xticklabels(variants, fontsize=8)
        ax.set_ylim(n_sys + 0.5, 0.5)
        ax.set_ylabel("rank (1 = best)")
        ax.set_title(_short(cid), fontsize=8)
        if n_sys <= 8:
            ax.legend(fontsize=6)
    for ax in axes.ravel()[len(configs) :]:
        ax.axis("off")
    fig.suptitle("Rank trajectories of the evaluated systems across variants", fontsize=10)
    return _save(fig, path)


def plot_aggregation(agg: pd.DataFrame, path, *, measure: str = "kendall") -> Path | None:
    """Correlation with humans of P1 alone and of each aggregate of the variants."""
    if agg is None or agg.empty or not np.isfinite(_num(agg[measure])).any():
        return None
    configs, series = _config_series(agg, "method", measure)
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(configs) + 2), 4.2))
    _grouped_bars(ax, series, len(configs))
    ax.axhline(0, color="black", lw=0.5)
    _category_axis(
        ax,
        [_short(c) for c in configs],
        ylabel=f"{measure} with human labels",
        title="Aggregating the variants vs the single prompt P1",
    )
    ax.legend(fontsize=7)
    return _save(fig, path)


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
        [_short(g) for g in sub["group"]],
        ylabel="share of items",
        title="Convergence of the plurality (judges in the recorded order)",
    )
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7)
    return _save(fig, path)


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
        rows.append((f"{_short(r['config_id'])} | {r['setting']}", dist))
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
    return _save(fig, path)


def _parse_labels(cell: str) -> dict[str, str | None]:
    """``"P1:3 P2:- P3:4"`` (unstable_items.csv's ``labels`` column) -> ``{"P1": "3", "P2": None, ...}``."""
    out: dict[str, str | None] = {}
    for part in str(cell).split():
        variant, _, label = part.partition(":")
        out[variant] = None if label in ("", "-") else label
    return out


def _label_order(labels) -> list[str]:
    """Numeric labels in numeric order (an ordinal colour scale), others in sorted order."""
    uniq = sorted({str(x) for x in labels if x is not None})
    try:
        return sorted(uniq, key=float)
    except ValueError:
        return uniq


def _as_label(h: float, order: list[str]) -> str | None:
    """A human label written as the verdict labels are (5.0 -> "5"), when it is one of them."""
    if not np.isfinite(h):
        return None
    for lab in order:
        try:
            if float(lab) == h:
                return lab
        except ValueError:
            return None
    return None


def plot_verdict_map(items: pd.DataFrame, path, *, max_items: int = 40, max_configs: int = 4) -> Path | None:
    """The lottery at a glance: items as rows (most unstable first, as ``unstable_items.csv`` sorts them),
    wordings as columns, colour = the verdict label each wording gave, the human label beside (grey
    = no verdict). One panel per configuration; at most ``max_items`` rows each (the most unstable)."""
    if items is None or items.empty or "labels" not in items.columns:
        return None
    configs = list(dict.fromkeys(items["config_id"]))[:max_configs]
    panels = []
    for cid in configs:
        sub = items[items["config_id"] == cid].head(max_items)
        rows = [_parse_labels(c) for c in sub["labels"]]
        variants = list(dict.fromkeys(v for r in rows for v in r))
        panels.append((cid, sub, rows, variants))
    all_labels = [x for _, _, rows, _ in panels for r in rows for x in r.values()]
    order = _label_order(all_labels)
    if order and "human" in items.columns:  # a numeric scale: the human labels on the same colour scale
        try:
            [float(x) for x in order]
            hum = pd.to_numeric(items["human"], errors="coerce").dropna()
            order = _label_order([*order, *(f"{h:g}" for h in hum)])
        except ValueError:
            pass
    if not order:
        return None
    cmap = plt.get_cmap("viridis", max(2, len(order)))
    colour = {lab: cmap(i / max(1, len(order) - 1)) for i, lab in enumerate(order)}
    grey = (0.85, 0.85, 0.85, 1.0)
    height = max(3.0, 0.16 * max(len(p[1]) for p in panels) + 1.4)
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(2.6 + 0.45 * max(len(p[3]) for p in panels), height)
        if len(panels) == 1
        else (3.2 * len(panels), height),
        squeeze=False,
    )
    for ax, (cid, sub, rows, variants) in zip(axes.ravel(), panels):
        humans = pd.to_numeric(sub["human"], errors="coerce") if "human" in sub.columns else None
        # the human label as a first column, in the verdicts' colours where it is one of their labels
        human_col = [colour.get(_as_label(h, order), grey) for h in humans] if humans is not None else None
        img = np.array([[colour.get(r.get(v), grey) for v in variants] for r in rows])
        cols = variants
        if human_col is not None:
            img = np.concatenate([np.array(human_col)[:, None, :], img], axis=1)
            cols = ["human", *variants]
        ax.imshow(img, aspect="auto", interpolation="nearest")
        if human_col is not None:
            ax.axvline(0.5, color="white", lw=3)
        ax.set_xticks(range(len(cols)))
        ax.set_xticklabels(cols, fontsize=7)
        ax.xaxis.tick_top()
        ticks = [
            f"{iid}  h={h:g}" if humans is not None and np.isfinite(h) else str(iid)
            for iid, h in zip(sub["item_id"], humans if humans is not None else [np.nan] * len(sub))
        ]
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(ticks, fontsize=6)
        ax.set_xlabel(_short(cid), fontsize=7)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[lab]) for lab in order]
    handles.append(plt.Rectangle((0, 0), 1, 1, color=grey))
    fig.legend(
        handles,
        [*order, "no verdict"],
        loc="lower center",
        ncol=min(8, len(order) + 1),
        fontsize=7,
        title="verdict label (human = the item's human label, h)",
        title_fontsize=7,
        bbox_to_anchor=(0.5, 0.0),
    )
    fig.suptitle("Verdict map: items (most unstable first) x wordings", fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata=_META)
    plt.close(fig)
    return path


FIGURES = {
    "verdict_map": (plot_verdict_map, (lt.UNSTABLE_ITEMS,)),
    "label_distributions": (plot_label_distributions, (lt.LABEL_DISTRIBUTIONS,)),
    "agreement_collapse": (plot_agreement_collapse, (lt.AGREEMENT_COLLAPSE,)),
    "agreement_by_task_type": (plot_task_types, (lt.AGREEMENT_BY_TASK_TYPE,)),
    "variant_human_correlation": (plot_variant_correlations, (lt.VARIANT_HUMAN_CORRELATION,)),
    "similarity_stability": (plot_similarity_stability, (lt.SIMILARITY_POINTS,)),
    "wording_dimensions": (plot_wording_dimensions, (lt.WORDING_DIMENSIONS,)),
    "rank_trajectories": (plot_rank_trajectories, (lt.RANK_TRAJECTORIES,)),
    "aggregation": (plot_aggregation, (lt.AGGREGATION_VS_HUMANS,)),
    "convergence": (plot_convergence, (lt.CONVERGENCE_SUMMARY,)),
}


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

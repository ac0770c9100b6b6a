"""The verdict map, the lottery at a glance: items x wordings, coloured by the verdict each wording
gave, from ``unstable_items.csv`` (in memory or read back)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from promptlottery.analysis.common.plots import DPI, PNG_METADATA, plt, short_config


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
        ax.set_xlabel(short_config(cid), fontsize=7)
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
    fig.savefig(path, dpi=DPI, metadata=PNG_METADATA)
    plt.close(fig)
    return path

"""What every figure of the analysis shares: the Agg backend, the resolution, PNG metadata without
a version string, saving, and reading a table's numbers and CI bounds."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

__all__ = ["DPI", "PNG_METADATA", "as_numbers", "error_bars", "plt", "save_figure", "short_config"]

DPI = 110
PNG_METADATA = {
    "Software": None
}  # no version string in the PNG: byte-stable across matplotlib patch releases


def as_numbers(s: pd.Series) -> np.ndarray:
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)


def error_bars(est: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    lo = np.where(np.isfinite(lo), lo, est)
    hi = np.where(np.isfinite(hi), hi, est)
    return np.vstack([np.clip(est - lo, 0, None), np.clip(hi - est, 0, None)])


def save_figure(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, metadata=PNG_METADATA)
    plt.close(fig)
    return path


def short_config(cid: str) -> str:
    parts = str(cid).split("/")
    return f"{parts[0]}/{parts[2]}/{parts[-1]}" if len(parts) >= 4 else str(cid)

"""Input checking shared by the metrics: array conversion, missing values, declared label scales."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd


class UndefinedMetricWarning(RuntimeWarning):
    """A measure is undefined on the given data (no variance, too few pairs, ...); ``nan`` is returned."""


def warn_undefined(message: str, stacklevel: int = 3) -> float:
    """Emit :class:`UndefinedMetricWarning` and return ``nan``."""
    warnings.warn(message, UndefinedMetricWarning, stacklevel=stacklevel)
    return float("nan")


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not valid; choose one of {list(choices)}")


def check_positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def to_array(x: Any, name: str) -> np.ndarray:
    """Plain ndarray from a list, numpy array, pandas Series or DataFrame."""
    if isinstance(x, pd.DataFrame | pd.Series | pd.Index):
        x = x.to_numpy()
    return np.asarray(x)


def to_1d(x: Any, name: str) -> np.ndarray:
    arr = to_array(x, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def to_numeric_1d(x: Any, name: str) -> np.ndarray:
    """1-D float array; missing values (None, NaN, pd.NA) become NaN."""
    arr = to_1d(x, name)
    return _as_float(arr, name)


def to_numeric_2d(x: Any, name: str) -> np.ndarray:
    arr = to_array(x, name)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a two-dimensional items x columns matrix, got shape {arr.shape}")
    return _as_float(arr, name)


def _as_float(arr: np.ndarray, name: str) -> np.ndarray:
    if arr.dtype.kind in "biuf":
        return arr.astype(np.float64, copy=False)
    missing = missing_mask(arr)
    out = np.full(arr.shape, np.nan)
    try:
        out[~missing] = np.asarray(arr[~missing], dtype=np.float64)
    except (TypeError, ValueError):
        bad = next(v for v in arr[~missing].ravel() if not _is_number(v))
        raise ValueError(f"{name} must be numeric; found the value {plain(bad)!r}") from None
    return out


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def plain(value: Any) -> Any:
    """A numpy scalar as the Python scalar it holds (for readable error messages)."""
    return value.item() if isinstance(value, np.generic) else value


def missing_mask(arr: np.ndarray) -> np.ndarray:
    """True where a value is missing (NaN, None, pd.NA, NaT)."""
    if arr.dtype.kind == "f":
        return np.isnan(arr)
    if arr.dtype.kind in "biuUS":
        return np.zeros(arr.shape, dtype=bool)
    return np.asarray(pd.isna(arr), dtype=bool)


def check_same_length(arrays: Sequence[np.ndarray], names: Sequence[str]) -> int:
    lengths = [len(a) for a in arrays]
    if len(set(lengths)) > 1:
        desc = ", ".join(f"{nm} has {ln}" for nm, ln in zip(names, lengths, strict=True))
        raise ValueError(f"mismatched lengths: {desc} items")
    return lengths[0]


def check_min_items(n: int, what: str = "items", minimum: int = 2) -> None:
    if n < minimum:
        raise ValueError(f"need at least {minimum} {what}, got {n}")


def check_no_empty_rows(missing: np.ndarray, name: str) -> None:
    """Raise if any row of an items x columns matrix is entirely missing."""
    empty = np.flatnonzero(missing.all(axis=1))
    if empty.size:
        shown = ", ".join(str(i) for i in empty[:10]) + (", ..." if empty.size > 10 else "")
        raise ValueError(
            f"{name} has {empty.size} all-missing row(s) (items with no value at all): rows {shown}"
        )


def encode_labels(
    values: np.ndarray, labels: Sequence[Any] | None, name: str
) -> tuple[np.ndarray, list[Any]]:
    """Integer codes for categorical ``values`` (any shape); -1 marks a missing value.

    With ``labels`` (the declared scale) the code is the label's position in it and a value
    outside it raises ValueError; without, the scale is the sorted distinct observed values.
    """
    missing = missing_mask(values).ravel()
    present = values.ravel()[~missing]
    sub_codes, uniques = pd.factorize(present) if present.size else (np.empty(0, np.int64), [])
    uniques = uniques.tolist() if hasattr(uniques, "tolist") else list(uniques)
    if labels is not None:
        scale = _check_labels(labels)
    else:
        try:
            scale = sorted(uniques)
        except TypeError:
            raise ValueError(
                f"{name} mixes label types that cannot be ordered ({uniques[:5]!r}); "
                "pass labels= to declare the scale"
            ) from None
    lookup: dict[Any, int] = {}
    for i, lab in enumerate(scale):
        lookup.setdefault(_key(lab), i)
    mapped = np.empty(len(uniques), dtype=np.int64)
    for j, u in enumerate(uniques):
        code = lookup.get(_key(u))
        if code is None:
            raise ValueError(
                f"{name} contains the value {u!r}, which is not in the declared labels {scale!r}"
            )
        mapped[j] = code
    codes = np.full(missing.shape, -1, dtype=np.int64)
    codes[~missing] = mapped[sub_codes]
    return codes.reshape(values.shape), scale


def _check_labels(labels: Sequence[Any]) -> list[Any]:
    if isinstance(labels, str) or not isinstance(labels, Sequence | np.ndarray | pd.Index | pd.Series):
        raise ValueError(f"labels must be a sequence of category labels, got {labels!r}")
    scale = list(labels.tolist() if hasattr(labels, "tolist") else labels)
    if len(scale) == 0:
        raise ValueError("labels must not be empty")
    if any(missing_mask(np.asarray([lab], dtype=object))[0] for lab in scale):
        raise ValueError(f"labels must not contain a missing value: {scale!r}")
    keys = [_key(lab) for lab in scale]
    if len(set(keys)) != len(keys):
        raise ValueError(f"labels contains duplicates: {scale!r}")
    return scale


def _key(value: Any) -> Any:
    """Hashable key under which 1, 1.0, np.int64(1) and np.float64(1.0) coincide."""
    if isinstance(value, np.generic):
        value = value.item()
    return value

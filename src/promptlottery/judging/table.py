"""Judgments in, verdicts out: choosing the verdict, building items x judges matrices (the sweeps are
read into one table by :func:`promptlottery.judging.load.load_judgments`).

A *configuration* is one dataset x judge family x prompt group (x criterion, rubric) x backbone.
Within a configuration the rows split into *settings*:

* ``paraphrases``: every prompt variant once (``sample_index == 0``) at the configuration's main
  temperature (the lowest one present unless ``temperature=`` says otherwise);
* ``fixed``: the reference variant (P1) sampled several times (``sample_index`` 0..n-1) at one
  temperature -- the fixed-prompt baseline, one setting per temperature.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from promptlottery.errors import UserError
from promptlottery.prompts.scales import get_scale

logger = logging.getLogger(__name__)

#: columns that identify a configuration (in this order)
CONFIG_KEYS = ("dataset", "judge_family", "prompt_group", "criterion", "rubric", "backbone")
VERDICTS = ("argmax", "weighted", "parsed")
#: temperatures at or above this are sampled (below: numerically greedy, as Decoding.greedy)
GREEDY_BELOW = 1e-3


class AnalysisError(UserError, ValueError):
    """The judgments cannot be analysed as asked (no files, missing columns, bad options)."""


def family_type(family: str, group_file: str | None = None) -> str:
    """``objective``, ``subjective`` or ``other``: the task type the judge family's prompt-group YAML
    declares (``family_type:``, as the paper sorts families).

    A group judged from its own file (the judgments' ``group_file`` column) may declare its own type;
    otherwise the built-in groups' declaration for ``family`` counts (an older judgments table, or a
    moved file, is typed by its family name alone), and a family no group types is ``other``.
    """
    from promptlottery.prompts.groups import builtin_family_types

    own = _group_file_type(group_file) if group_file else "other"
    return own if own != "other" else builtin_family_types().get(family, "other")


@lru_cache(maxsize=256)
def _group_file_type(group_file: str) -> str:
    from promptlottery.prompts.groups import PromptError, load_group_file

    try:
        return load_group_file(group_file).family_type
    except PromptError as exc:
        logger.debug("family_type from the family name: group_file=%s error=%s", group_file, exc)
        return "other"


def families_of_type(kind: str) -> tuple[str, ...]:
    """The judge families the built-in prompt groups declare ``kind``, in group order."""
    from promptlottery.prompts.groups import builtin_family_types

    return tuple(f for f, t in builtin_family_types().items() if t == kind)


def natural_key(s: Any) -> tuple:
    """Sort key that puts P2 before P10."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(s)))


def add_verdicts(df: pd.DataFrame, verdict: str = "argmax", *, sampled: str = "parsed") -> pd.DataFrame:
    """Add the verdict columns ``label``, ``value``, ``cont`` and ``verdict_source``.

    ``verdict="argmax"``: the most probable scale label (the paper's near-greedy setting);
    ``verdict="weighted"``: the logprob-weighted score rounded to the nearest scale label. Either
    falls back to the label parsed from the raw text when the backend gave no label probabilities.
    ``verdict="parsed"``: the label parsed from the generated text on every row (the verdict source
    of sampled fixed-prompt baselines, so paraphrases can be compared with them on the same source).
    ``value`` is the label's score on the scale (yes = 1, no = 0 for binary scales); ``cont`` is the
    unrounded weighted score (``value`` where there is none), used by the continuous measures.

    Sampled rows (temperature >= 1e-3) use the sampled answer's parsed label when
    ``sampled="parsed"`` (default): label probabilities are read from the logits before sampling,
    so they do not change from one sample to the next, and only the sampled text does.
    ``sampled="same"`` applies ``verdict`` to them as well.
    """
    if verdict not in VERDICTS:
        raise AnalysisError(f"analysis.verdict must be one of {VERDICTS}, got {verdict!r}")
    if sampled not in ("parsed", "same"):
        raise AnalysisError(f"analysis.sampled_verdict must be 'parsed' or 'same', got {sampled!r}")
    out = df.copy()
    parsed, arg = _labels(out["parsed_label"]), _labels(out["argmax_label"])
    weighted = pd.to_numeric(out["weighted_score"], errors="coerce").to_numpy(float)
    scale_of = out["scale"].to_numpy(object)
    scales = {name: get_scale(name) for name in pd.unique(scale_of)}
    # each row's case, in the order the rules are tried (vectorised: one mask per rule)
    sampled_row = (sampled == "parsed") & (out["temperature"].to_numpy(float) >= GREEDY_BELOW)
    argmax_row = ~sampled_row & (verdict == "argmax") & pd.notna(arg)
    weighted_row = ~sampled_row & ~argmax_row & (verdict == "weighted") & ~np.isnan(weighted)
    rest = ~(sampled_row | argmax_row | weighted_row)
    has_parsed = pd.notna(parsed)
    labels = np.where(argmax_row, arg, parsed)
    for name, scale in scales.items():  # the weighted score rounded, once per distinct score
        rows = weighted_row & (scale_of == name)
        if rows.any():
            uniq, inv = np.unique(weighted[rows], return_inverse=True)
            labels[rows] = np.array([scale.nearest_label(float(w)) for w in uniq], dtype=object)[inv]
    sources = np.full(len(out), None, dtype=object)
    sources[sampled_row & has_parsed] = "sampled_parsed"
    sources[argmax_row] = "argmax"
    sources[weighted_row] = "weighted_rounded"
    sources[rest & has_parsed] = "parsed" if verdict == "parsed" else "parsed_fallback"
    values = _scores(labels, scale_of, scales)
    cont = np.where(argmax_row | weighted_row, weighted, np.nan)
    out["label"] = list(labels)
    out["value"] = values
    out["cont"] = np.where(np.isnan(cont), values, cont)
    out["verdict_source"] = list(sources)
    out["config_id"] = config_ids(out)
    binary = {name: scale.binary for name, scale in scales.items()}
    out["binary"] = [binary[s] for s in scale_of]
    out["task_type"] = np.where(out["binary"], "binary", "likert")
    files = out["group_file"] if "group_file" in out.columns else [None] * len(out)
    types: dict[tuple, str] = {}  # one look-up per (family, group file)
    out["family_type"] = [
        types[k] if k in types else types.setdefault(k, family_type(k[0], k[1]))
        for k in zip(out["judge_family"], (g if isinstance(g, str) and g else None for g in files))
    ]
    return out


def _labels(column: pd.Series) -> np.ndarray:
    """A label column as an object array: ``str`` of each label, None where there is none."""
    arr = column.to_numpy(object).copy()
    missing = pd.isna(column).to_numpy()
    arr[missing] = None
    if not missing.all():
        arr[~missing] = [str(x) for x in arr[~missing]]
    return arr


def _scores(labels: np.ndarray, scale_of: np.ndarray, scales: dict) -> np.ndarray:
    """Each label's score on its row's scale (NaN: no label), one look-up per distinct (scale, label)."""
    out = np.full(len(labels), np.nan)
    for name, scale in scales.items():
        rows = (scale_of == name) & pd.notna(labels)
        if rows.any():
            uniq, inv = np.unique(labels[rows].astype(str), return_inverse=True)
            out[rows] = np.array([scale.score_of(x) for x in uniq], dtype=float)[inv]
    return out


def group_files(df: pd.DataFrame) -> dict[str, str]:
    """``{prompt_group: group file}`` for groups judged from a file (column ``group_file``)."""
    if "group_file" not in df.columns:
        return {}
    return {str(g): f for g, f in zip(df["prompt_group"], df["group_file"]) if isinstance(f, str) and f}


def config_ids(df: pd.DataFrame) -> list[str]:
    """Each row's configuration id: its non-empty :data:`CONFIG_KEYS`, joined by ``/`` (one join per
    distinct configuration)."""
    if not len(df):
        return []
    codes, uniq = pd.MultiIndex.from_frame(df[list(CONFIG_KEYS)].astype(str)).factorize()
    ids = np.array(["/".join(p for p in row if p) for row in uniq], dtype=object)
    return ids[codes].tolist()


def configurations(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """``(config_id, rows)`` for each configuration, sorted by id."""
    return [
        (cid, g) for cid, g in sorted(df.groupby("config_id", sort=False), key=lambda t: natural_key(t[0]))
    ]


def main_temperature(rows: pd.DataFrame, temperature: float | None = None) -> float:
    temps = sorted(rows["temperature"].unique())
    if temperature is None:
        return float(temps[0])
    close = [t for t in temps if np.isclose(t, temperature, rtol=1e-6, atol=0)]
    if not close:
        raise AnalysisError(f"no judgments at temperature {temperature}; present: {temps}")
    return float(close[0])


def paraphrase_rows(
    rows: pd.DataFrame, temperature: float | None = None, *, key: Sequence[str] = ("variant", "item_id")
) -> pd.DataFrame:
    """The rows of the paraphrase setting: sample 0 of each variant at the main temperature.

    Sample 0 of a fixed-prompt job with a repeat source is computed under the default batch plan,
    like an ordinary call (:func:`promptlottery.judging.runner.repeat_plans`): it stands in for a
    variant only where no ordinary (``repeat_source=none``) row of that ``key`` exists (a pairwise
    judge adds the pair's ``order`` to the key).
    """
    return ordinary_first(paraphrase_setting(rows, temperature), key)


def paraphrase_setting(rows: pd.DataFrame, temperature: float | None = None) -> pd.DataFrame:
    """Every row of the paraphrase setting (sample 0 at the main temperature, the lowest seed),
    repeat-source rows included: :func:`paraphrase_rows` before :func:`ordinary_first`."""
    t0 = main_temperature(rows, temperature)
    sel = rows[np.isclose(rows["temperature"], t0, rtol=1e-6, atol=0) & (rows["sample_index"] == 0)]
    if len(sel):
        sel = sel[sel["seed"] == sel["seed"].min()]
    return sel


def ordinary_first(sel: pd.DataFrame, key: Sequence[str] = ("variant", "item_id")) -> pd.DataFrame:
    """One row per ``key`` where a repeat-source row stands beside an ordinary one: the ordinary row."""
    if len(sel) and (_repeat_source(sel) != "none").any():
        ordinary = sel.assign(_r=_repeat_source(sel) != "none").sort_values("_r", kind="mergesort")
        sel = ordinary.drop_duplicates(list(key)).drop(columns="_r").sort_index()
    return sel


def is_repeat_source(rows: pd.DataFrame) -> pd.Series:
    """True for the rows judged with a repeat source (``repeat_source`` other than ``none``)."""
    return _repeat_source(rows) != "none"


def _repeat_source(rows: pd.DataFrame) -> pd.Series:
    """The rows' repeat source; ``none`` for a table built without the column (before repeat sources)."""
    if "repeat_source" in rows.columns:
        return rows["repeat_source"].fillna("none").astype(str)
    return pd.Series("none", index=rows.index, dtype=object)


def variant_order(variants: Iterable[str], reference: str = "P1") -> list[str]:
    """Variants in natural order with the reference first."""
    vs = sorted(set(variants), key=natural_key)
    return ([reference] if reference in vs else []) + [v for v in vs if v != reference]


def judge_matrix(
    rows: pd.DataFrame, column: str, *, by: str = "variant", order: list | None = None
) -> pd.DataFrame:
    """Items x judges matrix of ``column`` (items sorted, judges in ``order``)."""
    m = rows.pivot(index="item_id", columns=by, values=column)
    cols = order if order is not None else sorted(m.columns, key=natural_key)
    m = m.reindex(columns=cols)
    return m.loc[sorted(m.index, key=natural_key)]


class FixedSetting(NamedTuple):
    """One fixed-prompt baseline: the reference variant's repeated samples at one temperature, with
    one repeat source (``none``: the repeats differ only by sampling; ``batch``: each in its own
    batch composition, :func:`promptlottery.judging.runner.repeat_plans`)."""

    temperature: float
    repeat_source: str
    rows: pd.DataFrame

    @property
    def name(self) -> str:
        """``fixed T=0.7``, or ``fixed T=1e-05 batch`` for a repeat source other than ``none``."""
        return f"fixed T={self.temperature:g}" + (
            "" if self.repeat_source == "none" else f" {self.repeat_source}"
        )


def fixed_settings(rows: pd.DataFrame, reference: str = "P1") -> list[FixedSetting]:
    """The fixed-prompt baselines: one per temperature and repeat source at which the reference
    variant has >= 2 samples, by temperature (``none`` before the others)."""
    ref = rows[rows["variant"] == reference]
    out = []
    for (t, src), g in ref.groupby([ref["temperature"], _repeat_source(ref).rename("repeat_source")]):
        g = g[g["seed"] == g["seed"].min()]
        if g["sample_index"].nunique() >= 2:
            out.append(FixedSetting(float(t), str(src), g))
    return sorted(out, key=lambda f: (f.temperature, f.repeat_source != "none", f.repeat_source))


def human_vector(rows: pd.DataFrame, items: Iterable[str]) -> np.ndarray:
    h = rows.drop_duplicates("item_id").set_index("item_id")["human"]
    return h.reindex(list(items)).to_numpy(dtype=float)


def system_vector(rows: pd.DataFrame, items: Iterable[str]) -> np.ndarray:
    s = rows.drop_duplicates("item_id").set_index("item_id")["system"]
    return s.reindex(list(items)).to_numpy(dtype=object)

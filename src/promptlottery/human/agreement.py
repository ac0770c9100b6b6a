"""Human agreement within one wording and across wordings, and the judge's on the same items (no
I/O: pure functions over DataFrames); the degradation of each: :mod:`promptlottery.human.degradation`.

The paper, §3.2: "10 annotators rated 650 data points, yielding average human agreement of 0.78
Overlap, 0.71 pairwise Cohen's κ, 0.80 Fleiss' κ, and 0.63 Krippendorff's α"; the Abstract:
"LLMaJ judges exhibit 6-9× larger agreement degradation under prompt rephrasings than humans".
The summary of the paper defines neither "degradation" nor how the human agreement under one
wording and across wordings are formed, so the definitions below are **ours**:

* **Raters and units.** Humans, *within one wording*: a unit is an (item, wording) cell, its
  raters the annotators who rated it. Humans, *across wordings*: a unit is (item, slot ``s``), its
  raters the wordings (``w_0, w_1, ...`` in natural order); wording ``w_j``'s rating is the first,
  from position ``(s + j) mod n`` on, of the cell's ``n`` ratings in annotator order that is not
  yet used and not by an annotator already in the unit; a wording with no such rating is missing
  from the unit. A unit therefore holds ratings of one item under different wordings by
  **distinct** annotators only: the across pairs differ from the within pairs by the wording,
  never by being one person's two ratings (self-agreement). A slot with fewer than two such
  ratings forms no unit; those slots and the ratings in no unit are left out and counted in the
  notes (the match is greedy, slot by slot, not a maximum matching). The judge, *within one
  wording* (the fixed prompt, §3.2's "fixed-prompt repeated runs"): a unit is an item, its raters
  the repeated samples of the reference variant. The judge, *across wordings* (paraphrases): a unit
  is an item, its raters the prompt variants (the human campaign's wordings, sample 0).
* **The four measures** of §3.2, each from :mod:`promptlottery.metrics` on the nominal scale of
  the campaign's labels: ``overlap`` (mean over rater pairs of the share of shared units with the
  same label), ``cohen`` (mean over rater pairs of Cohen's kappa; pairs with fewer than two shared
  units or no variation are left out), ``fleiss`` (Fleiss' kappa on the units whose raters are
  complete: within one wording, the first ``m`` ratings of every cell, ``m`` the fewest any cell
  has; across wordings, the units that have every wording), ``alpha`` (Krippendorff's alpha,
  nominal unless ``alpha_level`` says otherwise; incomplete units allowed).

The verdict kind of the judge's labels is the one of the judgments table it is given (the
``label`` column of :func:`promptlottery.judging.table.add_verdicts`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from promptlottery.metrics import (
    UndefinedMetricWarning,
    fleiss_kappa,
    krippendorff_alpha,
    mean_pairwise_cohen_kappa,
    mean_pairwise_overlap,
)
from promptlottery.metrics._resampled import (
    fleiss_kappa_resampled,
    krippendorff_alpha_resampled,
    mean_defined,
    pairwise_kappa_resampled,
    pairwise_overlap_resampled,
)

MEASURES = ("overlap", "cohen", "fleiss", "alpha")
SETTINGS = ("within", "across")
#: the paper's human agreement (§3.2) and its human-vs-judge degradation ratio (Abstract)
PAPER_HUMAN = {"overlap": 0.78, "cohen": 0.71, "fleiss": 0.80, "alpha": 0.63}
PAPER_RATIO = "6-9x"
#: above this many rater pairs, the pairwise kappa's bootstrap (items x pairs x labels^2 counts) is skipped
MAX_PAIRS_RESAMPLED = 1000


@dataclass
class RaterTable:
    """One setting's ratings as integer codes: ``codes`` units x raters (-1 = missing), the item
    of each unit (``unit_item``, an index into the analysis' items), and the complete table Fleiss'
    kappa is computed on (``fleiss_codes`` / ``fleiss_item``)."""

    codes: np.ndarray
    unit_item: np.ndarray
    fleiss_codes: np.ndarray
    fleiss_item: np.ndarray
    raters: str
    notes: list[str] = field(default_factory=list)

    @property
    def n_units(self) -> int:
        return int(self.codes.shape[0])


def _encode(values: pd.Series, labels: tuple[str, ...]) -> np.ndarray:
    pos = {lab: i for i, lab in enumerate(labels)}
    return np.array([pos.get(v, -1) if isinstance(v, str) else -1 for v in values], dtype=np.int64)


def _table(
    long: pd.DataFrame, unit: list[str], rater: str, items: list[str], labels: tuple[str, ...], raters: str
) -> RaterTable:
    """Pivot ``long`` (one row per rating, a ``code`` column) into a units x raters table."""
    index = {it: n for n, it in enumerate(items)}
    wide = long.pivot_table(index=unit, columns=rater, values="code", aggfunc="first")
    wide = wide.sort_index()
    codes = wide.fillna(-1).to_numpy(dtype=np.int64)
    unit_item = np.array([index[u[0] if isinstance(u, tuple) else u] for u in wide.index], dtype=np.int64)
    keep = (codes >= 0).sum(axis=1) >= 1
    return RaterTable(codes[keep], unit_item[keep], codes[keep], unit_item[keep], raters)


def human_tables(ratings: pd.DataFrame, labels: tuple[str, ...], items: list[str]) -> dict[str, RaterTable]:
    """The human ``within`` and ``across`` tables of ``ratings`` on ``items`` (see the module docstring)."""
    r = ratings[ratings["item_id"].isin(items)].copy()
    r["code"] = _encode(r["label"], labels)
    r = r.sort_values(["item_id", "wording", "annotator"], kind="mergesort")
    r["slot"] = r.groupby(["item_id", "wording"]).cumcount()
    within = _table(r, ["item_id", "wording"], "annotator", items, labels, "annotators")
    # Fleiss: the first m ratings of every cell with at least two, m the fewest such a cell has
    sizes = r.groupby(["item_id", "wording"]).size()
    rated = sizes[sizes >= 2]
    if len(rated):
        m = int(rated.min())
        sub = r.set_index(["item_id", "wording"]).loc[rated.index].reset_index()
        sub = sub[sub["slot"] < m]
        f = _table(sub, ["item_id", "wording"], "slot", items, labels, "slots")
        within.fleiss_codes, within.fleiss_item = f.codes, f.unit_item
        if (sizes > m).any():
            within.notes.append(
                f"fleiss: the first {m} ratings of each cell (cells carry {sizes.min()}-{sizes.max()})"
            )
    else:
        within.fleiss_codes, within.fleiss_item = np.empty((0, 2), np.int64), np.empty(0, np.int64)
    across = _table(_across_slots(r), ["item_id", "slot"], "wording", items, labels, "wordings")
    units_out, ratings_out = r.attrs.get("left_out", (0, 0))
    if units_out or ratings_out:
        across.notes.append(
            f"{units_out} (item, slot) unit(s) left out (fewer than two distinct annotators); "
            f"{ratings_out} of {len(r)} ratings in no unit"
        )
    complete = (across.codes >= 0).all(axis=1)
    across.fleiss_codes, across.fleiss_item = across.codes[complete], across.unit_item[complete]
    if (~complete).any():
        across.notes.append(
            f"fleiss: {int(complete.sum())} of {len(complete)} (item, slot) units have every wording"
        )
    return {"within": within, "across": across}


def _across_slots(r: pd.DataFrame) -> pd.DataFrame:
    """The ratings with their across-wordings ``slot`` (see the module docstring): every unit of
    distinct annotators; ``r.attrs["left_out"]`` = (slots with a lone rating, ratings in no unit)."""
    from promptlottery.judging.table import natural_key

    out, units_out, ratings_out = [], 0, 0
    wordings = sorted(r["wording"].unique(), key=natural_key)
    for _item, g in r.groupby("item_id", sort=True):
        cells = {w: c.sort_values("annotator", kind="mergesort") for w, c in g.groupby("wording")}
        used: dict[str, set[int]] = {w: set() for w in cells}
        for s in range(max(len(c) for c in cells.values())):
            picks: list[tuple[str, int]] = []
            in_unit: set[str] = set()
            for j, w in enumerate(wordings):
                if w not in cells:
                    continue
                c, n = cells[w], len(cells[w])
                for t in range(n):
                    i = (s + j + t) % n
                    if i not in used[w] and c["annotator"].iloc[i] not in in_unit:
                        picks.append((w, i))
                        in_unit.add(c["annotator"].iloc[i])
                        break
            if len(picks) < 2:
                units_out += len(picks)  # a lone rating: no second annotator under another wording
                continue
            for w, i in picks:
                used[w].add(i)
                out.append(cells[w].iloc[[i]].assign(slot=s))
        ratings_out += sum(len(c) - len(used[w]) for w, c in cells.items())
    res = pd.concat(out, ignore_index=True) if out else r.iloc[0:0].assign(slot=0)
    r.attrs["left_out"] = (units_out, ratings_out)
    return res


def across_units_of(assignment: pd.DataFrame) -> pd.DataFrame:
    """The across-wordings units (``item_id``, ``slot``, ``wording``, ``annotator`` rows) the analysis
    would build if every task of ``assignment`` were rated; ``attrs["left_out"]`` as in :func:`human_tables`."""
    r = assignment.sort_values(["item_id", "wording", "annotator"], kind="mergesort").copy()
    units = _across_slots(r)
    units.attrs["left_out"] = r.attrs["left_out"]
    return units


def judge_tables(
    fixed: pd.DataFrame | None,
    para: pd.DataFrame,
    labels: tuple[str, ...],
    items: list[str],
    wordings: list[str],
) -> dict[str, RaterTable]:
    """The judge's ``within`` (fixed prompt: items x samples) and ``across`` (items x variants) tables."""
    out = {}
    p = para[para["item_id"].isin(items) & para["variant"].isin(wordings)].copy()
    if len(p):
        p["code"] = _encode(p["label"], labels)
        out["across"] = _table(p, ["item_id"], "variant", items, labels, "variants")
        complete = (out["across"].codes >= 0).all(axis=1)
        out["across"].fleiss_codes = out["across"].codes[complete]
        out["across"].fleiss_item = out["across"].unit_item[complete]
    if fixed is not None and len(fixed):
        f = fixed[fixed["item_id"].isin(items)].copy()
        f["code"] = _encode(f["label"], labels)
        t = _table(f, ["item_id"], "sample_index", items, labels, "samples of the reference variant")
        ok = (t.codes >= 0).all(axis=1)
        t.fleiss_codes, t.fleiss_item = t.codes[ok], t.unit_item[ok]
        out["within"] = t
    return out


# --------------------------------------------------------------------------- measures


def measures(t: RaterTable, n_labels: int, *, alpha_level: str = "nominal") -> dict[str, float]:
    """The four measures of one table (NaN where undefined), from the public metric functions."""
    labels = list(range(n_labels))
    m = np.where(t.codes >= 0, t.codes, np.nan).astype(float)
    f = np.where(t.fleiss_codes >= 0, t.fleiss_codes, np.nan).astype(float)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        out["overlap"] = _safe(mean_pairwise_overlap, m, labels=labels)
        out["cohen"] = _safe(mean_pairwise_cohen_kappa, m, labels=labels)
        out["fleiss"] = _safe(fleiss_kappa, f, labels=labels)
        out["alpha"] = _safe(krippendorff_alpha, m, level=alpha_level, labels=labels)
    return out


def _safe(fn, matrix: np.ndarray, **kw) -> float:
    if matrix.shape[0] < 1 or matrix.ndim != 2 or matrix.shape[1] < 2:
        return float("nan")
    m = matrix[~np.isnan(matrix).all(axis=1)]
    if m.shape[0] < 1:
        return float("nan")
    try:
        return float(fn(m, **kw))
    except ValueError:
        return float("nan")


def resampled_measures(
    t: RaterTable, w_items: np.ndarray, n_labels: int, *, alpha_level: str = "nominal"
) -> dict[str, np.ndarray]:
    """Each measure on every resample (rows of ``w_items``: copies of each item), NaN where undefined."""
    n_res = w_items.shape[0]
    nan = np.full(n_res, np.nan)
    out = dict.fromkeys(MEASURES, nan)
    if t.n_units == 0 or t.codes.shape[1] < 2:
        return out
    w = w_items[:, t.unit_item]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["overlap"] = mean_defined(pairwise_overlap_resampled(w, t.codes))
        n_pairs = t.codes.shape[1] * (t.codes.shape[1] - 1) // 2
        if n_pairs <= MAX_PAIRS_RESAMPLED:
            out["cohen"] = mean_defined(pairwise_kappa_resampled(w, t.codes, n_labels, None))
        if len(t.fleiss_codes) and t.fleiss_codes.shape[1] >= 2:
            out["fleiss"] = fleiss_kappa_resampled(w_items[:, t.fleiss_item], t.fleiss_codes, n_labels)
        out["alpha"] = krippendorff_alpha_resampled(w, t.codes, np.arange(n_labels, dtype=float), alpha_level)
    return out

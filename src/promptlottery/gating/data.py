"""Gate examples from a judgment grid: one row per (item, judge variant), labelled by the plurality cluster.

For each configuration (dataset x judge family x prompt group x criterion x backbone) the
paraphrase setting's verdicts form an ``items x variants`` matrix, variants in the recorded order
(P1 first). The label is the paper's (§F.2: the classifier "predicts whether a judge's score matches
at least three of five" judges): a judge's example is positive (``in_cluster = 1``) when its verdict
equals the item's plurality cluster label (:func:`promptlottery.metrics.aggregate.plurality_cluster`,
>= ceil((J + 1) / 2) votes of the J judges); an item without a cluster is *no-consensus* and every
judge's example is negative. A missing verdict is never in the cluster. ``plurality`` is the
five-judge decision (the cluster label when there is one, else the plurality with ties to the
earliest judge, ``ties_to_P1``), what the simulated policies are compared with; ``converged_at``
is the call at which the cluster is reached online (NaN: never).

The classifier input is the judge's rendered query (stored with each judgment by the judging
runner, column ``query``) and its answer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.errors import UserError
from promptlottery.judging.grid import Configuration, JudgmentGrid
from promptlottery.judging.table import judge_matrix, natural_key
from promptlottery.metrics.aggregate import plurality_cluster, plurality_details
from promptlottery.metrics.convergence import online_convergence

logger = logging.getLogger(__name__)

#: columns of the examples table (one row per item x variant of a configuration)
EXAMPLE_COLUMNS = (
    "config_id",
    "dataset",
    "judge_family",
    "prompt_group",
    "criterion",
    "backbone",
    "scale",
    "item_id",
    "item_key",
    "variant",
    "position",
    "label",
    "value",
    "plurality",
    "plurality_value",
    "cluster",
    "converged_at",
    "in_cluster",
    "unique",
    "votes",
    "n_judges",
    "no_consensus",
    "confidence",
    "human",
    "raw_output",
    "cache_key",
    "query",
    "run_dir",
    "prompt_format",
    "backend_identity",
)


class GateDataError(UserError, ValueError):
    """The judgments cannot be turned into gate examples as asked (one line, exit status 2)."""


def label_confidence(label_probs: Any, label: Any) -> float:
    """The judge's own probability of ``label``, renormalised over the scale's labels (NaN if unknown)."""
    if label is None or (isinstance(label, float) and np.isnan(label)) or label_probs is None:
        return float("nan")
    if isinstance(label_probs, str):
        try:
            label_probs = json.loads(label_probs)
        except ValueError:
            return float("nan")
    if not isinstance(label_probs, dict) or not label_probs:
        return float("nan")
    total = float(sum(float(v) for v in label_probs.values()))
    if total <= 0 or str(label) not in label_probs:
        return float("nan")
    return float(label_probs[str(label)]) / total


def build_examples(
    conf: Configuration, *, variants: Iterable[str] | None = None, min_judges: int = 2
) -> pd.DataFrame:
    """Gate examples of ONE configuration of the grid (its paraphrase setting's verdicts).

    ``variants`` restricts and orders the judges (default: every variant, the grid's reference
    first, then natural order). Items with fewer than ``min_judges`` verdicts are dropped.
    """
    order, rows = conf.order, conf.paraphrases
    if variants is None:
        labels = conf.matrix("label")
    else:
        wanted = list(variants)
        missing = [v for v in wanted if v not in order]
        if missing:
            raise GateDataError(f"variants {missing} not in the judgments (present: {order})")
        order = wanted
        rows = rows[rows["variant"].isin(order)]
        labels = judge_matrix(rows, "label", order=order)
    det = plurality_details(labels)
    det.index = labels.index
    det["cluster"] = list(plurality_cluster(labels.to_numpy(dtype=object), n_judges=len(order)))
    det["converged_at"] = online_convergence(labels.to_numpy(dtype=object), n_judges=len(order))
    keep = det.index[det["n_judges"] >= min_judges]
    labels, det = labels.loc[keep], det.loc[keep]
    first = rows.iloc[0]
    from promptlottery.prompts.scales import get_scale

    scale = get_scale(first["scale"])
    by_key = rows.set_index(["item_id", "variant"])
    out = []
    for item_id in labels.index:
        d = det.loc[item_id]
        plur, clus = d["plurality"], d["cluster"]
        plur_ok = plur is not None and not (isinstance(plur, float) and np.isnan(plur))
        clus_ok = clus is not None and not (isinstance(clus, float) and np.isnan(clus))
        for pos, variant in enumerate(order):
            lab = labels.at[item_id, variant]
            has = lab is not None and not (isinstance(lab, float) and np.isnan(lab))
            src = by_key.loc[(item_id, variant)] if (item_id, variant) in by_key.index else None
            out.append(
                {
                    "item_id": item_id,
                    "variant": variant,
                    "position": pos,
                    "label": lab if has else None,
                    "value": scale.score_of(lab) if has else np.nan,
                    "plurality": plur if plur_ok else None,
                    "plurality_value": scale.score_of(plur) if plur_ok else np.nan,
                    "cluster": clus if clus_ok else None,
                    "converged_at": float(d["converged_at"]),
                    "in_cluster": int(has and clus_ok and lab == clus),
                    "unique": bool(d["unique"]),
                    "votes": int(d["votes"]),
                    "n_judges": int(d["n_judges"]),
                    # no label has ceil((J + 1) / 2) votes of the J judges (e.g. <= 2 of 5)
                    "no_consensus": not clus_ok,
                    "confidence": label_confidence(src["label_probs"], lab) if src is not None else np.nan,
                    "human": float(src["human"]) if src is not None and pd.notna(src["human"]) else np.nan,
                    "raw_output": str(src["raw_output"])
                    if src is not None and pd.notna(src["raw_output"])
                    else "",
                    "cache_key": src["cache_key"] if src is not None and "cache_key" in src else None,
                    "query": src["query"] if src is not None and pd.notna(src.get("query")) else None,
                    "run_dir": src["run_dir"] if src is not None else "",
                    "prompt_format": src.get("prompt_format", "chat") if src is not None else "chat",
                }
            )
    ex = pd.DataFrame(out)
    for col in ("config_id", "dataset", "judge_family", "prompt_group", "criterion", "backbone", "scale"):
        ex[col] = first[col]
    ex["backend_identity"] = first.get("backend_identity", "")
    ex["item_key"] = ex["dataset"].astype(str) + "/" + ex["item_id"].astype(str)
    # the human label is an item property: fill it from any variant's row
    ex["human"] = ex.groupby("item_id")["human"].transform(lambda s: s.ffill().bfill())
    return ex[list(EXAMPLE_COLUMNS)]


def load_examples(
    runs: str | Iterable[str] | pd.DataFrame,
    *,
    verdict: str = "argmax",
    reference: str = "P1",
    variants: Iterable[str] | None = None,
    temperature: float | None = None,
    min_judges: int = 2,
) -> pd.DataFrame:
    """Gate examples of every configuration of the judgment grid under ``runs`` (globs of sweep dirs)."""
    grid = JudgmentGrid.load(
        runs,
        verdict=verdict,
        reference=reference,
        temperature=temperature,
        columns=("raw_output", "label_probs", "cache_key", "query"),
    )
    frames = []
    for conf in grid:
        cid = conf.config_id
        if len(conf.order) < 2:
            logger.warning("skipping config=%s: fewer than 2 prompt variants", cid)
            continue
        try:
            ex = build_examples(conf, variants=variants, min_judges=min_judges)
        except GateDataError as e:
            logger.warning("skipping config=%s: %s", cid, e)
            continue
        ex["config_id"] = cid
        frames.append(ex)
    if not frames:
        raise GateDataError("no configuration with at least 2 prompt variants in the judgments")
    return pd.concat(frames, ignore_index=True)


# -- the classifier's input text ------------------------------------------------------------------


def format_answer(raw_output: str, label: Any, *, max_chars: int = 200) -> str:
    """The judge's answer as the classifier sees it: the verdict being gated and the raw text."""
    raw = " ".join(str(raw_output or "").split())[:max_chars]
    lab = "none" if label is None or (isinstance(label, float) and np.isnan(label)) else str(label)
    return f"Verdict: {lab}. Answer: {raw}"


def attach_texts(ex: pd.DataFrame, *, allow_missing: bool = False) -> pd.DataFrame:
    """Add ``answer`` (the judge's verdict and raw text) and check ``query`` (the rendered judge query
    stored with each judgment by the judging runner).

    Judgments written before the runner stored the query have none: that raises, naming the run
    dirs and what to do (re-running their judging jobs answers every call from the cache, so it
    costs no model calls), unless ``allow_missing`` (the classifier then sees the answer only).
    """
    ex = ex.copy()
    missing = ex["query"].isna() if "query" in ex.columns else pd.Series(True, index=ex.index)
    if missing.any():
        runs = sorted(set(ex.loc[missing, "run_dir"].astype(str)))
        msg = (
            f"{int(missing.sum())} of {len(ex)} judgments have no stored `query` column (written before the "
            f"judging runner stored it) in {len(runs)} run(s), e.g. {runs[0]}/judgments.parquet: re-run their "
            "judging jobs (the call cache answers every call, no model calls) or set "
            "gate.allow_missing_query=true to use the answer only"
        )
        if not allow_missing:
            raise GateDataError(msg)
        logger.warning("%s", msg)
    ex["query"] = ex["query"].where(~missing, "") if "query" in ex.columns else ""
    ex["answer"] = [format_answer(r, lab) for r, lab in zip(ex["raw_output"], ex["label"])]
    return ex


# -- splits ---------------------------------------------------------------------------------------


def one_class_message(ex: pd.DataFrame, where: str) -> str | None:
    """Why a gate cannot be trained on ``ex`` when every example has the same label, else None."""
    y = ex["in_cluster"].to_numpy()
    if len(set(y)) >= 2:
        return None
    state = (
        "in its item's plurality cluster (the wordings agree on every item, e.g. a judge that answers the "
        "same label under every wording)"
        if len(y) and int(y[0]) == 1
        else "outside any plurality cluster (no item has one)"
    )
    return (
        f"gate: all {len(y)} examples of {where} have in_cluster={int(y[0]) if len(y) else 'none'}, every "
        f"verdict {state}: the gate has one class to learn, so its rates, decisions recovered and calls "
        "saved are undefined; judge items on which the wordings disagree"
    )


def held_out_groups(groups: Iterable[str]) -> list[str]:
    """The prompt groups among ``groups`` whose file marks them ``held_out`` (G15)."""
    from promptlottery.prompts import load_group

    out = []
    for g in sorted(set(groups), key=natural_key):
        try:
            if load_group(g).held_out:
                out.append(g)
        except Exception:  # noqa: BLE001 - an unknown group is simply not held out
            continue
    return out


#: the characters beyond a configuration's shared instructions that two items' P1 queries must share for
#: the items to share a source (an article, a question, a dialogue): a chance common opening is shorter
SOURCE_MIN_CHARS = 80


def source_keys(ex: pd.DataFrame) -> pd.Series:
    """Each row's source (``gate.split_by=source``): the items whose first wording's queries agree for at
    least :data:`SOURCE_MIN_CHARS` characters past the prefix every query of their configuration shares
    (the instructions), i.e. one article's summaries, one question's answers, one dialogue's responses,
    joined across configurations through their item keys. The key is the source's smallest item key;
    an item without a query is its own source."""
    from promptlottery.calls.loop import common_prefix_chars

    parent: dict[str, str] = {}

    def find(k: str) -> str:
        while parent.get(k, k) != k:
            k = parent[k]
        return k

    first = ex.sort_values("position", kind="mergesort").drop_duplicates(["config_id", "item_key"])
    for _, rows in first.groupby("config_id", sort=True):
        texts = sorted(zip(rows["query"].fillna("").astype(str), rows["item_key"].astype(str)))
        if len(texts) < 2:
            continue
        base = common_prefix_chars(texts[0][0], texts[-1][0])
        for (a, ka), (b, kb) in zip(texts, texts[1:]):
            if a and b and common_prefix_chars(a, b) >= base + SOURCE_MIN_CHARS:
                ra, rb = find(ka), find(kb)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
    return ex["item_key"].astype(str).map(find)


def _group_fold(y, groups, n_splits: int, seed: int) -> set:
    """The item keys of the first fold of a stratified, grouped ``n_splits``-fold split."""
    from sklearn.model_selection import StratifiedGroupKFold

    sgkf = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    _, idx = next(sgkf.split(np.zeros(len(y)), y, groups))
    return set(groups[idx])


def instance_split(
    ex: pd.DataFrame, *, val_size: float = 0.2, test_size: float = 0.2, seed: int = 0, by: str = "item_key"
) -> tuple[set[str], set[str], set[str]]:
    """Train / validation / test item keys: stratified by the label, no item in two of them.

    Grouped by ``by``: ``item_key`` (dataset and item id, so an item judged by several backbones stays in
    one part), or ``source_key`` (:func:`source_keys`: a source's items in one part); the sets hold its
    values. The test items are the first fold of a ``StratifiedGroupKFold`` with
    ``round(1 / test_size)`` folds; the validation items the first fold of the rest with
    ``round((1 - test_size) / val_size)`` folds. Validation picks the epoch, the Optuna trial and the
    threshold; test is only ever scored.
    """
    for name, v in (("val_size", val_size), ("test_size", test_size)):
        if not 0 < v < 1:
            raise GateDataError(f"gate.{name} must be in (0, 1), got {v}")
    if val_size + test_size >= 1:
        raise GateDataError(f"gate.val_size + gate.test_size must be < 1, got {val_size} + {test_size}")
    n_test = max(2, round(1 / test_size))
    n_val = max(2, round((1 - test_size) / val_size))
    groups = ex[by].to_numpy()
    n_groups = len(set(groups))
    if n_groups < n_test + n_val:
        raise GateDataError(
            f"need at least {n_test + n_val} distinct items for a {val_size:.0%} / {test_size:.0%} "
            f"validation / test split, got {n_groups}"
        )
    y = ex["in_cluster"].to_numpy()
    if (why := one_class_message(ex, "the judgments")) is not None:
        raise GateDataError(why)
    test = _group_fold(y, groups, n_test, seed)
    rest = ~np.isin(groups, list(test))
    val = _group_fold(y[rest], groups[rest], n_val, seed)
    train = set(groups) - test - val
    return train, val, test


def holdout_split(
    ex: pd.DataFrame, *, holdout_size: float = 0.2, seed: int = 0, by: str = "item_key"
) -> tuple[set[str], set[str]]:
    """The paper's split (§F.1, "an 80/20 stratified holdout split"): train and holdout item keys.

    Stratified by the label and grouped by ``item_key`` as :func:`instance_split`: the holdout is
    the first fold of a ``StratifiedGroupKFold`` with ``round(1 / holdout_size)`` folds (0.2 -> 5).
    The holdout is the validation set that picks the epoch, the Optuna trial and the threshold, and
    the figures are reported on it too (there is no untouched test part).
    """
    if not 0 < holdout_size < 1:
        raise GateDataError(f"gate.holdout_size must be in (0, 1), got {holdout_size}")
    n_folds = max(2, round(1 / holdout_size))
    groups = ex[by].to_numpy()
    if len(set(groups)) < n_folds:
        raise GateDataError(
            f"need at least {n_folds} distinct items for a {holdout_size:.0%} holdout, got {len(set(groups))}"
        )
    y = ex["in_cluster"].to_numpy()
    if (why := one_class_message(ex, "the judgments")) is not None:
        raise GateDataError(why)
    holdout = _group_fold(y, groups, n_folds, seed)
    return set(groups) - holdout, holdout

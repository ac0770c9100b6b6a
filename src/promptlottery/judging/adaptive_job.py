"""``judge.design=adaptive``: a sweep's job of one wording under adaptive stopping per item.

Every job of the sweep replays the same walk (:func:`promptlottery.metrics.adaptive.walk`: each item's
wordings in its own seeded order, until ``judge.stop_rule`` settles its plurality at
``judge.confidence``), asking the model, through the shared call cache, for the cells of every wording
the walk reaches; it writes only its own wording's rows. The first job of a sweep pays for the walk's
calls and the others read them from the cache, so the sweep as a whole makes exactly the walk's calls,
keeps one job (and one ``judgments.parquet``) per wording, and resumes exactly: a re-run gets every
answer from the cache and walks the same way. Jobs run in parallel before the cache holds the walk may
both pay for a call (answers of a deterministic backend agree; the analysis replays the walk from the
rows and refuses a grid where they do not).

The vote is the argmax label (the most probable scale label, falling back to the parsed label, as
``analysis.verdict=argmax`` reads it); a call without a verdict is a call with no vote. A mode judged
by order (pairwise) walks each pair's (wording, order) cells ``"<wording>:<order>"`` instead, every
cell a call and a vote (the single-order preference in the pair's terms: ``"1"``, ``"2"``, ``"tie"``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import pandas as pd

from promptlottery.calls.loop import CallStats
from promptlottery.checks import check_choice, check_open, fail, is_int
from promptlottery.errors import ConfigError
from promptlottery.judging.runner import Condition
from promptlottery.judging.table import CONFIG_KEYS, add_verdicts
from promptlottery.metrics.adaptive import RULES, walk
from promptlottery.modes import MODES, get_mode

logger = logging.getLogger(__name__)

__all__ = ["adaptive_design", "judge_adaptive", "walk_cells"]


def adaptive_design(judge_cfg, mode: str, n_samples: int) -> dict | None:
    """The adaptive design's parameters (None for another design); a bad one is a one-line ConfigError."""
    if judge_cfg.get("design", "full") != "adaptive":
        return None
    if not get_mode(mode).adaptive:
        built = ", ".join(name for name, m in MODES.items() if m.adaptive)
        raise ConfigError(f"judge.design=adaptive is built for {built} judging only (missing for {mode!r})")
    if get_mode(mode).sparse_by_order and not judge_cfg.get("position_swap", True):
        raise ConfigError(
            f"judge.design=adaptive for {mode} judging walks both orders: judge.position_swap=true"
        )
    if n_samples != 1:
        raise fail("n_samples", n_samples, "1 under judge.design=adaptive (one sample per cell)")
    rule = judge_cfg.get("stop_rule", "dirichlet")
    check_choice("judge.stop_rule", rule, RULES)
    confidence = judge_cfg.get("confidence", 0.95)
    check_open("judge.confidence", confidence, 0.5, 1)
    seed = judge_cfg.get("design_seed", 0)
    if not is_int(seed):
        raise fail("judge.design_seed", seed, "a whole number")
    return {"rule": str(rule), "confidence": float(confidence), "seed": int(seed)}


def _merge(total: CallStats, part: CallStats) -> None:
    for f in ("total", "cache_hits", "cache_misses", "parse_failures", "over_long"):
        setattr(total, f, getattr(total, f) + getattr(part, f))
    total.errors += part.errors


def walk_cells(variants: list[str], orders: tuple[str, ...] = ()) -> list[str]:
    """The cells an item's walk orders: its wordings, or (a by-order mode's ``orders``) each
    wording's orders."""
    return [f"{v}:{o}" for v in variants for o in orders] if orders else list(variants)


def design_orders(mode) -> tuple[str, ...]:
    """The orders a design crosses ``mode``'s wordings with (none: a cell is a wording)."""
    return tuple(mode.orders) if mode.sparse_by_order else ()


def _votes(df: pd.DataFrame, mode) -> pd.Series:
    """Each row's vote, as the analysis reads it: the mode's (:meth:`JudgeMode.vote`), else the
    argmax label."""
    if (vote := mode.vote(df)) is not None:
        return vote
    # the verdict as the analysis computes it (a condition without a rubric has none in its rows)
    return add_verdicts(df.assign(**{k: df[k].fillna("") for k in CONFIG_KEYS}), "argmax")["label"]


def judge_adaptive(
    items: list,
    condition: Condition,
    variants: list[str],
    design: dict,
    judge_cells: Callable[..., tuple[pd.DataFrame, CallStats]],
) -> tuple[pd.DataFrame, CallStats, dict]:
    """The rows of ``condition``'s wording that the walk reached, with its design columns.

    ``judge_cells(items, condition, orders_of=None)`` judges items under a condition (the runner, with
    the job's backend and cache; ``orders_of``: the orders to present each item in). Returns the rows,
    the call counts of this wording's rows, and the walk's own counts (every wording's cells it asked
    for, most of them cache hits after the first job)."""
    mode = get_mode(condition.judge_mode)
    orders = design_orders(mode)
    by_order = bool(orders)
    by_id = {it.id: it for it in items}
    own: list[pd.DataFrame] = []
    columns: list[pd.DataFrame] = []  # the table's columns, for a wording the walk never reached
    own_stats, walk_stats = CallStats(), CallStats()

    def labels_of(cell: str, ids: list[str]) -> dict[str, object]:
        variant, _, order = cell.partition(":")
        cond = dataclasses.replace(condition, variant=variant)
        orders_of = {i: (order,) for i in ids} if by_order else None
        df, stats = judge_cells([by_id[i] for i in ids], cond, orders_of=orders_of)
        _merge(walk_stats, stats)
        columns[:] = [df.iloc[0:0]]
        if variant == condition.variant:
            own.append(df)
            _merge(own_stats, stats)
        return {
            str(i): (None if pd.isna(v) else str(v))
            for i, v in zip(df["item_id"], _votes(df, mode), strict=True)
        }

    walks = walk(
        [it.id for it in items], walk_cells(variants, orders), labels_of,
        rule=design["rule"], confidence=design["confidence"], seed=design["seed"],
    )  # fmt: skip
    df = pd.concat(own, ignore_index=True) if own else columns[0]
    ids = df["item_id"].astype(str)
    cells = (
        [f"{v}:{o}" for v, o in zip(df["variant"], df["order"], strict=True)]
        if by_order
        else list(df["variant"])
    )
    df = df.assign(
        design="adaptive",
        design_rule=design["rule"],
        design_confidence=design["confidence"],
        design_seed=design["seed"],
        design_items=len(items),
        design_wordings=",".join(variants),
        adaptive_position=[walks[i].judged.index(c) + 1 for i, c in zip(ids, cells, strict=True)],
        adaptive_calls=[walks[i].calls for i in ids],
        adaptive_stop=[walks[i].stop for i in ids],
        adaptive_plurality=[walks[i].plurality for i in ids],
    )
    summary = {
        "adaptive_items": len(items),
        "adaptive_calls": sum(w.calls for w in walks.values()),
        "adaptive_full_calls": len(items) * len(walk_cells(variants, orders)),
        "walk_cache_hits": walk_stats.cache_hits,
        "walk_cache_misses": walk_stats.cache_misses,
    }
    logger.info("adaptive walk condition=%s %s", condition.id, summary)
    return df, own_stats, summary

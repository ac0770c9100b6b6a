"""The gate's data: examples with texts, the train / validation / test split (instance-disjoint,
stratified), and the held-out-group (transfer) rows."""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field

import pandas as pd

from promptlottery.gating.config import GateConfig
from promptlottery.gating.data import (
    GateDataError,
    attach_texts,
    held_out_groups,
    holdout_split,
    instance_split,
    load_examples,
    one_class_message,
    source_keys,
)

logger = logging.getLogger(__name__)


@dataclass
class GateData:
    train: pd.DataFrame
    val: pd.DataFrame  # validation: epoch, Optuna trial and threshold choice
    test: pd.DataFrame  # every reported figure
    transfer: pd.DataFrame  # may be empty
    transfer_note: str
    held_out: list[str]
    variants: list[str]
    #: ``gate.split``: "three_way" (test untouched) or "holdout" (the paper's: test = the holdout)
    split: str = "three_way"
    #: ``gate.transfer_config_share``: the left-out configurations' rows of items no training row
    #: holds (may be empty), and those configurations
    config_transfer: pd.DataFrame = field(default_factory=pd.DataFrame)
    transfer_configs: list[str] = field(default_factory=list)
    #: ``gate.split_by``: "item" (instance-disjoint) or "source" (a source's items in one part)
    split_by: str = "item"


def left_out_configs(configs, share: float | None, seed: int) -> list[str]:
    """``round(share * n)`` of the configurations (at least 1, at most n - 1), seeded; none if ``share``
    is null or there is a single configuration."""
    configs = sorted(set(configs))
    if share is None or len(configs) < 2:
        return []
    k = min(len(configs) - 1, max(1, round(share * len(configs))))
    return sorted(random.Random(seed).sample(configs, k))


def _load(runs, g: GateConfig) -> pd.DataFrame:
    return load_examples(
        runs,
        verdict=g.verdict,
        reference=g.reference,
        variants=g.variants,
        temperature=g.temperature,
        min_judges=g.min_judges,
    )


def _transfer_note(g: GateConfig, held: list[str], transfer: pd.DataFrame, seen: pd.Series | None) -> str:
    if not (held and len(transfer)):
        return (
            "No judgments of a held-out prompt group (G15) were found under gate.runs"
            + (" or gate.transfer_runs" if g.transfer_runs else "")
            + ": transfer to unseen prompts was not evaluated. Run a G15 sweep (e.g. "
            "`judge.family=qa_correctness judge.prompt_group=G15 judge.variant=P1,P2,P3,P4,P5`) and pass it "
            "as gate.transfer_runs."
        )
    if seen is None:
        return (
            f"Held-out group(s) {', '.join(held)}: every item was also a training item (under other "
            "prompts); evaluated on all of them."
        )
    return (
        f"Held-out group(s) {', '.join(held)}: {transfer['item_key'].nunique()} items judged with prompts "
        f"the gate never saw ({int(seen.sum())} examples of items seen in training dropped)."
    )


def prepare(g: GateConfig) -> GateData:
    """Examples with texts, the instance-disjoint split, and the held-out-group (transfer) rows."""
    t0 = time.perf_counter()
    ex = _load(g.runs, g)
    if g.transfer_runs:
        try:
            ex = pd.concat([ex, _load(g.transfer_runs, g)], ignore_index=True)
        except Exception as e:  # noqa: BLE001 - no transfer judgments is reported, not fatal
            logger.warning("gate.transfer_runs=%s: %s", g.transfer_runs, e)
        ex = ex.drop_duplicates(["config_id", "item_id", "variant"]).reset_index(drop=True)
    variants = (
        list(g.variants) if g.variants else list(ex.sort_values("position")["variant"].drop_duplicates())
    )
    held = held_out_groups(ex["prompt_group"].unique())
    is_held = ex["prompt_group"].isin(held).to_numpy()
    if is_held.all():
        raise GateDataError(f"every judgment is from a held-out prompt group {held}: nothing to train on")
    ex = attach_texts(ex, allow_missing=g.allow_missing_query)
    by = "source_key" if g.split_by == "source" else "item_key"
    if by == "source_key":
        ex["source_key"] = source_keys(ex)
    main = ex[~is_held].reset_index(drop=True)
    left_out = left_out_configs(main["config_id"], g.transfer_config_share, g.seed)
    if left_out and g.transfer_config_share is not None:
        config_rows = main[main["config_id"].isin(left_out)].reset_index(drop=True)
        main = main[~main["config_id"].isin(left_out)].reset_index(drop=True)
    else:
        config_rows = main.iloc[:0]
    transfer = ex[is_held].reset_index(drop=True)
    if (why := one_class_message(main, f"gate.runs={g.runs}")) is not None:
        raise GateDataError(why)
    if g.split == "holdout":  # the paper's 80/20: the holdout picks and is scored
        train_groups, val_groups = holdout_split(main, holdout_size=g.holdout_size, seed=g.seed, by=by)
        test_groups = set(val_groups)
    else:
        train_groups, val_groups, test_groups = instance_split(
            main, val_size=g.val_size, test_size=g.test_size, seed=g.seed, by=by
        )
    train_items, val_items, test_items = (
        set(main.loc[main[by].isin(part), "item_key"]) for part in (train_groups, val_groups, test_groups)
    )
    if g.max_train_items and len(train_items) > g.max_train_items:
        train_items = set(random.Random(g.seed).sample(sorted(train_items), int(g.max_train_items)))
        train_groups = set(main.loc[main["item_key"].isin(train_items), by])
    train = main[main["item_key"].isin(train_items)].reset_index(drop=True)
    val = main[main["item_key"].isin(val_items)].reset_index(drop=True)
    test = main[main["item_key"].isin(test_items)].reset_index(drop=True)
    seen = None
    if held and len(transfer):
        seen = transfer["item_key"].isin(train_items)
        if seen.all():
            seen = None
        else:
            transfer = transfer[~seen].reset_index(drop=True)
    note = _transfer_note(g, held, transfer, seen)
    # unseen configuration AND unseen item (and, split by source, unseen source): rows of items (sources)
    # a training row holds are dropped
    config_transfer = config_rows[~config_rows[by].isin(train_groups)].reset_index(drop=True)
    logger.info(
        "gate data: train=%d validation=%d test=%d transfer=%d config_transfer=%d examples (%.1f s)",
        len(train),
        len(val),
        len(test),
        len(transfer),
        len(config_transfer),
        time.perf_counter() - t0,
    )
    return GateData(
        train=train,
        val=val,
        test=test,
        transfer=transfer,
        transfer_note=note,
        held_out=held,
        variants=variants,
        split=str(g.split),
        config_transfer=config_transfer,
        transfer_configs=left_out,
        split_by=str(g.split_by),
    )

"""The sparse designs (``judge.design=sparse``, docs/sparse.md) as frontier policies, simulated on the
full five-wording judgments.

A design judges each item under the wordings its seeded plan draws
(:func:`promptlottery.metrics.sparse_plans.sparse_plan`: ``full_share`` of the items under every
wording, the ``anchor`` on every other item, the rest of ``budget`` spread in each item's own random
order). The simulation masks the recorded labels with that plan: **calls per item** = the item's
planned cells (a planned cell without a verdict still cost its call); **decision** = the plurality of
the item's judged labels (ties to the earliest wording in calling order, as the full plurality;
:func:`promptlottery.metrics.aggregate.plurality`); an item the plan leaves unjudged has no decision
(not recovered). An item's cells depend on the seed and its own id only, so the masked cells are the
ones a sparse sweep of that configuration with the same options would judge.

Nothing is chosen on validation: the plan does not look at the labels.
"""

from __future__ import annotations

import numpy as np

from promptlottery.gating.item_block import ItemBlock, is_missing
from promptlottery.metrics.aggregate import plurality
from promptlottery.metrics.sparse_plans import sparse_plan

__all__ = ["design_name", "simulate_sparse"]


def design_name(budget: float, anchor: str | None = None, full_share: float = 0.0) -> str:
    """The policy's name in the frontier: ``sparse_<budget>[_anchor_<wording>][_full_<share>]``.

    >>> design_name(0.4), design_name(0.6, "P1"), design_name(0.5, None, 0.25)
    ('sparse_0.4', 'sparse_0.6_anchor_P1', 'sparse_0.5_full_0.25')
    """
    name = f"sparse_{budget:g}"
    if anchor:
        name += f"_anchor_{anchor}"
    if full_share:
        name += f"_full_{full_share:g}"
    return name


def simulate_sparse(
    block: ItemBlock,
    *,
    budget: float,
    anchor: str | None = None,
    full_share: float = 0.0,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Calls and decision per item of the sparse design on ``block``'s recorded labels.

    The plan is built over the block's distinct item ids (an item judged under several
    configurations gets the same cells in each, as each configuration's sweep would draw them).
    """
    ids = block.items["item_id"].astype(str).to_numpy()
    if not len(ids):
        return np.zeros(0, dtype=int), np.zeros(0, dtype=object)
    plan = sparse_plan(
        sorted(set(ids)), block.variants, budget=budget, anchor=anchor, full_share=full_share, seed=seed
    )
    row = {item: n for n, item in enumerate(plan.items)}
    mask = plan.mask[[row[i] for i in ids]]
    judged = np.where(mask, block.labels, None)
    dec = np.array([None if is_missing(v) else v for v in plurality(judged)], dtype=object)
    return mask.sum(axis=1).astype(int), dec

"""``judge.design=sparse``: which items (pairwise: which orders) a sweep's job of one wording judges,
their inclusion probabilities, and the plan's parameters as the columns the analysis rebuilds the plan
from."""

from __future__ import annotations

import re
from functools import partial

from promptlottery.checks import check_choice
from promptlottery.errors import ConfigError
from promptlottery.modes import MODES, get_mode


def sparse_design(judge_cfg, group, items, mode: str) -> dict | None:
    """``judge.design=sparse``: which of ``items`` this job's wording judges (pairwise: in which orders),
    their inclusion probabilities, and the plan's parameters as columns (None for another design).

    Every job of the sweep builds the same plan (:func:`promptlottery.metrics.sparse_plans.sparse_plan`
    over the sampled items and the group's wordings; pairwise,
    :func:`promptlottery.metrics.sparse_pairwise.pairwise_plan` over their (wording, order) cells), so
    the jobs need not talk to each other."""
    design = judge_cfg.get("design", "full")
    if design in ("full", "adaptive"):
        return None
    check_choice("judge.design", design, ("full", "sparse", "adaptive"))
    judge_mode = get_mode(mode)
    if not judge_mode.sparse:
        built = ", ".join(name for name, m in MODES.items() if m.sparse)
        raise ConfigError(f"judge.design=sparse is built for {built} judging only (missing for {mode!r})")
    if judge_mode.sparse_by_order and not judge_cfg.get("position_swap", True):
        raise ConfigError(
            f"judge.design=sparse for {mode} judging samples both orders: judge.position_swap=true"
        )
    from promptlottery.metrics.sparse_pairwise import cell, pairwise_plan
    from promptlottery.metrics.sparse_plans import sparse_plan

    variants = list(group.variants)
    orders = judge_mode.orders
    make = partial(pairwise_plan, orders=orders) if judge_mode.sparse_by_order else sparse_plan
    try:
        plan = make(
            [it.id for it in items], variants, budget=float(judge_cfg.budget), anchor=judge_cfg.anchor,
            full_share=float(judge_cfg.full_share), seed=int(judge_cfg.design_seed),
        )  # fmt: skip
    except ValueError as exc:  # the plan's own names for its options, as the config spells them
        message = re.sub(r"^(budget|anchor|full_share)\b", r"judge.\1", str(exc))
        raise ConfigError(f"judge.design=sparse: {message}") from None
    columns = {
        "design": "sparse",
        "design_budget": float(judge_cfg.budget),
        "design_anchor": judge_cfg.anchor or "",
        "design_full_share": float(judge_cfg.full_share),
        "design_seed": int(judge_cfg.design_seed),
        "design_items": len(items),
    }
    if not judge_mode.sparse_by_order:
        w = variants.index(judge_cfg.variant)
        prob = {it.id: float(p) for it, p in zip(items, plan.prob[:, w], strict=True)}
        return {"judged": plan.mask[:, w].tolist(), "prob": prob, "columns": columns}
    columns["design_wordings"] = ",".join(variants)  # a wording no pair drew in this job is still one
    cols = {o: plan.variants.index(cell(judge_cfg.variant, o)) for o in orders}
    orders_of = {it.id: tuple(o for o in orders if plan.mask[i, cols[o]]) for i, it in enumerate(items)}
    prob = {(it.id, o): float(plan.prob[i, cols[o]]) for i, it in enumerate(items) for o in orders}
    return {"judged": [bool(orders_of[it.id]) for it in items], "prob": prob, "columns": columns,
            "orders_of": orders_of}  # fmt: skip

"""Pairwise judging: the position-swap request plan and the judgment columns in the pair's terms.

A pair item has ``inputs["response_a"]`` and ``inputs["response_b"]`` (the ``llmbar``, ``pandalm``,
``autoj_pairwise``, ``mt_bench_pairs`` loaders, or ``dataset=table`` with
``dataset.fields.response_a/response_b``). Its human preference is ``human[criterion]`` coded as
the loaders do: 1.0 = response_a is better, 0.0 = response_b, 0.5 = a tie (a list: one per
annotator).

Orders. ``"12"`` shows response_a first (as assistant A), ``"21"`` shows response_b first.
``judge.position_swap=true`` (the default in pairwise mode) judges every pair in both orders, each
a call of its own (the order is a named part of the cache key). FastChat judges both orders and
counts a disagreement as a tie (Zheng et al., 2023, Sec. 3.4: "we call a judge consistent only if
the judge prefers the same answer ... in both orders ... conservative, inconsistent verdicts are
treated as ties").

Columns (``/work/PAIRWISE_CONTRACT.md``): ``judge_mode``, ``order``, ``preferred`` (the argmax
label in the pair's terms: "1" = response_a, "2" = response_b, "tie"), ``preferred_parsed`` (the
same from the parsed label), ``p_pref_1``/``p_pref_2``/``p_pref_tie`` (the label probabilities
normalised over the scale's labels and mapped into the pair's terms), ``human_preferred``,
``human_raters`` (JSON list of "1"/"2"/"tie"), ``system_1``/``system_2`` and ``cluster_id``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from typing import Any

from promptlottery.config import JUDGE_MODES
from promptlottery.data.schema import DatasetError, Item
from promptlottery.errors import UserError
from promptlottery.prompts.scales import Scale

logger = logging.getLogger(__name__)

MODES = JUDGE_MODES
ORDERS = ("12", "21")
PAIR_FIELDS = ("response_a", "response_b")
#: a human preference value (1.0 / 0.0 / 0.5) -> the pair's terms
HUMAN_TERMS = {1.0: "1", 0.0: "2", 0.5: "tie"}


class PairwiseError(UserError, ValueError):
    """A pairwise run asked for something its inputs cannot give (one line naming the option/row)."""


def orders(position_swap: bool) -> tuple[str, ...]:
    return ORDERS if position_swap else ORDERS[:1]


def is_pair(item: Item) -> bool:
    return all(f in item.inputs for f in PAIR_FIELDS)


#: the identical-pairs warnings this process gave: each is given once per process, so once per sweep
#: with Hydra's basic launcher (jobs in the sweep's process), once per job where jobs run apart
_WARNED: set[str] = set()


def check_pairs(items: list[Item], *, where: str, identical_pairs: str = "warn") -> None:
    """Every item is a pair with two non-empty responses; else a PairwiseError naming the row. Pairs
    whose two responses are the same text (a judge can only guess between them) are counted in a
    warning (once per process: :data:`_WARNED`), or refused with ``identical_pairs="refuse"``
    (``judge.identical_pairs``)."""
    for it in items:
        if not is_pair(it):
            have = sorted(it.inputs)
            raise PairwiseError(
                f"{where}: judge.mode=pairwise needs items with response_a and response_b; item {it.id!r} has "
                f"{have} (a pointwise table: give dataset.fields.response_a/response_b, or judge.mode=pointwise "
                "with a pointwise prompt group)"
            )
        for f in PAIR_FIELDS:
            if not str(it.inputs[f]).strip():
                raise PairwiseError(
                    f"{where}: item {it.id!r} has an empty {f}: a pair needs two responses (a built-in loader "
                    "leaves such pairs out with dataset.options.drop_empty_pairs=true)"
                )
    same = [
        it.id for it in items if str(it.inputs["response_a"]).strip() == str(it.inputs["response_b"]).strip()
    ]
    if same:
        what = (
            f"{where}: {len(same)} of {len(items)} pairs have response_a == response_b (first: {same[0]!r})"
        )
        if identical_pairs == "refuse":
            raise PairwiseError(f"{what}; drop them, or judge them with judge.identical_pairs=warn")
        if what not in _WARNED:  # the pre-flight and every job of a sweep check the same table
            _WARNED.add(what)
            logger.warning("%s; they are judged (judge.identical_pairs=refuse refuses them)", what)


def check_mode(
    mode: str, scale: Scale, *, group: str, items: list[Item], where: str, identical_pairs: str = "warn"
) -> None:
    """``judge.mode`` agrees with the prompt group's scale and the items' kind (one line otherwise)."""
    if mode not in MODES:
        raise PairwiseError(f"judge.mode={mode!r}: must be one of {list(MODES)}")
    if mode == "pairwise" and not scale.pairwise:
        raise PairwiseError(
            f"judge.mode=pairwise but {group} has the pointwise scale {scale.name}; use a pairwise "
            "group (G17, or a group file with scale pairwise_ab / pairwise_abc)"
        )
    if mode == "pointwise" and scale.pairwise:
        raise PairwiseError(
            f"{group} is pairwise (scale {scale.name}) but judge.mode=pointwise; set judge.mode=pairwise"
        )
    if mode == "pairwise":
        check_pairs(items, where=where, identical_pairs=identical_pairs)
    elif items and all(is_pair(it) and "response" not in it.inputs for it in items):
        raise PairwiseError(
            f"{where}: {group} is pointwise (scale {scale.name}) but the items are pairs "
            "(response_a/response_b, no response); use judge.mode=pairwise with a pairwise group (G17)"
        )


def shown(item: Item, order: str) -> Item:
    """The item as the judge sees it in ``order``: for ``"21"`` response_a and response_b swapped."""
    if order == "12":
        return item
    if order != "21":
        raise ValueError(f"order must be '12' or '21', got {order!r}")
    inputs = dict(item.inputs)
    inputs["response_a"], inputs["response_b"] = item.inputs["response_b"], item.inputs["response_a"]
    return dataclasses.replace(item, inputs=inputs)


def label_terms(scale: Scale, order: str) -> dict[str, str]:
    """Shown label -> the pair's terms: A is response_a in order "12" and response_b in "21"."""
    first, second = ("1", "2") if order == "12" else ("2", "1")
    a, b = scale.labels[:2]
    out = {a: first, b: second}
    if scale.tie_label:
        out[scale.tie_label] = "tie"
    return out


def human_terms(value: Any) -> str | None:
    """A loader's preference code (1.0 / 0.0 / 0.5) in the pair's terms; None when unknown."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    try:
        return HUMAN_TERMS[float(value)]
    except (KeyError, TypeError, ValueError):
        raise DatasetError(
            f"human preference {value!r} is outside the pairwise scale: expected 1.0 (response_a), 0.0 "
            "(response_b) or 0.5 (tie)"
        ) from None


def human_preference(raw: Any) -> tuple[str | None, str | None]:
    """``(human_preferred, human_raters JSON)``; several annotators: the majority label (2 of 3 for
    PandaLM), "tie" when no label has a strict majority."""
    if isinstance(raw, (list, tuple)):
        votes = [h for h in (human_terms(v) for v in raw) if h is not None]
        if not votes:
            return None, None
        top = max(set(votes), key=votes.count)
        pref = top if votes.count(top) * 2 > len(votes) else "tie"
        return pref, json.dumps(votes)
    return human_terms(raw), None


def preference_columns(item: Item, order: str, scale: Scale, scored, label_probs: dict | None) -> dict:
    """The contract's pairwise columns of one judgment (``scored``: judging.scoring.Scored)."""
    terms = label_terms(scale, order)
    terms[None] = None
    p = dict.fromkeys(("1", "2", "tie"), math.nan)
    if label_probs:
        probs = {lab: float(label_probs.get(lab, 0.0)) for lab in scale.labels}
        mass = sum(probs.values())
        if mass > 0:
            p = {"1": 0.0, "2": 0.0, "tie": 0.0 if scale.tie_label else math.nan}
            for lab, v in probs.items():
                p[terms[lab]] += v / mass
    meta = item.meta or {}
    return {
        "judge_mode": "pairwise",
        "order": order,
        # the argmax label; a backend without label probabilities: the parsed one (as `score` falls back)
        "preferred": terms.get(scored.argmax_label if label_probs else scored.parsed_label),
        "preferred_parsed": terms.get(scored.parsed_label) if scored.parsed_label is not None else None,
        "p_pref_1": p["1"],
        "p_pref_2": p["2"],
        "p_pref_tie": p["tie"],
        "system_1": meta.get("system_1"),
        "system_2": meta.get("system_2"),
        "cluster_id": str(meta.get("cluster") or item.id),
    }

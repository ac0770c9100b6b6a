"""Pairwise judging: a preference between two responses, the position-swap plan and the columns in the pair's terms.

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

Columns: ``judge_mode``, ``order``, ``preferred`` (the argmax
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
from collections.abc import Mapping
from typing import Any

from promptlottery.checks import check_choice
from promptlottery.data.schema import DatasetError, Item
from promptlottery.modes.base import JudgeMode, ModeError, Presentation
from promptlottery.modes.registry import MODES
from promptlottery.prompts.scales import Scale, register_scale

logger = logging.getLogger(__name__)

NAME = "pairwise"
ORDERS = ("12", "21")
PAIR_FIELDS = ("response_a", "response_b")
#: a human preference value (1.0 / 0.0 / 0.5) -> the pair's terms
HUMAN_TERMS = {1.0: "1", 0.0: "2", 0.5: "tie"}
#: the :attr:`Scale.kind` of the pairwise scales (registered below)
SCALE_KIND = NAME

# Preference labels: A = the answer shown first is better, B = the second, C = a tie. Their scores
# are those of the shown order (A = 1, B = 0, tie = 0.5: the probability-weighted score is then
# p(first shown wins), a tie counted as half); :func:`for_order` maps them into the pair's own terms.
# A tie label as in FastChat's ``pair-v2`` output format ``[[A]]`` / ``[[B]]`` / ``[[C]]``.
register_scale("pairwise_ab", "AB", (1.0, 0.0), kind=SCALE_KIND, preference=True)
register_scale("pairwise_abc", "ABC", (1.0, 0.0, 0.5), kind=SCALE_KIND, tie_label="C", preference=True)
# the same, the positions numbered ("Response 1" / "Output (2)"), a tie as 0
register_scale("pairwise_12", "12", (1.0, 0.0), kind=SCALE_KIND, preference=True)
register_scale("pairwise_120", "120", (1.0, 0.0, 0.5), kind=SCALE_KIND, tie_label="0", preference=True)


#: ``judge.identical_pairs``: a pair whose two responses are the same text is judged with a warning
#: that counts them, or refused
IDENTICAL_PAIRS = ("warn", "refuse")


class PairwiseError(ModeError):
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


def for_order(scale: Scale, order: str) -> Scale:
    """A pairwise scale whose scores are in the pair's own terms for presentation ``order``:
    ``"12"`` keeps A = response_a (score 1), ``"21"`` shows response_b as A, so A scores 0 and B 1
    (the tie stays 0.5). The labels are unchanged (they are what the judge was shown)."""
    if scale.kind != SCALE_KIND or order == "12":
        return scale
    if order != "21":
        raise ValueError(f"order must be '12' or '21', got {order!r}")
    swap = {1.0: 0.0, 0.0: 1.0}
    return dataclasses.replace(scale, scores=tuple(swap.get(s, s) for s in scale.scores))


def parse_preference(text: str, labels: tuple[str, ...], *, cued: bool = False) -> str | None:
    r"""The preference label in a pairwise judge's raw text (:meth:`Scale.parse` on a pairwise scale
    of ``labels``, the last one the tie where there are three): the letter right after the ``[[``
    prefix (``"A]]\n\nExplanation: unlike [[B]]"`` is A: the verdict the judge gave where it was asked
    for it), else the last verdict marker (``[[B]]``, ``Verdict: B``, ``Assistant B is better``; not
    one after "not" / "unlike" / "than"), else a bare letter alone on the first line. ``[[D]]`` on an
    A/B/C scale, or a leading letter outside the scale, is no label (a parse failure, missing with
    its reason).

    >>> [parse_preference(t, ("A", "B", "C")) for t in ("[[A]]", "so [[c]]", "B", "A]]", " [B", "a tie", "[[D]]")]
    ['A', 'C', 'B', 'A', 'B', None, None]
    >>> parse_preference("A]]\n\nExplanation: unlike [[B]]", ("A", "B", "C"))
    'A'
    """
    scores = (1.0, 0.0, 0.5)[: len(labels)]
    tie = labels[2] if len(labels) == 3 else None
    scale = Scale("preference", tuple(labels), scores, SCALE_KIND, tie, preference=True)
    return scale.parse(text or "", cued=cued)


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
    """The contract's pairwise columns of one judgment (``scored``: prompts.scoring.Scored)."""
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
        "judge_mode": NAME,
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


class Pairwise(JudgeMode):
    """Each pair in both orders (``judge.position_swap``), the order and the group's assistant
    prefix named parts of the key, the answer scored in the pair's terms, the preference columns."""

    name = NAME
    scale_kind = SCALE_KIND
    fields = PAIR_FIELDS
    item_noun = "pairs"
    #: the prompt group of your own pairwise judge without a group file (``+experiment=own_judge``)
    default_group = "G17"
    #: judge.design=sparse: a plan of (wording, order) cells
    sparse = True
    sparse_by_order = True
    orders = ORDERS
    sections = ("promptlottery.analysis.lottery.sections.pairwise.section:PairwiseSection",)
    budget_full = "promptlottery.analysis.budget.pairwise.report:run_pairwise_budget"
    budget_sparse = "promptlottery.analysis.budget.pairwise.report:run_sparse_pairwise"
    card = "promptlottery.analysis.card.pairwise.card:PairwiseCard"
    #: judge.design=adaptive: each pair's walk over its (wording, order) cells
    adaptive = True
    #: ``judge.identical_pairs``: a pair whose two responses are the same text is warned or refused
    options = {"identical_pairs": IDENTICAL_PAIRS[0]}

    def check_options(self, judge) -> None:
        check_choice("judge.identical_pairs", self.option(judge, "identical_pairs"), IDENTICAL_PAIRS)

    def vote(self, rows):
        """The single-order preference: ``preferred``, falling back to ``preferred_parsed``."""
        return rows["preferred"].where(rows["preferred"].notna(), rows["preferred_parsed"])

    def wrong_scale(self, scale: Scale, group: str) -> str:
        return (
            f"judge.mode={self.name} but {group} has the {scale.kind} scale {scale.name}; use a pairwise "
            f"group ({self.default_group}, or a group file with scale pairwise_ab / pairwise_abc)"
        )

    def check_items(
        self,
        scale: Scale,
        *,
        group: str,
        items: list[Item],
        where: str,
        options: Mapping[str, Any] | None = None,
        criteria: tuple = (),
    ) -> None:
        check_pairs(items, where=where, identical_pairs=self.option(options, "identical_pairs"))

    def presentations(self, item: Item, *, group=None, position_swap: bool = True) -> list[Presentation]:
        return [Presentation(shown(item, o), o) for o in orders(position_swap)]

    def assistant_prefix(self, group) -> str | None:
        return group.assistant_prefix

    def key_parts(self, p: Presentation, prefix: str | None) -> dict[str, Any]:
        return {"order": p.order, "assistant_prefix": prefix}

    def scoring_scale(self, scale: Scale, order: str | None) -> Scale:
        """The scale's scores in the pair's terms for ``order`` (1 = response_a wins)."""
        return for_order(scale, order)

    def known_label(
        self, item: Item, criterion: str, scale: Scale, p: Presentation, human_range
    ) -> str | None:
        """The label shown for the gold preference in ``p.order`` (A for response_a in "12", B in
        "21"); None without a human label or for a gold tie on a scale without a tie label."""
        gold, _ = human_preference(item.human.get(criterion))
        return {term: lab for lab, term in label_terms(scale, p.order).items()}.get(gold)

    def human_raters(self, raw: Any) -> str | None:
        return human_preference(raw)[1]

    def columns(self, item: Item, order: str | None, scale: Scale, scored, label_probs, raw: Any) -> dict:
        return {
            **preference_columns(item, order, scale, scored, label_probs),
            "human_preferred": human_preference(raw)[0],
        }


MODES.register(Pairwise.name, Pairwise())

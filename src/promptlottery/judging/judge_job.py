"""One judge job as one object: what is judged, by what and how, built once and passed whole.

A :class:`JudgeJob` holds what the judge path needs (the items, the grid cell, the prompt group, the
backend, the call cache, the decoding and the run's options) and builds its requests once
(:meth:`JudgeJob.requests`): the judge stage's lost-cache check, its spend check, its dry run and
the runner (``judging.runner.run``) share them. A prompt the judge stage's preflight rendered
(``rendered``, :func:`promptlottery.judging.inputs.render_all`) is looked up, not rendered again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from promptlottery.backends.base import Backend, Decoding, JudgeRequest, KnownAnswer
from promptlottery.calls.cache import CallCache, make_request
from promptlottery.calls.loop import BatchPlan
from promptlottery.calls.spend import SpendCap
from promptlottery.config import REPEAT_SOURCES
from promptlottery.data.schema import Item
from promptlottery.modes import DEFAULT_MODE, get_mode
from promptlottery.prompts.groups import PromptGroup
from promptlottery.prompts.requests import render_chat, render_completion


@dataclass
class Condition:
    """One cell of the grid: what is judged, with which prompt, by which backbone."""

    dataset: str
    judge_family: str
    prompt_group: str
    variant: str
    backbone: str
    criterion: str
    prompt_format: str = "chat"  # or "completion" for base models
    rubric: str | None = None
    #: the judge mode (``judge.mode``; promptlottery.modes): how an item is presented, keyed and recorded
    judge_mode: str = DEFAULT_MODE
    #: every order the mode presents an item in (``JudgeMode.presentations``) a call of its own
    #: (false: the first order only)
    position_swap: bool = True

    @property
    def id(self) -> str:
        return "/".join([self.dataset, self.judge_family, self.prompt_group, self.variant, self.backbone])

    @property
    def configuration(self) -> str:
        """What is judged, by whichever backbone and wording: dataset config x judge family x prompt
        group x criterion (x rubric); the id the analysis, the study plan and W&B's group share."""
        parts = [self.dataset, self.judge_family, self.prompt_group, self.criterion, self.rubric or ""]
        return "/".join(p for p in parts if p)


def repeat_plans(
    source: str, n_samples: int, seed: int, base_size: int, base_order: str = "length"
) -> dict[int, BatchPlan] | None:
    """``{sample_index: BatchPlan}`` under ``repeat_source=source``, or ``None`` for ``none``.

    ``none``: every sample is answered in one call list under the default plan; a deterministic
    backend then gives its greedy repeats the same label probabilities, and they agree by
    construction. ``batch`` (ours: an emulation of the batch-composition nondeterminism of the
    paper's GPU runs, which the paper does not control): sample 0 under the default plan (the
    backend's batch order ``base_order`` and batch size ``base_size``), and each sample ``k >= 1`` in its own batches,
    the requests shuffled with seed ``seed * 100003 + k`` and cut into batches of ``base_size``,
    ``base_size // 2`` and 1 request(s) for k = 1, 2, 3, then again from ``base_size`` (k = 4, ...).
    Each request then meets other neighbours (other padding, another shared prefix, another batch
    shape) and the backend's floating-point result moves as much as that moves it: at float32 on a
    CPU very little, at bfloat16 more.
    """
    if source not in REPEAT_SOURCES:
        raise ValueError(f"repeat_source must be one of {REPEAT_SOURCES}, got {source!r}")
    if source == "none":
        return None
    base = max(1, int(base_size))
    sizes = (base, max(1, base // 2), 1)
    plans = {0: BatchPlan(base_order, size=base)}
    for k in range(1, n_samples):
        plans[k] = BatchPlan("shuffled", seed=seed * 100003 + k, size=sizes[(k - 1) % len(sizes)])
    return plans


#: a rendered presentation's key: (variant, item id, pair order, judged part, answer prefix)
RenderKey = tuple[str, str, "str | None", "str | None", "str | None"]


@dataclass(eq=False)
class JudgeJob:
    """Items judged under ``condition`` with ``group`` by ``backend`` (answers in ``cache``).

    ``n_samples`` answers per presentation; ``examples``: a completion prompt's solved examples;
    ``repeat_source``: :func:`repeat_plans`; ``human_range``: the dataset's, for the known answer of
    a pointwise label; ``orders_of`` (pairwise, a sparse plan's cells): the orders judged for each
    item id; ``max_retries`` / ``backoff_s`` / ``spend``: the call loop's. ``rendered``: prompts
    rendered before (by :class:`RenderKey`), used instead of rendering them again."""

    items: list[Item]
    condition: Condition
    group: PromptGroup
    backend: Backend
    decoding: Decoding
    cache: CallCache | None = None
    n_samples: int = 1
    examples: Sequence[tuple[Item, str]] = ()
    repeat_source: str = "none"
    human_range: tuple[float, float] | None = None
    orders_of: dict[str, tuple[str, ...]] | None = None
    max_retries: int = 4
    backoff_s: float = 1.0
    spend: SpendCap | None = None
    rendered: dict[RenderKey, tuple] = field(default_factory=dict, repr=False)
    #: every round's requests, built once (:meth:`requests`)
    _pairs: list | None = field(default=None, init=False, repr=False)

    def replace(self, **changes) -> JudgeJob:
        """This job with ``changes`` (other items, another condition): its requests built anew."""
        return dataclasses.replace(self, **changes)

    @property
    def mode(self):
        return get_mode(self.condition.judge_mode)

    @property
    def plans(self) -> dict[int, BatchPlan] | None:
        return repeat_plans(
            self.repeat_source,
            self.n_samples,
            self.decoding.seed,
            self.backend.max_concurrency,
            getattr(self.backend, "batch_order", "length"),
        )

    def keys(self, round_k: int | None = None) -> list[str]:
        return [r.key for _, r in self.requests(round_k)]

    def requests(self, round_k: int | None = None, earlier=None) -> list[tuple[Item, JudgeRequest]]:
        """One request per item presentation and sample, each with the item as presented. A repeat
        sample computed under its own batch plan (``repeat_source=batch``, :func:`repeat_plans`) has
        the plan in its cache key; sample 0 under the default plan keeps the key of an ordinary call,
        so it is shared with the paraphrase grid.

        The judge mode (``condition.judge_mode``) presents each item once or several times (a pair in
        both orders under ``position_swap``), one request per presentation and sample; what tells the
        presentations apart (a pair's order and the group's assistant prefix) are named parts of the
        key (a single presentation keeps the ordinary key). Every request carries its
        :class:`KnownAnswer`, outside the key. A mode that asks in rounds (:meth:`JudgeMode.rounds`,
        an analytic batch): round ``round_k`` after each item's greedy answers ``earlier`` (by item
        id), or every round after placeholder answers (``round_k`` None: for counting calls, the dry
        run; built once)."""
        if round_k is None and earlier is None:
            if self._pairs is None:
                self._pairs = self._build(None, None)
            return self._pairs
        return self._build(round_k, earlier)

    def _build(self, round_k: int | None, earlier) -> list[tuple[Item, JudgeRequest]]:
        cond, group, mode = self.condition, self.group, self.mode
        plans = self.plans or {}
        ident = self.backend.identity()
        prefix = mode.assistant_prefix(group)
        rounds = range(mode.rounds(group, self.items)) if round_k is None else (round_k,)
        out = []
        for item in self.items:
            for shown in (p for k in rounds for p in self._presentations(item, k, earlier)):
                own = prefix if shown.prefix is None else shown.prefix
                messages, prompt = self.render(shown, own)
                known = KnownAnswer(
                    cond.variant,
                    group.scale.scores,
                    mode.known_label(item, cond.criterion, group.scale, shown, self.human_range),
                    group.variant(cond.variant).control,
                )
                for k in range(self.n_samples):
                    req = make_request(
                        "judge",
                        ident,
                        self.decoding,
                        messages=messages,
                        prompt=prompt,
                        labels=group.scale.labels,
                        sample_index=k,
                        parts={
                            "prompt_group": group.id,
                            "variant": cond.variant,
                            "rubric": cond.rubric,
                            "text_version": group.version,
                            "text_hash": group.text_hash(cond.variant),
                            **({"batch_plan": asdict(plans[k])} if k in plans and k > 0 else {}),
                            **mode.key_parts(shown, own),
                        },
                        # the presentation and the answer prefix are keyed as the mode's named parts
                        assistant_prefix=own if messages is not None else None,
                        order=shown.order,
                        known=known,
                    )
                    out.append((shown.item, req))  # the item as presented: its mode's columns read it
        return out

    def _presentations(self, item: Item, k: int = 0, earlier=None) -> list:
        """The mode's presentations of ``item`` (in round ``k`` after ``earlier[item.id]`` where it
        asks in rounds); under a sparse plan's cells (``orders_of``) those of the item's planned
        orders, in the plan's order."""
        mode, group = self.mode, self.group
        if mode.rounds(group, [item]) > 1:
            seen = None if earlier is None else earlier.get(item.id, ())
            return mode.round_presentations(item, group=group, k=k, earlier=seen)
        if k > 0:
            return []
        if self.orders_of is None:
            return mode.presentations(item, group=group, position_swap=self.condition.position_swap)
        by_order = {p.order: p for p in mode.presentations(item, group=group, position_swap=True)}
        return [by_order[o] for o in self.orders_of.get(item.id, ())]

    def render(self, shown, prefix: str | None) -> tuple:
        """``(messages, prompt)`` of one presentation (``rendered``'s where it has it): chat
        messages, or a completion prompt ending with the answer prefix."""
        key = (self.condition.variant, shown.item.id, shown.order, shown.part, prefix)
        if key not in self.rendered:
            self.rendered[key] = render_presentation(
                self.condition, self.group, shown.item, self.examples, prefix
            )
        return self.rendered[key]


def render_presentation(condition: Condition, group: PromptGroup, seen: Item, examples, prefix: str | None):
    """``(messages, prompt)`` of one presentation: chat messages, or a completion prompt ending
    with the answer prefix."""
    if condition.prompt_format == "chat":
        return render_chat(group, condition.variant, seen), None
    if condition.prompt_format == "completion":
        answer = group.completion_answer
        prompt = render_completion(group, condition.variant, seen, examples, answer_prefix=answer)
        if answer is None:  # the prefix its own paragraph
            return None, "\n\n".join(p for p in (prompt, prefix) if p)
        return None, (f"{prompt} {prefix}" if prefix else prompt)
    raise ValueError(f"prompt_format must be 'chat' or 'completion', got {condition.prompt_format!r}")

"""The runner: items x one prompt variant x one backbone -> cached calls -> judgments table."""

from __future__ import annotations

import json
import logging
import warnings
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from promptlottery import SCHEMA_VERSION
from promptlottery.backends.base import Backend, Decoding, JudgeRequest, JudgeResponse, KnownAnswer
from promptlottery.calls.cache import CallCache, make_request

# the call loop lives in calls.loop (the gate and the rubric study use it without the grid)
from promptlottery.calls.loop import BatchPlan, CallStats, run_calls
from promptlottery.calls.spend import SpendCap
from promptlottery.config import REPEAT_SOURCES
from promptlottery.data.schema import Item
from promptlottery.errors import ConfigError
from promptlottery.modes import DEFAULT_MODE, get_mode
from promptlottery.prompts.groups import PromptGroup
from promptlottery.prompts.requests import query_text, render_chat, render_completion
from promptlottery.prompts.scoring import score_response, unscored, verdict_context

logger = logging.getLogger(__name__)


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
    #: a pair's two orders ("12" and "21") each a call of its own (the pairwise mode)
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


def repeat_plans(source: str, n_samples: int, seed: int, base_size: int) -> dict[int, BatchPlan] | None:
    """``{sample_index: BatchPlan}`` under ``repeat_source=source``, or ``None`` for ``none``.

    ``none``: every sample is answered in one call list under the default plan; a deterministic
    backend then gives its greedy repeats the same label probabilities, and they agree by
    construction. ``batch`` (ours: an emulation of the batch-composition nondeterminism of the
    paper's GPU runs, which the paper does not control): sample 0 under the default plan (length
    order, the backend's batch size ``base_size``), and each sample ``k >= 1`` in its own batches,
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
    plans = {0: BatchPlan(size=base)}
    for k in range(1, n_samples):
        plans[k] = BatchPlan("shuffled", seed=seed * 100003 + k, size=sizes[(k - 1) % len(sizes)])
    return plans


def build_requests(
    items: list[Item],
    condition: Condition,
    group: PromptGroup,
    backend: Backend,
    decoding: Decoding,
    *,
    n_samples: int = 1,
    examples: list[tuple[Item, str]] = (),
    repeat_source: str = "none",
    human_range: tuple[float, float] | None = None,
    orders_of: dict[str, tuple[str, ...]] | None = None,
    round_k: int | None = None,
    earlier: dict[str, tuple[str, ...]] | None = None,
) -> list[tuple[Item, JudgeRequest]]:
    """One request per item and sample. A repeat sample computed under its own batch plan
    (``repeat_source=batch``, :func:`repeat_plans`) has the plan in its cache key; sample 0 under the
    default plan keeps the key of an ordinary call, so it is shared with the paraphrase grid.

    The judge mode (``condition.judge_mode``) presents each item once or several times (a pair in
    both orders under ``position_swap``), one request per presentation and sample; what tells the
    presentations apart (a pair's order and the group's assistant prefix) are named parts of the key
    (a single presentation keeps the ordinary key). Every request carries its :class:`KnownAnswer`
    (``human_range``: the dataset's, for the pointwise label), outside the key. ``orders_of``
    (pairwise, a sparse plan's cells): the orders judged for each item id instead. A mode that asks
    in rounds (:meth:`JudgeMode.rounds`, an analytic batch): round ``round_k`` after each item's
    greedy answers ``earlier`` (by item id), or every round after placeholder answers (``round_k``
    None: for counting calls, the dry run)."""
    labels = group.scale.labels
    plans = repeat_plans(repeat_source, n_samples, decoding.seed, backend.max_concurrency) or {}
    ident = backend.identity()
    mode = get_mode(condition.judge_mode)
    prefix = mode.assistant_prefix(group)
    rounds = range(mode.rounds(group, items)) if round_k is None else (round_k,)
    out = []
    for item in items:
        for shown in (
            p
            for k in rounds
            for p in _presentations(mode, item, group, condition.position_swap, orders_of, k, earlier)
        ):
            own = prefix if shown.prefix is None else shown.prefix
            messages, prompt = _render(condition, group, shown.item, examples, own)
            known = KnownAnswer(
                condition.variant,
                group.scale.scores,
                mode.known_label(item, condition.criterion, group.scale, shown, human_range),
                group.variant(condition.variant).control,
            )
            for k in range(n_samples):
                req = make_request(
                    "judge",
                    ident,
                    decoding,
                    messages=messages,
                    prompt=prompt,
                    labels=labels,
                    sample_index=k,
                    parts={
                        "prompt_group": group.id,
                        "variant": condition.variant,
                        "rubric": condition.rubric,
                        "text_version": group.version,
                        "text_hash": group.text_hash(condition.variant),
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


def _presentations(
    mode, item: Item, group: PromptGroup, position_swap: bool, orders_of, k: int = 0, earlier=None
) -> list:
    """The mode's presentations of ``item`` (in round ``k`` after ``earlier[item.id]`` where it asks
    in rounds); under a sparse plan's cells (``orders_of``) those of the item's planned orders, in
    the plan's order."""
    if mode.rounds(group, [item]) > 1:
        seen = None if earlier is None else earlier.get(item.id, ())
        return mode.round_presentations(item, group=group, k=k, earlier=seen)
    if k > 0:
        return []
    if orders_of is None:
        return mode.presentations(item, group=group, position_swap=position_swap)
    by_order = {p.order: p for p in mode.presentations(item, group=group, position_swap=True)}
    return [by_order[o] for o in orders_of.get(item.id, ())]


def _render(condition: Condition, group: PromptGroup, seen: Item, examples, prefix: str | None):
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


def judgments_table(
    pairs: list[tuple[Item, JudgeRequest]],
    answers: dict[str, JudgeResponse],
    condition: Condition,
    group: PromptGroup,
    decoding: Decoding,
    cached_keys: set[str],
    stats: CallStats,
    plans: dict[int, BatchPlan] | None = None,
    repeat_source: str = "none",
    skipped: dict[str, str] | None = None,
) -> pd.DataFrame:
    """One row per request; a request in ``skipped`` (never sent, :func:`over_long`) is a row with
    every score missing and the reason."""
    mode = get_mode(condition.judge_mode)
    rows = []
    for item, req in pairs:
        if req.key in (skipped or {}):
            resp, s = JudgeResponse("", None, 0, 0, 0.0), unscored(skipped[req.key])
        else:
            resp = answers[req.key]
            s = score_response(resp, mode.scoring_scale(group.scale, req.order), **verdict_context(req))
            stats.parse_failures += s.parsed_label is None
        human_raw = item.human.get(condition.criterion)
        rows.append(
            {
                "schema_version": SCHEMA_VERSION,
                "condition": condition.id,
                **{k: v for k, v in asdict(condition).items() if k not in ("prompt_format", "position_swap")},
                "prompt_format": condition.prompt_format,
                "scale": group.scale.name,
                "text_version": group.version,
                "item_id": item.id,
                "system": item.system,
                "sample_index": req.sample_index,
                # what made this sample's computation differ from the other samples' (judging.runner.repeat_plans)
                "repeat_source": repeat_source,
                "batch_plan": plans[req.sample_index].describe() if plans else "",
                "temperature": decoding.temperature,
                "seed": decoding.seed,
                "human": item.human_score(condition.criterion),
                "human_raters": mode.human_raters(human_raw),
                "human_kind": item.human_kind,
                "raw_output": resp.raw_text,
                **asdict(s),
                "label_probs": json.dumps(resp.label_probs) if resp.label_probs is not None else None,
                "prompt_tokens": resp.prompt_tokens,
                "completion_tokens": resp.completion_tokens,
                "latency_s": resp.latency_s,
                "cache_hit": req.key in cached_keys,
                "cache_key": req.key,
                # what the judge saw, so that downstream stages (the gate) never re-render prompts
                "query": query_text(req.messages, req.prompt)
                + (f"\n\n[assistant] {req.assistant_prefix}" if req.assistant_prefix else ""),
                **mode.columns(item, req.order, group.scale, s, resp.label_probs, human_raw),
            }
        )
    return pd.DataFrame(rows)


def judge(
    items: list[Item],
    condition: Condition,
    group: PromptGroup,
    backend: Backend,
    cache: CallCache,
    decoding: Decoding,
    *,
    n_samples: int = 1,
    examples: list[tuple[Item, str]] = (),
    max_retries: int = 4,
    backoff_s: float = 1.0,
    repeat_source: str = "none",
    human_range: tuple[float, float] | None = None,
    orders_of: dict[str, tuple[str, ...]] | None = None,
    spend: SpendCap | None = None,
) -> tuple[pd.DataFrame, CallStats]:
    """Judge ``items`` under ``condition``; returns the judgments table and call counts.

    ``repeat_source="batch"`` answers each sample under its own batch plan (:func:`repeat_plans`);
    ``human_range`` (the dataset's) goes to :func:`build_requests`.
    """
    if condition.criterion and not any(condition.criterion in it.human for it in items):
        logger.warning("no item has human label criterion=%s condition=%s", condition.criterion, condition.id)
    stats = CallStats()
    plans = repeat_plans(repeat_source, n_samples, decoding.seed, backend.max_concurrency)
    calls = dict(
        max_retries=max_retries, backoff_s=backoff_s, repeat_source=repeat_source, plans=plans, spend=spend
    )
    request_options = dict(n_samples=n_samples, examples=examples, repeat_source=repeat_source)
    request_options.update(human_range=human_range, orders_of=orders_of)
    n_rounds = get_mode(condition.judge_mode).rounds(group, items)
    if n_rounds == 1:
        pairs = build_requests(items, condition, group, backend, decoding, **request_options)
        return _judged(pairs, condition, group, backend, cache, decoding, stats, **calls), stats
    if n_samples != 1 or plans is not None or orders_of is not None:
        raise ConfigError(
            f"prompt group {group.id} asks its criteria in one reply (criteria_call={group.criteria_call}): "
            "each position is read after the greedy answers before it, so only n_samples=1, "
            "repeat_source=none and judge.design=full"
        )
    if condition.prompt_format == "chat" and not backend.supports_assistant_prefix:
        raise ConfigError(
            f"prompt group {group.id} reads each answer after the reply so far in the assistant turn, which "
            f"backend {type(backend).__name__} does not honour (Backend.supports_assistant_prefix); use "
            "backbone.prompt_format=completion"
        )
    so_far: dict[str, tuple[str, ...]] = {it.id: () for it in items}
    tables = []
    for k in range(n_rounds):  # round k: criterion k of every item whose earlier answers all have a label
        pairs = build_requests(
            items, condition, group, backend, decoding, **request_options, round_k=k, earlier=so_far
        )
        if not pairs:
            break
        table = _judged(
            pairs, condition, group, backend, cache, decoding, stats, **calls, desc=f" position {k + 1}"
        )
        for item_id, argmax, parsed in zip(table["item_id"], table["argmax_label"], table["parsed_label"]):
            greedy = argmax if isinstance(argmax, str) else parsed
            if isinstance(greedy, str):
                so_far[item_id] += (greedy,)
        tables.append(table)
    return pd.concat(tables, ignore_index=True), stats


def _judged(
    pairs: list[tuple[Item, JudgeRequest]], condition: Condition, group: PromptGroup, backend: Backend,
    cache: CallCache, decoding: Decoding, stats: CallStats, *, max_retries: int, backoff_s: float,
    repeat_source: str, plans: dict[int, BatchPlan] | None, desc: str = "", spend: SpendCap | None = None,
) -> pd.DataFrame:  # fmt: skip
    """``pairs`` answered (the cache first; a request too long for the context never sent) and
    tabulated, the calls counted into ``stats``."""
    skipped = over_long(pairs, backend, decoding)
    stats.over_long += len(skipped)
    requests = [r for _, r in pairs if r.key not in skipped]
    cached_keys = set(cache.get_many([r.key for r in requests]))
    # one call list per batch plan: under `none` all samples together, under `batch` one per sample
    groups = (
        {None: requests}
        if plans is None
        else {k: [r for r in requests if r.sample_index == k] for k in plans}
    )
    answers: dict[str, JudgeResponse] = {}
    for k, reqs in groups.items():
        where = (condition.id if k is None else f"{condition.id} sample {k}") + desc
        answers.update(
            run_calls(reqs, backend, cache, decoding, stats=stats, max_retries=max_retries, backoff_s=backoff_s,
                      desc=where, plan=None if k is None else plans[k], spend=spend)
        )  # fmt: skip
    table = judgments_table(
        pairs, answers, condition, group, decoding, cached_keys, stats, plans, repeat_source, skipped
    )
    stats.total += len(skipped)
    return table


def over_long(pairs: list[tuple[Item, JudgeRequest]], backend: Backend, decoding: Decoding) -> dict[str, str]:
    """``{request key: reason}`` for the requests whose prompt and ``max_new_tokens`` do not fit the
    backend's context (where it knows it, ``Backend.context_length``): each is one failed item with a
    missing score and the reason ``prompt longer than the context: N > M tokens`` (M the context
    less the new tokens), never sent, so the rest of its batch is judged (a re-run fails the same
    way: it is no transient error to re-run)."""
    limit = getattr(backend, "context_length", None)  # a test double need not say
    if not limit:
        return {}
    room = limit - decoding.max_new_tokens
    out: dict[str, str] = {}
    for item, req in pairs:
        if req.key not in out and (n := backend.count_tokens(req)) > room:
            out[req.key] = f"prompt longer than the context: {n} > {room} tokens"
            logger.warning("item not judged item=%s reason=%s", item.id, out[req.key])
    return out


def condition_metrics(df: pd.DataFrame) -> dict[str, Any]:
    """Per-condition summary: coverage, parse failures, label mass and alignment with humans.

    Every correlation names the verdict it uses: ``weighted`` is the logprob-weighted score,
    ``argmax`` the most probable scale label.
    """
    from promptlottery.metrics import UndefinedMetricWarning, kendall_tau, pearson, spearman

    n = len(df)
    out: dict[str, Any] = {
        "n_judgments": n,
        "n_scored": int(df["score"].notna().sum()),
        "parse_failure_rate": float(df["parsed_label"].isna().mean()) if n else float("nan"),
        "missing_rate": float(df["score"].isna().mean()) if n else float("nan"),
        "label_mass_mean": float(df["label_mass"].mean()) if df["label_mass"].notna().any() else None,
        "scoring_modes": {str(k): int(v) for k, v in df["scoring_mode"].value_counts(dropna=False).items()},
        "argmax_label_counts": {
            str(k): int(v) for k, v in df["argmax_label"].value_counts().sort_index().items()
        },
    }
    has_human = df["human"].notna()
    out["n_with_human"] = int(has_human.sum())
    if has_human.sum() >= 3:
        h = df.loc[has_human, "human"].to_numpy(float)
        for verdict, col in (
            ("weighted", "weighted_score"),
            ("argmax", "argmax_score"),
            ("parsed", "parsed_score"),
        ):
            x = df.loc[has_human, col].to_numpy(float)
            # undefined (e.g. a judge that gives one label to every item): None and one logged line,
            # not three warnings above the finding of every job
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", UndefinedMetricWarning)
                out[f"pearson_{verdict}"] = _nan_to_none(pearson(x, h))
                out[f"spearman_{verdict}"] = _nan_to_none(spearman(x, h))
                out[f"kendall_tau_b_{verdict}"] = _nan_to_none(kendall_tau(x, h))
            undefined = [w for w in caught if issubclass(w.category, UndefinedMetricWarning)]
            for w in caught:
                if w not in undefined:  # any other warning goes on as it came
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            if undefined:
                logger.info(
                    "human correlation undefined verdict=%s metrics=pearson,spearman,kendall_tau_b reason=%r",
                    verdict,
                    str(undefined[0].message).split(": ", 1)[-1],
                )
    return out


def _nan_to_none(x: float) -> float | None:
    return None if x != x else float(x)

"""The runner: items x one prompt variant x one backbone -> cached calls -> judgments table."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from promptlottery import SCHEMA_VERSION
from promptlottery.backends.base import Backend, Decoding, JudgeRequest, JudgeResponse, KnownAnswer
from promptlottery.config import REPEAT_SOURCES
from promptlottery.data.schema import Item
from promptlottery.judging.cache import CallCache, make_request

# the call loop lives in judging.calls (the gate and the rubric study use it without the grid)
from promptlottery.judging.calls import BatchPlan, CallStats, run_calls
from promptlottery.judging.pairs import human_preference, label_terms, orders, preference_columns, shown
from promptlottery.judging.scoring import score_response, unscored
from promptlottery.prompts.groups import PromptGroup
from promptlottery.prompts.requests import query_text, render_chat, render_completion, to_scale_label

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
    #: "pointwise" (rate one response) or "pairwise" (prefer one of two; judging.pairs)
    judge_mode: str = "pointwise"
    #: pairwise: judge every pair in both orders ("12" and "21"), each a call of its own
    position_swap: bool = True

    @property
    def id(self) -> str:
        return "/".join([self.dataset, self.judge_family, self.prompt_group, self.variant, self.backbone])


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


def known_label(
    item: Item, criterion: str, scale, order: str | None, human_range: tuple[float, float] | None
) -> str | None:
    """The label a judge that knew the human answer gives on the shown scale (:class:`KnownAnswer`):
    pointwise the human value mapped from ``human_range`` onto the scale, its nearest label; pairwise
    the label shown for the gold preference in ``order`` (A for response_a in "12", B in "21"); None
    without a human label, without ``human_range`` (pointwise), or for a gold tie on a scale without
    a tie label."""
    if order is None:
        value = item.human_score(criterion)
        return None if value is None or human_range is None else to_scale_label(value, human_range, scale)
    gold, _ = human_preference(item.human.get(criterion))
    return {term: lab for lab, term in label_terms(scale, order).items()}.get(gold)


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
) -> list[tuple[Item, JudgeRequest]]:
    """One request per item and sample. A repeat sample computed under its own batch plan
    (``repeat_source=batch``, :func:`repeat_plans`) has the plan in its cache key; sample 0 under the
    default plan keeps the key of an ordinary call, so it is shared with the paraphrase grid.

    Pairwise (``condition.judge_mode="pairwise"``): one request per item, order and sample; the order
    ("12", and "21" with response_a and response_b swapped under ``position_swap``) and the group's
    assistant prefix are named parts of the key (pointwise keys are unchanged). Every request carries
    its :class:`KnownAnswer` (``human_range``: the dataset's, for the pointwise label), outside the key.
    ``orders_of`` (pairwise, a sparse plan's cells): the orders judged for each item id instead."""
    labels = group.scale.labels
    plans = repeat_plans(repeat_source, n_samples, decoding.seed, backend.max_concurrency) or {}
    ident = backend.identity()
    pairwise = condition.judge_mode == "pairwise"
    prefix = group.assistant_prefix if pairwise else None
    out = []
    for item, order in (
        (
            (it, o)
            for it in items
            for o in (orders(condition.position_swap) if orders_of is None else orders_of.get(it.id, ()))
        )
        if pairwise
        else ((it, None) for it in items)
    ):
        seen = shown(item, order) if pairwise else item
        if condition.prompt_format == "chat":
            messages, prompt = render_chat(group, condition.variant, seen), None
        elif condition.prompt_format == "completion":
            messages, prompt = None, render_completion(group, condition.variant, seen, examples)
            prompt = f"{prompt} {prefix}" if prefix else prompt
        else:
            raise ValueError(f"prompt_format must be 'chat' or 'completion', got {condition.prompt_format!r}")
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
                    **({"order": order, "assistant_prefix": prefix} if pairwise else {}),
                },
            )
            if pairwise:  # the order and the answer prefix ("[[") are keyed above as named parts
                req.order = order
                req.assistant_prefix = prefix if messages is not None else None
            req.known = KnownAnswer(
                condition.variant,
                group.scale.scores,
                known_label(item, condition.criterion, group.scale, order, human_range),
            )
            out.append((item, req))
    return out


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
    rows = []
    for item, req in pairs:
        pairwise = req.order is not None
        if req.key in (skipped or {}):
            resp, s = JudgeResponse("", None, 0, 0, 0.0), unscored(skipped[req.key])
        else:
            resp = answers[req.key]
            # a pairwise scale's scores follow the pair's terms in each order (1 = response_a wins)
            s = score_response(resp, group.scale.for_order(req.order) if pairwise else group.scale)
            stats.parse_failures += s.parsed_label is None
        human_raw = item.human.get(condition.criterion)
        if pairwise:
            human_pref, raters = human_preference(human_raw)
            pair_cols = {
                **preference_columns(item, req.order, group.scale, s, resp.label_probs),
                "human_preferred": human_pref,
            }
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
                "human_raters": raters
                if pairwise
                else (json.dumps(human_raw) if isinstance(human_raw, (list, tuple)) else None),
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
                **(pair_cols if pairwise else {}),
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
) -> tuple[pd.DataFrame, CallStats]:
    """Judge ``items`` under ``condition``; returns the judgments table and call counts.

    ``repeat_source="batch"`` answers each sample under its own batch plan (:func:`repeat_plans`);
    ``human_range`` (the dataset's) goes to :func:`build_requests`.
    """
    if condition.criterion and not any(condition.criterion in it.human for it in items):
        logger.warning("no item has human label criterion=%s condition=%s", condition.criterion, condition.id)
    pairs = build_requests(
        items,
        condition,
        group,
        backend,
        decoding,
        n_samples=n_samples,
        examples=examples,
        repeat_source=repeat_source,
        human_range=human_range,
        orders_of=orders_of,
    )
    stats = CallStats()
    skipped = over_long(pairs, backend, decoding)
    stats.over_long = len(skipped)
    requests = [r for _, r in pairs if r.key not in skipped]
    cached_keys = set(cache.get_many([r.key for r in requests]))
    plans = repeat_plans(repeat_source, n_samples, decoding.seed, backend.max_concurrency)
    # one call list per batch plan: under `none` all samples together, under `batch` one per sample
    groups = (
        {None: requests}
        if plans is None
        else {k: [r for r in requests if r.sample_index == k] for k in plans}
    )
    answers: dict[str, JudgeResponse] = {}
    for k, reqs in groups.items():
        answers.update(
            run_calls(
                reqs,
                backend,
                cache,
                decoding,
                stats=stats,
                max_retries=max_retries,
                backoff_s=backoff_s,
                desc=condition.id if k is None else f"{condition.id} sample {k}",
                plan=None if k is None else plans[k],
            )
        )
    table = judgments_table(
        pairs, answers, condition, group, decoding, cached_keys, stats, plans, repeat_source, skipped
    )
    stats.total += len(skipped)
    return table, stats


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
    from promptlottery.metrics import kendall_tau, pearson, spearman

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
            out[f"pearson_{verdict}"] = _nan_to_none(pearson(x, h))
            out[f"spearman_{verdict}"] = _nan_to_none(spearman(x, h))
            out[f"kendall_tau_b_{verdict}"] = _nan_to_none(kendall_tau(x, h))
    return out


def _nan_to_none(x: float) -> float | None:
    return None if x != x else float(x)

from __future__ import annotations

import json
import logging
import warnings
from dataclasses import asdict
from typing import Any

import pandas as pd

from promptlottery import SCHEMA_VERSION
from promptlottery.backends.base import Backend, Decoding, JudgeRequest, JudgeResponse
from promptlottery.calls.cache import CallCache

# the call loop lives in calls.loop (the gate and the rubric study use it without the grid)
from promptlottery.calls.loop import CallStats, run_calls
from promptlottery.data.schema import Item
from promptlottery.errors import ConfigError

# the judge job (its grid cell, repeat plans and requests) lives in judging.judge_job
from promptlottery.judging.judge_job import Condition, JudgeJob, repeat_plans
from promptlottery.prompts.groups import PromptGroup
from promptlottery.prompts.requests import query_text
from promptlottery.prompts.scoring import score_response, unscored, verdict_context

__all__ = ["Condition", "JudgeJob", "build_requests", "judge", "repeat_plans", "run"]

logger = logging.getLogger(__name__)


def build_requests(
    items: list[Item], condition: Condition, group: PromptGroup, backend: Backend, decoding: Decoding,
    *, round_k: int | None = None, earlier: dict[str, tuple[str, ...]] | None = None, **options: Any,
) -> list[tuple[Item, JudgeRequest]]:  # fmt: skip
    """The (item as presented, request) pairs of :class:`JudgeJob` ``(items, condition, group,
    backend, decoding, **options)`` (:meth:`JudgeJob.requests`, round ``round_k`` after ``earlier``)."""
    return JudgeJob(items, condition, group, backend, decoding, **options).requests(round_k, earlier)


def judge(
    items: list[Item], condition: Condition, group: PromptGroup, backend: Backend, cache: CallCache,
    decoding: Decoding, **options: Any,
) -> tuple[pd.DataFrame, CallStats]:  # fmt: skip
    """:func:`run` of the :class:`JudgeJob` ``(items, condition, group, backend, decoding, cache=cache,
    **options)``: the judgments table and call counts."""
    return run(JudgeJob(items, condition, group, backend, decoding, cache=cache, **options))


def judgments_table(
    job: JudgeJob,
    pairs: list[tuple[Item, JudgeRequest]],
    answers: dict[str, JudgeResponse],
    cached_keys: set[str],
    stats: CallStats,
    skipped: dict[str, str] | None = None,
) -> pd.DataFrame:
    """One row per request of ``job``; a request in ``skipped`` (never sent, :func:`over_long`) is a
    row with every score missing and the reason."""
    condition, group, decoding, mode, plans = job.condition, job.group, job.decoding, job.mode, job.plans
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
                # what made this sample's computation differ from the other samples' (judge_job.repeat_plans)
                "repeat_source": job.repeat_source,
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


def run(job: JudgeJob) -> tuple[pd.DataFrame, CallStats]:
    """Judge ``job``'s items under its condition; returns the judgments table and call counts.

    ``repeat_source="batch"`` answers each sample under its own batch plan (:func:`repeat_plans`).
    A mode that asks in rounds judges round after round, each after the greedy answers before it.
    """
    condition, group, items = job.condition, job.group, job.items
    if condition.criterion and not any(condition.criterion in it.human for it in items):
        logger.warning("no item has human label criterion=%s condition=%s", condition.criterion, condition.id)
    stats = CallStats()
    n_rounds = job.mode.rounds(group, items)
    if n_rounds == 1:
        return _judged(job, job.requests(), stats), stats
    if job.n_samples != 1 or job.plans is not None or job.orders_of is not None:
        raise ConfigError(
            f"prompt group {group.id} asks its criteria in one reply (criteria_call={group.criteria_call}): "
            "each position is read after the greedy answers before it, so only n_samples=1, "
            "repeat_source=none and judge.design=full"
        )
    if condition.prompt_format == "chat" and not job.backend.supports_assistant_prefix:
        raise ConfigError(
            f"prompt group {group.id} reads each answer after the reply so far in the assistant turn, which "
            f"backend {type(job.backend).__name__} does not honour (Backend.supports_assistant_prefix); use "
            "backbone.prompt_format=completion"
        )
    so_far: dict[str, tuple[str, ...]] = {it.id: () for it in items}
    tables = []
    for k in range(n_rounds):  # round k: criterion k of every item whose earlier answers all have a label
        pairs = job.requests(round_k=k, earlier=so_far)
        if not pairs:
            break
        table = _judged(job, pairs, stats, desc=f" position {k + 1}")
        for item_id, argmax, parsed in zip(table["item_id"], table["argmax_label"], table["parsed_label"]):
            greedy = argmax if isinstance(argmax, str) else parsed
            if isinstance(greedy, str):
                so_far[item_id] += (greedy,)
        tables.append(table)
    return pd.concat(tables, ignore_index=True), stats


def _judged(
    job: JudgeJob, pairs: list[tuple[Item, JudgeRequest]], stats: CallStats, desc: str = ""
) -> pd.DataFrame:
    """``pairs`` of ``job`` answered (the cache first; a request too long for the context never
    sent) and tabulated, the calls counted into ``stats``."""
    backend, cache, decoding, plans = job.backend, job.cache, job.decoding, job.plans
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
        where = (job.condition.id if k is None else f"{job.condition.id} sample {k}") + desc
        answers.update(
            run_calls(reqs, backend, cache, decoding, stats=stats, max_retries=job.max_retries,
                      backoff_s=job.backoff_s, desc=where, plan=None if k is None else plans[k], spend=job.spend)
        )  # fmt: skip
    table = judgments_table(job, pairs, answers, cached_keys, stats, skipped)
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

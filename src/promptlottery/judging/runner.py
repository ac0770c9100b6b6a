"""The runner: items x one prompt variant x one backbone -> cached calls -> judgments table."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from promptlottery import SCHEMA_VERSION
from promptlottery.backends.base import Backend, BackendError, Decoding, JudgeRequest, JudgeResponse
from promptlottery.data.schema import Item
from promptlottery.judging.cache import CallCache, cache_key
from promptlottery.judging.scoring import score_response
from promptlottery.prompts.groups import PromptGroup
from promptlottery.prompts.requests import render_chat, render_completion

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

    @property
    def id(self) -> str:
        return "/".join([self.dataset, self.judge_family, self.prompt_group, self.variant, self.backbone])


@dataclass
class CallStats:
    total: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    parse_failures: int = 0
    errors: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """``total``, ``cache_hits`` and ``cache_misses``: the ``calls`` record of results.json."""
        return {"total": self.total, "cache_hits": self.cache_hits, "cache_misses": self.cache_misses}


class JudgingError(RuntimeError):
    """The runner stopped; every judgment computed before the failure is in the cache."""


def build_requests(
    items: list[Item],
    condition: Condition,
    group: PromptGroup,
    backend: Backend,
    decoding: Decoding,
    *,
    n_samples: int = 1,
    examples: list[tuple[Item, str]] = (),
) -> list[tuple[Item, JudgeRequest]]:
    labels = group.scale.labels
    ident = backend.identity()
    out = []
    for item in items:
        if condition.prompt_format == "chat":
            messages, prompt = render_chat(group, condition.variant, item), None
        elif condition.prompt_format == "completion":
            messages, prompt = None, render_completion(group, condition.variant, item, examples)
        else:
            raise ValueError(f"prompt_format must be 'chat' or 'completion', got {condition.prompt_format!r}")
        for k in range(n_samples):
            key = cache_key(
                {
                    "backend": ident,
                    "messages": messages,
                    "prompt": prompt,
                    "labels": labels,
                    "decoding": decoding.as_dict(),
                    "prompt_group": group.id,
                    "variant": condition.variant,
                    "rubric": condition.rubric,
                    "text_version": group.version,
                    "text_hash": group.text_hash(condition.variant),
                    "sample_index": k,
                }
            )
            out.append(
                (item, JudgeRequest(key=key, labels=labels, messages=messages, prompt=prompt, sample_index=k))
            )
    return out


def _call(
    backend: Backend, batch: list[JudgeRequest], decoding: Decoding, max_retries: int, backoff_s: float
):
    for attempt in range(max_retries + 1):
        try:
            return backend.generate(batch, decoding)
        except Exception as exc:  # noqa: BLE001 - the predicate decides
            if attempt < max_retries and backend.is_retryable(exc):
                delay = backoff_s * 2**attempt
                logger.warning("retrying attempt=%d delay_s=%.1f error=%s", attempt + 1, delay, exc)
                time.sleep(delay)
                continue
            raise


def run_calls(
    requests: list[JudgeRequest],
    backend: Backend,
    cache: CallCache,
    decoding: Decoding,
    *,
    stats: CallStats,
    max_retries: int = 4,
    backoff_s: float = 1.0,
    desc: str = "judging",
    max_consecutive_failures: int = 3,
) -> dict[str, JudgeResponse]:
    """Answer every request, from the cache where possible.

    Batches are planned from the whole request list (sorted by length, fixed size), so a batch is
    always computed with the same neighbours: a resumed run reproduces an uninterrupted one
    exactly. A batch with any uncached request is computed whole and its misses written at once.
    """
    unique = list({r.key: r for r in requests}.values())
    cached = cache.get_many([r.key for r in unique])
    stats.total += len(requests)
    order = sorted(unique, key=lambda r: (len(r.prompt or json.dumps(r.messages)), r.key))
    size = max(1, int(backend.max_concurrency))
    batches = [order[i : i + size] for i in range(0, len(order), size)]
    todo = [b for b in batches if any(r.key not in cached for r in b)]
    answers = dict(cached)
    misses = sum(1 for r in unique if r.key not in cached)
    if todo and getattr(cache, "readonly", False):  # fail before computing answers it cannot keep
        from promptlottery.judging.cache import CacheError

        raise CacheError(
            f"call cache dir {Path(cache.location).parent} is read-only and {misses} calls are not cached; make it "
            "writable or set paths.cache_dir to a writable directory"
        )
    failures: list[str] = []
    consecutive = 0
    for batch in tqdm(todo, desc=desc, unit="batch", disable=not todo):
        try:
            responses = _call(backend, batch, decoding, max_retries, backoff_s)
        except BackendError as exc:
            # keep going: one refused request must not cost the rest of the grid; but a backend
            # that fails batch after batch (server down) stops the run early
            failures.append(str(exc))
            consecutive += 1
            if consecutive >= max_consecutive_failures:
                break
            continue
        consecutive = 0
        fresh = [
            (r.key, resp, {"messages": r.messages, "prompt": r.prompt})
            for r, resp in zip(batch, responses)
            if r.key not in cached
        ]
        cache.put_many(fresh)
        answers.update({k: resp for k, resp, _ in fresh})
    if failures:
        stats.errors.extend(failures)
        raise JudgingError(
            f"{desc}: {len(failures)} batch(es) failed, {len(answers) - len(cached)} new calls cached "
            f"(re-run to complete); first error: {failures[0]}"
        )
    stats.cache_misses += misses
    stats.cache_hits += len(requests) - misses
    return answers


def judgments_table(
    pairs: list[tuple[Item, JudgeRequest]],
    answers: dict[str, JudgeResponse],
    condition: Condition,
    group: PromptGroup,
    decoding: Decoding,
    cached_keys: set[str],
    stats: CallStats,
) -> pd.DataFrame:
    rows = []
    for item, req in pairs:
        resp = answers[req.key]
        s = score_response(resp, group.scale)
        stats.parse_failures += s.parsed_label is None
        human_raw = item.human.get(condition.criterion)
        rows.append(
            {
                "schema_version": SCHEMA_VERSION,
                "condition": condition.id,
                **{k: v for k, v in asdict(condition).items() if k != "prompt_format"},
                "prompt_format": condition.prompt_format,
                "scale": group.scale.name,
                "text_version": group.version,
                "item_id": item.id,
                "system": item.system,
                "sample_index": req.sample_index,
                "temperature": decoding.temperature,
                "seed": decoding.seed,
                "human": item.human_score(condition.criterion),
                "human_raters": json.dumps(human_raw) if isinstance(human_raw, (list, tuple)) else None,
                "human_kind": item.human_kind,
                "raw_output": resp.raw_text,
                **asdict(s),
                "label_probs": json.dumps(resp.label_probs) if resp.label_probs is not None else None,
                "prompt_tokens": resp.prompt_tokens,
                "completion_tokens": resp.completion_tokens,
                "latency_s": resp.latency_s,
                "cache_hit": req.key in cached_keys,
                "cache_key": req.key,
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
) -> tuple[pd.DataFrame, CallStats]:
    """Judge ``items`` under ``condition``; returns the judgments table and call counts."""
    if condition.criterion and not any(condition.criterion in it.human for it in items):
        logger.warning("no item has human label criterion=%s condition=%s", condition.criterion, condition.id)
    pairs = build_requests(items, condition, group, backend, decoding, n_samples=n_samples, examples=examples)
    stats = CallStats()
    requests = [r for _, r in pairs]
    cached_keys = set(cache.get_many([r.key for r in requests]))
    answers = run_calls(
        requests,
        backend,
        cache,
        decoding,
        stats=stats,
        max_retries=max_retries,
        backoff_s=backoff_s,
        desc=condition.id,
    )
    return judgments_table(pairs, answers, condition, group, decoding, cached_keys, stats), stats


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

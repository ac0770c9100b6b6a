"""Before a judge job's first call: the calls it makes again because its cache is gone, and its dry run."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from promptlottery.calls.cache import CacheError, CallCache, cache_location
from promptlottery.calls.cache_manifest import manifest_path
from promptlottery.judging.judge_job import JudgeJob
from promptlottery.tracking.job import StageJob
from promptlottery.tracking.jobdir import previous_record, sibling_records
from promptlottery.tracking.secrets import redact_text

logger = logging.getLogger(__name__)


def _cache_where(paths: Any) -> str:
    loc = cache_location(paths)
    return redact_text(loc) if isinstance(loc, str) else str(Path(loc).resolve())


def check_lost_cache(cfg: DictConfig, cache: CallCache, output_dir: Path, *, keys) -> None:
    """Say, before any call, how many of this job's calls are made again because the cache that held
    them is gone: an empty (0-byte, new or renamed) cache where this job's previous run or the jobs
    beside it recorded calls cached there, or a SQLite file that replaced the one its manifest names
    (:mod:`promptlottery.calls.cache_manifest`; a new sweep dir too). With a paid API
    (``backbone.price_per_mtok_input`` set), refuse unless ``paths.allow_paid_recompute=true``.
    ``keys()`` gives this job's cache keys."""
    message = _lost_by_records(cfg, cache, output_dir, keys) or _lost_by_manifest(cfg, cache, keys)
    if message is None:
        return
    if cfg.backbone.get("price_per_mtok_input") is not None and not cfg.paths.get("allow_paid_recompute"):
        raise CacheError(
            f"{message}, on a paid API; point paths.cache_dir / paths.cache_url at the cache that holds "
            "them, or set paths.allow_paid_recompute=true to pay for them again"
        )
    logger.warning(message)


def _lost_by_records(cfg: DictConfig, cache: CallCache, output_dir: Path, keys) -> str | None:
    if len(cache):
        return None
    where = _cache_where(cfg.paths)
    previous = previous_record(output_dir)
    records = [
        r for r in ([previous] if previous else []) + sibling_records(output_dir) if r.get("status") == "ok"
    ]
    cached = [
        int((r.get("calls") or {}).get("total") or 0)
        for r in records
        if isinstance((r.get("config") or {}).get("paths"), dict)
        and _cache_where(r["config"]["paths"]) == where
    ]
    cached = [n for n in cached if n > 0]
    if not cached:
        return None
    by = "this job's previous run" if previous and len(cached) == 1 else f"{len(cached)} completed jobs here"
    return (
        f"call cache {where} is empty (0-byte, missing or replaced), but {by} cached {sum(cached)} calls "
        f"in it: all {len(keys())} calls of this job will be made again"
    )


def _lost_by_manifest(cfg: DictConfig, cache: CallCache, keys) -> str | None:
    lost = cache.replaced
    if lost is None:
        return None
    wanted = keys()
    again = len(set(wanted) - set(cache.get_many(wanted)))
    if not again:
        return None
    return (
        f"call cache {_cache_where(cfg.paths)} is not the file that held {lost['answers']} calls when its "
        f"manifest was written ({lost.get('written')}): it was emptied, removed or renamed and holds "
        f"{len(cache)} now; {again} of this job's {len(wanted)} calls will be made again (remove "
        f"{manifest_path(cache.location)} if the loss is meant)"
    )


def dry_run(cfg, judged: JudgeJob, job: StageJob) -> dict:
    """Count calls, prompt tokens, cached calls and cost of ``judged`` without calling a model."""
    backend = judged.backend
    pairs = judged.requests()
    keys = [r.key for _, r in pairs]
    cached = judged.cache.get_many(keys)
    tokens = sum(backend.count_tokens(r) for _, r in pairs)
    uncached_tokens = sum(backend.count_tokens(r) for _, r in pairs if r.key not in cached)
    price = cfg.backbone.price_per_mtok_input
    estimate = {
        "conditions": 1,
        "calls": len(pairs),
        "cached_calls": len(cached),
        "prompt_tokens": tokens,
        "uncached_prompt_tokens": uncached_tokens,
        "cost_usd": None if price is None else round(uncached_tokens / 1e6 * price, 6),
        # "tokenizer", or how the backend approximated when its tokenizer could not be loaded
        "token_count": backend.token_count_method,
    }
    if cfg.judge.get("design") == "adaptive":  # the walk's stops are known only from the answers
        estimate["calls_bound"] = "upper"
    print(f"dry_run condition={judged.condition.id} " + " ".join(f"{k}={v}" for k, v in estimate.items()))
    return job.write("dry_run", estimate=estimate)

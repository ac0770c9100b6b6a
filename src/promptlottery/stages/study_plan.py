"""The study's plan (``dry_run=true``): each job's calls, prompt tokens, cached calls, API cost and
device-hours, counted from shared parts (:func:`plan_study`); its totals and text are
:mod:`promptlottery.stages.study_plan_text`. The study itself: :mod:`promptlottery.stages.study`."""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from promptlottery.stages.study_plan_text import summarize_plan

logger = logging.getLogger(__name__)


@dataclass
class StudyExperiment:
    """One experiment of a study: its jobs' overrides (without ``hydra.*``) and its sweep dir."""

    name: str
    sweep_dir: Path
    jobs: list[list[str]] = field(default_factory=list)

    def launch_overrides(self) -> list[list[str]]:
        """Each job's overrides as launched: its sweep dir is the experiment's own."""
        return [[*job, f"hydra.sweep.dir={self.sweep_dir}"] for job in self.jobs]

    def plan(self) -> dict[str, Any]:
        """The experiment's ``sweep_plan.json`` (as tracking.callbacks.plan_jobs writes it)."""
        return {"jobs": [{"num": i, "overrides": sorted(o)} for i, o in enumerate(self.jobs)]}


@dataclass
class _Memo:
    """What the plan builds once and every job shares: datasets, backends, caches, predictions."""

    tmp: Path
    items: dict[tuple, list] = field(default_factory=dict)
    backends: dict[str, Any] = field(default_factory=dict)
    caches: dict[str, Any] = field(default_factory=dict)
    predictions: dict[str, Path] = field(default_factory=dict)


def _throughput(backbone: DictConfig) -> dict[str, Any]:
    t = backbone.get("throughput") or {}
    t = OmegaConf.to_container(t, resolve=True) if OmegaConf.is_config(t) else dict(t)
    return {
        "device": t.get("device") or "unknown",
        "tokens_per_s": t.get("tokens_per_s"),
        "engine_load_s": float(t.get("engine_load_s") or 0.0),
        "source": t.get("source") or "no throughput declared (backbone.throughput): no time estimate",
    }


def _items(cfg: DictConfig, options: dict, memo: _Memo) -> tuple[list, list]:
    from promptlottery.data import load_items
    from promptlottery.judging.job_inputs import job_sample

    key = (cfg.dataset.name, str(cfg.paths.data_dir), json.dumps(options, sort_keys=True, default=str))
    if key not in memo.items:
        memo.items[key] = load_items(cfg.dataset.name, data_dir=cfg.paths.data_dir, **options)
    all_items = memo.items[key]
    return all_items, job_sample(cfg, all_items)


def _backend(spec: DictConfig, name: str, memo: _Memo):
    from promptlottery.calls.compose import build_backend

    if name not in memo.backends:
        memo.backends[name] = build_backend(spec)
    return memo.backends[name]


def _cache(paths: DictConfig, memo: _Memo):
    from promptlottery.calls.cache import cache_location, open_cache

    where = str(cache_location(paths))
    if where not in memo.caches:
        memo.caches[where] = open_cache(paths)
    return memo.caches[where]


def _tokens(requests) -> int:
    from promptlottery.backends.tokenizers import approx_token_count

    return sum(approx_token_count(r) for r in requests)


def _run_tokens(requests: list, order: str, size: int) -> int:
    """The approximated prompt tokens a backend's forward passes run for ``requests`` under its batch
    ``order``: every prompt whole for ``length`` (what a server or an API is sent); for ``prefix``
    (:func:`~promptlottery.calls.loop.prefix_batches`, the transformers and OpenVINO judges) each batch's
    shared prefix once and every row padded to the batch's longest rest, as the backend runs it."""
    from promptlottery.backends.tokenizers import APPROX_CHARS_PER_TOKEN, approx_token_count
    from promptlottery.calls.loop import common_prefix_chars, prefix_batches, request_text

    if order != "prefix" or not requests:
        return _tokens(requests)
    total = 0
    for batch in prefix_batches(sorted(requests, key=lambda r: (request_text(r), r.key)), max(1, size)):
        shared = (
            common_prefix_chars(request_text(batch[0]), request_text(batch[-1])) // APPROX_CHARS_PER_TOKEN
            if len(batch) > 1
            else 0
        )
        total += shared + len(batch) * max(approx_token_count(r) - shared for r in batch)
    return int(total)


def _predict_stage(cfg: DictConfig, memo: _Memo) -> dict[str, Any] | None:
    """The candidate systems' answers a job needs first (SQuAD v2): calls, tokens, cached, per system."""
    from promptlottery.calls.compose import run_decoding
    from promptlottery.judging.predict import answer_requests, placeholder_predictions

    if not (cfg.predict and cfg.predict.get("systems")):
        return None
    key = json.dumps(OmegaConf.to_container(cfg.predict, resolve=True), sort_keys=True, default=str)
    if key in memo.predictions:
        return None  # counted with the first job that needs it
    out = memo.tmp / f"predictions_{len(memo.predictions)}"
    out.mkdir(parents=True, exist_ok=True)
    memo.predictions[key] = placeholder_predictions(
        cfg.predict, dataset=cfg.dataset.name, data_dir=cfg.paths.data_dir, output_dir=out
    )
    from promptlottery.backends.base import Decoding
    from promptlottery.data import load_items
    from promptlottery.data.registry import sample_items

    base = load_items(cfg.dataset.name, data_dir=cfg.paths.data_dir)
    questions = sample_items(base, limit=cfg.predict.limit, seed=cfg.predict.seed)
    gen = Decoding(
        **{**OmegaConf.to_container(cfg.predict.decoding, resolve=True), "seed": run_decoding(cfg).seed}
    )
    cache = _cache(cfg.paths, memo)
    systems = {}
    for name, spec in cfg.predict.systems.items():
        bb = spec.backbone
        backend = _backend(bb.backend, f"predict:{bb.name}", memo)
        template = spec.template_chat if bb.prompt_format == "chat" else spec.template_completion
        reqs = answer_requests(
            questions, name, backend, template, prompt_format=bb.prompt_format, examples=[], decoding=gen
        )
        keys = [r.key for r in reqs]
        cached = cache.get_many(keys)
        tp = _throughput(bb)
        uncached = _tokens(r for r in reqs if r.key not in cached)
        systems[name] = {
            "backbone": str(bb.name),
            "calls": len(reqs),
            "cached_calls": sum(1 for k in keys if k in cached),
            "prompt_tokens": _tokens(reqs),
            "uncached_prompt_tokens": uncached,
            "device": tp["device"],
            "hours": _hours(uncached, tp),
        }
    return {
        "stage": f"predict {cfg.dataset.name}",
        "questions": len(questions),
        "output": str(cfg.predict.output),
        "written": Path(str(cfg.predict.output)).exists(),
        "systems": systems,
    }


def _fake_with_real_predictions(cfg: DictConfig) -> bool:
    """A fake judge whose judged answers real models write (SQuAD v2's candidate systems)."""
    if not (cfg.predict and cfg.predict.get("systems")) or not str(
        cfg.backbone.backend.get("_target_", "")
    ).endswith("FakeBackend"):
        return False
    return any(
        _throughput(s.backbone)["device"] in ("cpu", "gpu", "api", "unknown")
        and not str(s.backbone.backend.get("_target_", "")).endswith(("FakeBackend", "SentenceOverlapQA"))
        for s in cfg.predict.systems.values()
    )


def _hours(tokens: int, tp: dict[str, Any]) -> float | None:
    tps = tp.get("tokens_per_s")
    return None if not tps else tokens / float(tps) / 3600


#: the call loop's batch orders whose forward-pass tokens the plan counts (calls.loop.BatchPlan)
BATCH_ORDERS = ("length", "prefix")

#: evenly spaced calls of a job looked up in the cache before all of them are: none found, none cached
PROBE = 256


def _requests(cfg: DictConfig, backend, memo: _Memo, items=None):
    """The job's (item, request) pairs as the judge stage builds them (``items``: a subset)."""
    from promptlottery.calls.compose import run_decoding
    from promptlottery.judging.inputs import build_condition
    from promptlottery.judging.job_inputs import job_examples
    from promptlottery.judging.runner import build_requests
    from promptlottery.modes import default_group
    from promptlottery.prompts.groups import resolve_group

    group = resolve_group(cfg.judge, default_group(cfg.judge))
    condition = build_condition(cfg, group)
    options = OmegaConf.to_container(cfg.dataset.options, resolve=True)
    if cfg.predict and cfg.predict.get("systems"):
        key = json.dumps(OmegaConf.to_container(cfg.predict, resolve=True), sort_keys=True, default=str)
        options["predictions"] = str(memo.predictions[key])
    all_items, sample = _items(cfg, options, memo)
    examples = job_examples(cfg, all_items, sample, group)
    pairs = build_requests(
        sample if items is None else items(sample),
        condition,
        group,
        backend,
        run_decoding(cfg),
        n_samples=cfg.n_samples,
        examples=examples,
        repeat_source=cfg.repeat_source,
    )
    return condition, pairs


def plan_job(cfg: DictConfig, memo: _Memo, shared: dict | None = None) -> dict[str, Any]:
    """One job's estimate, as ``dry_run=true`` counts it (judging.before_calls.dry_run), from shared parts.

    ``shared`` (a job of the same configuration, wording and prompt format judged by another backbone
    counted before): its calls and tokens are this job's (tokens are approximated alike for every
    backbone), and this job's own requests are built only for the cache: :data:`PROBE` evenly spaced
    calls first, all of them when any is cached."""
    predict = _predict_stage(cfg, memo)
    backend = _backend(cfg.backbone.backend, str(cfg.backbone.name), memo)
    cache = _cache(cfg.paths, memo)
    if shared is None:
        condition, pairs = _requests(cfg, backend, memo)
        calls, tokens = len(pairs), _tokens(r for _, r in pairs)
        per_item = {it.id: 0 for it, _ in pairs}
        for it, _ in pairs:
            per_item[it.id] += 1
        unique = list({r.key: r for _, r in pairs}.values())
        size = int(getattr(backend, "max_concurrency", 1) or 1)
        run = {order: _run_tokens(unique, order, size) for order in BATCH_ORDERS}
        shared_out = {"calls": calls, "tokens": tokens, "items": list(per_item), "run_tokens": run}
    else:
        calls, tokens, pairs = shared["calls"], shared["tokens"], None
        shared_out = shared
    order = getattr(backend, "batch_order", "length")
    run_tokens = shared_out["run_tokens"].get(order, tokens)
    ids = shared_out["items"]
    step = max(1, len(ids) // PROBE)
    probe = set(ids[::step])
    condition, probed = _requests(
        cfg, backend, memo, items=lambda sample: [it for it in sample if it.id in probe]
    )
    if not cache.get_many([r.key for _, r in probed]):
        cached: list = []
        uncached = tokens
    else:  # some are cached: look every call up
        if pairs is None:
            condition, pairs = _requests(cfg, backend, memo)
        cached = cache.get_many([r.key for _, r in pairs])
        uncached = _tokens(r for _, r in pairs if r.key not in cached)
        # calls, not keys: two items with the same prompt (SummEval systems writing one summary) are
        # two calls of one key, both answered by the cache
        cached = [r.key for _, r in pairs if r.key in cached]
    # the forward passes left: the whole job's when nothing is cached, else in proportion to its tokens
    uncached_run = run_tokens if uncached == tokens else round(run_tokens * uncached / max(tokens, 1))
    price = cfg.backbone.get("price_per_mtok_input")
    tp = _throughput(cfg.backbone)
    row = {
        "condition": condition.id,
        "configuration": condition.configuration,
        "backbone": str(cfg.backbone.name),
        "variant": condition.variant,
        "calls": calls,
        "cached_calls": len(cached),
        "prompt_tokens": tokens,
        "uncached_prompt_tokens": uncached,
        "cost_usd": None if price is None else uncached / 1e6 * float(price),
        "batch_order": order,
        "run_tokens": run_tokens,
        "uncached_run_tokens": uncached_run,
        "run_tokens_by_order": shared_out["run_tokens"],
        "device": tp["device"],
        "hours": _hours(uncached_run, tp),
        "throughput": tp,
        **({"predict": predict} if predict else {}),
        **({"fake_judge_real_predictions": True} if _fake_with_real_predictions(cfg) else {}),
        **({"calls_bound": "upper"} if cfg.judge.get("design", "full") not in ("full", None) else {}),
    }
    return row, shared_out


def plan_study(
    experiments: list[StudyExperiment],
    compose: Callable[[list[str]], DictConfig],
    *,
    progress: bool = True,
) -> dict[str, Any]:
    """Every job's estimate (:func:`plan_job`) and the study's totals (:func:`summarize_plan`); a
    progress bar over the jobs. Each experiment is composed once and each backbone once: a job is its
    experiment's config with the job's backbone node and ``judge.variant`` set (the jobs of a study
    differ only in those; an experiment that specialised its config by backbone would need a
    composition per job)."""
    import copy

    from tqdm import tqdm

    def value(overrides, key):
        found = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == key]
        return found[-1] if found else None

    jobs = [(e.name, o) for e in experiments for o in e.jobs]
    composed: dict[tuple, DictConfig] = {}
    backbones: dict[str, Any] = {}
    shared: dict[tuple, dict] = {}
    rows = []
    with tempfile.TemporaryDirectory(prefix="study_plan_") as tmp:
        memo = _Memo(Path(tmp))
        bar = tqdm(jobs, desc="study plan", unit="job", disable=not progress, mininterval=1.0)
        for name, overrides in bar:
            variant, backbone = value(overrides, "judge.variant"), value(overrides, "backbone")
            base = tuple(o for o in overrides if o.split("=", 1)[0] not in ("judge.variant", "backbone"))
            if base not in composed:
                composed[base] = compose([*base, *([f"backbone={backbone}"] if backbone else [])])
            if backbone and backbone not in backbones:
                backbones[backbone] = compose([*base, f"backbone={backbone}"]).backbone
            cfg = copy.deepcopy(composed[base])
            if backbone:
                cfg.backbone = copy.deepcopy(backbones[backbone])
            if variant:
                cfg.judge.variant = variant
            sig = (base, variant, str(cfg.backbone.prompt_format), int(cfg.backbone.n_shot))
            row, shared[sig] = plan_job(cfg, memo, shared.get(sig))
            rows.append({"experiment": name, **row})
        for cache in memo.caches.values():
            cache.close()
    return summarize_plan(rows, measured_throughput(experiments, rows))


def measured_throughput(experiments: list[StudyExperiment], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each backbone's prompt tokens a second as judged on this machine by the study's own finished
    jobs (``results.json`` in the experiments' sweep dirs: status ok, some calls not from the cache):
    the approximated tokens each job's forward passes ran (its plan row's tokens under the batch order
    the job recorded, ``calls.batch_order``, length where none is recorded, x misses / calls) over the
    job's wall seconds, model load included, summed over jobs. A declared ``tokens_per_s`` was
    measured on one machine; a study's own jobs are the rate of the machine that runs it (the 1.5B
    judge: 131 tokens/s declared from a 2-core AMX VM, 17-64 a process on a 2-core AVX-512 one)."""
    by_condition = {(r["experiment"], r["condition"]): r for r in rows}
    acc: dict[str, list] = {}
    for e in experiments:
        for path in sorted(Path(e.sweep_dir).glob("*/results.json")):
            try:
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # a job being written or damaged: the plan informs, the preflight checks
            row = by_condition.get((e.name, rec.get("condition")))
            calls = rec.get("calls") or {}
            misses, total = int(calls.get("cache_misses") or 0), int(calls.get("total") or 0)
            if (
                rec.get("status") != "ok"
                or row is None
                or misses <= 0
                or total <= 0
                or not rec.get("seconds")
            ):
                continue
            a = acc.setdefault(row["backbone"], [0, 0.0, 0.0])
            a[0] += 1
            ran = (row.get("run_tokens_by_order") or {}).get(
                calls.get("batch_order", "length"), row["prompt_tokens"]
            )
            a[1] += ran * misses / total
            a[2] += float(rec["seconds"])
    return {
        bb: {
            "tokens_per_s": tokens / seconds,
            "jobs": n,
            "tokens": round(tokens),
            "seconds": round(seconds, 1),
        }
        for bb, (n, tokens, seconds) in acc.items()
        if seconds > 0
    }

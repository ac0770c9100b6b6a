"""The ``judge`` stage: one condition of the grid, from config to judgments, metrics and records.

``judge(cfg, job) -> dict`` is pure with respect to Hydra: it reads the composed config, builds the
backend, cache and decoding with ``calls.compose.build_judge_runtime`` and passes plain objects down to the library; it runs
inside the job wrapper (``promptlottery.stages.run_stage``), which checked the config.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from promptlottery.atomic import atomic_write
from promptlottery.calls.cache import CacheError, CallCache, cache_location
from promptlottery.calls.cache_manifest import manifest_path
from promptlottery.calls.compose import build_calls, build_judge_runtime, build_spend, run_decoding
from promptlottery.data import load_items
from promptlottery.data.registry import dataset_id
from promptlottery.data.schema import Item, check_text
from promptlottery.errors import ConfigError
from promptlottery.judging import runner
from promptlottery.judging.adaptive_job import adaptive_design, judge_adaptive
from promptlottery.judging.job_inputs import job_examples, job_sample
from promptlottery.judging.runner import Condition, build_requests, condition_metrics
from promptlottery.judging.sparse_job import sparse_design
from promptlottery.modes import DEFAULT_MODE, check_mode, default_group, get_mode
from promptlottery.prompts.groups import (
    PromptGroup,
    check_variables,
    dump_group,
    own_default_group,
    resolve_group,
)
from promptlottery.prompts.requests import check_rendering
from promptlottery.tracking.job import StageJob
from promptlottery.tracking.jobdir import file_sha256, previous_record, sibling_records
from promptlottery.tracking.secrets import redact_text

logger = logging.getLogger(__name__)

JUDGMENTS = "judgments.parquet"


def build_condition(cfg: DictConfig, group: PromptGroup | None = None) -> Condition:
    """The grid cell; a prompt group loaded from a file (judge.group_file / template) names itself."""
    return Condition(
        dataset=dataset_id(cfg.dataset),
        judge_family=group.judge_family if group is not None else cfg.judge.family,
        prompt_group=group.id if group is not None else cfg.judge.prompt_group,
        variant=cfg.judge.variant,
        backbone=cfg.backbone.name,
        criterion=cfg.judge.criterion,
        prompt_format=cfg.backbone.prompt_format,
        judge_mode=cfg.judge.get("mode", DEFAULT_MODE),
        position_swap=bool(cfg.judge.get("position_swap", True)),
    )


def _group_where(cfg: DictConfig, group: PromptGroup) -> str:
    src = cfg.judge.get("group_file") or cfg.judge.get("template")
    return f"{src} (prompt group {group.id})" if src else f"prompt group {group.id}"


def _group_condition(cfg: DictConfig) -> tuple[PromptGroup, Condition, bool]:
    """The prompt group, the grid cell and whether the group came from the user's file."""
    group = resolve_group(cfg.judge, default_group(cfg.judge))
    from_file = bool(cfg.judge.get("group_file") or cfg.judge.get("template"))
    # your own judge without a file judges its mode's built-in group (G17), which names its own family
    named_by_group = from_file or own_default_group(cfg.judge, default_group(cfg.judge))
    condition = build_condition(cfg, group)
    if not named_by_group and group.judge_family != cfg.judge.family:
        raise ConfigError(
            f"judge.family={cfg.judge.family!r} but prompt group {group.id} is {group.judge_family!r}"
        )
    group.variant(condition.variant)  # judge.variant=P9: one line naming the group's variants
    if condition.variant in group.controls and not cfg.judge.get("controls", False):
        raise ConfigError(
            f"judge.variant={condition.variant} is a control variant of prompt group {group.id} "
            "(it must move the verdict); judge it only with judge.controls=true"
        )
    return group, condition, from_file


def _check_items(
    cfg: DictConfig, group: PromptGroup, condition: Condition, items: list[Item], from_file: bool
):
    where = _dataset_where(cfg)
    check_mode(
        condition.judge_mode,
        group.scale,
        group=_group_where(cfg, group),
        items=items,
        where=where,
        identical_pairs=cfg.judge.get("identical_pairs", "warn"),
        criteria=group.criteria,
    )
    if from_file:  # built-in groups are checked by their tests (and may use optional {% if x %} inputs)
        mode = get_mode(condition.judge_mode)
        shown = (p.item for it in items for p in mode.presentations(it, group=group, position_swap=False))
        check_variables(group, set().union(*(it.inputs for it in shown)), where=_group_where(cfg, group))


def check_inputs(cfg: DictConfig) -> None:
    """The judge stage's inputs, checked before any job of a sweep starts (``stages.preflight``): the
    prompt group and variant, the mode, the table and its rows, every item's prompt rendered in the
    sandbox. Each refusal is a one-line :class:`~promptlottery.errors.UserError`; no model is built."""
    group, condition, from_file = _group_condition(cfg)
    if cfg.predict and cfg.predict.get("systems"):
        return  # the judged responses are generated by the job itself: no items to check before it
    options = OmegaConf.to_container(cfg.dataset.options, resolve=True)
    _, items = _load(cfg, options)
    sparse_design(cfg.judge, group, items, condition.judge_mode)  # a bad design refused before any job
    adaptive_design(cfg.judge, condition.judge_mode, cfg.n_samples)
    _check_items(cfg, group, condition, items, from_file)
    check_text(items, where=_dataset_where(cfg))
    mode = get_mode(condition.judge_mode)
    shown = (mode.presentations(it, group=group, position_swap=False)[0].item for it in items)
    src = cfg.judge.get("group_file") or cfg.judge.get("template")
    check_rendering(group, condition.variant, shown, condition.prompt_format, source=src)  # once, not per job


def _dataset_where(cfg: DictConfig) -> str:
    return f"dataset {cfg.dataset.name}" + (f" ({cfg.dataset.path})" if cfg.dataset.get("path") else "")


def _load(cfg: DictConfig, options: dict) -> tuple[list[Item], list[Item]]:
    all_items = load_items(cfg.dataset.name, data_dir=cfg.paths.data_dir, **options)
    return all_items, job_sample(cfg, all_items)


def judge(cfg: DictConfig, job: StageJob, *, backend=None) -> dict[str, Any]:
    """Judge one condition and write ``judgments.parquet`` + ``results.json`` to ``job.output_dir``."""
    output_dir = job.output_dir
    group, condition, from_file = _group_condition(cfg)
    job.label = "condition"
    job.fields["condition"] = condition.id
    job.track(name=condition.id, group=condition.configuration)
    options = OmegaConf.to_container(cfg.dataset.options, resolve=True)
    decoding = run_decoding(cfg)
    _add_predictions(cfg, options, decoding, output_dir)
    all_items, items = _load(cfg, options)
    design = sparse_design(cfg.judge, group, items, condition.judge_mode)
    adaptive = adaptive_design(cfg.judge, condition.judge_mode, cfg.n_samples)
    if design is not None:
        items = [it for it, judged in zip(items, design["judged"], strict=True) if judged]
    _check_items(cfg, group, condition, items, from_file)
    examples = job_examples(cfg, all_items, items, group)
    backend, cache, _ = build_judge_runtime(cfg, backend=backend)
    orders_of = (design or {}).get("orders_of")
    check_lost_cache(
        cfg,
        cache,
        output_dir,
        # a mode asking in rounds: the first round's keys, the only ones known before any answer
        keys=lambda: [
            r.key
            for _, r in _requests(cfg, items, condition, group, backend, decoding, examples, orders_of, 0)
        ],
    )
    if cfg.dry_run:
        return dry_run(cfg, items, condition, group, backend, cache, decoding, examples, job, orders_of)
    # a sweep's jobs share one budget (Hydra writes multirun.yaml in the sweep dir); a single job its own
    sweep = output_dir.parent if (output_dir.parent / "multirun.yaml").exists() else output_dir
    spend = build_spend(cfg, ledger=sweep / "spend.json")
    if spend.active:  # the dry run's count against the cap, before the first call
        pairs = _requests(cfg, items, condition, group, backend, decoding, examples, orders_of)
        spend.check_pending(
            [r for _, r in pairs], backend, cache, decoding, where=f"condition {condition.id}"
        )
    job.tracker  # noqa: B018 - the W&B run starts before the calls, so it times them

    def judge_cells(cells: list[Item], cond: Condition, orders_of=orders_of):
        return runner.judge(
            cells, cond, group, backend, cache, decoding, n_samples=cfg.n_samples, examples=examples,
            max_retries=cfg.max_retries, repeat_source=cfg.repeat_source, backoff_s=cfg.backoff_s,
            human_range=tuple(cfg.dataset.human_range),
            orders_of=orders_of, spend=spend,
        )  # fmt: skip

    walk_summary = {}
    try:
        if adaptive is None:
            df, stats = judge_cells(items, condition)
        else:  # the walk asks every wording it reaches; this job keeps its own wording's rows
            df, stats, walk_summary = judge_adaptive(
                items, condition, list(group.variants), adaptive, judge_cells
            )
    finally:  # closed, so the SQLite WAL is checkpointed: a read-only (immutable) reader sees every answer
        cache.close()
    df = _with_job_columns(cfg, df, items, design, group, from_file, output_dir)
    return _write(job, df, stats, backend, walk_summary)


def _add_predictions(cfg: DictConfig, options: dict, decoding, output_dir: Path) -> None:
    """The judged responses of a dataset with candidate systems: the systems' predictions, generated
    (or, in a dry run, placeholders to count with), passed to the loader in ``options``."""
    if not (cfg.predict and cfg.predict.get("systems")):
        return
    if cfg.dry_run:  # count, never generate
        from promptlottery.judging.predict import placeholder_predictions

        options["predictions"] = str(
            placeholder_predictions(
                cfg.predict, dataset=cfg.dataset.name, data_dir=cfg.paths.data_dir, output_dir=output_dir
            )
        )
        return
    from promptlottery.judging.predict import ensure_predictions

    if str(cfg.backbone.backend.get("_target_", "")).endswith("FakeBackend"):  # never hides real model work
        print(
            f"note: backbone=fake judges, but the {len(cfg.predict.systems)} candidate systems' answers it judges "
            f"are written by real models first ({cfg.predict.output}; answers in the call cache are reused)",
            file=sys.stderr,
        )
    options["predictions"] = str(
        ensure_predictions(
            cfg.predict,
            dataset=cfg.dataset.name,
            data_dir=cfg.paths.data_dir,
            cache=build_calls(cfg)[0],
            decoding=decoding,
        )
    )


def _with_job_columns(cfg, df, items, design, group: PromptGroup, from_file: bool, output_dir: Path):
    """The judgments with what the analysis reads beside them: a table's input texts, a sparse
    design's columns, the table's and the wording's hashes, the file of a group given as a file."""
    saved_group = group if from_file else None
    if cfg.dataset.name == "table":  # unstable_items.csv shows the user's texts next to the ids
        inputs = {it.id: it.inputs for it in items}
        for name in sorted(set().union(*inputs.values())):
            df[f"input_{name}"] = [inputs[i].get(name) for i in df["item_id"]]
    if design is not None:  # the analysis rebuilds the plan from these columns and checks the cells
        keys = zip(df["item_id"], df["order"]) if "orders_of" in design else df["item_id"]
        df = df.assign(**design["columns"], design_prob=[design["prob"][k] for k in keys])
    path = cfg.dataset.get("path")  # what was judged: one analysis refuses two (judging.load.check_one_text)
    df["table_sha256"] = file_sha256(Path(path)) if path and Path(path).is_file() else ""
    df["wording_sha"] = group.text_hash(cfg.judge.variant)
    if saved_group is not None:  # the analysis reads the judged texts from here (analysis 4-5)
        # through a temporary file and a rename: a link planted at the path is replaced, not followed
        saved = atomic_write(output_dir / "prompt_group.yaml", lambda tmp: dump_group(saved_group, tmp))
        df["group_file"] = str(saved.resolve())
    return df


def _write(job: StageJob, df, stats, backend, walk_summary: dict) -> dict[str, Any]:
    """``judgments.parquet`` first, ``results.json`` last, each atomically: a results.json saying
    ``ok`` always describes the parquet next to it (its hash is recorded, see judging.jobs)."""
    metrics = condition_metrics(df)
    calls = {**stats.counts(), "parse_failures": stats.parse_failures}
    parquet = atomic_write(job.output_dir / JUDGMENTS, lambda tmp: df.to_parquet(tmp, index=False))
    record = job.ok(
        backend=backend.identity(),
        judgments={"file": JUDGMENTS, "sha256": file_sha256(parquet), "n_rows": len(df)},
        metrics=metrics,
        calls=calls,
        **({"adaptive": walk_summary} if walk_summary else {}),
    )
    if len(df):  # W&B's run table sorts and groups by these: one run per condition
        job.tracker.update_config(
            {"condition": str(df["condition"].iloc[0]), "wording": str(df["variant"].iloc[0])}
        )
    job.tracker.log_metrics({"metrics": metrics, "calls": calls})
    job.tracker.log_table("judgments", df.drop(columns=["cache_key", "query"]))
    job.note(
        n=len(df),
        cache_hits=stats.cache_hits,
        cache_misses=stats.cache_misses,
        parse_failures=stats.parse_failures,
        **walk_summary,
    )
    return record


def _requests(
    cfg, items, condition, group, backend, decoding, examples, orders_of=None, round_k=None
) -> list:
    """The job's (item, request) pairs, as the runner will build them (for counting, not calling; a
    mode asking in rounds: after placeholder answers, or round ``round_k`` alone)."""
    return build_requests(
        items,
        condition,
        group,
        backend,
        decoding,
        n_samples=cfg.n_samples,
        examples=examples,
        repeat_source=cfg.repeat_source,
        orders_of=orders_of,
        round_k=round_k,
    )


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


def dry_run(
    cfg, items, condition, group, backend, cache, decoding, examples, job: StageJob, orders_of=None
) -> dict:
    """Count calls, prompt tokens, cached calls and cost without calling a model."""
    pairs = _requests(cfg, items, condition, group, backend, decoding, examples, orders_of)
    keys = [r.key for _, r in pairs]
    cached = cache.get_many(keys)
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
    print(f"dry_run condition={condition.id} " + " ".join(f"{k}={v}" for k, v in estimate.items()))
    return job.write("dry_run", estimate=estimate)

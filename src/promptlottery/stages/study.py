"""The study: every configuration of a study x backbone x wording as one sweep, and its plan.

A study (``conf/study/<name>.yaml``, ``python -m run +study=paper grid=gpu -m``) lists experiments, each
an ordinary ``conf/experiment/`` overlay with its own sweep (``hydra.sweeper.params``: P1-P5, the grid's
backbones). The study sweeper (``conf/hydra/sweeper/study.yaml``) expands each experiment's own sweep
with the study's overrides for it (``study.overrides``; ``study.overrides_by_grid.<grid>`` on top, e.g.
SQuAD v2's 400 questions under ``grid=gpu``) and the command line's, and launches each experiment's
jobs into ``<hydra.sweep.dir>/<experiment>/`` numbered from 0: the layout, overrides and plan file of
``python -m run +experiment=<e> <overrides> hydra.sweep.dir=<root>/<e> -m``, so a study resumes the
sweeps run one at a time before it (same requests: every call a cache hit).

``dry_run=true`` launches nothing: :func:`plan_study` counts each job's calls, prompt tokens, cached
calls and API cost, loading each dataset once and rendering each wording's prompts once per backbone,
and turns tokens into GPU- and CPU-hours at each backbone's declared throughput (``backbone.throughput``,
measured here for the CPU judges, an assumption for the GPU ones), with the two ways of running it on
SLURM (:func:`slurm_layouts`). Tokens are counted as characters / 4 + 4 per chat message for every
backbone (no tokenizer is loaded: the Hub's are unavailable offline); a one-configuration dry run
(``+experiment=<e> dry_run=true -m``) counts with the real tokenizers where they load.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from promptlottery.errors import ConfigError

logger = logging.getLogger(__name__)

SWEEPER = "hydra_plugins.promptlottery_study.study_sweeper.StudySweeper"
PLAN_FILE = "study_plan.json"
APPROX = "approx_chars_div_4"
#: the line a fake judge's sweep gets when real models write the judged answers (SQuAD v2's systems)
FAKE_PREDICTIONS = (
    "note: backbone=fake judges, but the candidate answers it judges are written by real models (the "
    "predict stage's systems, listed above), once, then cached"
)


def is_study(config: DictConfig) -> bool:
    """Whether ``config`` (a sweep's) is swept by the study sweeper."""
    return str(OmegaConf.select(config, "hydra.sweeper._target_", default="")) == SWEEPER


def check_experiment_sweep(args: Iterable[str]) -> None:
    """Refuse ``+experiment=a,b -m`` outside a study in one line: a plain sweep over experiments keeps
    only what the command line sweeps and drops each experiment's own sweep (its P1-P5 wordings)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = [a for a in args if not a.startswith("-")]
    try:
        parsed = OverridesParser.create().parse_overrides(args)
    except Exception:  # noqa: BLE001 - a malformed override: Hydra's own message says where
        return
    if any(o.key_or_group == "study" for o in parsed):
        return
    for o in parsed:
        if o.key_or_group == "experiment" and o.is_sweep_override():
            names = ",".join(str(v) for v in o.sweep_iterator())
            raise ConfigError(
                f"{o.input_line}: a sweep over experiments would drop each one's own sweep (its wordings "
                f"P1-P5, hydra.sweeper.params); run them as a study: python -m run +study=paper "
                f"'study.experiments=[{names}]' -m"
            )


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


def _params(node: Any) -> list[str]:
    if not node:
        return []
    return [f"{k}={v}" for k, v in OmegaConf.to_container(node, resolve=True).items()]


def study_experiments(
    config: DictConfig, arguments: list[str], compose: Callable[[list[str]], DictConfig]
) -> list[StudyExperiment]:
    """The study's experiments and their jobs: each experiment's own sweep params (composed with the
    study and the command line's plain overrides), then the study's overrides for it, then the command
    line (which wins), expanded like Hydra's basic sweeper. ``compose(overrides)`` composes a job."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    study = config.study
    if not study or not study.get("experiments"):
        raise ConfigError("+study: study.experiments is empty; a study lists the experiments it runs")
    parser = OverridesParser.create()
    # the study's own overrides (+study=..., study.*) shape the study, not its jobs
    args = [a for a in arguments if parser.parse_override(a).key_or_group.split(".")[0] != "study"]
    plain = [a for a in args if not parser.parse_override(a).is_sweep_override()]
    study_arg = [a for a in arguments if a not in args]
    grid = str(OmegaConf.select(config, "hydra.runtime.choices.grid", default="") or "")
    by_grid = (study.get("overrides_by_grid") or {}).get(grid) or {}
    root = Path(str(config.hydra.sweep.dir))
    out = []
    for name in study.experiments:
        name = str(name)
        own = [
            *(study.get("overrides") or {}).get(name, study.get("default_overrides") or []),
            *by_grid.get(name, []),
        ]
        own = [str(o) for o in own]
        composed = compose([*study_arg, f"+experiment={name}", *own, *plain])
        params = _params(OmegaConf.select(composed, "hydra.sweeper.params"))
        overrides = parser.parse_overrides([*params, f"+experiment={name}", *own, *args])
        batches = BasicSweeper.split_arguments(overrides, None)[0]
        out.append(StudyExperiment(name, root / name, [list(b) for b in batches]))
    return out


def write_plans(experiments: list[StudyExperiment], root: Path, *, study: str) -> None:
    """Each experiment's ``sweep_plan.json`` and the study's ``study_plan.json`` (its experiments)."""
    from promptlottery.atomic import atomic_write_text
    from promptlottery.tracking.secrets import redact

    for e in experiments:
        e.sweep_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(e.sweep_dir / "sweep_plan.json", json.dumps(redact(e.plan()), indent=2) + "\n")
    root.mkdir(parents=True, exist_ok=True)
    record = {"study": study, "experiments": {e.name: len(e.jobs) for e in experiments}}
    atomic_write_text(root / PLAN_FILE, json.dumps(record, indent=2) + "\n")


# -- the plan --------------------------------------------------------------------------------


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
    from promptlottery.data.registry import sample_items

    key = (cfg.dataset.name, str(cfg.paths.data_dir), json.dumps(options, sort_keys=True, default=str))
    if key not in memo.items:
        memo.items[key] = load_items(cfg.dataset.name, data_dir=cfg.paths.data_dir, **options)
    all_items = memo.items[key]
    return all_items, sample_items(
        all_items, limit=cfg.dataset.limit, seed=cfg.dataset.seed, by=cfg.dataset.get("sample_by", "item")
    )


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
    from promptlottery.backends.openai_compat import approx_token_count

    return sum(approx_token_count(r) for r in requests)


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
            "cached_calls": len(cached),
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


#: evenly spaced calls of a job looked up in the cache before all of them are: none found, none cached
PROBE = 256


def _requests(cfg: DictConfig, backend, memo: _Memo, items=None):
    """The job's (item, request) pairs as the judge stage builds them (``items``: a subset)."""
    from promptlottery.calls.compose import run_decoding
    from promptlottery.judging.runner import build_requests
    from promptlottery.judging.stage import build_condition, few_shot_examples
    from promptlottery.modes import default_group
    from promptlottery.prompts.groups import resolve_group

    group = resolve_group(cfg.judge, default_group(cfg.judge))
    condition = build_condition(cfg, group)
    options = OmegaConf.to_container(cfg.dataset.options, resolve=True)
    if cfg.predict and cfg.predict.get("systems"):
        key = json.dumps(OmegaConf.to_container(cfg.predict, resolve=True), sort_keys=True, default=str)
        options["predictions"] = str(memo.predictions[key])
    all_items, sample = _items(cfg, options, memo)
    examples = few_shot_examples(
        all_items,
        sample,
        n_shot=cfg.backbone.n_shot,
        criterion=cfg.judge.criterion,
        human_range=cfg.dataset.human_range,
        scale=group.scale,
        seed=cfg.dataset.seed,
    )
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
    """One job's estimate, as ``dry_run=true`` counts it (judging.stage.dry_run), from shared parts.

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
        shared_out = {"calls": calls, "tokens": tokens, "items": list(per_item)}
    else:
        calls, tokens, pairs = shared["calls"], shared["tokens"], None
        shared_out = shared
    ids = shared_out["items"]
    step = max(1, len(ids) // PROBE)
    probe = set(ids[::step])
    condition, probed = _requests(
        cfg, backend, memo, items=lambda sample: [it for it in sample if it.id in probe]
    )
    if not cache.get_many([r.key for _, r in probed]):
        cached: dict = {}
        uncached = tokens
    else:  # some are cached: look every call up
        if pairs is None:
            condition, pairs = _requests(cfg, backend, memo)
        cached = cache.get_many([r.key for _, r in pairs])
        uncached = _tokens(r for _, r in pairs if r.key not in cached)
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
        "device": tp["device"],
        "hours": _hours(uncached, tp),
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
    return summarize_plan(rows)


def slurm_layouts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The two ways of running the GPU / CPU jobs on SLURM without one engine load per job, in device
    hours: one task per configuration x backbone (its wordings in one process: one load per task), or
    one server per backbone with the jobs as its clients (one load per backbone, the server up for the
    whole of its backbone's judging). The cheaper one is ``chosen``; a load per job is shown beside."""
    out: dict[str, Any] = {}
    for device in ("gpu", "cpu"):
        mine = [r for r in rows if r["device"] == device and r["hours"] is not None]
        if not mine:
            continue
        judging = sum(r["hours"] for r in mine)
        load = {r["backbone"]: r["throughput"]["engine_load_s"] / 3600 for r in mine}
        tasks = {(r["configuration"], r["backbone"]) for r in mine}
        per_job = judging + sum(load[r["backbone"]] for r in mine)
        per_task = judging + sum(load[bb] for _, bb in tasks)
        per_server = judging + sum(load.values())
        layouts = {
            "task_per_job": {"tasks": len(mine), "engine_loads": len(mine), "hours": per_job},
            "task_per_configuration_backbone": {
                "tasks": len(tasks),
                "engine_loads": len(tasks),
                "hours": per_task,
            },
            "server_per_backbone": {"tasks": len(load), "engine_loads": len(load), "hours": per_server},
        }
        chosen = min(
            ("task_per_configuration_backbone", "server_per_backbone"), key=lambda k: layouts[k]["hours"]
        )
        out[device] = {"judging_hours": judging, **layouts, "chosen": chosen}
    return out


def summarize_plan(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals of a study plan: overall, per backbone, per configuration; the predict stages; SLURM."""

    def total(rs: list[dict[str, Any]]) -> dict[str, Any]:
        priced = [r["cost_usd"] for r in rs if r["cost_usd"] is not None]
        hours: dict[str, float] = {}
        for r in rs:
            if r["hours"] is not None:
                hours[r["device"]] = hours.get(r["device"], 0.0) + r["hours"]
        return {
            "conditions": len(rs),
            "calls": sum(r["calls"] for r in rs),
            "cached_calls": sum(r["cached_calls"] for r in rs),
            "prompt_tokens": sum(r["prompt_tokens"] for r in rs),
            "uncached_prompt_tokens": sum(r["uncached_prompt_tokens"] for r in rs),
            "cost_usd": round(sum(priced), 2) if priced else None,
            **{f"{d}_hours": round(h, 3) for d, h in sorted(hours.items())},
        }

    by = lambda key: {k: total([r for r in rows if r[key] == k]) for k in dict.fromkeys(r[key] for r in rows)}  # noqa: E731
    predicts = [r["predict"] for r in rows if "predict" in r]
    return {
        "token_count": APPROX,
        "total": total(rows),
        "backbones": by("backbone"),
        "configurations": by("configuration"),
        "throughput": {r["backbone"]: r["throughput"] for r in rows},
        "predict": predicts,
        "slurm": slurm_layouts(rows),
        "jobs": [{k: v for k, v in r.items() if k not in ("throughput", "predict")} for r in rows],
    }


def _num(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.2f}"
    return f"{x:,}"


def format_plan(plan: dict[str, Any], *, study: str = "") -> str:
    """The plan as a person reads it before any call."""
    t = plan["total"]
    hours = ", ".join(f"{k.replace('_', '-')} {v:,.2f}" for k, v in t.items() if k.endswith("_hours"))
    lines = [
        f"{study} plan: {t['conditions']} conditions ({len(plan['configurations'])} configurations x "
        f"{len(plan['backbones'])} backbones x wordings), {_num(t['calls'])} calls ({_num(t['cached_calls'])} "
        f"cached), {_num(t['prompt_tokens'])} prompt tokens ({_num(t['uncached_prompt_tokens'])} uncached), "
        f"API cost ${_num(t['cost_usd'])}" + (f", {hours} of judging" if hours else ""),
        "",
        "| backbone | device | conditions | calls | cached | prompt tokens | API cost USD | hours | at tokens/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    sources = {}
    for bb, b in plan["backbones"].items():
        tp = plan["throughput"][bb]
        sources.setdefault(tp["source"], []).append(bb)
        h = next((v for k, v in b.items() if k.endswith("_hours")), None)
        lines.append(
            f"| {bb} | {tp['device']} | {b['conditions']} | {_num(b['calls'])} | {_num(b['cached_calls'])} | "
            f"{_num(b['prompt_tokens'])} | {_num(b['cost_usd'])} | {_num(h)} | {_num(tp['tokens_per_s'])} |"
        )
    lines += ["", "throughput sources:"] + [f"  {', '.join(bbs)}: {src}" for src, bbs in sources.items()]
    for p in plan["predict"]:
        calls = sum(s["calls"] for s in p["systems"].values())
        h = sum(s["hours"] or 0 for s in p["systems"].values())
        lines.append("")
        lines.append(
            f"stage {p['stage']} (before any judging): {p['questions']} questions x {len(p['systems'])} candidate "
            f"systems = {calls:,} answers, {h:,.2f} hours on their own backbones "
            f"(into {p['output']}; an answer in the call cache is not asked again)"
        )
        for name, s in p["systems"].items():
            lines.append(
                f"  {name} ({s['backbone']}, {s['device']}): {s['calls']:,} calls, {s['cached_calls']:,} cached, "
                f"{s['prompt_tokens']:,} prompt tokens, {_num(s['hours'])} hours"
            )
    for device, s in plan["slurm"].items():
        lines.append("")
        lines.append(
            f"SLURM, {device}: judging {s['judging_hours']:,.2f} {device}-hours; with engine loads: one task per "
            f"job {s['task_per_job']['engine_loads']} loads {s['task_per_job']['hours']:,.2f} h | one task per "
            f"configuration x backbone {s['task_per_configuration_backbone']['engine_loads']} loads "
            f"{s['task_per_configuration_backbone']['hours']:,.2f} h | one server per backbone "
            f"{s['server_per_backbone']['engine_loads']} loads {s['server_per_backbone']['hours']:,.2f} h "
            f"-> cheaper: {s['chosen'].replace('_', ' ')}"
        )
    if any(r.get("fake_judge_real_predictions") for r in plan["jobs"]):
        lines += ["", FAKE_PREDICTIONS]
    lines.append("")
    lines.append(
        "note: prompt tokens are approximated for every backbone (characters / 4 + 4 per chat message: the "
        "plan loads no tokenizer; the Hub's are unavailable offline); hours are uncached prompt tokens / the "
        "backbone's declared throughput (backbone.throughput: measured here for the CPU judges, an "
        "assumption for the GPU ones)"
    )
    return "\n".join(lines)


def write_study_plan(plan: dict[str, Any], root: Path, *, study: str) -> Path:
    from promptlottery.atomic import atomic_write_text

    root.mkdir(parents=True, exist_ok=True)
    path = root / "study_dry_run.json"
    atomic_write_text(path, json.dumps({"study": study, **plan}, indent=2, default=str) + "\n")
    atomic_write_text(root / "study_dry_run.md", format_plan(plan, study=study) + "\n")
    return path


class SweepPlan(Callback):
    """Hydra callback (``conf/hydra/default.yaml``): an ordinary judging sweep prints its plan (jobs,
    calls, tokens, cost, hours, a predict stage) before its first job, e.g. ``python -m run
    +experiment=squad_v2 -m`` before the candidate systems and the judges start. A dry run prints its
    own totals, a study its own plan; a plan that cannot be made is a warning, never a failed sweep."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from hydra.core.global_hydra import GlobalHydra

        from promptlottery.tracking.callbacks import plan_jobs

        if is_study(config) or config.get("dry_run") or (config.get("stage") or "judge") != "judge":
            return
        try:
            jobs = plan_jobs(config)
            if not jobs:
                return
            loader = GlobalHydra.instance().config_loader()
            name = str(config.get("task_name") or "sweep")
            exp = StudyExperiment(
                name, Path(str(config.hydra.sweep.dir)), [list(j["overrides"]) for j in jobs]
            )
            plan = plan_study([exp], lambda ov: loader.load_sweep_config(config, list(ov)), progress=False)
        except Exception as exc:  # noqa: BLE001 - the plan informs; the preflight refuses bad inputs
            logger.warning(
                "no plan for this sweep error=%s", str(exc).splitlines()[0][:200] if str(exc) else exc
            )
            return
        print(format_plan(plan, study=f"sweep {name}"), flush=True)


def study(cfg: DictConfig, job) -> dict[str, Any]:
    """Stage ``study`` (``+analysis=study``): the lottery analysis of every configuration of a study dir
    (each kept separate), then the study page ``study.md`` with the paper's rows and the breakdowns
    per backbone and per judge family (:mod:`promptlottery.analysis.study_report`)."""
    import pandas as pd

    from promptlottery.analysis.stage import lottery
    from promptlottery.analysis.study_report import not_analysed, write_study_page

    record = lottery(cfg, job)
    configs = pd.read_csv(Path(job.output_dir) / "tables" / "configurations.csv")
    fake = bool(
        (configs["backbone"].astype(str) == "fake").any()
        or (configs["model"].astype(str) == "fake-judge").any()
    )
    page = write_study_page(job.output_dir, fake=fake)
    for line in not_analysed(Path(job.output_dir) / "tables"):
        logger.warning("configuration not analysed (incomplete): %s", line)
    print(f"study page: {page}" + (" (FAKE judge)" if fake else ""))
    return record

"""Structured configs behind the YAML: a typo in a key fails at compose time.

The YAML groups under ``conf/`` fill these dataclasses; Hydra checks every key against them. This
module imports no stage: a stage with typed options registers them itself (the gate's
``GateConfig``: ``gating.config.register_configs``), and :func:`promptlottery.stages.register_configs`
calls every registration.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from promptlottery.backends.base import Decoding
from promptlottery.checks import check_choice, check_int, check_range, fail
from promptlottery.errors import ConfigError
from promptlottery.modes import DEFAULT_MODE, MODES, get_mode
from promptlottery.prompts.groups import PromptError, load_group, load_group_file
from promptlottery.tracking.jobdir import check_path_id, unique_suffix


@dataclass
class PathsConfig:
    root_dir: str = "."
    data_dir: str = "../shared/data"
    cache_dir: str = ".cache/promptlottery"
    #: a postgresql:// URL: the call cache on a server (jobs on many nodes); null: <cache_dir>/calls.sqlite
    cache_url: str | None = None
    #: an answer that does not match its checksum: `error` (one line naming its key) or `recompute`
    #: (dropped and asked again)
    cache_on_mismatch: str = "error"
    #: a paid API (backbone.price_per_mtok_input set) may be called again for answers a lost (empty or
    #: missing) cache held; without it such a run is refused before any call
    allow_paid_recompute: bool = False
    #: how long a job waits for another writer's lock on the SQLite cache before it stops (one line
    #: saying so; the answers it got are kept and stored by the next run)
    cache_timeout_s: float = 60.0
    output_dir: str = "outputs"
    model_dir: str = ".cache/promptlottery"


@dataclass
class FieldMap:
    """dataset=table: the column of each role (None = the table has no such column)."""

    id: str | None = None
    response: str | None = None
    #: a table of pairs (a judge mode whose items are pairs): the two compared responses; `human` is then
    #: a preference
    response_a: str | None = None
    response_b: str | None = None
    #: the instruction the responses answer (a table of pairs; G17 names it `question`)
    question: str | None = None
    context: str | None = None
    reference: str | None = None
    system: str | None = None
    group: str | None = None
    human: str | None = None


@dataclass
class DatasetConfig:
    name: str = MISSING
    #: what the configuration is called in judgments, condition ids and W&B (null: ``name``). A config
    #: that shares its loader with another (persona_chat_usr and topical_chat_usr, evouna_nq and _tq)
    #: names itself, so the two are never pooled (tests/test_study.py checks no two configs share one)
    id: str | None = None
    limit: int | None = None
    seed: int = 0
    #: "item": ``limit`` items; "group": ``limit`` articles / questions with every system's response
    sample_by: str = "item"
    #: human labels live on this range; used to label few-shot examples for base models
    human_range: list[float] = field(default_factory=lambda: [1.0, 5.0])
    #: passed to the loader (split, subset, hub=true, ...)
    options: dict[str, Any] = field(default_factory=dict)
    #: dataset=table: the file (JSONL, CSV, Parquet; hf:<name> for a Hub table) and its column map
    path: str | None = None
    fields: FieldMap = field(default_factory=FieldMap)


@dataclass
class JudgeCore:
    """The ``judge`` node's options that every mode has (:data:`JudgeConfig` adds the modes' own)."""

    family: str = MISSING
    prompt_group: str = MISSING
    variant: str = "P1"
    #: which human label the verdicts are compared with
    criterion: str = MISSING
    #: a prompt-group YAML from anywhere (overrides prompt_group), or one template file + its scale
    group_file: str | None = None
    template: str | None = None
    scale: str | None = None
    #: the judge mode, a name in promptlottery.modes.MODES (a rating of one response, a preference
    #: between response_a and response_b with a pairwise prompt group, ...)
    mode: str = DEFAULT_MODE
    #: judge every item in each of its mode's orders (a pair in both), each a call of its own (false: the first only)
    position_swap: bool = True
    #: "full" (every item under every wording), "sparse" (a seeded plan of the cells at ``budget``,
    #: docs/sparse.md; a sparse job judges its wording's cells of the plan only) or "adaptive" (each
    #: item's wordings in a seeded order until ``stop_rule`` settles its plurality at ``confidence``)
    design: str = "full"
    #: sparse: the share of the full grid's calls (0, 1]
    budget: float = 1.0
    #: sparse: a wording judged on every item (null: none)
    anchor: str | None = None
    #: sparse: the share of items judged under every wording (the changed-share calibration items)
    full_share: float = 0.0
    #: sparse and adaptive: the seed of the plan / of every item's order of the wordings
    design_seed: int = 0
    #: adaptive: "dirichlet" (Beta for two labels), "beta" (the two largest counts) or "paper_3of5"
    stop_rule: str = "dirichlet"
    #: adaptive: the posterior probability of the plurality at which an item stops (beta, dirichlet)
    confidence: float = 0.95


def _judge_schema() -> type:
    """The ``judge`` node's schema: :class:`JudgeCore`, then every registered mode's own options
    (:attr:`JudgeMode.options`, each a field of its default's type, in registration order), then
    ``controls``: the order every results.json written so far has (a mode option sat before it)."""
    own = [
        (name, Any if default is None else type(default), field(default=default))
        for _, mode in MODES.items()
        for name, default in mode.options.items()
    ]
    # judge a prompt group's control variants (``judge.variant=<control id>``): refused unless true,
    # so a paraphrase sweep never judges one by accident (docs/judge_card.md)
    controls = ("controls", bool, field(default=False))
    return dataclasses.make_dataclass("JudgeConfig", [*own, controls], bases=(JudgeCore,))


#: the ``judge`` node's schema (:func:`_judge_schema`): a key no field names fails at compose time
JudgeConfig = _judge_schema()


@dataclass
class BackboneConfig:
    name: str = MISSING
    prompt_format: str = "chat"  # "chat" or "completion" (base models)
    n_shot: int = 0  # solved examples in completion prompts
    backend: Any = MISSING  # a `_target_` node built with hydra.utils.instantiate
    price_per_mtok_input: float | None = None
    price_per_mtok_output: float | None = None
    #: the study plan's time estimate (promptlottery.stages.study_plan): ``tokens_per_s`` (prompt tokens a
    #: second), ``device`` (gpu | cpu | api), ``engine_load_s`` and ``source`` (measured where, or the
    #: assumption). A planning figure, not part of the job: out of the job's config hash
    throughput: Any = None


@dataclass
class DecodingConfig:
    temperature: float = 1e-5
    max_new_tokens: int = 8
    seed: int = 0
    top_logprobs: int = 20
    stop_at_label: bool = True


@dataclass
class LoggerConfig:
    name: str = "none"
    project: str = "promptlottery"
    mode: str = "offline"
    dir: str | None = None
    log_table_rows: int = 2000


#: what makes the repeated samples of one request differ beyond sampling (``repeat_source``;
#: judging.runner.repeat_plans)
REPEAT_SOURCES = ("none", "batch")


@dataclass
class RunConfig:
    task_name: str = "judge"
    seed: int = 0
    n_samples: int = 1
    #: what makes repeated samples differ beyond sampling: none | batch (judging.runner.repeat_plans)
    repeat_source: str = "none"
    dry_run: bool = False
    max_retries: int = 4
    backoff_s: float = 1.0
    #: a spend cap on each job's new calls (calls.spend): USD at the backbone's prices, and tokens
    #: (prompt + answer, as the server counts them); null: none
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    tags: list[str] = field(default_factory=list)
    paths: PathsConfig = field(default_factory=PathsConfig)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    decoding: DecodingConfig = field(default_factory=DecodingConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    #: which job runs: a name in promptlottery.stages.STAGES (each stage's config group sets it)
    stage: str = "judge"
    #: options of the non-judging stages, free-form here (each stage checks its own keys)
    analysis: Any = None
    validation: Any = None
    rubric: Any = None
    #: the gate stage (conf/gate/): typed by the gate's own schema (gating.config.register_configs),
    #: which conf/gate/selective.yaml composes in, so its keys are checked at compose time too
    gate: Any = None
    predict: Any = None
    paraphrase: Any = None
    #: the human-baseline stages (conf/human/): checked by promptlottery.stages.human.HumanOptions
    human: Any = None
    #: a study (conf/study/: its experiments and their overrides), read by the study sweeper
    study: Any = None


def group_variants(
    group_file: str | None, mode: str | None = None, template: str | None = None, controls: bool = False
) -> str:
    """``P1,P2,...``: the variant ids of a prompt-group file, for a sweep over all of them
    (``judge.variant: ${group_variants:${judge.group_file},${judge.mode},${judge.template}}`` in
    hydra.sweeper.params); one template file (``judge.template``): its one variant, ``P1``; no file in a
    mode with a built-in group (pairwise: G17): that group's. An unknown mode is named first (the
    variants of a group are the wrong question when the mode is a typo)."""
    builtin = get_mode(mode or DEFAULT_MODE).default_group
    if group_file:
        group = load_group_file(group_file)
        # a fourth argument true (${judge.controls}): the group's control variants after its paraphrases
        return ",".join([*group.variants, *(group.controls if str(controls).lower() == "true" else ())])
    if template:
        return "P1"  # groups.group_from_template: a template is a group of one wording
    if builtin:
        return ",".join(load_group(builtin).variants)
    # a sweep's own values (judge.template=a.j2,b.j2) are not set in the sweep's config, so a sweep
    # over templates lands here too: each job would judge one template as a group of one wording
    raise PromptError(
        "judge.group_file=PATH is required: the wordings compared are the variants of one prompt group "
        "file (one template: judge.template=PATH judge.scale=SCALE; a sweep over judge.template=A,B "
        "would judge each file as a group of its own, compared with no other wording)"
    )


def register_configs() -> None:
    ConfigStore.instance().store(name="run_schema", node=RunConfig)
    # per-process suffix of run / sweep dir names; cached so every use in one config agrees
    OmegaConf.register_new_resolver("unique", unique_suffix, use_cache=True, replace=True)
    OmegaConf.register_new_resolver("group_variants", group_variants, replace=True)
    # a part of a job dir's name (conf/hydra/default.yaml): refused if it could leave the sweep dir
    OmegaConf.register_new_resolver("path_id", lambda value: check_path_id(value, "id"), replace=True)
    # ${first_set:a,b}: a, or b where a is null (a rubric job dir: its condition, else the stage)
    OmegaConf.register_new_resolver("first_set", _first_set, replace=True)


def _first_set(*values):
    return next((v for v in values if v is not None), None)


def unknown_keys(cfg: DictConfig, prefix: str = "") -> list[str]:
    """Keys under structured-config nodes that their dataclass does not define.

    ``+judge.variantt=P2`` passes Hydra's struct check (``+`` opens the node), so this catches it.
    Free-form nodes (``Any``/``dict`` fields such as ``backbone.backend``, ``dataset.options``) are skipped.
    """
    out = []
    typ = OmegaConf.get_type(cfg)
    if not (isinstance(typ, type) and dataclasses.is_dataclass(typ)):
        return out
    valid = {f.name for f in dataclasses.fields(typ)}
    for k in cfg.keys():
        path = f"{prefix}{k}"
        if k not in valid:
            out.append(f"{path} (valid keys under {prefix.rstrip('.') or 'the top level'}: {sorted(valid)})")
            continue
        node = cfg._get_node(k)
        if isinstance(node, DictConfig) and not node._is_missing() and not node._is_none():
            out.extend(unknown_keys(node, f"{path}."))
    return out


def check_target_arguments(node: Any, name: str) -> None:
    """The keys of a ``_target_`` node are arguments its class takes (a typo'd backend option is one
    line here, not a TypeError from ``instantiate`` deep inside the job)."""
    import inspect

    from hydra.utils import get_object

    if not isinstance(node, DictConfig) or "_target_" not in node:
        return
    target = node._target_
    try:
        obj = get_object(target)
    except Exception as exc:  # noqa: BLE001 - a missing module or a typo in the path: both one line
        raise ConfigError(f"{name}._target_={target}: cannot be imported ({exc})") from None
    kwargs = {str(k): None for k in node.keys() if not str(k).startswith("_")}
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):  # not a callable with a signature: instantiate will say so
        return
    try:
        sig.bind_partial(**kwargs)
    except TypeError as exc:
        valid = sorted(p for p in sig.parameters if p not in ("self", "args", "kwargs"))
        raise ConfigError(f"{name}: {target} does not take these arguments ({exc}); valid: {valid}") from None


def check_config(cfg: DictConfig) -> None:
    """One-line ConfigError for an unknown key or a value outside its range (before any output)."""
    bad = unknown_keys(cfg)
    if bad:
        raise ConfigError(f"unknown config key {bad[0]}; a typo added with '+' is not ignored")
    limit = OmegaConf.select(cfg, "dataset.limit")
    if limit is not None:
        check_int("dataset.limit", limit, lo=1, what="a positive number of items, or null for all of them")
    check_int("n_samples", OmegaConf.select(cfg, "n_samples"), lo=1)
    if OmegaConf.select(cfg, "judge") is not None:
        get_mode(OmegaConf.select(cfg, "judge.mode", default=DEFAULT_MODE))
        for _, mode in MODES.items():  # each mode's own options, whatever the mode (a typo fails anyway)
            mode.check_options(cfg.judge)
    if OmegaConf.select(cfg, "dataset.human_range") is not None:
        check_range("dataset.human_range", OmegaConf.select(cfg, "dataset.human_range"))
    source = OmegaConf.select(cfg, "repeat_source")
    if source is not None:
        check_choice(
            "repeat_source",
            source,
            REPEAT_SOURCES,
            why="a dtype repeat source is not implemented: a backbone's dtype is part of its identity; for "
            "bfloat16's larger batch noise use repeat_source=batch with the backbone at dtype=bfloat16",
        )
        if source != "none" and OmegaConf.select(cfg, "n_samples") == 1:
            raise ConfigError(
                f"repeat_source={source} needs n_samples >= 2: it changes how repeats are computed"
            )
    check_int("max_retries", OmegaConf.select(cfg, "max_retries"), lo=0)
    backoff = OmegaConf.select(cfg, "backoff_s")
    if backoff is None or backoff < 0:
        raise fail("backoff_s", backoff, ">= 0 seconds")
    for cap in ("max_cost_usd", "max_tokens"):
        value = OmegaConf.select(cfg, cap)
        if value is not None and not value > 0:
            raise fail(cap, value, "> 0 (null: no cap)")
    check_target_arguments(OmegaConf.select(cfg, "backbone.backend"), "backbone.backend")
    if OmegaConf.select(cfg, "decoding") is not None:
        try:
            Decoding(**OmegaConf.to_container(cfg.decoding, resolve=True))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

"""The ``gate:`` node of the run config: structured configs behind ``conf/gate/``.

The gate registers its own schema (:func:`register_configs`: ``gate/schema`` in the ConfigStore,
the first default of ``conf/gate/selective.yaml``), so the ``gate:`` node is a :class:`GateConfig`
and a typo in a key or a value outside an Enum's choices fails when Hydra composes the config; the
checks that span fields run in ``__post_init__``, when the node becomes an object
(:meth:`GateConfig.from_dict`; :func:`check` runs it with the job's config check, before any
output). The classifier's backbone is picked by ``gate.classifier._target_``
(:mod:`promptlottery.gating.backbones`).

This module stays light (no torch, no transformers): the stage registry imports it to register
the schema.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException

from promptlottery.checks import check_int, check_open, fail
from promptlottery.errors import ConfigError

logger = logging.getLogger(__name__)

#: the backbone of the CPU default (``conf/gate/classifier/minilm.yaml``)
MINILM_TARGET = "promptlottery.gating.backbones.MiniLM"


def _error(message: str) -> Exception:
    return ConfigError(message)


class Verdict(StrEnum):
    """Which verdict of a judgment is gated (see ``judging.table.add_verdicts``)."""

    argmax = "argmax"
    weighted = "weighted"


class QueryTruncation(StrEnum):
    """How an over-long query is cut: ``middle`` keeps its first third and its end (the instructions
    and the judged item, which follows any few-shot examples); ``right`` keeps its start only."""

    middle = "middle"
    right = "right"


class Split(StrEnum):
    """How the items are split (``gate.split``).

    ``three_way`` (ours, the default): train / validation / test, instance-disjoint and stratified;
    validation picks the epoch, the Optuna trial and the threshold, test is only ever scored.
    ``holdout`` (the paper's, §F.1: "an 80/20 stratified holdout split"): train / holdout; the
    holdout both picks and is scored (``gate.holdout_size``), so its figures are not on untouched items.
    """

    three_way = "three_way"
    holdout = "holdout"


class SplitBy(StrEnum):
    """What the split keeps in one part (``gate.split_by``).

    ``item`` (the paper's "instance-disjoint", the default): an item (one answer judged) and all its
    wordings' verdicts. ``source`` (ours, stricter): every item of one source (a question's answers,
    an article's summaries, a dialogue's responses) in one part, so the test items' source texts were
    never read in training (:func:`~promptlottery.gating.data.source_keys`).
    """

    item = "item"
    source = "source"


class MonitorMode(StrEnum):
    max = "max"
    min = "min"


class SelectFor(StrEnum):
    """Which validation figure picks the best epoch (``gate.select_for``)."""

    #: the paper's TNR (its positive class is "needs aggregation"), i.e. our val/tpr
    paper_tnr = "paper_tnr"
    #: the classifier's own monitor (``gate.classifier.monitor``)
    classifier = "classifier"


class ClassWeight(StrEnum):
    """``balanced`` weighs the loss by inverse class frequency (null: unweighted)."""

    balanced = "balanced"


@dataclass
class LoraSettings:
    r: int = 8
    alpha: int = 16
    dropout: float = 0.1
    #: null: the query/key/value projections of the architecture (backbones.QKV_MODULES)
    target_modules: list[str] | None = None
    #: trained in full besides the adapters (the classification head always is)
    modules_to_save: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_int("gate.classifier.lora.r", self.r, lo=1)
        if self.alpha <= 0:
            raise fail("gate.classifier.lora.alpha", self.alpha, "> 0")
        if not 0.0 <= self.dropout < 1.0:
            raise fail("gate.classifier.lora.dropout", self.dropout, "in [0, 1)")


@dataclass
class ClassifierConfig:
    #: the backbone class (a ``gating.backbones.ClassifierBackbone``): MiniLM, Pretrained, RandomInit
    _target_: str = MINILM_TARGET
    name: str = "minilm"
    #: Pretrained: ``from_pretrained(model_name)`` (a Hub name or a local path)
    model_name: str | None = None
    #: RandomInit: "minilm" or a name/path; Pretrained: null = model_name's own tokenizer
    tokenizer: str | None = None
    #: RandomInit: model_type + the architecture's kwargs
    model_config: dict[str, Any] = field(default_factory=dict)
    lora: LoraSettings = field(default_factory=LoraSettings)
    max_length: int = 512
    query_truncation: QueryTruncation = QueryTruncation.middle
    batch_size: int = 4
    eval_batch_size: int = 32
    accumulate_grad_batches: int = 8
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    max_epochs: int = 3
    max_steps: int = -1
    class_weight: ClassWeight | None = ClassWeight.balanced
    val_check_interval: float = 1.0
    gradient_clip_val: float | None = 1.0
    precision: str = "32-true"
    accelerator: str = "auto"
    devices: int = 1
    #: torch threads on the CPU: a whole number, ``all`` (every core this process may use; null is
    #: the same) or ``auto`` (the cores the load average leaves free at start; machine-state dependent)
    num_threads: Any = "all"
    #: the frozen backbone's own dropout (hidden and attention) while training; false: off (LoRA's
    #: dropout stays). Ours, for the CPU: dropout took 10% of a MiniLM step and attention dropout
    #: keeps scaled-dot-product attention off its fast path
    backbone_dropout: bool = True
    seed: int = 0
    monitor: str = "val/mcc"
    monitor_mode: MonitorMode = MonitorMode.max
    progress_bar: bool = False

    def __post_init__(self) -> None:
        from promptlottery.gating.backbones import backbone_class

        backbone_class(self._target_).check(self)
        for key in ("max_length", "batch_size", "eval_batch_size", "accumulate_grad_batches", "devices"):
            check_int(f"gate.classifier.{key}", getattr(self, key), lo=1)
        if self.lr <= 0:
            raise fail("gate.classifier.lr", self.lr, "> 0")
        if not 0.0 <= self.warmup_ratio <= 1.0:
            raise fail("gate.classifier.warmup_ratio", self.warmup_ratio, "in [0, 1]")
        nt = self.num_threads
        if not (
            nt in (None, "all", "auto") or (isinstance(nt, int) and not isinstance(nt, bool) and nt >= 1)
        ):
            raise fail("gate.classifier.num_threads", nt, "a whole number >= 1, 'all' or 'auto'")
        if self.max_epochs < 1 and self.max_steps < 1:
            raise _error("gate.classifier.max_epochs and max_steps are both < 1: nothing would be trained")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | DictConfig | None) -> ClassifierConfig:
        """The checked config of a plain ``gate.classifier`` dict (one-line ConfigError if bad)."""
        return _to_object(cls, d, "gate.classifier.")


@dataclass
class EmbeddingBaselineConfig:
    enabled: bool = True
    C: float = 1.0


@dataclass
class SparseDesignConfig:
    """A sparse design simulated as a frontier policy (``gating.sparse_policy``; docs/sparse.md):
    ``budget`` a share of the five calls per item, ``anchor`` a wording judged on every item,
    ``full_share`` the items judged under every wording."""

    budget: float = 0.4
    anchor: str | None = None
    full_share: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.budget <= 1.0:
            raise fail("gate.sparse_designs[].budget", self.budget, "a share of the calls in (0, 1]")
        if not 0.0 <= self.full_share <= self.budget:
            raise fail("gate.sparse_designs[].full_share", self.full_share, f"in [0, budget={self.budget}]")


@dataclass
class LLMBaselineConfig:
    """The LLM prompt classifier (``gating.baselines.llm_prompt_classifier``).

    The paper's cuts (§F.2): "queries are truncated to 3,500 characters and few-shot examples to
    1,200 characters each": ``max_query_chars`` and ``max_shot_chars``, cut at the end
    (``truncation: right``, the text's first characters kept); ``truncation: middle`` is ours (the
    query's first third and its end, where a few-shot judge prompt puts the judged item).
    """

    enabled: bool = True
    n_shot: int = 2
    max_query_chars: int = 3500
    max_shot_chars: int = 1200
    truncation: QueryTruncation = QueryTruncation.right
    max_rows: int | None = 400
    seed: int = 0
    max_new_tokens: int = 2
    #: ours, beyond the paper: where a prompt at the paper's cuts exceeds the backend's context
    #: (``max_length`` / ``max_model_len``), queries are cut further (75% per step, down to this many
    #: characters) and then shots dropped; each such row is counted in the stage's notes
    min_query_chars: int = 400

    def __post_init__(self) -> None:
        for key in ("max_query_chars", "max_shot_chars", "min_query_chars"):
            check_int(f"gate.llm_baseline.{key}", getattr(self, key), lo=1)


@dataclass
class GateConfig:
    #: glob(s) of sweep / job dirs holding judgments.parquet (a string or a list)
    runs: Any = None
    transfer_runs: Any = None
    verdict: Verdict = Verdict.argmax
    reference: str = "P1"
    variants: list[str] | None = field(default_factory=lambda: ["P1", "P2", "P3", "P4", "P5"])
    temperature: float | None = None
    min_judges: int = 2
    #: ``three_way`` (ours, default: val_size / test_size) or ``holdout`` (the paper's 80/20)
    split: Split = Split.three_way
    #: ``item`` (instance-disjoint, the paper's) or ``source`` (ours: a source's items in one part)
    split_by: SplitBy = SplitBy.item
    val_size: float = 0.2
    test_size: float = 0.2
    holdout_size: float = 0.2
    seed: int = 0
    max_train_items: int | None = None
    allow_missing_query: bool = False
    #: "auto" or a number (OmegaConf has no str | float field)
    threshold: Any = "auto"
    target_recovery: float = 0.86
    #: the report also gives each threshold policy's largest saving at these recovery levels
    recovery_targets: list[float] = field(default_factory=lambda: [0.86, 0.95, 1.0])
    first_k: list[int] = field(default_factory=lambda: [2, 3])
    #: the frontier's item-cluster bootstrap (gating.frontier): resamples and interval level
    n_bootstrap: int = 1000
    bootstrap_level: float = 0.95
    #: transfer by configuration: this share of the configurations (seeded; at least one, at most all
    #: but one) is left out of training and validation; the frontier is also computed on their items
    #: that no training row holds. null: none
    transfer_config_share: float | None = None
    #: the sparse designs simulated as frontier policies on the full judgments ([]: none)
    sparse_designs: list[SparseDesignConfig] = field(default_factory=list)
    #: the best epoch: ``paper_tnr`` = the paper's TNR on validation (its positive class is "needs
    #: aggregation", so our val/tpr); ``classifier`` = ``gate.classifier.monitor``
    select_for: SelectFor = SelectFor.paper_tnr
    #: best_params.json of sweeps/tune_gate.py: its gate.classifier.* values override the classifier's
    best_params: str | None = None
    save_adapter: bool = True
    classifier: ClassifierConfig = field(default_factory=ClassifierConfig)
    embedding_baseline: EmbeddingBaselineConfig = field(default_factory=EmbeddingBaselineConfig)
    llm_baseline: LLMBaselineConfig = field(default_factory=LLMBaselineConfig)
    #: the Optuna search (gating/tune.py reads it); free-form: its `space` is keyed by parameter name
    tune: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.runs in (None, "", []):
            raise _error("gate.runs is required: a glob (or list of globs) of sweep dirs with judgments")
        if not (self.threshold == "auto" or _is_number(self.threshold)):
            raise _error(f"gate.threshold={self.threshold!r}: must be 'auto' or a number")
        if self.variants is not None and len(self.variants) < 2:
            raise _error(f"gate.variants={list(self.variants)}: needs at least 2 judges")
        check_open("gate.val_size", self.val_size, 0, 1)
        if not 0.0 < self.test_size < 1.0 or self.val_size + self.test_size >= 1.0:
            raise _error(
                f"gate.test_size={self.test_size}: must be in (0, 1) and leave training items "
                f"(val_size + test_size = {self.val_size + self.test_size:g} must be < 1)"
            )
        check_open("gate.holdout_size", self.holdout_size, 0, 1)
        check_int("gate.min_judges", self.min_judges, lo=2)
        check_int("gate.n_bootstrap", self.n_bootstrap, lo=1)
        check_open("gate.bootstrap_level", self.bootstrap_level, 0, 1)
        if self.transfer_config_share is not None:
            check_open("gate.transfer_config_share", self.transfer_config_share, 0, 1)
        for d in self.sparse_designs:
            if d.anchor is not None and self.variants is not None and d.anchor not in self.variants:
                raise _error(
                    f"gate.sparse_designs: anchor={d.anchor!r} is not one of gate.variants={list(self.variants)}"
                )

    @classmethod
    def from_dict(cls, d: dict[str, Any] | DictConfig | None) -> GateConfig:
        """The checked gate config of a plain ``gate`` dict (as ``OmegaConf.to_container`` gives it).

        ``best_params`` is applied to the classifier first. Every bad key or value is a one-line
        ConfigError naming the option (and its valid choices where it has them).
        """
        if isinstance(d, DictConfig):
            d = OmegaConf.to_container(d, resolve=True)
        d = dict(d or {})
        if d.get("best_params"):
            d["classifier"] = apply_best_params(dict(d.get("classifier") or {}), d["best_params"])
        return _to_object(cls, d, "gate.")


def register_configs() -> None:
    """``gate/schema``: the gate's typed options, composed in by ``conf/gate/selective.yaml``."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(group="gate", name="schema", node=GateConfig, package="gate")


def check(cfg: DictConfig) -> None:
    """The gate's cross-field checks (``__post_init__``) of a composed run config, if it has a gate."""
    if OmegaConf.select(cfg, "gate") is not None:
        GateConfig.from_dict(cfg.gate)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _to_object(cls, d, prefix: str):
    """``d`` merged into ``cls``'s schema and built (``__post_init__`` runs): OmegaConf's errors as
    one line naming the full key, e.g. ``gate.verdict='x': expected one of [argmax, weighted]``."""
    if isinstance(d, DictConfig):  # resolved while it still has its parents (${seed}, ${paths.*})
        d = OmegaConf.to_container(d, resolve=True)
    try:
        node = OmegaConf.merge(OmegaConf.structured(cls), d or {})
        return OmegaConf.to_object(node)
    except ConfigKeyError as e:
        key = f"{prefix}{e.full_key}"
        parent = key.rpartition(".")[0]
        valid = sorted(_fields_at(cls, str(e.full_key).split(".")[:-1]))
        raise _error(f"unknown config key {key} (valid keys under {parent}: {valid})") from None
    except MissingMandatoryValue as e:
        raise _error(f"{prefix}{e.full_key} is required (??? in the config)") from None
    except OmegaConfBaseException as e:
        msg = str(getattr(e, "msg", None) or e).splitlines()[0]
        raise _error(f"{prefix}{e.full_key}: {msg}") from None


def _fields_at(cls, path: list[str]) -> set[str]:
    import dataclasses
    import typing

    for part in path:
        hints = typing.get_type_hints(cls)
        cls = hints.get(part, cls)
    return {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()


def apply_best_params(classifier: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """Apply the ``gate.classifier.*`` overrides of a tune_gate best_params.json to ``classifier``."""
    best = json.loads(Path(path).read_text())
    tuned, name = best.get("classifier"), classifier.get("name")
    if tuned and name and tuned != name:
        logger.warning(
            "gate.best_params=%s was tuned for classifier=%s, applied to classifier=%s", path, tuned, name
        )
    out = json.loads(json.dumps(classifier))
    for dotted, value in (best.get("params_by_path") or {}).items():
        parts = dotted.split(".")
        if parts[:2] != ["gate", "classifier"]:
            raise _error(f"{path}: parameter {dotted!r} is not under gate.classifier")
        node = out
        for p in parts[2:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out

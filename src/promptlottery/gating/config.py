"""The ``gate:`` node of the run config, checked (RunConfig.gate is free-form)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from promptlottery.gating.baselines import LLMBaselineConfig
from promptlottery.gating.model import ClassifierConfig

logger = logging.getLogger(__name__)


@dataclass
class EmbeddingBaselineConfig:
    enabled: bool = True
    C: float = 1.0


@dataclass
class GateConfig:
    runs: Any = None
    transfer_runs: Any = None
    verdict: str = "argmax"
    reference: str = "P1"
    variants: list[str] | None = field(default_factory=lambda: ["P1", "P2", "P3", "P4", "P5"])
    temperature: float | None = None
    min_judges: int = 2
    val_size: float = 0.2
    test_size: float = 0.2
    seed: int = 0
    max_train_items: int | None = None
    allow_missing_query: bool = False
    threshold: Any = "auto"
    target_recovery: float = 0.86
    #: the report also gives each threshold policy's largest saving at these recovery levels
    recovery_targets: list[float] = field(default_factory=lambda: [0.86, 0.95, 1.0])
    first_k: list[int] = field(default_factory=lambda: [2, 3])
    #: the best epoch: ``paper_tnr`` = the paper's TNR on validation (its positive class is "needs
    #: aggregation", so our val/tpr); ``classifier`` = ``gate.classifier.monitor``
    select_for: str = "paper_tnr"
    best_params: str | None = None
    save_adapter: bool = True
    classifier: ClassifierConfig = field(default_factory=ClassifierConfig)
    embedding_baseline: EmbeddingBaselineConfig = field(default_factory=EmbeddingBaselineConfig)
    llm_baseline: LLMBaselineConfig = field(default_factory=LLMBaselineConfig)
    tune: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> GateConfig:
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown gate keys {unknown}; valid: {sorted(known)}")
        classifier = dict(d.pop("classifier", None) or {})
        if d.get("best_params"):
            classifier = apply_best_params(classifier, d["best_params"])
        emb = _sub(EmbeddingBaselineConfig, d.pop("embedding_baseline", None), "gate.embedding_baseline")
        llm = _sub(LLMBaselineConfig, d.pop("llm_baseline", None), "gate.llm_baseline")
        cfg = cls(
            **d, classifier=ClassifierConfig.from_dict(classifier), embedding_baseline=emb, llm_baseline=llm
        )
        if cfg.runs in (None, "", []):
            raise ValueError("gate.runs is required: a glob (or list of globs) of sweep dirs with judgments")
        if cfg.verdict not in ("argmax", "weighted"):
            raise ValueError(f"gate.verdict must be argmax or weighted, got {cfg.verdict!r}")
        if not (cfg.threshold == "auto" or isinstance(cfg.threshold, (int, float))):
            raise ValueError(f"gate.threshold must be 'auto' or a number, got {cfg.threshold!r}")
        if cfg.select_for not in ("paper_tnr", "classifier"):
            raise ValueError(f"gate.select_for must be paper_tnr or classifier, got {cfg.select_for!r}")
        if cfg.variants is not None and len(cfg.variants) < 2:
            raise ValueError("gate.variants needs at least 2 judges")
        return cfg


def _sub(kind, d, where: str):
    d = dict(d or {})
    known = {f.name for f in fields(kind)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ValueError(f"unknown {where} keys {unknown}; valid: {sorted(known)}")
    return kind(**d)


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
            raise ValueError(f"{path}: parameter {dotted!r} is not under gate.classifier")
        node = out
        for p in parts[2:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out

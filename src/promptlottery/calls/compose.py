"""The one place a stage builds what it calls a model with: the backend of a backbone config, the
call cache of the run's ``paths`` and the run's decoding. Every stage that asks a model (judge,
predict, paraphrase, validate_prompts' equivalence rating, rubric, the gate's LLM baseline) takes
them from here, so a new ``paths`` or ``decoding`` option reaches all of them at once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptlottery.backends.base import Backend, Decoding
from promptlottery.calls.cache import CallCache, open_cache
from promptlottery.calls.spend import SpendCap


@dataclass(frozen=True)
class JudgeRuntime:
    """A stage's backend, call cache (``paths.cache_url`` / ``paths.cache_dir``) and decoding."""

    backend: Backend
    cache: CallCache
    decoding: Decoding

    def __iter__(self):  # backend, cache, decoding = build_judge_runtime(cfg)
        return iter((self.backend, self.cache, self.decoding))


#: the backends built inside :func:`shared_backends`, by their resolved spec (None: outside it)
_SHARED: dict[str, Backend] | None = None


@contextmanager
def shared_backends() -> Iterator[dict[str, Backend]]:
    """Inside it, :func:`build_backend` builds each distinct backend spec once and hands the same
    engine to every job that asks again: a study's task of one configuration x backbone judges its
    wordings with one engine load (:mod:`promptlottery.stages.study_tasks`). Those with a
    ``close()`` are closed on the way out."""
    global _SHARED
    outer, _SHARED = _SHARED, {}
    try:
        yield _SHARED
    finally:
        built, _SHARED = _SHARED, outer
        for b in built.values():
            close = getattr(b, "close", None)
            if callable(close):
                close()


def _spec_key(spec: Any) -> str:
    import json

    from omegaconf import OmegaConf

    node = OmegaConf.to_container(spec, resolve=True) if OmegaConf.is_config(spec) else spec
    return json.dumps(node, sort_keys=True, default=str)


def build_backend(spec: Any, backend: Backend | None = None) -> Backend:
    """``backend`` if given (tests pass a fake), else the ``_target_`` node ``spec`` instantiated
    (inside :func:`shared_backends`, once per distinct spec)."""
    if backend is not None:
        return backend
    from hydra.utils import instantiate

    if _SHARED is None:
        return instantiate(spec)
    key = _spec_key(spec)
    if key not in _SHARED:
        _SHARED[key] = instantiate(spec)
    return _SHARED[key]


def run_decoding(cfg: Any) -> Decoding:
    """The run's ``decoding:`` node as a :class:`Decoding`."""
    from omegaconf import OmegaConf

    node = cfg.decoding
    return Decoding(**(OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node))


def build_calls(cfg: Any) -> tuple[CallCache, Decoding]:
    """The run's call cache and decoding, for a stage that builds its backends itself (the rubric
    study judges with several backbones in one job)."""
    return open_cache(cfg.paths), run_decoding(cfg)


def build_judge_runtime(cfg: Any, *, backend: Backend | None = None) -> JudgeRuntime:
    """The backend of ``cfg.backbone`` (or ``backend``), the run's call cache and its decoding."""
    backend = build_backend(cfg.backbone.backend, backend)
    cache, decoding = build_calls(cfg)
    return JudgeRuntime(backend, cache, decoding)


def build_spend(cfg: Any, *, ledger: Path | None = None) -> SpendCap:
    """The run's spend cap (``max_cost_usd``, ``max_tokens``) priced at the backbone's prices, from
    what ``ledger`` says was spent already (:meth:`SpendCap.load`)."""
    backbone = cfg.get("backbone") or {}
    return SpendCap(
        max_cost_usd=cfg.get("max_cost_usd"),
        max_tokens=cfg.get("max_tokens"),
        price_in=backbone.get("price_per_mtok_input"),
        price_out=backbone.get("price_per_mtok_output"),
        ledger=ledger,
    ).load()

"""One backbone's judge calls for the rubric study: holistic, separate and batch prompts.

The ``rubric`` stage (:mod:`promptlottery.rubrics.stage`) runs one :class:`Judge` per backbone;
every call goes through the call cache. Every request carries its
:class:`~promptlottery.backends.base.KnownAnswer` (outside the key), what a judge with known
behaviour (the fake backend's ``behaviour``) reads: the condition's name as its variant, the
scale's scores, and the label nearest the item's human value for the request's criterion (the
human holistic score, an ASAP++ trait); None where the task has no human label (InFoBench), so an
oracle is refused there.
"""

from __future__ import annotations

import json
from typing import Any

from promptlottery import SCHEMA_VERSION
from promptlottery.backends.base import Decoding, JudgeRequest, KnownAnswer
from promptlottery.calls.cache import CallCache
from promptlottery.calls.loop import CallStats, run_calls
from promptlottery.data.schema import Item
from promptlottery.prompts.scales import Scale
from promptlottery.prompts.scoring import score_response
from promptlottery.rubrics.prompts import PromptBuilder, RubricCondition, to_request
from promptlottery.rubrics.task_base import Criterion, RubricTask

__all__ = ["Judge"]


class Judge:
    """One backbone's calls for the rubric study, all through the call cache."""

    def __init__(
        self,
        task: RubricTask,
        builder: PromptBuilder,
        *,
        backbone: str,
        backend,
        prompt_format: str,
        cache: CallCache,
        decoding: Decoding,
        stats: CallStats,
        texts_version: dict[str, Any],
        max_retries: int = 4,
        backoff_s: float = 1.0,
    ):
        if prompt_format == "chat" and not backend.supports_assistant_prefix:
            raise ValueError(
                f"backbone {backbone}: backend {type(backend).__name__} does not honour JudgeRequest.assistant_prefix "
                "(needed to read each answer after '<name>:' in a chat turn); use prompt_format=completion"
            )
        self.task, self.builder, self.backbone, self.backend = task, builder, backbone, backend
        self.prompt_format, self.cache, self.decoding, self.stats = prompt_format, cache, decoding, stats
        self.identity = backend.identity()
        self.texts_version = texts_version
        self.max_retries, self.backoff_s = max_retries, backoff_s
        self._prefix: dict[str, str] = {}  # request key -> the answer prefix the label follows

    def request(
        self, rendered, scale: Scale, cond: RubricCondition, item: Item, criterion: Criterion | None
    ) -> JudgeRequest:
        crit_id = criterion.id if criterion else "holistic"
        req = to_request(
            rendered,
            scale.labels,
            prompt_format=self.prompt_format,
            identity=self.identity,
            decoding=self.decoding,
            tags={"condition": cond.name, "criterion": crit_id, "texts": self.texts_version},
        )
        self._prefix[req.key] = rendered.prefix
        req.known = KnownAnswer(cond.name, scale.scores, self._known_label(item, criterion, scale))
        return req

    def _known_label(self, item: Item, criterion: Criterion | None, scale: Scale) -> str | None:
        """The scale label nearest the human value (the task's human labels are on the scale it
        judges with: ASAP's rater and ASAP++ trait ranges), None without one."""
        human = self._human(item, criterion)
        return None if human is None else scale.nearest_label(float(human))

    def _human(self, item: Item, criterion: Criterion | None) -> float | None:
        if criterion is None:
            return self.task.human_holistic(item)
        return self.task.human_criterion(item, criterion.id)

    def _answer(self, jobs: list[tuple], desc: str) -> tuple[dict, set[str]]:
        reqs = [j[-1] for j in jobs]
        cached = set(self.cache.get_many([r.key for r in reqs]))
        answers = run_calls(
            reqs,
            self.backend,
            self.cache,
            self.decoding,
            stats=self.stats,
            max_retries=self.max_retries,
            backoff_s=self.backoff_s,
            desc=desc,
        )
        return answers, cached

    def _row(
        self,
        item: Item,
        cond: RubricCondition,
        criterion: Criterion | None,
        position: int,
        scale: Scale,
        req: JudgeRequest,
        answers: dict,
        cached: set[str],
    ) -> dict[str, Any]:
        resp = answers[req.key]
        s = score_response(resp, scale)
        self.stats.parse_failures += s.score is None
        crit_id = criterion.id if criterion else "holistic"
        human = self._human(item, criterion)
        ref = (
            self.task.reference_holistic(item)
            if criterion is None
            else self.task.reference_criterion(item, crit_id)
        )
        return {
            "schema_version": SCHEMA_VERSION,
            "backbone": self.backbone,
            "condition": cond.name,
            "kind": cond.kind,
            "mode": cond.mode if cond.kind == "analytic" else None,
            "examples": cond.examples,
            "context": cond.context,
            "item_id": item.id,
            "criterion": crit_id,
            "criterion_name": criterion.name if criterion else self.task.holistic_name,
            "position": position,
            "scale": scale.name,
            "prompt_format": self.prompt_format,
            "answer_prefix": self._prefix[req.key],
            "raw_output": resp.raw_text,
            "score": s.score,
            "weighted_score": s.weighted_score,
            "argmax_label": s.argmax_label,
            "argmax_score": s.argmax_score,
            "parsed_label": s.parsed_label,
            "label_mass": s.label_mass,
            "scoring_mode": s.scoring_mode,
            "missing_reason": s.missing_reason,
            "label_probs": json.dumps(resp.label_probs) if resp.label_probs is not None else None,
            "human": human,
            "reference": ref,
            "prompt_tokens": resp.prompt_tokens,
            "latency_s": resp.latency_s,
            "cache_hit": req.key in cached,
            "cache_key": req.key,
        }

    # -- the three shapes ----------------------------------------------------------------------
    def holistic(self, items: list[Item], cond: RubricCondition) -> list[dict]:
        scale = self.task.holistic_scale
        jobs = [(it, self.request(self.builder.holistic(it, cond), scale, cond, it, None)) for it in items]
        answers, cached = self._answer(jobs, f"{self.backbone}/{cond.name}")
        return [self._row(it, cond, None, 0, scale, r, answers, cached) for it, r in jobs]

    def separate(self, items: list[Item], cond: RubricCondition) -> list[dict]:
        jobs = [
            (it, c, k, self.request(self.builder.separate(it, c, cond), c.scale, cond, it, c))
            for it in items
            for k, c in enumerate(self.task.criteria(it), start=1)
        ]
        answers, cached = self._answer(jobs, f"{self.backbone}/{cond.name}")
        return [self._row(it, cond, c, k, c.scale, r, answers, cached) for it, c, k, r in jobs]

    def batch(self, items: list[Item], cond: RubricCondition) -> list[dict]:
        """Round k scores criterion k of every item, after the greedy answers of rounds 1..k-1."""
        crits = {it.id: self.task.criteria(it) for it in items}
        so_far: dict[str, list[str]] = {it.id: [] for it in items}
        rows: list[dict] = []
        for k in range(max(len(c) for c in crits.values())):
            jobs = []
            for it in items:
                cs = crits[it.id]
                if k < len(cs) and len(so_far[it.id]) == k:  # an item whose earlier answer failed stops
                    rendered = self.builder.batch(it, cs, k, so_far[it.id], cond)
                    jobs.append((it, cs[k], self.request(rendered, cs[k].scale, cond, it, cs[k])))
            if not jobs:
                break
            answers, cached = self._answer(jobs, f"{self.backbone}/{cond.name}/position {k + 1}")
            for it, c, r in jobs:
                row = self._row(it, cond, c, k + 1, c.scale, r, answers, cached)
                greedy = row["argmax_label"] or row["parsed_label"]
                if greedy is not None:
                    so_far[it.id].append(greedy)
                row["greedy_answer"] = greedy
                rows.append(row)
        return rows

    def condition(self, items: list[Item], cond: RubricCondition) -> list[dict]:
        if cond.kind == "holistic":
            return self.holistic(items, cond)
        return self.batch(items, cond) if cond.mode == "batch" else self.separate(items, cond)

    def dry_run(self, items: list[Item], cond: RubricCondition) -> dict[str, int]:
        """Requests and prompt tokens, without calling the model (batch: first-label placeholders)."""
        reqs = []
        for it in items:
            if cond.kind == "holistic":
                reqs.append(
                    self.request(self.builder.holistic(it, cond), self.task.holistic_scale, cond, it, None)
                )
                continue
            cs = self.task.criteria(it)
            for k, c in enumerate(cs):
                rendered = (
                    self.builder.batch(it, cs, k, [x.scale.labels[0] for x in cs[:k]], cond)
                    if cond.mode == "batch"
                    else self.builder.separate(it, c, cond)
                )
                reqs.append(self.request(rendered, c.scale, cond, it, c))
        cached = self.cache.get_many([r.key for r in reqs])
        return {
            "calls": len(reqs),
            "cached_calls": len(cached),
            "prompt_tokens": sum(self.backend.count_tokens(r) for r in reqs),
            "uncached_prompt_tokens": sum(self.backend.count_tokens(r) for r in reqs if r.key not in cached),
        }

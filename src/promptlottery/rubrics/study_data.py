"""The study's human labels and every model's scores as aligned item arrays (NaN = missing)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.data.schema import Item
from promptlottery.metrics import kendall_tau, pareto_dominance_tau
from promptlottery.rubrics.prompts import ANALYTIC, RubricCondition
from promptlottery.rubrics.task_base import RubricTask


class StudyData:
    """The sample's human labels and every model's scores as aligned arrays (NaN = missing)."""

    def __init__(
        self,
        task: RubricTask,
        items: list[Item],
        scores: pd.DataFrame,
        conditions: list[RubricCondition],
        backbones: list[str],
    ):
        self.task, self.items, self.conditions, self.backbones = task, items, conditions, backbones
        self.ids = [it.id for it in items]
        self.n = len(items)
        crits = [task.criteria(it) for it in items]
        self.width = max((len(c) for c in crits), default=0)
        first = crits[0] if crits else []
        self.criterion_names = (
            [c.name for c in first]
            if task.fixed_criteria
            else [f"position {k}" for k in range(1, self.width + 1)]
        )
        self.has_human = task.human_note is None
        nan = np.full((self.n, self.width), np.nan)
        self.human_holistic = np.array([_num(task.human_holistic(it)) for it in items], dtype=float)
        self.human_analytic = nan.copy()
        self.reference_holistic = np.array([_num(task.reference_holistic(it)) for it in items], dtype=float)
        self.reference_analytic = nan.copy()
        for i, (it, cs) in enumerate(zip(items, crits)):
            for j, c in enumerate(cs):
                self.human_analytic[i, j] = _num(task.human_criterion(it, c.id))
                self.reference_analytic[i, j] = _num(task.reference_criterion(it, c.id))
        self.strata = [task.agreement(it) for it in items]
        self.scores = scores
        self._cache: dict[tuple, np.ndarray] = {}

    def holistic_conditions(self) -> list[RubricCondition]:
        return [c for c in self.conditions if c.kind == "holistic"]

    def analytic_conditions(self) -> list[RubricCondition]:
        return [c for c in self.conditions if c.kind == ANALYTIC]

    def _matrix(self, backbone: str, condition: str, column: str) -> np.ndarray:
        key = (backbone, condition, column)
        if key not in self._cache:
            df = self.scores[(self.scores["backbone"] == backbone) & (self.scores["condition"] == condition)]
            out = np.full((self.n, max(self.width, 1)), np.nan)
            pos = {iid: i for i, iid in enumerate(self.ids)}
            for iid, p, v in zip(df["item_id"], df["position"], df[column]):
                if iid in pos and v is not None and not pd.isna(v):
                    out[pos[iid], max(int(p), 1) - 1] = float(v)
            self._cache[key] = out
        return self._cache[key]

    def holistic(self, backbone: str, cond: RubricCondition) -> np.ndarray:
        return self._matrix(backbone, cond.name, "score")[:, 0]

    def analytic(self, backbone: str, cond: RubricCondition, column: str = "score") -> np.ndarray:
        return self._matrix(backbone, cond.name, column)[:, : self.width]

    # -- the analytic aggregate: a matrix for Pareto dominance, a vector for the yes-ratio --------
    def aggregate(self, matrix: np.ndarray) -> np.ndarray:
        if self.task.aggregate == "pareto":
            return matrix
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(matrix, axis=1)

    @property
    def aggregate_stat(self) -> Callable:
        return pareto_dominance_tau if self.task.aggregate == "pareto" else kendall_tau

    @property
    def aggregate_name(self) -> str:
        return "Pareto dominance" if self.task.aggregate == "pareto" else "yes-ratio"


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)

"""The judgment grid: the checked jobs' judgments, sliced once into configurations.

Every analysis of the lottery stage and the gate's examples read the judgments through one
:class:`JudgmentGrid`, loaded once per analysis (:meth:`JudgmentGrid.load`) or built from a table
(:meth:`JudgmentGrid.from_frame`). The grid holds

* the judgments with their verdicts (``label``, ``value``, ``cont``, ``verdict_source``:
  :func:`~promptlottery.judging.table.add_verdicts`) and the **verdict kind** that produced them
  (:data:`VERDICT_KINDS`: ``argmax``, ``weighted``, ``parsed``);
* per configuration (dataset x judge family x prompt group x criterion x rubric x backbone, sorted
  by id) a :class:`Configuration`: its rows, the paraphrase setting (each variant once at the main
  temperature, :func:`~promptlottery.judging.table.paraphrase_rows`), the variant order (the
  reference first), the fixed-prompt settings, the scale, and the items x variants matrices of the
  paraphrase setting (``label``, ``value``, ``cont``, ...) with the human labels and systems of
  their items, each computed once.

The slicing definitions stay in :mod:`promptlottery.judging.table`; the grid is the only caller
of them on the read side, so the judgments table is sliced by configuration once per analysis.

A judge mode that does not give one scale label per (item, judge) (``JudgeMode.label_matrix``
false: the pairwise mode, whose rows carry ``order`` and ``preferred``) is a verdict kind of its
own: its rows are kept out of the pointwise configurations (no analysis of scale labels sees them)
and exposed per configuration as :meth:`JudgmentGrid.rows` (``grid.rows(mode)``: ``{config_id:
rows}``), for the analyses written over such frames. A table without the ``judge_mode`` column is
the default mode's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from promptlottery.judging.load import load_judgments
from promptlottery.judging.table import (
    GREEDY_BELOW,
    AnalysisError,
    FixedSetting,
    add_verdicts,
    config_ids,
    configurations,
    fixed_settings,
    group_files,
    human_vector,
    judge_matrix,
    main_temperature,
    natural_key,
    paraphrase_rows,
    system_vector,
    variant_order,
)
from promptlottery.modes import MODES
from promptlottery.prompts.scales import Scale, get_scale

#: the verdict kinds of a pointwise judge (one scale label per item and judge), see ``add_verdicts``
VERDICT_KINDS = {
    "argmax": "the argmax label (the most probable scale label; the paper's near-greedy setting)",
    "weighted": "the logprob-weighted score rounded to the nearest scale label",
    "parsed": "the label parsed from the generated text",
}


def _label_matrix_modes() -> tuple[str, ...]:
    """``judge_mode`` values whose rows are the grid's configurations ("": a row without a mode)."""
    return ("", *(name for name, mode in MODES.items() if mode.label_matrix))


def _split_modes(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, dict[str, pd.DataFrame]]]:
    """The rows of the label-matrix modes, and ``{mode: {config_id: rows}}`` of every other mode
    (configurations sorted by id); a ``judge_mode`` no registered mode has is one line."""
    if "judge_mode" not in df.columns:
        return df, {}
    mode = df["judge_mode"].fillna("").astype(str)
    unknown = sorted(set(mode) - {"", *MODES})
    if unknown:
        raise AnalysisError(
            f"judgments with judge_mode {unknown[0]!r}, which no judge mode has (known: {', '.join(MODES)})"
        )
    matrix = mode.isin(_label_matrix_modes())
    by_mode: dict[str, dict[str, pd.DataFrame]] = {}
    for name in (n for n in MODES if n not in _label_matrix_modes()):
        other = df[mode == name]
        if len(other):
            other = other.assign(config_id=config_ids(other))
            by_mode[name] = {
                cid: g for cid, g in sorted(other.groupby("config_id"), key=lambda t: natural_key(t[0]))
            }
    return df[matrix], by_mode


@dataclass
class Configuration:
    """One configuration of the grid: its rows and its paraphrase setting's matrices.

    ``rows``: every judgment of the configuration (with verdicts); ``paraphrases``: the paraphrase
    setting's rows; ``order``: the variants of the paraphrase setting, the reference first;
    ``fixed``: the fixed-prompt baselines (:func:`~promptlottery.judging.table.fixed_settings`).
    The matrices are computed on first use and shared by every analysis: do not modify them.
    """

    config_id: str
    rows: pd.DataFrame
    paraphrases: pd.DataFrame
    order: list[str]
    fixed: list[FixedSetting]
    reference: str
    temperature: float | None = None
    _matrices: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, config_id: str, rows: pd.DataFrame, *, reference: str, temperature: float | None):
        para = paraphrase_rows(rows, temperature)
        return cls(
            config_id=config_id,
            rows=rows,
            paraphrases=para,
            order=variant_order(para["variant"], reference),
            fixed=fixed_settings(rows, reference),
            reference=reference,
            temperature=temperature,
        )

    @cached_property
    def first(self) -> pd.Series:
        """The configuration's first row: its dataset, judge, backbone, model, scale, task type ..."""
        return self.rows.iloc[0]

    @cached_property
    def scale(self) -> Scale:
        return get_scale(self.first["scale"])

    @property
    def backbone(self) -> str:
        return self.first["backbone"]

    @property
    def binary(self) -> bool:
        return bool(self.first["binary"])

    @cached_property
    def main_temperature(self) -> float:
        return main_temperature(self.rows, self.temperature)

    def matrix(self, column: str) -> pd.DataFrame:
        """Items x variants matrix of ``column`` in the paraphrase setting (items sorted, ``order``)."""
        if column not in self._matrices:
            self._matrices[column] = judge_matrix(self.paraphrases, column, order=self.order)
        return self._matrices[column]

    def fixed_matrix(self, setting: FixedSetting, column: str) -> pd.DataFrame:
        """Items x samples matrix of ``column`` in one fixed-prompt setting (samples in order)."""
        key = f"{setting.name}\0{column}"
        if key not in self._matrices:
            samples = sorted(setting.rows["sample_index"].unique())
            self._matrices[key] = judge_matrix(setting.rows, column, by="sample_index", order=samples)
        return self._matrices[key]

    def humans(self, items: Iterable[str] | None = None) -> np.ndarray:
        """The human label of each item (default: the paraphrase matrix's items), NaN where none."""
        return human_vector(self.paraphrases, self.matrix("value").index if items is None else items)

    def systems(self, items: Iterable[str] | None = None) -> np.ndarray:
        """The evaluated system of each item (default: the paraphrase matrix's items), None where none."""
        return system_vector(self.paraphrases, self.matrix("value").index if items is None else items)


@dataclass
class JudgmentGrid:
    """The judgments of one analysis with their verdict kind, and their configurations (sorted by id).

    Iterating the grid yields its pointwise :class:`Configuration` s; ``grid[config_id]`` one of
    them; :meth:`only` a grid of some of them (what a parallel worker receives).
    """

    judgments: pd.DataFrame
    verdict: str = "argmax"
    sampled: str = "parsed"
    reference: str = "P1"
    temperature: float | None = None
    configurations: list[Configuration] = field(default_factory=list)
    #: ``{mode: {config_id: rows}}``: the judgments of the modes without a label matrix, each its own
    #: verdict kind (:meth:`rows`)
    by_mode: dict[str, dict[str, pd.DataFrame]] = field(default_factory=dict)
    #: the judgment files read (empty for a grid built from a table)
    files: list[str] = field(default_factory=list)
    #: ``{config_id: "n/a: P2 missing: ..."}``: the configurations left out (or analysed partially)
    problems: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(
        cls,
        runs: str | Iterable[str] | pd.DataFrame,
        *,
        verdict: str = "argmax",
        sampled: str = "parsed",
        reference: str = "P1",
        temperature: float | None = None,
        allow_partial: bool = False,
        allow_mixed_dtypes: bool = False,
        columns: Iterable[str] = (),
    ) -> JudgmentGrid:
        """The grid of every finished judging job under ``runs`` (:func:`~promptlottery.judging.load.load_judgments`).

        ``columns`` are added (as None) where the judgments lack them (e.g. the gate's ``query``).
        """
        problems: list[dict[str, str]] = []
        loaded = load_judgments(
            runs, allow_partial=allow_partial, allow_mixed_dtypes=allow_mixed_dtypes, problems=problems
        )
        for col in columns:
            if col not in loaded.columns:
                loaded[col] = None
        files = sorted({str(Path(d) / "judgments.parquet") for d in loaded["run_dir"].unique() if d})
        grid = cls.from_frame(
            loaded, verdict=verdict, sampled=sampled, reference=reference, temperature=temperature
        )
        grid.files = files
        grid.problems = problems[0] if problems else {}
        return grid

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        *,
        verdict: str = "argmax",
        sampled: str = "parsed",
        reference: str = "P1",
        temperature: float | None = None,
    ) -> JudgmentGrid:
        """The grid of a judgments table (as :func:`~promptlottery.judging.load.load_judgments` gives it).

        The verdicts are (re)computed with ``verdict`` / ``sampled`` (:func:`add_verdicts`).
        """
        matrix, by_mode = _split_modes(df)
        if by_mode:
            df = matrix
            if df.empty:  # e.g. a pairwise judge alone: no pointwise configuration
                return cls(df, verdict, sampled, reference, temperature, [], by_mode)
        judged = add_verdicts(df, verdict, sampled=sampled)
        return cls.from_verdicts(
            judged,
            verdict=verdict,
            sampled=sampled,
            reference=reference,
            temperature=temperature,
            by_mode=by_mode,
        )

    @classmethod
    def from_verdicts(
        cls,
        judged: pd.DataFrame,
        *,
        verdict: str = "argmax",
        sampled: str = "parsed",
        reference: str = "P1",
        temperature: float | None = None,
        by_mode: dict[str, dict[str, pd.DataFrame]] | None = None,
    ) -> JudgmentGrid:
        """The grid of a table that already has its verdicts and ``config_id`` (``verdict`` names their kind)."""
        configs = [
            Configuration.of(cid, rows, reference=reference, temperature=temperature)
            for cid, rows in configurations(judged)
        ]
        return cls(judged, verdict, sampled, reference, temperature, configs, dict(by_mode or {}))

    def __iter__(self) -> Iterator[Configuration]:
        return iter(self.configurations)

    def __len__(self) -> int:
        return len(self.configurations)

    def __getitem__(self, config_id: str) -> Configuration:
        for c in self.configurations:
            if c.config_id == config_id:
                return c
        raise KeyError(config_id)

    def rows(self, mode: str) -> dict[str, pd.DataFrame]:
        """``{config_id: rows}`` of judge mode ``mode`` (one without a label matrix; empty when the
        grid has none of its judgments)."""
        return self.by_mode.get(mode, {})

    def mode_frames(self) -> list[pd.DataFrame]:
        """The rows of every configuration of the modes without a label matrix, mode by mode (in
        registration order), each mode's configurations sorted by id."""
        return [g for rows in self.by_mode.values() for g in rows.values()]

    @property
    def n_judgments(self) -> int:
        """Every judgment of the grid: the configurations' and those of the other modes' verdict kinds."""
        return len(self.judgments) + sum(len(g) for rows in self.by_mode.values() for g in rows.values())

    def only(self, configs: Iterable[Configuration]) -> JudgmentGrid:
        """A grid of some of this grid's configurations (same verdict kind and options)."""
        keep = list(configs)
        rows = pd.concat([c.rows for c in keep]) if keep else self.judgments.iloc[0:0]
        return JudgmentGrid(
            rows, self.verdict, self.sampled, self.reference, self.temperature, keep, {}, self.files, {}
        )

    @cached_property
    def paraphrases(self) -> pd.DataFrame:
        """The paraphrase setting's rows of every configuration, in configuration order."""
        if not len(self.judgments):
            return self.judgments
        return pd.concat([c.paraphrases for c in self.configurations], ignore_index=True)

    def paraphrase_grid(self, verdict: str) -> JudgmentGrid:
        """The paraphrase settings alone, their verdicts computed as ``verdict`` (e.g. ``parsed``)."""
        judged = add_verdicts(self.paraphrases, verdict, sampled=self.sampled)
        return JudgmentGrid.from_verdicts(
            judged,
            verdict=verdict,
            sampled=self.sampled,
            reference=self.reference,
            temperature=self.temperature,
        )

    @cached_property
    def sampled_reference(self) -> bool:
        """Whether any reference-variant judgment was sampled (temperature >= 1e-3)."""
        df = self.judgments
        return bool(
            ((df["temperature"].astype(float) >= GREEDY_BELOW) & (df["variant"] == self.reference)).any()
        )

    def prompt_groups(self) -> list[str]:
        """The prompt groups judged, in the judgments' order."""
        return list(self.judgments["prompt_group"].unique())

    def group_files(self) -> dict[str, str]:
        """``{prompt_group: group file}`` for groups judged from a file."""
        return group_files(self.judgments)


def describe_verdict(kind: str) -> str:
    """The report's words for a verdict kind (one-line AnalysisError for an unknown one)."""
    if kind not in VERDICT_KINDS:
        raise AnalysisError(f"analysis.verdict must be one of {tuple(VERDICT_KINDS)}, got {kind!r}")
    return VERDICT_KINDS[kind]


__all__ = ["VERDICT_KINDS", "Configuration", "JudgmentGrid", "describe_verdict"]

"""The lottery report's sections: analyse, summary_metrics and render_report loop over the
registry and name none of them; every table a section builds is one it declares."""

from __future__ import annotations

import pandas as pd

from promptlottery.analysis import report as rp
from promptlottery.analysis.analyse import analyse
from promptlottery.analysis.options import LotteryOptions
from promptlottery.analysis.render import render_report
from promptlottery.analysis.sections import registry
from promptlottery.analysis.sections.base import Section
from promptlottery.analysis.stage import summary_metrics
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.table import load_judgments, paraphrase_rows
from tests.pairwise_toys import toy_table
from tests.test_analysis_fixtures import default_judgments


def _opts(**kw) -> LotteryOptions:
    base = {"runs": "unused", "embeddings": "none", "plots": False, "n_resamples": 30, "n_permutations": 10}
    return LotteryOptions.from_dict({**base, **kw})


def _grid() -> JudgmentGrid:
    return JudgmentGrid.from_frame(
        pd.concat([load_judgments(default_judgments()), toy_table()], ignore_index=True)
    )


def test_every_section_declares_its_mode_and_the_tables_it_builds():
    assert [s.name for s in registry.SECTIONS] == ["lottery", "pairwise", "human"]
    assert {s.mode for s in registry.SECTIONS} == {"pointwise", "pairwise"}
    declared = [name for s in registry.SECTIONS for name in s.tables]
    assert len(declared) == len(set(declared))  # one owner per table name
    tables = analyse(_grid(), _opts())["tables"]
    assert set(tables) <= set(declared)
    assert {"agreement_collapse", "headlines", "pairwise_wordings", "pairwise_verdict"} <= set(tables)


def test_metrics_are_the_sections_metrics_in_report_order():
    tables = analyse(_grid(), _opts())["tables"]
    metrics = summary_metrics(tables)
    parts = [s.metrics(tables) for s in registry.SECTIONS]
    assert list(metrics) == [k for p in parts for k in p]
    assert any(k.startswith("pairwise/") for k in parts[1]) and not parts[2]  # no human ratings given


class _Probe(Section):
    name, mode, tables = "probe", "pointwise", ("probe_counts",)

    def compute(self, grid, opts, *, checked=None, encode=None):
        return {"tables": {"probe_counts": pd.DataFrame({"n": [grid.n_judgments]})}}

    def verdict_rows(self, tables):
        return pd.DataFrame({"config_id": ["probe"], "sentence": ["probe: a sentence of its own."]})

    def metrics(self, tables):
        return {"probe/n": float(tables["probe_counts"]["n"].iloc[0])} if "probe_counts" in tables else {}

    def render(self, R: rp.Report, ctx) -> None:
        R.h("Probe section")


def test_a_registered_section_is_computed_measured_and_rendered(monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "SECTIONS", (*registry.SECTIONS, _Probe()))
    grid, opts = JudgmentGrid.from_frame(load_judgments(default_judgments())), _opts()
    result = analyse(grid, opts)
    assert result["tables"]["probe_counts"]["n"].iloc[0] == grid.n_judgments
    assert result["tables"]["verdict"]["sentence"].iloc[-1] == "probe: a sentence of its own."
    assert summary_metrics(result["tables"])["probe/n"] == grid.n_judgments
    text = render_report(result, grid, opts, tmp_path, {}, [])
    assert text.index("## Probe section") > text.index("## 8. Convergence")
    assert text.index("## Probe section") < text.index("## Files")


def test_paraphrase_rows_keyed_by_order_keep_an_ordinary_row_per_order():
    # one pair judged in both orders; order 21 also has a repeat-source row (dropped: an ordinary one
    # exists), order 12 of a second pair only a repeat-source row (kept: it stands in)
    rows = pd.DataFrame(
        {
            "variant": ["P1"] * 4,
            "item_id": ["q1", "q1", "q1", "q2"],
            "order": ["12", "21", "21", "12"],
            "repeat_source": ["none", "none", "batch", "batch"],
            "temperature": 0.0,
            "sample_index": 0,
            "seed": 0,
        }
    )
    kept = paraphrase_rows(rows, key=("variant", "item_id", "order"))
    assert kept.index.tolist() == [0, 1, 3]
    assert paraphrase_rows(rows).index.tolist() == [0, 3]  # by (variant, item) alone: one row each

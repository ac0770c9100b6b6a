"""The lottery report's sections: analyse, summary_metrics and render_report loop over the
registry and name none of them; every table a section builds is one it declares."""

from __future__ import annotations

import pandas as pd

from promptlottery.analysis.common import report as rp
from promptlottery.analysis.lottery.analyse import analyse
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.lottery.render import render_report
from promptlottery.analysis.lottery.sections import registry
from promptlottery.analysis.lottery.sections.base import Section
from promptlottery.analysis.stage import summary_metrics
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.load import load_judgments
from promptlottery.judging.table import paraphrase_rows
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
    assert [s.name for s in registry.SECTIONS] == ["lottery", "pairwise", "listwise", "human"]
    # the label-matrix sections read every mode with a label matrix (mode None); a mode's own section names it
    assert {s.mode for s in registry.SECTIONS} == {None, "pairwise", "listwise"}
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
    assert (
        any(k.startswith("pairwise/") for k in parts[1]) and not parts[2] and not parts[3]
    )  # no lists, no human ratings


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


def test_the_lottery_section_builds_exactly_the_tables_it_declares():
    from promptlottery.analysis.lottery import table_names as lt
    from promptlottery.analysis.lottery.parallel import configuration_tables

    lottery = registry.SECTIONS[0]
    assert lottery.tables == lt.TABLES
    grid, opts = JudgmentGrid.from_frame(load_judgments(default_judgments())), _opts()
    built = lottery.compute(grid, opts)["tables"]
    # the fixture's sampled fixed-prompt baseline is read from the parsed text: every table is built
    assert set(built) == set(lt.TABLES)
    assert set(configuration_tables(grid, opts)["tables"]) == set(lt.PER_CONFIGURATION)
    empty = lottery.compute(JudgmentGrid.from_frame(toy_table()), opts)["tables"]
    assert set(empty) == {*lt.POINTWISE_TABLES, lt.HEADLINES}


def test_no_lottery_table_is_read_by_a_string_key():
    import re
    from pathlib import Path

    from promptlottery.analysis.lottery import table_names as lt

    names = "|".join(sorted((v for v in lt.TABLES), key=len, reverse=True))
    # a table looked up in a tables dict by its literal name: tables["x"], t['x'], tables.get("x"
    pattern = re.compile(r"\b(tables\[|t\[|tables\.get\()([\"'])(" + names + r")\2")
    root = Path(lt.__file__).parent
    hits = [
        f"{p.relative_to(root)}:{i}"
        for p in sorted(root.rglob("*.py"))
        if p.name != "lottery_tables.py"
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line) and "figures.get" not in line
    ]
    assert hits == []

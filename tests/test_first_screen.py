"""The first screen: the plain-words finding, the folded headline rows and the verdict map."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from promptlottery.analysis.lottery import plots_verdict
from promptlottery.analysis.lottery.first_screen import finding, show
from promptlottery.tracking.staging import digests


def _items():
    return pd.DataFrame(
        {
            "config_id": ["c"] * 3,
            "item_id": ["a", "b", "c"],
            "human": [5.0, 2.0, np.nan],
            "labels": ["P1:5 P2:1 P3:-", "P1:2 P2:2 P3:2", "P1:1 P2:1 P3:1"],
        }
    )


def test_parse_labels_reads_missing_as_none():
    assert plots_verdict._parse_labels("P1:5 P2:- P3:yes") == {"P1": "5", "P2": None, "P3": "yes"}


def test_verdict_map_draws_and_skips_empty(tmp_path):
    assert plots_verdict.plot_verdict_map(pd.DataFrame(), tmp_path / "x.png") is None
    path = plots_verdict.plot_verdict_map(_items(), tmp_path / "vm.png")
    assert path is not None and path.stat().st_size > 1000
    # numeric labels in numeric order, human labels on the same scale
    assert plots_verdict._label_order(["10", "2", "1"]) == ["1", "2", "10"]
    assert plots_verdict._as_label(2.0, ["1", "2"]) == "2" and plots_verdict._as_label(np.nan, ["1"]) is None


def _written(tmp_path, *, flip=0.25, rank_change=1 / 3, kappa=0.2):
    (tmp_path / "tables").mkdir()
    pd.DataFrame(
        [
            {
                "config_id": "cfg",
                "n_items": 24,
                "n_variants": 5,
                "kappa": kappa,
                "kappa_lo": 0.1 if kappa == kappa else np.nan,
                "kappa_hi": 0.3 if kappa == kappa else np.nan,
                "kappa_note": ""
                if kappa == kappa
                else "mean_kappa, fleiss_kappa: n/a: labels collapsed: every verdict is '1'; x",
                "band": "below usable" if kappa == kappa else "n/a",
                "changed": 0.5,
                "changed_lo": 0.25,
                "changed_hi": 0.75,
                "majority_differs": 0.125,
                "majority_differs_lo": 0.0,
                "majority_differs_hi": 0.25,
                "n_systems": 3,
                "flip_share": flip,
                "flip_share_lo": 0.0,
                "flip_share_hi": 0.5,
                "rank_change_share": rank_change,
                "k_most": 3.0,
            }
        ]
    ).to_csv(tmp_path / "tables" / "verdict.csv", index=False)
    pd.DataFrame(
        {
            "config_id": ["cfg"] * 3,
            "variant": ["P1", "P2", "P3"],
            "cont_pearson": [0.8, 0.7, 0.9],
            "cont_pearson_lo": [0.6, 0.5, 0.8],
            "cont_pearson_hi": [0.9, 0.8, 0.95],
        }
    ).to_csv(tmp_path / "tables" / "variant_human_correlation.csv", index=False)
    pd.DataFrame(
        {
            "key": ["paraphrase_kappa", "fixed_kappa", "paraphrase_kappa_cohen"],
            "finding": ["Fleiss across paraphrases", "fixed prompt", "mean Cohen (ours)"],
            "paper": ["0.24", "0.89", "not reported"],
            "ours": [0.2, np.nan, 0.5],
            "ours_lo": [0.1, np.nan, 0.4],
            "ours_hi": [0.3, np.nan, 0.6],
            "n": [1, 0, 1],
            "pct": [False, False, False],
            "note": [
                "second interval [0.0, 0.4]",
                "n/a: no fixed-prompt baseline (run P1 with n_samples=5)",
                "",
            ],
        }
    ).to_csv(tmp_path / "tables" / "headlines.csv", index=False)
    # the record a finished analysis writes last: show() reads only files it vouches for
    record = {"status": "ok", "stage": "lottery", "outputs": digests(tmp_path)}
    (tmp_path / "results.json").write_text(json.dumps(record), encoding="utf-8")
    return tmp_path


def test_finding_in_plain_words(tmp_path):
    lines = finding(_written(tmp_path))
    assert lines[0] == "cfg:"
    assert len(lines) - 1 <= 6
    assert "Pearson r = 0.800 [0.600, 0.900]" in lines[1] and "0.70 to 0.90" in lines[1]
    assert "not stable across wordings" in lines[2] and "0.200 [0.100, 0.300]" in lines[2]
    assert lines[3].startswith("  - 50.0% [25.0, 75.0] of 24 items") and "12.5%" in lines[3]
    assert "ranking of 3 systems flips" in lines[4] and "33% of the systems" in lines[4]
    assert lines[5] == "  - Most items need 3 wordings for a stable majority."


def test_ranking_that_holds_is_not_called_a_flip(tmp_path):
    lines = finding(_written(tmp_path, flip=0.0, rank_change=0.0))
    assert "ranking of 3 systems holds" in lines[4]


def test_undefined_kappa_says_why_instead_of_nan(tmp_path):
    # a judge whose labels collapsed: the band is written as "n/a", which pandas reads back as NaN
    lines = finding(_written(tmp_path, kappa=np.nan))
    assert lines[2] == (
        "  - Its stability across wordings cannot be measured (labels collapsed: every verdict is '1'): "
        "mean pairwise Cohen's kappa is undefined across 5 wordings of one prompt."
    )
    assert "nan" not in lines[2]


def test_rank_change_through_ties_is_not_called_a_flip(tmp_path):
    # no pair swaps order, yet a third of the systems change rank: a tie under one wording only
    lines = finding(_written(tmp_path, flip=0.0, rank_change=1 / 3))
    assert "ranking of 3 systems moves only through ties" in lines[4]
    assert "no system pair swaps order" in lines[4] and "33% of the systems change rank" in lines[4]
    assert "flips" not in lines[4]


def test_show_folds_rows_without_a_value(tmp_path):
    text = show(_written(tmp_path))
    assert text.startswith("The finding:")
    table = text.split("The paper's measures vs ours")[1].split("Not measured")[0]
    assert "| Fleiss across paraphrases | 0.24 | 0.200 [0.100, 0.300] | 1 |" in table
    assert "fixed prompt" not in table  # no value: folded into one line
    # one interval a row: the notes (our variants' intervals) and our own rows stay in report.md
    assert "second interval" not in table and "mean Cohen (ours)" not in table
    assert (
        "Not measured on this run (1 rows, see report.md): no fixed-prompt baseline (run P1 with n_samples=5)."
        in text
    )


def test_constant_judge_metrics_log_one_line_instead_of_warnings(caplog, recwarn):
    # a judge that gives every item the same label (SmolLM2 on the demo): the correlations with the
    # humans are undefined; None and one logged line per verdict, no UndefinedMetricWarning on screen
    import logging

    from promptlottery.judging.runner import condition_metrics

    n = 6
    df = pd.DataFrame(
        {
            "score": [1.0] * n,
            "parsed_label": ["1"] * n,
            "label_mass": [0.9] * n,
            "scoring_mode": ["logprob_weighted"] * n,
            "argmax_label": ["1"] * n,
            "human": [1.0, 2.0, 3.0, 4.0, 5.0, 2.0],
            "weighted_score": [1.1, 1.5, 2.0, 2.2, 3.0, 1.4],
            "argmax_score": [1.0] * n,
            "parsed_score": [1.0] * n,
        }
    )
    with caplog.at_level(logging.INFO, logger="promptlottery.judging.runner"):
        m = condition_metrics(df)
    assert m["pearson_argmax"] is None and m["kendall_tau_b_parsed"] is None
    assert m["pearson_weighted"] == pytest.approx(np.corrcoef(df["weighted_score"], df["human"])[0, 1])
    assert not [w for w in recwarn if "undefined" in str(w.message)]
    lines = [r.getMessage() for r in caplog.records if "undefined" in r.getMessage()]
    assert len(lines) == 2 and "verdict=argmax" in lines[0] and "no variance" in lines[0]


def test_first_screen_shows_at_most_ten_of_the_papers_rows(tmp_path):
    from promptlottery.analysis.lottery.headlines import paper_keys

    d = _written(tmp_path)
    keys = paper_keys()
    assert len(keys) > 10
    hl = pd.DataFrame(
        {
            "key": keys,
            "finding": [f"row {k}" for k in keys],
            "paper": ["x"] * len(keys),
            "ours": [0.5] * len(keys),
            "ours_lo": [0.4] * len(keys),
            "ours_hi": [0.6] * len(keys),
            "n": [3] * len(keys),
            "pct": [False] * len(keys),
            "note": [""] * len(keys),
        }
    )
    hl.to_csv(d / "tables" / "headlines.csv", index=False)
    (d / "results.json").unlink()
    record = {"status": "ok", "stage": "lottery", "outputs": digests(d)}
    (d / "results.json").write_text(json.dumps(record), encoding="utf-8")
    text = show(d)
    table = text.split("The paper's measures vs ours")[1]
    rows = [ln for ln in table.splitlines() if ln.startswith("| row ")]
    assert [r.split(" | ")[0] for r in rows] == [f"| row {k}" for k in keys[:10]]
    assert f"({len(keys) - 10} more measured rows in report.md)" in table


def test_one_configuration_has_one_fleiss_interval_everywhere(tmp_path):
    # the demo's shape: one configuration; its Fleiss' kappa across the wordings is printed in the
    # verdict, the headline row, section 1 and section 2: with one interval, section 1's (studentized)
    from promptlottery.analysis.lottery.options import LotteryOptions
    from promptlottery.analysis.stage import run_lottery
    from promptlottery.tracking import tables
    from tests.test_analysis_fixtures import default_judgments, write_sweep

    df = default_judgments()
    sweep = write_sweep(tmp_path / "grid", df[(df["dataset"] == "stsb") & (df["backbone"] == "bb1")])
    opts = {
        "runs": str(sweep / "*"),
        "n_resamples": 60,
        "n_permutations": 20,
        "embeddings": "none",
        "plots": False,
    }
    out = tmp_path / "out"
    run_lottery(LotteryOptions.from_dict(opts), out)
    col = pd.read_csv(out / "tables" / "agreement_collapse.csv")
    para = col[col["setting"] == "paraphrases"].iloc[0]
    est, lo, hi = para["fleiss_kappa_all"], para["fleiss_kappa_all_lo"], para["fleiss_kappa_all_hi"]
    assert np.isfinite([est, lo, hi]).all() and lo <= est <= hi
    hl = pd.read_csv(out / "tables" / "headlines.csv").set_index("key").loc["paraphrase_kappa"]
    assert (hl["ours"], hl["ours_lo"], hl["ours_hi"]) == pytest.approx((est, lo, hi), abs=1e-4)
    by = pd.read_csv(out / "tables" / "agreement_by_task_type.csv")
    assert by["fleiss_kappa_all_lo"].to_numpy() == pytest.approx([lo] * len(by), abs=1e-4)
    assert by["fleiss_kappa_all_hi"].to_numpy() == pytest.approx([hi] * len(by), abs=1e-4)
    report = (out / "report.md").read_text(encoding="utf-8")
    ci = tables.ci(est, lo, hi)
    row = next(
        ln for ln in report.splitlines() if ln.startswith("| Fleiss' kappa across the five paraphrases |")
    )
    assert f"| {ci} |" in row
    section2 = report.split("## 2.")[1].split("\n## ")[0]
    assert section2.count(f"| {ci} |") >= len(by)  # Fleiss (no collapse filter) in every grouping row
    # the verdict section gives the paper's measure, right after the verdict sentences
    verdict = report.split("## Verdict")[1].split("\n## ")[0]
    assert "Fleiss' kappa across the wordings (§3.2, §C.3" in verdict and tables.ci(est, lo, hi) in verdict

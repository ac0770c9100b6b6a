"""W&B as the place runs are compared (issue 45, item 5), read back from offline runs: the analysed
grid as the run's config, the headline numbers as summary scalars (an estimate and its interval as
``x``, ``x_lo``, ``x_hi``), the lottery's and the gate's curves as native line plots, and compare's
headline-first rows."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from promptlottery.analysis.compare.runs import compare
from promptlottery.analysis.lottery.headlines import paper_keys
from promptlottery.stages import run_stage
from promptlottery.tracking.wandb_offline import read_wandb_log
from tests.conftest import compose
from tests.test_analysis_fixtures import write_sweep


def _read_back(wandb_dir: Path) -> tuple[Path, dict, dict]:
    """The one offline run under ``wandb_dir``: its folder, config and summary (from its log)."""
    (run,) = sorted(wandb_dir.glob("wandb/offline-run-*"))
    log = next(run.glob("run-*.wandb"))
    seen = None
    for _ in range(100):  # wandb-core may still be flushing the log when finish() returns
        config, summary = read_wandb_log(log)
        if config and summary and seen == (len(config), len(summary)):
            break  # read twice alike: written out
        seen = (len(config), len(summary))
        time.sleep(0.2)
    return run, config, summary


def _line_table(run: Path, summary: dict, name: str) -> pd.DataFrame:
    """The table behind a logged ``wandb.plot.line`` (``<name>_table`` in the summary)."""
    assert summary[f"{name}_table/_type"] == "table-file"  # the log's summary keys come flat
    data = json.loads((run / "files" / summary[f"{name}_table/path"]).read_text())
    return pd.DataFrame(data["data"], columns=data["columns"])


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wandb_lottery")
    sweep = write_sweep(tmp / "grid")
    cfg = compose(
        [
            "+analysis=lottery", f"analysis.runs={sweep}/*", "analysis.embeddings=none",
            "analysis.n_resamples=40", "analysis.n_permutations=40",
            "logger=wandb", "logger.mode=offline", f"logger.dir={tmp / 'wb'}",
        ],
        tmp_path=tmp,
    )  # fmt: skip
    rec = run_stage(cfg, tmp / "lottery")
    return tmp, rec, *_read_back(tmp / "wb")


def test_a_standalone_analysis_logs_the_grid_it_read_not_the_default_composition(analysed):
    _, rec, _, config, _ = analysed
    assert rec["status"] == "ok"
    assert config["stage"] == "lottery"
    # the fixture's grid: two datasets, two backbones, three wordings (tests/test_analysis_fixtures.py)
    assert config["dataset"] == "stsb, topical_chat_usr"
    assert config["backbone"] == "bb1, bb2"
    assert config["wording"] == "P1, P2, P3"
    assert config["n_configurations"] == 3 and config["n_judgments"] == rec["n_judgments"]
    # nothing of the composition's defaults (backbone smollm2, dataset stsb's loader, the judge group)
    flat = json.dumps({k: v for k, v in config.items() if not k.startswith("_wandb")})  # W&B's own: charts
    assert "smollm2" not in flat and '"judge"' not in flat and "${" not in flat
    assert config["analysis"]["n_resamples"] == 40


def test_headline_numbers_are_summary_scalars_with_their_intervals(analysed):
    _, rec, _, _, summary = analysed
    k = summary["metrics/paraphrase_kappa"]
    assert k == pytest.approx(5 / 48)  # the fixture's Fleiss mean (tests/test_analysis_stage.py)
    assert summary["metrics/paraphrase_kappa_lo"] <= k <= summary["metrics/paraphrase_kappa_hi"]
    assert summary["metrics/paraphrase_kappa_cohen"] == pytest.approx(1 / 9)
    for key, v in rec["metrics"].items():  # every headline scalar of results.json, the same number
        assert summary[f"metrics/{key}"] == pytest.approx(v), key


def test_the_lotterys_curves_are_native_line_plots(analysed):
    tmp, _, run, config, summary = analysed
    settled = _line_table(run, summary, "lottery/curve/settled_by_k")
    assert list(settled.columns) == ["wordings", "settled_share", "config_id"]  # x, y, stroke
    items = pd.read_csv(tmp / "lottery" / "unstable_items.csv")
    for cid, g in items.groupby("config_id"):
        k_needed = g["k_needed"].fillna(np.inf).to_numpy(float)
        got = settled[settled.config_id == cid].set_index("wordings")["settled_share"]
        assert list(got.index) == [1, 2, 3]
        for k in (1, 2, 3):
            assert got[k] == pytest.approx((k_needed <= k).mean()), (cid, k)
    ranks = _line_table(run, summary, "lottery/curve/rank_trajectories")
    assert set(ranks["wording_position"]) <= {1, 2, 3} and ranks["line"].str.contains(" \\| ").all()
    # the chart itself: W&B's line panel over that table, recorded in the run's config
    panel = config["_wandb.visualize.lottery/curve/settled_by_k"]["panel_config"]
    assert panel["panelDefId"] == "wandb/line/v0"
    assert panel["fieldSettings"] == {"x": "wordings", "y": "settled_share", "stroke": "config_id"}


def test_compare_puts_the_papers_headlines_first_with_intervals_on_one_row(analysed):
    tmp, _, run, _, _ = analysed
    res = compare([str(tmp / "lottery"), str(run)], tmp / "cmp")
    metrics = res["metrics"]["metric"].tolist()
    assert not [m for m in metrics if m.endswith(("_lo", "_hi")) and m[:-3] in metrics]
    bare = [m.rsplit("/", 1)[-1] for m in metrics]
    papers = [m for m in bare if m in paper_keys()]
    assert papers and bare[: len(papers)] == papers  # the paper's rows lead, in report order
    assert papers == [k for k in paper_keys() if k in papers]
    row = res["metrics"].set_index("metric").loc["metrics/paraphrase_kappa"]
    assert row["lottery lo"] <= row["lottery"] <= row["lottery hi"]
    md = res["markdown"]
    assert f"| metrics/paraphrase_kappa | {row['lottery']:.3f} [" in md
    # the analysis' results.json vs its own W&B run: the same numbers, deltas zero
    assert np.nanmax(np.abs(res["metrics"].filter(like="delta").to_numpy(float))) == pytest.approx(0)


def test_a_gate_cost_curve_is_a_native_line_plot(tmp_path):
    from promptlottery.tracking.wandb_logger import WandbTracker

    curves = pd.DataFrame(
        {
            "policy": ["learned_gate"] * 3 + ["paper_gate"] * 2,
            "calls_saved": [0.0, 0.4, 0.8, 0.0, 0.6],
            "recovered": [1.0, 0.9, 0.5, 1.0, np.nan],
        }
    )
    t = WandbTracker(project="t", mode="offline", dir=str(tmp_path), config={"stage": "gate"}, name="g")
    t.log_line("cost_curve/all", curves, x="calls_saved", y="recovered", stroke="policy")
    t.log_line("cost_curve/none", curves.iloc[0:0], x="calls_saved", y="recovered", stroke="policy")
    t.log_metrics({"gate": {"learned_gate": {"calls_saved": 0.4}}})
    t.finish()
    run, _, summary = _read_back(tmp_path)
    got = _line_table(run, summary, "cost_curve/all")
    assert got.to_dict("list") == {
        "calls_saved": [0.0, 0.4, 0.8, 0.0],
        "recovered": [1.0, 0.9, 0.5, 1.0],
        "policy": ["learned_gate"] * 3 + ["paper_gate"],
    }  # the row without a y is left out
    assert not [k for k in summary if k.startswith("cost_curve/none")]  # an empty curve is not logged
    assert summary["gate/learned_gate/calls_saved"] == pytest.approx(0.4)


def test_a_judge_run_is_one_condition_with_a_resolved_config(tmp_path):
    cfg = compose(
        [
            "+experiment=demo", "backbone=fake", "judge.variant=P2", "logger=wandb", "logger.mode=offline",
            f"logger.dir={tmp_path / 'wb'}",
        ],
        tmp_path=tmp_path,
    )  # fmt: skip
    rec = run_stage(cfg, tmp_path / "job")
    _, config, summary = _read_back(tmp_path / "wb")
    assert config["condition"] == "table/answer_correctness/demo_correctness/P2/fake"
    assert config["wording"] == "P2" and config["judge"]["variant"] == "P2"
    assert config["backbone"]["name"] == "fake" and config["stage"] == "judge"
    assert "${" not in json.dumps({k: v for k, v in config.items() if not k.startswith("_wandb")})
    assert summary["metrics/n_judgments"] == rec["metrics"]["n_judgments"] == 24
    assert summary["metrics/pearson_weighted"] == pytest.approx(rec["metrics"]["pearson_weighted"])


def test_the_gate_stage_logs_its_cost_curves_as_line_plots(tmp_path):
    # the gate stage end to end (tests/test_gate_stage.py's small fake grid), logged to an offline run
    for v in ("P1", "P2", "P3", "P4", "P5"):
        cfg = compose(["backbone=fake", "dataset.limit=20", f"judge.variant={v}"], tmp_path=tmp_path)
        run_stage(cfg, tmp_path / "grid" / f"stsb_{v}")
    cfg = compose(
        [
            "+gate=selective", f"gate.runs={tmp_path / 'grid'}/*", "gate/classifier=deberta_tiny",
            "backbone=fake", "gate.llm_baseline.n_shot=1", "gate.embedding_baseline.enabled=false",
            "logger=wandb", "logger.mode=offline", f"logger.dir={tmp_path / 'wb'}",
        ],
        tmp_path=tmp_path,
    )  # fmt: skip
    assert run_stage(cfg, tmp_path / "gate")["status"] == "ok"
    run, config, summary = _read_back(tmp_path / "wb")
    # the grid the gate read, not the composition's dataset / judge groups; the LLM baseline's judge
    # (backbone=fake here) under its own key
    assert config["judged"]["dataset"] == "stsb" and config["judged"]["backbone"] == "fake"
    assert config["judged"]["wording"] == "P1, P2, P3, P4, P5" and config["judged"]["n_items"] == 20
    assert config["llm_baseline_judge"]["backbone"]["name"] == "fake"
    assert not {"dataset", "judge", "backbone"} & set(config) and config["stage"] == "gate"
    written = pd.read_csv(tmp_path / "gate" / "cost_curve.csv")
    for name, suffix in (("all", ""), ("no-consensus", "_nc")):
        got = _line_table(run, summary, f"cost_curves/{name}")
        want = written[[f"calls_saved{suffix}", f"recovered{suffix}", "policy"]].dropna()
        assert len(got) == len(want) > 0
        assert got[f"recovered{suffix}"].to_numpy() == pytest.approx(want[f"recovered{suffix}"].to_numpy())
        panel = config[f"_wandb.visualize.cost_curves/{name}"]["panel_config"]
        assert panel["fieldSettings"] == {
            "x": f"calls_saved{suffix}",
            "y": f"recovered{suffix}",
            "stroke": "policy",
        }
    assert summary["gate/learned_gate/calls_saved"] == pytest.approx(
        json.loads((tmp_path / "gate" / "results.json").read_text())["metrics"]["learned_gate"]["calls_saved"]
    )


def _check_script():
    """``scripts/wandb_offline_check.py`` as a module (scripts/ is no package)."""
    import importlib.util

    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location(
        "wandb_offline_check", REPO / "scripts" / "wandb_offline_check.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _settled_listing(run: Path) -> dict:
    """The run's listing once wandb-core has flushed it (two reads alike)."""
    from promptlottery.tracking.wandb_offline import describe_run

    seen = None
    for _ in range(100):
        listing = describe_run(run)
        shape = (len(listing["config"]), len(listing["scalars"]), len(listing["line_plots"]))
        if shape == seen and listing["scalars"]:
            break
        seen = shape
        time.sleep(0.2)
    return listing


def test_a_study_analysis_is_a_comparison_surface_in_its_offline_run(tmp_path, monkeypatch, capsys):
    """A fake study of three configurations (Topical-Chat and PersonaChat share a loader) analysed as
    one with ``logger=wandb`` in W&B's offline mode, read back from the run's log by
    ``scripts/wandb_offline_check.py``: the analysed grid as resolved config keys, the paper's
    headlines and the study's breakdowns as summary scalars (estimate, ``_lo``, ``_hi``), and the
    lottery's curve as a native line plot. A logger that wrote files only fails here."""
    from tests.test_study import _fake_study

    monkeypatch.setenv("WANDB_MODE", "offline")
    root = _fake_study(
        tmp_path, experiments=("tc_usr_engaging", "pc_usr_engaging", "evouna_nq_correctness"),
        variants=("P1", "P2", "P3"),
    )  # fmt: skip
    cfg = compose(
        [
            "+analysis=study", f"analysis.runs={root}/*/*", "analysis.embeddings=none", "analysis.n_jobs=1",
            "analysis.n_resamples=40", "analysis.n_permutations=40", "analysis.plots=false",
            "logger=wandb", f"logger.dir={tmp_path / 'wb'}",
        ],
        tmp_path=tmp_path,
    )  # fmt: skip
    rec = run_stage(cfg, tmp_path / "study_analysis")
    assert rec["status"] == "ok"
    (run,) = sorted((tmp_path / "wb" / "wandb").glob("offline-run-*"))
    listing = _settled_listing(run)
    assert listing["run"]["name"] == "study" and listing["run"]["job_type"] == "analysis"
    config = listing["config"]
    # what was analysed, not the composition's defaults (dataset stsb, backbone smollm2)
    assert config["stage"] == "study"
    assert config["dataset"] == "evouna_nq, persona_chat_usr, topical_chat_usr"
    assert config["backbone"] == "fake" and config["wording"] == "P1, P2, P3"
    assert config["n_configurations"] == 3 and config["n_judgments"] == rec["n_judgments"]
    assert not [k for k, v in config.items() if "${" in str(v) or "smollm2" in str(v)]
    scalars = listing["scalars"]
    for key, v in rec["metrics"].items():  # every headline of results.json, the same number
        assert scalars[f"metrics/{key}"] == pytest.approx(v), key
    k = scalars["metrics/paraphrase_kappa"]
    assert scalars["metrics/paraphrase_kappa_lo"] <= k <= scalars["metrics/paraphrase_kappa_hi"]
    family = pd.read_csv(tmp_path / "study_analysis" / "tables" / "study_by_family.csv")
    for row in family.itertuples():  # the study page's breakdown, as scalars
        assert scalars[f"study/by_family/{row.judge_family}/configurations"] == row.configurations
    assert scalars["study/analysed"] == 3 and scalars["study/judge_is_fake"] == 1
    assert scalars["study/backbone/fake/fleiss_kappa_lo"] <= scalars["study/backbone/fake/fleiss_kappa_hi"]
    settled = listing["line_plots"]["lottery/curve/settled_by_k"]
    assert (settled["x"], settled["y"], settled["stroke"]) == ("wordings", "settled_share", "config_id")
    assert settled["rows"] == 3 * 3  # three configurations x k = 1..3
    assert {"study/table/by_backbone", "study/table/by_family"} <= set(listing["tables"])
    # the script prints the same and passes it
    script = _check_script()
    assert script.main([str(tmp_path / "wb"), "--expect-line", "lottery/curve/settled_by_k"]) == 0
    out = capsys.readouterr().out
    assert 'stage = "study"' in out and "lottery/curve/settled_by_k: x=wordings y=settled_share" in out
    assert f"metrics/paraphrase_kappa = {k:.4g} [" in out and out.rstrip().endswith("ok: 0 problems")


def test_the_check_fails_a_run_of_files_only(tmp_path, capsys):
    """A run that logged its curve as a PNG and its config as the composition's defaults: the check
    names each problem and exits 1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from promptlottery.tracking.wandb_logger import WandbTracker

    png = tmp_path / "curve.png"
    plt.figure().savefig(png)
    t = WandbTracker(
        project="t", mode="offline", dir=str(tmp_path), name="files",
        config={"backbone": {"name": "smollm2"}, "dataset": "${oc.env:X}"},
    )  # fmt: skip
    t.log_image("lottery/figure/settled", str(png))
    t.run.summary.update({"metrics/kappa_lo": 0.1})
    t.finish()
    (run,) = sorted((tmp_path / "wandb").glob("offline-run-*"))
    _settled_listing(run)
    assert _check_script().main([str(run), "--expect-line", "lottery/curve/settled_by_k"]) == 1
    problems = [x for x in capsys.readouterr().out.splitlines() if x.startswith("PROBLEM")]
    assert [p.split(": ", 1)[1].split(" ")[0:2] for p in problems] == [
        ["config", "backbone.name='smollm2':"],
        ["config", "dataset='${oc.env:X}':"],
        ["scalar", "metrics/kappa_lo:"],
        ["no", "native"],
        ["line", "plot"],
    ]

"""The gate stage and the Optuna search end to end on a small fake-backend grid (tiny DeBERTa-v2)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from promptlottery.stages import run_stage as judge_run
from tests.conftest import compose

VARIANTS = ["P1", "P2", "P3", "P4", "P5"]


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """20 STS-B items (G12) and 5 EVOUNA items under the held-out group G15, five variants, fake judge."""
    tmp = tmp_path_factory.mktemp("gate_grid")
    for v in VARIANTS:
        cfg = compose(["backbone=fake", "dataset.limit=20", f"judge.variant={v}"], tmp_path=tmp)
        judge_run(cfg, tmp / "grid" / f"stsb_{v}")
        # the study's held-out configuration (conf/experiment/heldout_g15_evouna_nq.yaml)
        cfg = compose(
            [
                "+experiment=heldout_g15_evouna_nq",
                "backbone=fake",
                "dataset.limit=5",
                "dataset.sample_by=item",
                f"judge.variant={v}",
            ],
            tmp_path=tmp,
        )
        assert cfg.judge.prompt_group == "G15"
        judge_run(cfg, tmp / "g15" / f"evouna_{v}")
    return tmp


def _gate_without_baselines(grid, *overrides: str):
    """The gate on the STS-B grid alone (no held-out group), its LLM and embedding baselines off."""
    return compose(
        [
            "+gate=selective",
            f"gate.runs={grid / 'grid'}/*",
            "gate/classifier=deberta_tiny",
            "backbone=fake",
            "gate.llm_baseline.enabled=false",
            "gate.embedding_baseline.enabled=false",
            *overrides,
        ],
        tmp_path=grid,
    )


def test_gate_stage_end_to_end(grid, tmp_path):
    from promptlottery.gating.stage import gate
    from promptlottery.stages import get_stage, run_stage

    cfg = compose(
        [
            "+gate=selective",
            f"gate.runs={grid / 'grid'}/*",
            f"gate.transfer_runs={grid / 'g15'}/*",
            "gate/classifier=deberta_tiny",
            "backbone=fake",
            "gate.llm_baseline.n_shot=1",
            "gate.embedding_baseline.enabled=false",
        ],
        tmp_path=grid,
    )
    assert cfg.stage == "gate"
    out = tmp_path / "gate"
    assert get_stage(cfg.stage) is gate
    rec = run_stage(cfg, out)
    assert rec["status"] == "ok"
    for name in (
        "classifier_metrics",
        "operating_points",
        "cost_curve",
        "training_history",
        "paper_comparison",
        "transfer_operating_points",
        "transfer_classifier_metrics",
        "savings_at_recovery",
        "transfer_savings_at_recovery",
    ):
        assert (out / f"{name}.csv").exists() and (out / f"{name}.md").exists(), name
    assert (out / "cost_curve.png").stat().st_size > 1000
    report = (out / "report.md").read_text()
    assert "paper" in report and "G15" in report
    ops = pd.read_csv(out / "operating_points.csv").set_index("policy")
    assert {
        "learned_gate",
        "confidence",
        "llm_prompt_gate",
        "first_2_agree",
        "first_3_agree",
        "P1_only",
        "full_plurality",
        "paper_gate",
        "adaptive_full_aggregation",
    } <= set(ops.index)
    # true by construction, not a measurement: full aggregation is the reference decision
    assert ops.loc["full_plurality", "mean_calls"] == 5 and ops.loc["full_plurality", "recovered"] == 1
    assert ops.loc["adaptive_full_aggregation", "recovered"] == 1
    assert 3 <= ops.loc["adaptive_full_aggregation", "mean_calls"] <= 5
    saved = json.loads((out / "results.json").read_text())
    # was: recovered >= 0.86 at a threshold chosen on the very items scored. Now the threshold is chosen
    # on the validation items, where the target holds by construction; the test figure is reported as is
    assert saved["threshold_source"] == "validation"
    assert saved["split"] == {"train": 12, "validation": 4, "test": 4, "disjoint": True}
    val_ops = pd.read_csv(out / "validation_operating_points.csv").set_index("policy")
    assert val_ops.loc["learned_gate", "recovered"] >= 0.86
    assert val_ops.loc["learned_gate", "threshold"] == ops.loc["learned_gate", "threshold"]
    assert saved["metrics"]["learned_gate"]["recovered"] == pytest.approx(
        ops.loc["learned_gate", "recovered"]
    )
    assert 1 <= ops.loc["learned_gate", "mean_calls"] <= 5 and 1 <= ops.loc["paper_gate", "mean_calls"] <= 5
    clf = pd.read_csv(out / "classifier_metrics.csv").set_index("classifier")
    assert {
        "mcc",
        "tpr_in_cluster",
        "tnr_in_cluster",
        "tpr_needs_aggregation",
        "tnr_needs_aggregation",
    } <= set(clf.columns)
    # the test items are 20% of the 20 STS-B items; the LLM baseline's calls went through the cache
    pred = pd.read_parquet(out / "heldout_predictions.parquet")
    assert pred["item_key"].nunique() == 4 and pred["p_gate"].between(0, 1).all()
    assert rec["calls"]["total"] == len(pred) + saved["summary"]["n_val"]  # asked on validation and test
    assert saved["metrics"]["transfer"]["mean_calls"] >= 1
    assert (out / "adapter" / "adapter_config.json").exists()
    matched = pd.read_csv(out / "savings_at_recovery.csv")
    assert set(matched["target"]) == {0.86, 0.95, 1.0}
    fixed = ~matched["policy"].isin(["paper_gate", "learned_gate", "confidence", "llm_prompt_gate"])
    assert (matched.loc[fixed, "recovered"] >= matched.loc[fixed, "target"] - 1e-9).all()
    assert "every figure below is on the 4 test items" in report
    # the held-out group's frontier: every policy on the G15 items, thresholds from the G12 validation items
    held = pd.DataFrame(rec["frontier_heldout_group"])
    assert rec["heldout_groups"] == ["G15"] and set(held["n_configs"]) == {1}
    assert set(held["n_items"]) == {5} and {"paper_gate", "P1_only", "sparse_0.4_anchor_P1"} <= set(
        held["policy"]
    )
    assert "Transfer to the held-out prompt group G15 (5 items" in report
    assert (out / "frontier_heldout_group.csv").exists()
    assert any(r["part"] == "heldout_group" for r in rec["classifier_intervals"])
    # the sparse designs of conf/gate/selective.yaml, on the same test items
    front = pd.DataFrame(rec["frontier"]).set_index("policy")
    assert {"sparse_0.4", "sparse_0.6", "sparse_0.4_anchor_P1", "sparse_0.6_anchor_P1"} <= set(front.index)
    assert front.loc["sparse_0.4_anchor_P1", "calls"] == 2  # P1 + one other wording on every item
    assert "Calls saved at matched recovery" in report and saved["metrics"]["llm_baseline_error"] is None
    # every comparison row names the split and the search objective; the held-out TNR row (§5.2)
    comp = pd.read_csv(out / "paper_comparison.csv")
    assert comp["split"].str.startswith("three_way - ours").all()
    assert comp["objective"].str.startswith("none (no Optuna search").all()
    transfer_row = comp[comp["measure"].str.contains("held-out prompt group")].iloc[0]
    assert transfer_row["paper"] == "66.22%" and transfer_row["ours"].endswith("%")
    t_clf = pd.read_csv(out / "transfer_classifier_metrics.csv").set_index("classifier")
    assert (
        transfer_row["ours"]
        == f"{100 * t_clf.loc['paper_gate@P1@operating_threshold', 'tnr_needs_aggregation']:.2f}%"
    )


def test_gate_stage_with_the_papers_80_20_holdout(grid, tmp_path):
    from promptlottery.stages import run_stage

    cfg = compose(
        [
            "+gate=selective",
            f"gate.runs={grid / 'grid'}/*",
            "gate/classifier=deberta_tiny",
            "backbone=fake",
            "gate.split=holdout",
            "gate.llm_baseline.enabled=false",
            "gate.embedding_baseline.enabled=false",
        ],
        tmp_path=grid,
    )
    out = tmp_path / "gate"
    rec = run_stage(cfg, out)
    saved = json.loads((out / "results.json").read_text())
    # 20 items: 16 train / 4 holdout, and the holdout is both the validation and the scored part
    assert saved["split"] == {"train": 16, "validation": 4, "test": 4, "disjoint": False}
    assert rec["status"] == "ok"
    comp = pd.read_csv(out / "paper_comparison.csv")
    assert comp["split"].str.startswith("holdout - paper's").all()
    assert "not on untouched items" in (out / "report.md").read_text()


def test_gate_stage_without_held_out_group_says_so(grid, tmp_path):
    from promptlottery.stages import run_stage as run

    rec = run(_gate_without_baselines(grid, "gate.save_adapter=false"), tmp_path / "gate")
    assert rec["status"] == "ok"
    report = (tmp_path / "gate" / "report.md").read_text()
    assert "No judgments of a held-out prompt group (G15)" in report
    assert "**Held-out prompt group (G15): not evaluated.** No judgments of a held-out" in report
    assert rec["frontier_heldout_group"] is None
    assert not (tmp_path / "gate" / "transfer_operating_points.csv").exists()


class Killed(BaseException):
    """Stands for SIGKILL: no handler of the job wrapper runs (it catches Exception only)."""


def test_a_gate_killed_mid_write_leaves_the_previous_outputs(grid, tmp_path, monkeypatch):
    """Every file goes through the one writer: killed while report.md is written (the tables, the
    predictions, the figure already staged), the earlier run's files are as they were, none added."""
    from promptlottery.gating import report
    from promptlottery.stages import run_stage
    from promptlottery.tracking.staging import STAGING

    out = tmp_path / "gate"
    earlier = {
        "report.md": "an earlier gate's report\n",
        "operating_points.csv": "policy\nP1_only\n",
        "training_history.csv": "epoch\n0\n",
        "adapter/adapter_config.json": "{}\n",
    }
    for name, text in earlier.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)

    def dying(path, **kw):
        path.write_text("# Selective aggregation: half a rep")
        raise Killed

    monkeypatch.setattr(report, "write_report", dying)
    with pytest.raises(Killed):
        run_stage(_gate_without_baselines(grid), out)
    left = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert left == {k: v.encode() for k, v in earlier.items()} and not (out / STAGING).exists()


def test_a_failing_llm_baseline_is_reported_and_the_gate_is_kept(grid, tmp_path, monkeypatch):
    from promptlottery.calls.loop import JudgingError
    from promptlottery.gating import stage
    from promptlottery.stages import run_stage

    def fail(*args, **kwargs):
        raise JudgingError("gate llm baseline: 1 batch(es) failed; first error: prompt too long")

    monkeypatch.setattr(stage, "run_llm_baseline", fail)
    cfg = compose(
        [
            "+gate=selective",
            f"gate.runs={grid / 'grid'}/*",
            "gate/classifier=deberta_tiny",
            "backbone=fake",
            "gate.embedding_baseline.enabled=false",
            "gate.save_adapter=false",
        ],
        tmp_path=grid,
    )
    out = tmp_path / "gate"
    rec = run_stage(cfg, out)
    assert rec["status"] == "ok"
    assert "prompt too long" in rec["metrics"]["llm_baseline_error"]
    assert "n/a: the LLM prompt classifier failed" in (out / "report.md").read_text()
    ops = pd.read_csv(out / "operating_points.csv")
    assert "learned_gate" in set(ops["policy"]) and "llm_prompt_gate" not in set(ops["policy"])
    assert pd.read_parquet(out / "heldout_predictions.parquet")["p_gate"].between(0, 1).all()


def test_tune_gate_study_runs_and_saves_best_params(grid, tmp_path, monkeypatch):
    from promptlottery.gating import tune

    out = tmp_path / "tune"
    summary = tune.run_study(
        [
            f"gate.runs={grid / 'grid'}/*",
            "gate/classifier=deberta_tiny",
            "logger=none",
            f"paths.cache_dir={grid / 'cache'}",
            "gate.tune.n_trials=2",
            "gate.tune.epochs=2",
            f"gate.tune.output_dir={out}",
            "gate.tune.tpe_startup_trials=1",
            "gate.tune.pruner.n_startup_trials=1",
            "gate.tune.metric=val/balanced_accuracy",
        ]
    )
    assert summary["n_trials"] == 2 and summary["metric"] == "val/balanced_accuracy"
    assert summary["storage"].startswith("sqlite:///") and (out / "optuna.db").exists()
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 2 and "params_lr" in trials.columns
    best = json.loads((out / "best_params.json").read_text())
    if best["n_complete"]:
        assert set(best["params_by_path"]) <= {
            "gate.classifier.lr",
            "gate.classifier.lora.r",
            "gate.classifier.lora.alpha",
            "gate.classifier.lora.dropout",
            "gate.classifier.weight_decay",
        }
        # best params feed back into the stage config
        from promptlottery.gating.config import GateConfig

        g = GateConfig.from_dict(
            {"runs": "x", "classifier": {"lr": 1.0}, "best_params": str(out / "best_params.json")}
        )
        assert g.classifier.lr == pytest.approx(best["params_by_path"]["gate.classifier.lr"])


def test_savings_at_recovery_hand_example():
    from promptlottery.gating.stage import savings_at_recovery

    curves = pd.DataFrame(
        {
            "policy": ["g"] * 3,
            "threshold": [0.0, 0.5, 1.1],
            "calls_saved": [0.8, 0.4, 0.0],
            "recovered": [0.90, 0.97, 1.0],
        }
    )
    points = pd.DataFrame({"policy": ["first_2_agree"], "calls_saved": [0.5], "recovered": [0.96]})
    m = savings_at_recovery(curves, points, [0.86, 0.95, 1.0]).set_index(["target", "policy"])
    assert m.loc[(0.86, "g"), "calls_saved"] == 0.8 and m.loc[(0.95, "g"), "threshold"] == 0.5
    assert m.loc[(1.0, "g"), "calls_saved"] == 0.0
    assert (0.95, "first_2_agree") in m.index and (1.0, "first_2_agree") not in m.index

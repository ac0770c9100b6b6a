"""The sweep summary: a failed job is reported as failed; a dry-run sweep prints and writes totals.

Both run a real Hydra multirun (`python -m run -m ...`) with the fake backend in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from promptlottery.tracking.callbacks import dry_run_total, summarize_sweep
from tests.conftest import DATA_DIR, MODEL_CACHE, REPO


def _multirun(tmp_path: Path, *overrides: str) -> tuple[subprocess.CompletedProcess, dict]:
    cmd = [
        sys.executable,
        "-m",
        "run",
        "-m",
        "backbone=fake",
        "logger=none",
        "dataset.limit=4",
        f"paths.data_dir={DATA_DIR}",
        f"paths.model_dir={MODEL_CACHE}",
        f"paths.cache_dir={tmp_path / 'cache'}",
        f"paths.output_dir={tmp_path / 'out'}",
        "hydra.sweep.dir=" + str(tmp_path / "sweep"),
        *overrides,
    ]
    proc = subprocess.run(
        cmd,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        # this checkout's code, whichever checkout the environment has installed
        env={
            "HF_HUB_OFFLINE": "1",
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "PYTHONPATH": str(REPO / "src"),
        },
    )
    summary_path = tmp_path / "sweep" / "sweep_summary.json"
    assert summary_path.exists(), proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc, json.loads(summary_path.read_text())


def test_failed_job_shows_as_failed_in_sweep_summary(tmp_path):
    # P2 alone has the system prompt "You are an expert in comparing meaning.": the fake backend refuses it
    proc, summary = _multirun(
        tmp_path, "judge.variant=P1,P2,P3", "+backbone.backend.fail_on=[expert in comparing]", "max_retries=0"
    )
    assert proc.returncode == 2  # the refusal is a one-line error: the other jobs run, the sweep exits 2
    assert summary["n_jobs"] == 3 and summary["status_counts"] == {"ok": 2, "failed": 1}
    by_variant = {j["job"].split("_")[-2]: j for j in summary["jobs"]}
    assert by_variant["P2"]["status"] == "failed" and "refused request" in by_variant["P2"]["error"]
    assert by_variant["P1"]["status"] == by_variant["P3"]["status"] == "ok"
    assert by_variant["P1"]["calls"]["cache_misses"] == 4


def test_job_that_raises_before_judging_is_recorded_as_failed(tmp_path):
    # a bad input (judge.variant=P99) is refused before the sweep starts (tests/test_user_errors.py); a
    # backend that cannot be built fails inside its own job: job 0's replies file does not exist
    missing = tmp_path / "no_replies.yaml"
    proc, summary = _multirun(tmp_path, f"+backbone.backend.replies_file={missing},null")
    assert proc.returncode != 0 and summary["status_counts"] == {"ok": 1, "failed": 1}
    bad = next(j for j in summary["jobs"] if j["status"] == "failed")
    assert "FileNotFoundError" in bad["error"] and bad["job"].startswith("0_")
    rec = json.loads((tmp_path / "sweep" / bad["job"] / "results.json").read_text())
    assert rec["status"] == "failed" and rec["config"]["backbone"]["backend"]["replies_file"] == str(missing)
    assert rec["git_commit"] != "unknown"


def test_job_that_dies_before_writing_results_is_missing(tmp_path):
    sweep = tmp_path / "sweep"
    (sweep / "0_job" / ".hydra").mkdir(parents=True)
    (sweep / "1_job" / ".hydra").mkdir(parents=True)
    (sweep / "1_job" / "results.json").write_text(json.dumps({"status": "ok", "condition": "c"}))
    s = summarize_sweep(sweep)
    assert s["status_counts"] == {"missing": 1, "ok": 1}
    assert s["jobs"][0]["error"].startswith("no results.json")


def test_dry_run_sweep_prints_and_writes_totals(tmp_path):
    proc, summary = _multirun(tmp_path, "judge.variant=P1,P2,P3", "dry_run=true", "n_samples=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    total = summary["dry_run_total"]
    # 3 conditions x 4 items x 2 samples; the fake backend counts whitespace-separated words
    assert total["conditions"] == 3 and total["calls"] == 24 and total["cached_calls"] == 0
    assert total["prompt_tokens"] == sum(j["estimate"]["prompt_tokens"] for j in summary["jobs"]) > 0
    assert total["cost_usd"] is None and total["token_count"] == "tokenizer"
    line = next(x for x in proc.stdout.splitlines() if x.startswith("dry_run_total "))
    assert "conditions=3 calls=24 cached_calls=0" in line
    assert summary["status_counts"] == {"dry_run": 3}


def test_dry_run_total_sums_priced_jobs_only():
    est = [
        {
            "conditions": 1,
            "calls": 10,
            "cached_calls": 4,
            "prompt_tokens": 1000,
            "uncached_prompt_tokens": 600,
            "cost_usd": 0.0015,
            "token_count": "approx_chars_div_4",
        },
        {
            "conditions": 1,
            "calls": 10,
            "cached_calls": 0,
            "prompt_tokens": 900,
            "uncached_prompt_tokens": 900,
            "cost_usd": None,
            "token_count": "tokenizer",
        },
    ]
    t = dry_run_total(est)
    assert t["calls"] == 20 and t["cached_calls"] == 4 and t["uncached_prompt_tokens"] == 1500
    assert t["cost_usd"] == 0.0015 and t["priced_conditions"] == 1
    assert t["token_count"] == "approx_chars_div_4,tokenizer"


@pytest.mark.parametrize(
    ("launcher", "target"),
    [
        ("submitit_slurm", "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"),
    ],
)
def test_cluster_launcher_configs_compose(launcher, target, tmp_path):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from promptlottery.stages import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = hydra_compose(
            "config",
            overrides=[f"hydra/launcher={launcher}", "logger=none", f"paths.output_dir={tmp_path}"],
            return_hydra_config=True,
        )
    assert cfg.hydra.launcher._target_ == target
    if launcher == "submitit_slurm":  # job files under the sweep dir, on paths.output_dir
        assert str(cfg.hydra.launcher.submitit_folder).startswith(str(tmp_path))
        assert cfg.hydra.launcher.gpus_per_node == 1 and cfg.hydra.launcher.max_num_timeout == 0


def test_gpu_backbone_dry_run_on_this_cpu_approximates_tokens_and_says_so(tmp_path, capsys):
    from promptlottery.stages import run_stage as run
    from tests.conftest import compose

    cfg = compose(
        ["backbone=qwen25_7b", "dry_run=true", "dataset.limit=3"], tmp_path=tmp_path
    )  # HF_HUB_OFFLINE=1
    rec = run(cfg, tmp_path / "job")
    est = rec["estimate"]
    assert rec["status"] == "dry_run" and est["calls"] == 3 and est["cached_calls"] == 0
    assert est["token_count"] == "approx_chars_div_4" and est["prompt_tokens"] > 3 * 50
    assert "token_count=approx_chars_div_4" in capsys.readouterr().out
    priced = run(
        compose(["backbone=gpt4o", "dry_run=true", "dataset.limit=3"], tmp_path=tmp_path), tmp_path / "j2"
    )
    assert priced["estimate"]["cost_usd"] == round(
        priced["estimate"]["uncached_prompt_tokens"] * 2.5 / 1e6, 6
    )

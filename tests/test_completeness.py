"""One rule decides whether a configuration is complete, for every kind of judging job.

A sweep of your own judge files its judgments under the group file's names
(``answer_correctness/demo_correctness``), not under the ``judge=own`` defaults (``custom/own``): a
failed, killed or never-run job of that sweep must make *that* configuration incomplete, so the
analysis refuses it in one line naming the configuration and the missing wordings.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from promptlottery.judging.jobs import config_parts
from promptlottery.judging.load import load_judgments
from promptlottery.judging.table import AnalysisError
from tests.conftest import MODEL_CACHE, REPO, subprocess_env

EXAMPLES = REPO / "examples" / "own_judge"
POINTWISE = [
    f"dataset.path={EXAMPLES / 'qa_answers.jsonl'}",
    *(f"dataset.fields.{k}={v}" for k, v in {"id": "id", "context": "question", "reference": "gold"}.items()),
    *(f"dataset.fields.{k}={v}" for k, v in {"response": "answer", "system": "system", "human": "rating"}.items()),
    "dataset.human_range=[1,5]",
]  # fmt: skip
PAIRWISE = [
    "judge.mode=pairwise",
    f"dataset.path={EXAMPLES / 'qa_pairs.jsonl'}",
    *(f"dataset.fields.{k}=answer_{k[-1]}" for k in ("response_a", "response_b")),
    "dataset.fields.id=id", "dataset.fields.question=question", "dataset.fields.human=pref",
]  # fmt: skip
#: what the judge stage names the judgments of examples/own_judge/correctness.yaml (its id and family)
OWN = "table/answer_correctness/demo_correctness/human/fake"
#: your own pairwise judge without a group file judges G17 (family pairwise_preference)
OWN_PAIRWISE = "table/pairwise_preference/G17/human/fake"
N_ITEMS = 24  # rows of qa_answers.jsonl and of qa_pairs.jsonl


def own_sweep(root: Path, *overrides: str) -> Path:
    """``python -m run -m +experiment=own_judge`` on the fake judge; the sweep dir."""
    cmd = [
        sys.executable, "-m", "run", "-m", "+experiment=own_judge", "backbone=fake", "logger=none",
        f"paths.model_dir={MODEL_CACHE}", f"paths.cache_dir={root / 'cache'}",
        f"paths.output_dir={root / 'out'}", f"hydra.sweep.dir={root / 'sweep'}",
        "analysis.embeddings=none", "analysis.plots=false", "analysis.n_resamples=50", *overrides,
    ]  # fmt: skip
    subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=subprocess_env(root))
    return root / "sweep"


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("own")
    group = root / "group.yaml"  # a copy the tests may delete
    shutil.copy(EXAMPLES / "correctness.yaml", group)
    own = [f"judge.group_file={group}", *POINTWISE]
    return {
        "complete": own_sweep(root / "complete", *own),
        # P3 alone says "Judge it on this scale": the fake backend refuses it
        "p3_failed": own_sweep(root / "p3", *own, "+backbone.backend.fail_on=[Judge it on this scale]"),
        "pairwise": own_sweep(root / "pairwise", *PAIRWISE),
        "group": group,
    }


def copy_sweep(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("lottery"))
    return dst


def refusal(runs: Path) -> str:
    with pytest.raises(AnalysisError) as info:
        load_judgments(str(runs))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_a_complete_own_judge_sweep_is_analysed(sweeps):
    df = load_judgments(str(sweeps["complete"]))
    assert set(df["variant"]) == {"P1", "P2", "P3", "P4", "P5"} and len(df) == 5 * N_ITEMS
    assert {"/".join(df.iloc[0][["dataset", "judge_family", "prompt_group", "criterion", "backbone"]])} == {
        OWN
    }


def test_an_own_judge_sweep_with_a_failed_wording_is_refused(sweeps):
    message = refusal(sweeps["p3_failed"])
    assert message.startswith(f"every configuration is incomplete: {OWN}: n/a: P3 missing: job failed: ")
    assert "refused request containing 'Judge it on this scale'" in message
    assert "custom/own" not in message


def test_a_killed_own_judge_sweep_with_only_p1_done_is_refused(sweeps, tmp_path):
    sweep = copy_sweep(sweeps["complete"], tmp_path / "sweep")
    for d in sweep.glob("[1-4]_*"):
        shutil.rmtree(d)  # killed after P1: the other planned jobs never started
    message = refusal(sweep)
    assert message.startswith(f"every configuration is incomplete: {OWN}: n/a: P2 missing: job never ran")
    for v in ("P2", "P3", "P4", "P5"):
        assert f"{v} missing: job never ran" in message
    assert "P1 missing" not in message


def test_a_job_killed_before_its_results_is_refused(sweeps, tmp_path):
    sweep = copy_sweep(sweeps["complete"], tmp_path / "sweep")
    (next(sweep.glob("4_P5_*")) / "results.json").unlink()  # killed between its two writes
    message = refusal(sweep)
    assert message.startswith(
        f"every configuration is incomplete: {OWN}: n/a: P5 missing: job did not finish"
    )


def test_two_parquets_dropped_by_the_sha256_check_are_refused(sweeps, tmp_path):
    sweep = copy_sweep(sweeps["complete"], tmp_path / "sweep")
    for v in ("1_P2", "3_P4"):
        parquet = next(sweep.glob(f"{v}_*")) / "judgments.parquet"
        df = pd.read_parquet(parquet)
        df.loc[0, "argmax_label"] = "5" if df.loc[0, "argmax_label"] != "5" else "1"
        df.to_parquet(parquet, index=False)  # valid parquet, not the file results.json describes
    message = refusal(sweep)
    assert message.startswith(
        f"every configuration is incomplete: {OWN}: n/a: P2 missing: judgments.parquet is not"
    )
    assert "P4 missing: judgments.parquet is not the one results.json describes" in message
    assert "P3 missing" not in message


def test_a_failed_job_is_placed_by_its_sweep_even_when_its_group_file_is_gone(sweeps, tmp_path):
    sweep = copy_sweep(sweeps["p3_failed"], tmp_path / "sweep")
    group = sweeps["group"]
    moved = tmp_path / "moved.yaml"
    shutil.move(group, moved)
    try:
        message = refusal(sweep)
    finally:
        shutil.move(moved, group)
    assert message.startswith(f"every configuration is incomplete: {OWN}: n/a: P3 missing: job failed")


def test_an_own_pairwise_sweep_with_a_missing_wording_is_refused(sweeps, tmp_path):
    df = load_judgments(str(sweeps["pairwise"]))
    assert len(df) == 5 * 2 * N_ITEMS  # five wordings, both orders of each pair
    sweep = copy_sweep(sweeps["pairwise"], tmp_path / "sweep")
    shutil.rmtree(next(sweep.glob("2_P3_*")))
    message = refusal(sweep)
    assert message.startswith(
        f"every configuration is incomplete: {OWN_PAIRWISE}: n/a: P3 missing: job never ran"
    )


def test_the_lottery_command_refuses_an_incomplete_own_sweep_in_one_line(sweeps, tmp_path):
    cmd = [
        sys.executable, "-m", "run", "+analysis=lottery", f"analysis.runs={sweeps['p3_failed']}", "logger=none",
        f"hydra.run.dir={tmp_path / 'lottery'}", "analysis.embeddings=none", "analysis.plots=false",
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=subprocess_env(tmp_path)
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(errors) == 1 and errors[0].startswith(
        f"error: every configuration is incomplete: {OWN}: n/a: P3"
    )
    assert not (tmp_path / "lottery" / "report.md").exists()


# ------------------------------------------------------------------------------ config_parts, by hand


def _cfg(**judge) -> dict:
    base = {"family": "custom", "prompt_group": "own", "variant": "P2", "criterion": "human"}
    return {"dataset": {"name": "table"}, "backbone": {"name": "fake"}, "judge": {**base, **judge}}


def test_config_parts_names_a_group_by_its_file_as_the_judge_stage_does(tmp_path):
    gf = tmp_path / "sub" / "mine.yaml"
    gf.parent.mkdir()
    shutil.copy(EXAMPLES / "correctness.yaml", gf)
    want = {"judge_family": "answer_correctness", "prompt_group": "demo_correctness", "variant": "P2"}
    assert config_parts(_cfg(group_file=str(gf))).items() >= want.items()
    # a relative path is read where the job ran
    assert config_parts(_cfg(group_file="sub/mine.yaml"), cwd=tmp_path).items() >= want.items()
    # one template: family from judge.family, id from the file's stem
    tpl = tmp_path / "grade.j2"
    tpl.write_text("Rate {{ response }} 1-5:", encoding="utf-8")
    parts = config_parts(_cfg(template=str(tpl), scale="likert_1_5"))
    assert (parts["judge_family"], parts["prompt_group"]) == ("custom", "grade")
    # your own pairwise judge without a file: G17
    parts = config_parts(_cfg(mode="pairwise"))
    assert (parts["judge_family"], parts["prompt_group"]) == ("pairwise_preference", "G17")
    # a built-in group: the config's own names
    parts = config_parts(_cfg(family="qa_correctness", prompt_group="G1"))
    assert (parts["judge_family"], parts["prompt_group"]) == ("qa_correctness", "G1")
    # a group file that is gone cannot place the job
    assert config_parts(_cfg(group_file=str(tmp_path / "gone.yaml"))) is None


def test_an_unplaceable_failed_job_makes_every_configuration_it_may_be_incomplete(sweeps, tmp_path):
    sweep = copy_sweep(sweeps["complete"], tmp_path / "sweep")
    job = next(sweep.glob("2_P3_*"))
    rec = json.loads((job / "results.json").read_text())
    rec["config"]["judge"]["group_file"] = str(tmp_path / "gone.yaml")
    (job / "results.json").write_text(json.dumps({**rec, "status": "failed", "error": "boom"}))
    (job / "judgments.parquet").unlink()
    (job / ".hydra" / "overrides.yaml").unlink()  # no sweep job by its overrides: no sibling places it
    message = refusal(sweep)
    assert message.startswith(f"every configuration is incomplete: {OWN}: n/a: ")
    assert "all variants missing: job failed: boom (the job's configuration cannot be read)" in message

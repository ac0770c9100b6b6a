"""Hostile files: ids that would form paths outside their directory, links planted in a job dir, outputs
inside the package or at the repository root. Each is refused in one line before anything is written."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from omegaconf import OmegaConf

from promptlottery.prompts.groups import PromptError, load_group_file
from promptlottery.stages import register_configs, run_stage
from promptlottery.tracking.jobdir import (
    PACKAGE_DIR,
    OutputDirError,
    PathIdError,
    check_path_id,
    claim_output_dir,
)
from tests.conftest import DATA_DIR, MODEL_CACHE, REPO, compose, subprocess_env
from tests.test_own_judge import FIELDS, GROUP, ROWS, own_judge, write_csv

ESCAPE = "../../../ESCAPED"


@pytest.mark.parametrize("bad", [ESCAPE, "..", "a/b", "/abs", "a\\b", "", "P 1", "P1\n"])
def test_an_id_that_could_leave_its_directory_is_refused(bad):
    with pytest.raises(PathIdError, match="cannot be part of a path"):
        check_path_id(bad, "variant id")


@pytest.mark.parametrize("good", ["P1", "G17", "qwen25_coder_15b", "gpt-4o", "v1.2"])
def test_ordinary_ids_pass(good):
    assert check_path_id(good, "id") == good


def _escaping_group(tmp_path):
    raw = yaml.safe_load(GROUP)
    raw["variants"][ESCAPE] = raw["variants"].pop("P2")
    gf = tmp_path / "mine.yaml"
    gf.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return gf


def test_a_group_file_variant_id_with_a_path_in_it_is_refused(tmp_path):
    with pytest.raises(
        PromptError, match=r"mine.yaml: prompt group \w+: variant id '\.\./\.\./\.\./ESCAPED'"
    ):
        load_group_file(_escaping_group(tmp_path))


def test_a_sweep_over_an_escaping_variant_writes_nothing_outside_its_dir(tmp_path):
    work = tmp_path / "a" / "b" / "c"  # the sweep dir three levels down: ESCAPED would land in tmp_path
    work.mkdir(parents=True)
    data = write_csv(work / "mine.csv", ROWS)
    fields = [f"dataset.fields.{k}={v}" for k, v in FIELDS.items()]
    gf = _escaping_group(work)
    proc = own_judge(
        work, f"dataset.path={data}", *fields, "dataset.human_range=[1,10]", f"judge.group_file={gf}"
    )
    assert proc.returncode != 0
    assert "variant id '../../../ESCAPED' cannot be part of a path" in proc.stderr
    assert not [p for p in tmp_path.rglob("*ESCAPED*")]
    assert not (work / "sweep").exists() or not list((work / "sweep").glob("*/judgments.parquet"))


def test_a_job_dir_name_is_built_from_checked_ids():
    register_configs()
    cfg = OmegaConf.create({"v": "../x", "ok": "P1", "name": "${path_id:${ok}}_${path_id:${v}}"})
    with pytest.raises(Exception, match="id '../x' cannot be part of a path"):
        OmegaConf.to_container(cfg, resolve=True)
    assert OmegaConf.create({"a": "P1", "n": "${path_id:${a}}"}).n == "P1"


def _run(tmp_path, run_dir, *overrides):
    cmd = [
        sys.executable, "-m", "run", "backbone=fake", "logger=none", "dataset.limit=2",
        f"paths.data_dir={DATA_DIR}", f"paths.model_dir={MODEL_CACHE}", f"paths.cache_dir={tmp_path / 'cache'}",
        f"paths.output_dir={tmp_path / 'out'}", f"hydra.run.dir={run_dir}", *overrides,
    ]  # fmt: skip
    return subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=240, env=subprocess_env(tmp_path)
    )


@pytest.mark.parametrize("planted", ["run.log", ".hydra/config.yaml", "results.json", ".job.lock"])
def test_a_link_planted_in_a_job_dir_is_refused_and_its_target_untouched(tmp_path, planted):
    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    run_dir = tmp_path / "job"
    (run_dir / planted).parent.mkdir(parents=True, exist_ok=True)
    (run_dir / planted).symlink_to(target)
    proc = _run(tmp_path, run_dir)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {run_dir / planted} is a symbolic link: a job's files are never opened through a link; remove it"
    ]
    assert target.read_text() == "precious\n"
    assert not (run_dir / "judgments.parquet").exists()


def test_the_saved_prompt_group_replaces_a_planted_link_instead_of_writing_through_it(tmp_path):
    target = tmp_path / "victim.yaml"
    target.write_text("precious\n")
    out = tmp_path / "job"
    out.mkdir()
    (out / "prompt_group.yaml").symlink_to(target)
    gf = tmp_path / "mine.yaml"
    gf.write_text(GROUP, encoding="utf-8")
    data = write_csv(tmp_path / "mine.csv", ROWS)
    fields = [f"dataset.fields.{k}={v}" for k, v in FIELDS.items()]
    cfg = compose(
        ["backbone=fake", "dataset=table", "judge=own", f"dataset.path={data}", *fields,
         "dataset.human_range=[1,10]", f"judge.group_file={gf}"],
        tmp_path=tmp_path,
    )  # fmt: skip
    run_stage(cfg, out)  # no claim: the write itself must not follow the link
    assert target.read_text() == "precious\n"
    assert (
        not (out / "prompt_group.yaml").is_symlink() and "variants" in (out / "prompt_group.yaml").read_text()
    )


@pytest.mark.parametrize("where", ["package", "root"])
def test_outputs_inside_the_package_or_at_the_repository_root_are_refused(where, tmp_path):
    out = PACKAGE_DIR / "outputs" if where == "package" else REPO
    with pytest.raises(OutputDirError, match="inside the promptlottery package|is the repository root"):
        claim_output_dir(out, {"paths": {"root_dir": str(REPO)}})
    assert not (PACKAGE_DIR / "outputs").exists() and not (REPO / ".job.json").exists()


@pytest.mark.parametrize("where", ["package", "root"])
def test_a_run_dir_inside_the_package_or_at_the_root_is_refused_before_hydra_writes(where, tmp_path):
    run_dir = PACKAGE_DIR if where == "package" else REPO
    before = sorted(p.name for p in run_dir.iterdir())
    proc = _run(tmp_path, run_dir)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "inside the promptlottery package" in proc.stderr or "is the repository root" in proc.stderr
    assert sorted(p.name for p in run_dir.iterdir()) == before  # no .hydra/, run.log or results.json

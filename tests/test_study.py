"""The study: configurations identified by what they are, and the study sweeper's jobs and plan."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, compose

#: six configurations of the 33 whose loaders are shared: Topical-Chat and PersonaChat (one USR loader),
#: EVOUNA NQ and TQ, BEGIN WoW and CMU-DoG
SIX = (
    "tc_usr_engaging",
    "pc_usr_engaging",
    "evouna_nq_correctness",
    "evouna_tq_correctness",
    "begin_wow_groundedness",
    "begin_cmu_groundedness",
)


def test_no_two_dataset_configs_are_one_configuration():
    """Every conf/dataset/*.yaml names one configuration (``id``, else its loader ``name``): a new
    config that shares a loader without its own id fails here, before it is pooled with the other."""
    ids: dict[str, str] = {}
    for path in sorted((REPO / "conf" / "dataset").glob("*.yaml")):
        ds = yaml.safe_load(path.read_text())
        own = ds.get("id") or ds["name"]
        assert own not in ids, f"{path.name} and {ids[own]} are both configuration {own!r}"
        ids[own] = path.name


def _fake_study(tmp_path: Path, experiments=SIX, variants=("P1", "P2")) -> Path:
    from promptlottery.stages import run_stage

    root = tmp_path / "study"
    for exp in experiments:
        for n, v in enumerate(variants):
            cfg = compose(
                [f"+experiment={exp}", "backbone=fake", "dataset.limit=4", f"judge.variant={v}"],
                tmp_path=tmp_path,
            )
            assert run_stage(cfg, root / exp / f"{n}_{v}")["status"] == "ok"
    return root


def test_a_fake_study_analysed_as_one_keeps_each_configuration(tmp_path):
    """Six configurations judged by the fake judge and read back as one grid are six configurations
    (on main, the shared loader names pooled them into three: Topical-Chat with PersonaChat, NQ with
    TQ, WoW with CMU-DoG), each with its own 4 items x 2 wordings, and the lottery report lists six."""
    import pandas as pd

    from promptlottery.judging.grid import JudgmentGrid
    from promptlottery.stages import run_stage

    root = _fake_study(tmp_path)
    grid = JudgmentGrid.load(f"{root}/*/*")
    assert [c.config_id for c in grid] == sorted(
        [
            "begin_cmu/qa_groundedness/G11/attributable/fake",
            "begin_wow/qa_groundedness/G11/attributable/fake",
            "evouna_nq/qa_correctness/G10/correct/fake",
            "evouna_tq/qa_correctness/G10/correct/fake",
            "persona_chat_usr/dialogue_quality/G1/engaging/fake",
            "topical_chat_usr/dialogue_quality/G1/engaging/fake",
        ]
    )
    for c in grid:
        assert c.paraphrases.groupby("variant")["item_id"].nunique().to_dict() == {"P1": 4, "P2": 4}
    cfg = compose(["+analysis=lottery", f"analysis.runs={root}/*/*"], tmp_path=tmp_path)
    out = tmp_path / "lottery"
    assert run_stage(cfg, out)["status"] == "ok"
    tables = {p.stem: pd.read_csv(p) for p in out.glob("tables/*.csv")}
    keyed = [t for t in tables.values() if "config_id" in t.columns and len(t)]
    assert keyed, sorted(tables)
    for t in keyed:  # every per-configuration table: the six, none pooled
        ids = {c.config_id for c in grid}  # with the backbone, or the configuration across backbones
        assert set(t["config_id"].dropna()) <= ids | {i.rsplit("/", 1)[0] for i in ids}
    assert max(t["config_id"].nunique() for t in keyed) == 6


def test_the_wandb_group_and_condition_id_name_the_configuration(tmp_path):
    from promptlottery.judging.stage import build_condition

    pc = build_condition(compose(["+experiment=pc_usr_engaging", "backbone=fake"], tmp_path=tmp_path))
    tc = build_condition(compose(["+experiment=tc_usr_engaging", "backbone=fake"], tmp_path=tmp_path))
    assert pc.id == "persona_chat_usr/dialogue_quality/G1/P1/fake"
    assert (pc.configuration, tc.configuration) == (
        "persona_chat_usr/dialogue_quality/G1/engaging",
        "topical_chat_usr/dialogue_quality/G1/engaging",
    )


@pytest.mark.parametrize("exp", ["pc_usr_engaging", "evouna_tq_correctness"])
def test_the_job_config_hash_ignores_the_new_labels(tmp_path, exp):
    """dataset.id and backbone.throughput are labels: a job dir judged before them is the same job
    (the CPU study judged in the background resumes into its own dirs)."""
    from omegaconf import OmegaConf

    from promptlottery.tracking.jobdir import config_hash

    cfg = OmegaConf.to_container(compose([f"+experiment={exp}"], tmp_path=tmp_path), resolve=True)
    old = {k: v for k, v in cfg.items() if k != "study"}
    old["dataset"] = {k: v for k, v in cfg["dataset"].items() if k != "id"}
    old["backbone"] = {k: v for k, v in cfg["backbone"].items() if k != "throughput"}
    assert config_hash(cfg) == config_hash(old)


def test_the_background_cpu_studys_job_dirs_are_the_same_jobs(tmp_path):
    """A squad_v2 job of the CPU study composed now hashes like the one judged before the throughput
    fields (its candidate systems' backbones carry one too)."""
    from omegaconf import OmegaConf

    from promptlottery.tracking.jobdir import config_hash

    cfg = OmegaConf.to_container(
        compose(["+experiment=squad_v2", "backbone=qwen25_coder_15b", "predict.limit=6"], tmp_path=tmp_path),
        resolve=True,
    )
    old = {k: v for k, v in cfg.items() if k != "study"}
    old["backbone"] = {k: v for k, v in cfg["backbone"].items() if k != "throughput"}
    systems = old["predict"]["systems"]
    assert any("throughput" in s["backbone"] for s in systems.values())
    old["predict"] = {
        **old["predict"],
        "systems": {
            n: {**s, "backbone": {k: v for k, v in s["backbone"].items() if k != "throughput"}}
            for n, s in systems.items()
        },
    }
    assert config_hash(cfg) == config_hash(old)

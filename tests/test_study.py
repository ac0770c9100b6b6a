"""The study: configurations identified by what they are, and the study sweeper's jobs and plan."""

from __future__ import annotations

import json
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
                # 4 items each (USR and EVOUNA sample whole contexts / questions by default)
                [
                    f"+experiment={exp}",
                    "backbone=fake",
                    "dataset.limit=4",
                    "dataset.sample_by=item",
                    f"judge.variant={v}",
                ],
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
    cfg = compose(
        ["+analysis=study", f"analysis.runs={root}/*/*", "analysis.embeddings=none"], tmp_path=tmp_path
    )
    out = tmp_path / "lottery"
    assert run_stage(cfg, out)["status"] == "ok"
    family = pd.read_csv(out / "tables" / "study_by_family.csv").set_index("judge_family")
    assert family["configurations"].to_dict() == {
        "dialogue_quality": 2,
        "qa_correctness": 2,
        "qa_groundedness": 2,
    }
    assert family["items"].to_dict() == {"dialogue_quality": 8, "qa_correctness": 8, "qa_groundedness": 8}
    page = (out / "study.md").read_text()
    assert page.startswith("**FAKE JUDGE**") and "6 configurations x 1 backbones" in page
    tables = {p.stem: pd.read_csv(p) for p in out.glob("tables/*.csv")}
    keyed = [t for t in tables.values() if "config_id" in t.columns and len(t)]
    assert keyed, sorted(tables)
    for t in keyed:  # every per-configuration table: the six, none pooled
        ids = {c.config_id for c in grid}  # with the backbone, or the configuration across backbones
        assert set(t["config_id"].dropna()) <= ids | {i.rsplit("/", 1)[0] for i in ids}
    assert max(t["config_id"].nunique() for t in keyed) == 6


def test_the_study_page_is_published_with_the_lottery_and_vouched_for_by_its_digests(tmp_path):
    """study.md and its two breakdown tables are written into the lottery's staging dir and published
    with it: results.json names each with its sha256, a reader accepts the directory, and refuses it
    once one of the study's files is altered (before, they were written after results.json)."""
    from promptlottery.stages import run_stage
    from promptlottery.tracking.staging import STAGING, OutputsError, check_outputs

    root = _fake_study(tmp_path, experiments=SIX[:1])
    cfg = compose(
        ["+analysis=study", f"analysis.runs={root}/*/*", "analysis.embeddings=none", "analysis.plots=false"],
        tmp_path=tmp_path,
    )
    out = tmp_path / "lottery"
    assert run_stage(cfg, out)["status"] == "ok"
    outputs = json.loads((out / "results.json").read_text())["outputs"]
    study_files = ["study.md", "tables/study_by_backbone.csv", "tables/study_by_family.csv"]
    assert set(study_files) <= set(outputs) and "report.md" in outputs
    assert not (out / STAGING).exists()
    check_outputs(out, reader="test")
    page = out / "study.md"
    page.write_text(page.read_text() + "edited\n")
    with pytest.raises(OutputsError, match=r"study\.md: not the file results\.json describes"):
        check_outputs(out, reader="test")


def test_a_partial_configuration_is_named_in_the_study_page_and_the_log(tmp_path, caplog):
    """A sweep dir with 2 of its 3 wordings finished (P3 killed: no results.json) is left out of the
    study, and said so in one line naming it, what is missing, what it had judged and its directory."""
    import logging

    from promptlottery.stages import run_stage

    root = _fake_study(tmp_path, experiments=SIX[:2], variants=("P1", "P2", "P3"))
    (root / "tc_usr_engaging" / "2_P3" / "results.json").unlink()
    cfg = compose(
        ["+analysis=study", f"analysis.runs={root}/*/*", "analysis.embeddings=none"], tmp_path=tmp_path
    )
    with caplog.at_level(logging.WARNING, logger="promptlottery.stages.study"):
        assert run_stage(cfg, tmp_path / "lottery")["status"] == "ok"
    page = (tmp_path / "lottery" / "study.md").read_text()
    assert "1 configurations x 1 backbones" in page
    line = next(x for x in page.splitlines() if x.startswith("- topical_chat_usr/"))
    assert line.startswith(
        "- topical_chat_usr/dialogue_quality/G1/engaging/fake: n/a: P3 missing: job did not"
    )
    assert line.endswith(
        f"; judged: P1, P2 (8 judgments, 4 items) in {root / 'tc_usr_engaging'}, left out of the analysis"
    )
    logged = [r.getMessage() for r in caplog.records if "not analysed" in r.getMessage()]
    assert len(logged) == 1 and logged[0].endswith(line[2:])


def test_the_wandb_group_and_condition_id_name_the_configuration(tmp_path):
    from promptlottery.judging.inputs import build_condition

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


# -- the study sweeper -------------------------------------------------------------------------


def _experiments(overrides: list[str], tmp_path: Path):
    """The study's experiments as the study sweeper expands them (``+study=...`` composed)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import open_dict

    from promptlottery.stages.study import study_experiments

    plain = [
        o.input_line for o in OverridesParser.create().parse_overrides(overrides) if not o.is_sweep_override()
    ]
    config = compose(plain, tmp_path=tmp_path, return_hydra_config=True)  # a multirun's own config
    with open_dict(config):
        config.hydra.sweep.dir = str(tmp_path / "study")

    def job(ov):
        return compose(ov, tmp_path=tmp_path, return_hydra_config=True)

    return study_experiments(config, list(overrides), job)


def test_the_paper_study_on_the_gpu_grid_is_825_conditions(tmp_path):
    """33 configurations (experiments/README.md's table) x 5 GPU backbones x P1-P5, each experiment's
    own sweep kept; SQuAD v2 at its documented GPU size (400 questions)."""
    import re

    readme = (REPO / "experiments" / "README.md").read_text()
    table = re.findall(r"^\| \d+ \| (\w+) \|", readme.split("## The 33 configurations")[1], flags=re.M)
    exps = _experiments(["+study=paper", "grid=gpu"], tmp_path)
    assert [e.name for e in exps] == table and len(table) == 33
    assert (
        sum(len(e.jobs) for e in exps)
        == 825
        == len({(e.name, tuple(sorted(j))) for e in exps for j in e.jobs})
    )
    backbones = {"qwen25_7b", "llama31_8b", "mistral_7b", "gemma2_9b", "gpt4o"}
    for e in exps:
        assert len(e.jobs) == 25
        assert {o.split("=")[1] for j in e.jobs for o in j if o.startswith("backbone=")} == backbones
        assert {o.split("=")[1] for j in e.jobs for o in j if o.startswith("judge.variant=")} == {
            f"P{i}" for i in range(1, 6)
        }
        assert e.sweep_dir == tmp_path / "study" / e.name
    squad = next(e for e in exps if e.name == "squad_v2")
    assert all("predict.limit=400" in j for j in squad.jobs)


#: /work/study/run_study.sh, the CPU study judged one experiment at a time (issue 45): its overrides (USR and
#: EVOUNA now count whole contexts / questions: run_study.sh must pass these limits to match)
RUN_STUDY = {
    **{
        e: ["dataset.limit=30"]
        for e in (
            "stsb_alignment nq301_correctness fed_engaging fed_understandable "
            "fed_context_specific fed_relevant fed_domain begin_wow_groundedness "
            "begin_topicalchat_groundedness begin_cmu_groundedness unieval_sfhot_overall "
            "unieval_sfres_overall qags_cnndm_groundedness qags_xsum_groundedness"
        ).split()
    },
    "hanna_coherence": ["dataset.limit=3"],
    # whole contexts / questions since they sample by group (run_study.sh: dataset.limit=30 until then)
    **{
        f"tc_usr_{c}": ["dataset.limit=5"]
        for c in ("engaging understandable context_specific relevant practical_value".split())
    },
    **{f"pc_usr_{c}": ["dataset.limit=6"] for c in ("engaging", "understandable", "context_specific")},
    **{f"evouna_{s}_correctness": ["dataset.limit=6"] for s in ("nq", "tq")},
    **{f"newsroom_{c}": ["dataset.limit=5"] for c in ("coherence", "fluency", "relevance")},
    **{f"summeval_{c}": ["dataset.limit=2"] for c in ("coherence", "consistency", "fluency", "relevance")},
    "squad_v2": ["predict.limit=6"],
}


def test_the_cpu_study_is_the_background_runs_jobs(tmp_path):
    """+study=cpu logger=none composes exactly run_study.sh's jobs: the same overrides per job (so the
    same requests, answered from the call cache), numbered 0-4 = P1-P5 in <root>/<experiment>/."""
    exps = _experiments(["+study=cpu", "logger=none"], tmp_path)
    assert {e.name for e in exps} == set(RUN_STUDY)
    for e in exps:
        want = [
            sorted(
                [
                    f"+experiment={e.name}",
                    "backbone=qwen25_coder_15b",
                    *RUN_STUDY[e.name],
                    f"judge.variant=P{k}",
                    "logger=none",
                ]
            )
            for k in range(1, 6)
        ]
        assert [p["overrides"] for p in e.plan()["jobs"]] == want
        assert [p["num"] for p in e.plan()["jobs"]] == [0, 1, 2, 3, 4]
        assert all(o[-1] == f"hydra.sweep.dir={tmp_path / 'study' / e.name}" for o in e.launch_overrides())


def test_the_command_line_wins_over_the_study(tmp_path):
    exps = _experiments(
        [
            "+study=cpu",
            "study.experiments=[fed_domain,hanna_coherence]",
            "backbone=fake,smollm2",
            "dataset.limit=4",
        ],
        tmp_path,
    )
    assert [e.name for e in exps] == ["fed_domain", "hanna_coherence"]
    for e in exps:
        assert len(e.jobs) == 10
        assert all("dataset.limit=4" in j and not any(o.startswith("+study") for o in j) for j in e.jobs)


def test_a_sweep_over_experiments_is_refused_in_one_line_naming_the_study():
    from promptlottery.errors import ConfigError
    from promptlottery.stages.study import check_experiment_sweep

    with pytest.raises(
        ConfigError,
        match=r"run them as a study: python -m run \+study=paper 'study.experiments=\[stsb_alignment,fed_domain\]' -m",
    ):
        check_experiment_sweep(["+experiment=stsb_alignment,fed_domain", "grid=gpu", "dry_run=true", "-m"])
    check_experiment_sweep(["+experiment=stsb_alignment", "-m"])
    check_experiment_sweep(["+study=paper", "-m"])


def test_the_plan_counts_like_the_judge_stages_dry_run(tmp_path):
    """The study plan's calls, prompt tokens and API cost of a job are those the judge stage's own dry
    run counts for it (gpt-4o: no tokenizer, characters / 4 + 4 per message in both); PersonaChat and
    Topical-Chat are two configurations; hours = uncached tokens / the backbone's tokens_per_s."""
    from promptlottery.stages import run_stage
    from promptlottery.stages.study_plan import plan_study

    over = [
        "+study=paper",
        "study.experiments=[pc_usr_engaging,tc_usr_engaging]",
        "backbone=gpt4o,qwen25_7b",
        "dataset.limit=3",
    ]
    exps = _experiments(over, tmp_path)
    plan = plan_study(
        exps, lambda ov: compose(ov, tmp_path=tmp_path, return_hydra_config=True), progress=False
    )
    # dataset.limit=3 contexts (USR samples whole contexts): PersonaChat 3 x 5 systems, Topical-Chat 3 x 6
    assert plan["total"]["conditions"] == 20 and plan["total"]["calls"] == 10 * 15 + 10 * 18
    assert sorted(plan["configurations"]) == [
        "persona_chat_usr/dialogue_quality/G1/engaging",
        "topical_chat_usr/dialogue_quality/G1/engaging",
    ]
    row = next(r for r in plan["jobs"] if r["condition"] == "persona_chat_usr/dialogue_quality/G1/P3/gpt4o")
    cfg = compose(
        [
            "+experiment=pc_usr_engaging",
            "backbone=gpt4o",
            "dataset.limit=3",
            "judge.variant=P3",
            "dry_run=true",
        ],
        tmp_path=tmp_path,
    )
    est = run_stage(cfg, tmp_path / "dry")["estimate"]
    assert (
        (row["calls"], row["prompt_tokens"])
        == (est["calls"], est["prompt_tokens"])
        == (15, est["prompt_tokens"])
    )
    assert row["cost_usd"] == pytest.approx(est["cost_usd"], abs=1e-6)  # the dry run rounds to 6 places
    qwen = plan["backbones"]["qwen25_7b"]
    assert qwen["gpu_hours"] == pytest.approx(qwen["uncached_prompt_tokens"] / 10_000 / 3600, abs=1e-3)
    assert plan["slurm"]["gpu"]["server_per_backbone"]["engine_loads"] == 1
    assert plan["slurm"]["gpu"]["task_per_configuration_backbone"]["engine_loads"] == 2


def test_the_study_breakdown_is_the_median_and_the_bands():
    """Per backbone: the median kappa of its configurations and their count per band (hand-computed:
    judge a's kappas 0.9, 0.5, 0.7 -> median 0.7, one robust, one usable, one below)."""
    import pandas as pd

    from promptlottery.analysis.lottery.study_report import breakdown

    verdict = pd.DataFrame(
        {
            "config_id": ["x/a", "y/a", "z/a", "x/b"],
            "n_items": [10, 20, 30, 10],
            "kappa": [0.9, 0.5, 0.7, float("nan")],
            "band": ["robust", "below usable", "usable", None],
            "changed": [0.1, 0.5, 0.3, 0.2],
        }
    )
    configs = pd.DataFrame(
        {
            "config_id": ["x/a", "y/a", "z/a", "x/b"],
            "backbone": ["a", "a", "a", "b"],
            "judge_family": ["f"] * 4,
        }
    )
    out = breakdown(verdict, configs, "backbone").set_index("backbone")
    assert out.loc["a", ["configurations", "items", "robust", "usable", "below usable", "n/a"]].tolist() == [
        3,
        60,
        1,
        1,
        1,
        0,
    ]
    assert out.loc["a", "kappa_median"] == pytest.approx(0.7) and out.loc[
        "a", "changed_median"
    ] == pytest.approx(0.3)
    assert out.loc["b", "n/a"] == 1 and pd.isna(out.loc["b", "kappa_median"])


def test_the_study_page_puts_the_papers_section_4_2_beside_ours(tmp_path):
    """Task type, family type and backbone rows of agreement_by_task_type.csv, each beside the paper's
    §4.2 / §C.3 words, with ours as mean [interval]; the pooled grouping is not a row."""
    import pandas as pd

    from promptlottery.analysis.lottery.study_report import paper_breakdown

    cols = {"n_configs": 2, "overlap": 0.8, "overlap_lo": 0.7, "overlap_hi": 0.9, "fleiss_kappa_n": 2}
    rows = [
        {"grouping": "task type", "group": "binary", **cols, "fleiss_kappa": 0.25, "fleiss_kappa_lo": 0.125},
        {"grouping": "judge family type", "group": "subjective", **cols, "fleiss_kappa": 0.5},
        {"grouping": "backbone", "group": "qwen", **cols, "fleiss_kappa": float("nan")},
        {"grouping": "task type x family type x backbone", "group": "binary / subjective / qwen", **cols},
    ]
    pd.DataFrame(rows).assign(fleiss_kappa_hi=0.375).to_csv(tmp_path / "agreement_by_task_type.csv")
    out = paper_breakdown(tmp_path)
    assert out["group"].tolist() == ["binary", "subjective", "qwen"]
    assert out["paper"].str.contains("§").all() and "0.26-0.28" in out["paper"][1]
    assert out["overlap"][0] == "0.800 [0.700, 0.900]" and out["fleiss_kappa"][0] == "0.250 [0.125, 0.375]"
    assert out["fleiss_kappa"][2] == "n/a"


def test_a_study_runs_each_experiment_into_its_own_dir_and_resumes_from_the_cache(tmp_path):
    """`python -m run +study=cpu ... -m` with the fake judge: the plan printed before the first job, each
    experiment's five jobs in <root>/<experiment>/ numbered 0-4 with its sweep plan and summary; run
    again, the plan finds every call cached and no call is made."""
    import json
    import subprocess

    from tests.conftest import subprocess_env
    from tests.load_counter import fake_study_command

    cmd = fake_study_command(tmp_path)
    runs = [
        subprocess.run(
            cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=subprocess_env(tmp_path)
        )
        for _ in range(2)
    ]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    first, second = (r.stdout + r.stderr for r in runs)
    assert first.index("study cpu plan: 10 conditions (2 configurations") < first.index("Launching 5 jobs")
    assert "30 calls (0 cached)" in first and "30 calls (30 cached)" in second
    root = tmp_path / "out" / "study_cpu"
    assert json.loads((root / "study_plan.json").read_text())["experiments"] == {
        "pc_usr_engaging": 5,
        "evouna_nq_correctness": 5,
    }
    for exp in ("pc_usr_engaging", "evouna_nq_correctness"):
        summary = json.loads((root / exp / "sweep_summary.json").read_text())
        assert summary["status_counts"] == {"ok": 5} and summary["n_planned"] == 5
        assert sorted(p.name.split("_")[0] for p in (root / exp).glob("[0-9]_*")) == ["0", "1", "2", "3", "4"]
        for job in (root / exp).glob("[0-9]_*"):
            calls = json.loads((job / "results.json").read_text())["calls"]
            assert calls["cache_misses"] == 0  # the second run's record: every call from the cache


def test_the_bench_studys_stand_in_judges_are_named_fake_in_its_report(tmp_path):
    """benchmarks/bench_study.py writes made-up judgments under backbone names: its report must say so."""
    import importlib.util

    from promptlottery.analysis.lottery.options import LotteryOptions
    from promptlottery.analysis.stage import run_lottery

    spec = importlib.util.spec_from_file_location("bench_study", REPO / "benchmarks" / "bench_study.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.write_study(tmp_path / "study", items=12, configurations=1)
    opts = LotteryOptions.from_dict(
        {"runs": [str(tmp_path / "study" / "*" / "*")], "embeddings": "none", "plots": False}
    )
    run_lottery(opts, tmp_path / "out")
    report = next((tmp_path / "out").rglob("report.md")).read_text()
    assert "**Fake judge**" in report.split("\n\n")[0] + report[:2000]


def test_the_plan_measures_each_backbones_rate_from_the_studys_finished_jobs(tmp_path):
    """A finished job (status ok, some calls judged, not cached) gives its plan row's tokens x misses /
    calls over its wall seconds; a cached, failed or unplanned job gives nothing. By hand: job a judged
    30 of 30 calls of 3,000 tokens in 100 s, job b 10 of 20 calls of 2,000 tokens in 50 s -> (3,000 +
    1,000) / 150 = 26.67 tokens/s; the 6,000 uncached tokens left take 6,000 / 26.67 / 3600 h."""
    from promptlottery.stages.study import StudyExperiment
    from promptlottery.stages.study_plan import measured_throughput
    from promptlottery.stages.study_plan_text import format_plan, summarize_plan

    exp = StudyExperiment("e", tmp_path / "e")

    def rec(condition, status, total, misses, seconds):
        return {"condition": condition, "status": status, "seconds": seconds,
                "calls": {"total": total, "cache_misses": misses}}  # fmt: skip

    jobs = {
        "0_a": rec("c/a", "ok", 30, 30, 100),
        "1_b": rec("c/b", "ok", 20, 10, 50),
        "2_cached": rec("c/c", "ok", 20, 0, 9),
        "3_failed": rec("c/d", "failed", 5, 5, 9),
        "4_unplanned": rec("x/y", "ok", 5, 5, 9),
    }
    for name, rec in jobs.items():
        (exp.sweep_dir / name).mkdir(parents=True)
        (exp.sweep_dir / name / "results.json").write_text(json.dumps(rec))
    (exp.sweep_dir / "5_broken").mkdir()
    (exp.sweep_dir / "5_broken" / "results.json").write_text("{not json")

    def row(cond, tokens, uncached):
        return {
            "experiment": "e",
            "condition": cond,
            "configuration": "c",
            "backbone": "judge",
            "variant": "P1",
            "calls": 30,
            "cached_calls": 0,
            "prompt_tokens": tokens,
            "uncached_prompt_tokens": uncached,
            "cost_usd": None,
            "device": "cpu",
            "hours": None,
            "throughput": {"device": "cpu", "tokens_per_s": None, "engine_load_s": 0.0, "source": "none"},
        }

    rows = [row("c/a", 3000, 0), row("c/b", 2000, 1000), row("c/c", 2000, 0), row("c/d", 5000, 5000)]
    measured = measured_throughput([exp], rows)
    assert measured["judge"]["jobs"] == 2 and measured["judge"]["tokens"] == 4000
    assert measured["judge"]["tokens_per_s"] == pytest.approx(4000 / 150)
    plan = summarize_plan(rows, measured)
    assert plan["measured_throughput"]["judge"]["hours_left"] == pytest.approx(
        6000 / (4000 / 150) / 3600, abs=1e-3
    )
    text = format_plan(plan, study="t")
    assert "| 0.06 | 26.7 (2) |" in text and "2 finished job(s) of this study judged 4,000" in text


def test_the_plan_counts_cached_calls_not_cached_keys(tmp_path, monkeypatch):
    """Two items with one prompt are two calls of one key: once the key is cached, the plan says both
    calls are cached (SummEval: systems that wrote the same summary; the plan said 28 of 32 cached
    for a finished job whose 32 calls the cache answers)."""
    from promptlottery.stages import study_plan

    class Req:
        def __init__(self, key):
            self.key, self.messages, self.prompt = key, [{"role": "user", "content": "x" * 40}], None

    class Cache:
        def get_many(self, keys):
            return {k: object() for k in keys if k == "k1"}

    item = type("Item", (), {})
    items = [item(), item(), item()]
    for i, it in enumerate(items):
        it.id = f"i{i}"
    pairs = [(items[0], Req("k1")), (items[1], Req("k1")), (items[2], Req("k2"))]
    monkeypatch.setattr(study_plan, "_predict_stage", lambda cfg, memo: None)
    monkeypatch.setattr(study_plan, "_backend", lambda spec, name, memo: None)
    monkeypatch.setattr(study_plan, "_cache", lambda paths, memo: Cache())
    cond = type("C", (), {"id": "c/P1/b", "configuration": "c", "variant": "P1"})()
    monkeypatch.setattr(study_plan, "_requests", lambda cfg, backend, memo, items=None: (cond, pairs))
    monkeypatch.setattr(study_plan, "_tokens", lambda reqs: 10 * sum(1 for _ in reqs))
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(
        {"backbone": {"name": "b", "backend": {}}, "paths": {}, "judge": {}, "predict": None}
    )
    row, _ = study_plan.plan_job(cfg, study_plan._Memo(tmp_path))
    assert (row["calls"], row["cached_calls"], row["uncached_prompt_tokens"]) == (3, 2, 10)


def test_the_plan_counts_the_tokens_a_prefix_judges_batches_run(tmp_path):
    """A judge that batches by shared prefix (transformers, OpenVINO) runs a source its batch shares once:
    by hand, 3 answers of 40 characters to one 400-character source (440 characters, 110 tokens at 4
    characters a token) run 100 + 3 x 10 = 130 tokens in one batch, not 3 x 110 = 330; a finished job's
    rate is counted in the tokens of the batch order it recorded (length where it recorded none)."""
    from promptlottery.backends.base import JudgeRequest
    from promptlottery.stages.study import StudyExperiment
    from promptlottery.stages.study_plan import _run_tokens, measured_throughput

    reqs = [JudgeRequest(key=f"k{k}", labels=("1",), prompt="S" * 400 + str(k) + "x" * 39) for k in range(3)]
    assert _run_tokens(reqs, "length", 8) == 330
    assert _run_tokens(reqs, "prefix", 8) == 130
    assert _run_tokens(reqs, "prefix", 1) == 330  # batches of one share nothing

    exp = StudyExperiment("e", tmp_path / "e")
    for name, order in (("0_a", "prefix"), ("1_b", None)):
        calls = {"total": 3, "cache_misses": 3} | ({"batch_order": order} if order else {})
        (exp.sweep_dir / name).mkdir(parents=True)
        rec = {"condition": f"c/{name}", "status": "ok", "seconds": 10, "calls": calls}
        (exp.sweep_dir / name / "results.json").write_text(json.dumps(rec))
    rows = [
        {"experiment": "e", "condition": f"c/{n}", "backbone": "judge", "prompt_tokens": 330,
         "run_tokens_by_order": {"length": 330, "prefix": 130}}
        for n in ("0_a", "1_b")
    ]  # fmt: skip
    measured = measured_throughput([exp], rows)["judge"]
    assert measured["tokens"] == 130 + 330 and measured["tokens_per_s"] == pytest.approx(460 / 20)

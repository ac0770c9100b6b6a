"""Runs you can trust (issue 13): executable probes with the fake backend.

Parallel launches in one second, a job refusing another job's dir, SIGKILL between the two writes,
a failed job in a sweep, a killed sweep, two backends under one backbone name, planted secrets
grepped across every file a run writes, each bad value, and cache revisions. Subprocesses run the
real `python -m run`; everything else runs in process.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from promptlottery.judging.load import load_judgments
from promptlottery.judging.table import AnalysisError
from tests.conftest import DATA_DIR, MODEL_CACHE, REPO, compose

LIMIT = 3
ENV = {
    **os.environ,
    "HF_HUB_OFFLINE": "1",
    "WANDB_MODE": "offline",
    "WANDB_SILENT": "true",
    "PYTHONPATH": str(REPO / "src"),  # this checkout's code, whichever checkout is installed
}


def _cmd(tmp: Path, *overrides: str, multirun: bool = False) -> list[str]:
    return [
        sys.executable,
        "-m",
        "run",
        *(["-m"] if multirun else []),
        "backbone=fake",
        "logger=none",
        f"dataset.limit={LIMIT}",
        f"paths.data_dir={DATA_DIR}",
        f"paths.model_dir={MODEL_CACHE}",
        f"paths.cache_dir={tmp / 'cache'}",
        f"paths.output_dir={tmp / 'out'}",
        *overrides,
    ]


def _popen(cmd: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        cmd, cwd=REPO, env=env or ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(p: subprocess.Popen, timeout: float = 240) -> tuple[int, str, str]:
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def _job(tmp: Path, name: str, *overrides: str) -> Path:
    """One judging job in process (fake backend) into ``tmp/name``."""
    from promptlottery.stages import run_stage as run

    out = tmp / name
    run(compose(["backbone=fake", f"dataset.limit={LIMIT}", *overrides], tmp_path=tmp), out)
    return out


# -- 1. one job, one directory --------------------------------------------------------------------------
def test_parallel_launches_in_one_second_get_their_own_dirs(tmp_path):
    procs = [_popen(_cmd(tmp_path, f"judge.variant={v}")) for v in ("P1", "P2", "P1")]
    procs += [_popen(_cmd(tmp_path, "judge.variant=P1,P2", multirun=True)) for _ in range(2)]
    for p in procs:
        rc, _, err = _finish(p)
        assert rc == 0, err[-3000:]
    runs = sorted((tmp_path / "out" / "judge" / "runs").iterdir())
    assert len(runs) == 3
    for d in runs:  # each dir holds one job: its overrides, results and judgments agree
        (override,) = yaml.safe_load((d / ".hydra" / "overrides.yaml").read_text())[-1:]
        rec = json.loads((d / "results.json").read_text())
        variants = set(pd.read_parquet(d / "judgments.parquet")["variant"])
        assert override == f"judge.variant={rec['config']['judge']['variant']}" and variants == {
            rec["config"]["judge"]["variant"]
        }
        assert (d / "run.log").read_text().count("condition done") == 1  # one process per log
    sweeps = sorted((tmp_path / "out" / "judge" / "multiruns").iterdir())
    assert len(sweeps) == 2
    for s in sweeps:
        summary = json.loads((s / "sweep_summary.json").read_text())
        assert summary["n_planned"] == 2 and summary["status_counts"] == {"ok": 2}


def test_a_job_refuses_a_dir_that_holds_another_jobs_outputs(tmp_path):
    from promptlottery.tracking.jobdir import OutputDirError, claim_output_dir, release_output_dir

    d = tmp_path / "job"
    claim_output_dir(d, {"judge": {"variant": "P1"}})
    (d / "results.json").write_text("{}")
    release_output_dir(d)
    with pytest.raises(OutputDirError, match="holds another job's outputs"):
        claim_output_dir(d, {"judge": {"variant": "P2"}})
    claim_output_dir(d, {"judge": {"variant": "P1"}})  # the same job re-run: a resume
    assert not (d / "results.json").exists()  # its stale outputs are gone before it writes
    release_output_dir(d)
    legacy = tmp_path / "legacy"  # written before claims existed: its results.json names the job
    legacy.mkdir()
    (legacy / "results.json").write_text(json.dumps({"status": "ok", "config": {"judge": {"variant": "P1"}}}))
    with pytest.raises(OutputDirError, match="did not record its config"):
        claim_output_dir(legacy, {"judge": {"variant": "P2"}})
    claim_output_dir(legacy, {"judge": {"variant": "P1"}})
    release_output_dir(legacy)
    with open(d / ".job.lock", "a+") as held:  # another process holds the dir
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(OutputDirError, match="in use by another running job"):
            claim_output_dir(d, {"judge": {"variant": "P1"}})
    # through the CLI: a P2 run pointed at a finished P1 run's dir is refused and changes nothing there
    first = _cmd(tmp_path, f"hydra.run.dir={tmp_path / 'shared'}")
    assert _finish(_popen(first))[0] == 0
    before = (tmp_path / "shared" / "results.json").read_bytes()
    rc, _, err = _finish(_popen([*first, "judge.variant=P2"]))
    assert rc == 2 and "holds another job's outputs" in err.strip().splitlines()[-1]
    assert (tmp_path / "shared" / "results.json").read_bytes() == before


# -- 2. only finished jobs are analysed ---------------------------------------------------------------------
_KILL_BETWEEN_WRITES = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from tests.conftest import compose
import promptlottery.stages as stages
import promptlottery.tracking.job as job  # every stage writes its results.json through job.StageJob
real = job.write_results
def killed(path, **kw):
    if kw.get("status") == "ok":
        os.kill(os.getpid(), signal.SIGKILL)  # the parquet is written, results.json is not
    return real(path, **kw)
job.write_results = killed
stages.run_stage(compose(["backbone=fake", "dataset.limit={limit}", "judge.variant=P2"], tmp_path=Path({tmp!r})), {out!r})
"""


def test_sigkill_between_writes_and_stale_parquets_are_not_analysed(tmp_path):
    good = _job(tmp_path, "grid/p1", "judge.variant=P1")
    killed = tmp_path / "grid" / "p2"
    script = _KILL_BETWEEN_WRITES.format(repo=str(REPO), limit=LIMIT, tmp=str(tmp_path), out=str(killed))
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=ENV, capture_output=True, timeout=240)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert (killed / "judgments.parquet").exists() and not (killed / "results.json").exists()
    with pytest.raises(AnalysisError, match=r"P2 missing: job did not finish \(a judgments.parquet without"):
        load_judgments(str(tmp_path / "grid"))
    partial: list = []
    df = load_judgments(str(tmp_path / "grid"), allow_partial=True, problems=partial)
    assert set(df["variant"]) == {"P1"} and "partial: P2 missing" in next(iter(partial[0].values()))
    # a stale parquet: another job's judgments next to a results.json that says ok
    stale = tmp_path / "grid2" / "p3"
    _job(tmp_path, "grid2/p3", "judge.variant=P3")
    shutil.copy(good / "judgments.parquet", stale / "judgments.parquet")
    with pytest.raises(AnalysisError, match="not the one results.json describes"):
        load_judgments(str(tmp_path / "grid2"))


def test_failed_job_in_a_sweep_is_reported_not_analysed(tmp_path):
    from promptlottery.analysis.lottery.options import LotteryOptions
    from promptlottery.analysis.stage import run_lottery

    sweep = tmp_path / "sweep"
    # P2 alone has the system prompt "You are an expert in comparing meaning.": the fake backend refuses it
    cmd = _cmd(
        tmp_path,
        "judge.variant=P1,P2,P3",
        "+backbone.backend.fail_on=[expert in comparing]",
        "max_retries=0",
        f"hydra.sweep.dir={sweep}",
        multirun=True,
    )
    rc, _, err = _finish(_popen(cmd))
    assert rc != 0
    summary = json.loads((sweep / "sweep_summary.json").read_text())
    assert summary["status_counts"] == {"ok": 2, "failed": 1}
    with pytest.raises(AnalysisError, match=r"n/a: P2 missing: job failed: .*refused request"):
        load_judgments(str(sweep))
    # the gate and compare read the same way
    from promptlottery.analysis.compare.runs import compare
    from promptlottery.gating.data import load_examples

    with pytest.raises(AnalysisError, match="P2 missing: job failed"):
        load_examples(str(sweep))
    with pytest.raises(
        ValueError, match="status='failed'.*compare reads only runs whose results.json says ok"
    ):
        compare([str(d) for d in sorted(sweep.glob("[0-9]_*"))])
    opts = {"runs": str(sweep), "n_resamples": 20, "n_permutations": 20, "embeddings": "none", "plots": False}
    rec = run_lottery(LotteryOptions.from_dict({**opts, "allow_partial": True}), tmp_path / "analysis")
    report = (tmp_path / "analysis" / "report.md").read_text()
    assert "PARTIAL GRID" in report and "P2 missing: job failed" in report
    assert rec["partial"] is True and rec["n_judgments"] == 2 * LIMIT


# -- 3. a killed sweep lists what it planned ----------------------------------------------------------------
def test_killed_sweep_lists_its_missing_jobs(tmp_path):
    sweep = tmp_path / "sweep"
    cmd = _cmd(
        tmp_path,
        "judge.variant=P1,P2,P3",
        "+backbone.backend.delay_s=2",
        f"hydra.sweep.dir={sweep}",
        multirun=True,
    )
    p = _popen(cmd)
    deadline = time.time() + 120
    while not list(sweep.glob("1_*")) and p.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert p.poll() is None, "the sweep ended before its second job could be killed"
    p.kill()  # SIGKILL in the second job
    p.communicate()
    summary = json.loads((sweep / "sweep_summary.json").read_text())
    assert summary["n_planned"] == 3 and summary["n_jobs"] == 3
    assert summary["status_counts"] == {"ok": 1, "missing": 2}
    with pytest.raises(AnalysisError, match=r"P2 missing: .*P3 missing: job never ran"):
        load_judgments(str(sweep))


# -- 4. backend identity, not backbone name -----------------------------------------------------------------
def test_two_backends_under_one_backbone_name_is_an_error(tmp_path):
    _job(tmp_path, "runs/a", "judge.variant=P1")
    b = _job(tmp_path, "runs/b", "judge.variant=P1", "backbone.backend.model=fake-B")
    with pytest.raises(AnalysisError, match=r"backbone name 'fake' stands for two backends: .*fake-B"):
        load_judgments(str(tmp_path / "runs"))
    # under their own names both are kept (300 -> 150 was the silent loss)
    shutil.rmtree(b)
    _job(tmp_path, "runs/b", "judge.variant=P1", "backbone.backend.model=fake-B", "backbone.name=fakeB")
    assert len(load_judgments(str(tmp_path / "runs"))) == 2 * LIMIT


def test_mixed_dtypes_of_one_backbone_need_an_option(tmp_path):
    for v, dtype in (("P1", "float32"), ("P2", "bfloat16")):
        d = _job(tmp_path, f"runs/{v}", f"judge.variant={v}")
        rec = json.loads((d / "results.json").read_text())
        rec["backend"]["dtype"] = dtype  # as a transformers job records it on each CPU kind
        (d / "results.json").write_text(json.dumps(rec))
    with pytest.raises(AnalysisError, match="mixes dtypes float32 .* and bfloat16 .*allow_mixed_dtypes"):
        load_judgments(str(tmp_path / "runs"))
    assert len(load_judgments(str(tmp_path / "runs"), allow_mixed_dtypes=True)) == 2 * LIMIT


# -- 5. secrets ---------------------------------------------------------------------------------------------
def test_planted_secrets_are_in_no_file_a_run_writes(tmp_path):
    secret = "sk-planted" + secrets.token_hex(8)
    env = {**ENV, "PL_SECRET": secret}
    cmd = _cmd(
        tmp_path,
        "logger=wandb",
        f"logger.dir={tmp_path / 'wandb'}",
        "judge.variant=P1,P2",
        "+backbone.backend.extra_body.api_key=${oc.env:PL_SECRET}",
        "+backbone.backend.base_url=http://user:${oc.env:PL_SECRET}@127.0.0.1:9/v1",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        multirun=True,
    )
    rc, out, err = _finish(_popen(cmd, env))
    assert rc == 0, err[-3000:]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    kinds = {p.name for p in files}
    assert {"results.json", "sweep_summary.json", "run.log", "config.yaml", "multirun.yaml"} <= kinds
    assert any(p.suffix == ".wandb" for p in files)  # the W&B offline run log
    leaks = [str(p) for p in files if secret.encode() in p.read_bytes()]
    assert not leaks and secret not in out + err
    rec = json.loads(next((tmp_path / "sweep").glob("0_*/results.json")).read_text())
    assert rec["backend"]["extra_body"]["api_key"] == "***"
    assert rec["config"]["backbone"]["backend"]["base_url"] == "http://***@127.0.0.1:9/v1"
    # a literal secret on the command line is refused before Hydra writes anything
    literal = _cmd(tmp_path / "lit", f"+backbone.backend.extra_body.api_key={secret}")
    rc, out, err = _finish(_popen(literal))
    assert rc == 2 and "api_key_env" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "lit").exists() and secret not in out + err


def test_redaction_by_key_name_and_url_userinfo():
    from promptlottery.tracking.secrets import redact, redact_text

    rec = redact(
        {
            "api_key": "a",
            "hf_token": "b",
            "client_secret": "c",
            "db_password": "d",
            "Authorization": "Bearer e",
            "api_key_env": "OPENAI_API_KEY",
            "max_new_tokens": 8,
            "token_count": "tokenizer",
            "url": "https://u:p@h/x?key=f",
        }
    )
    assert [rec[k] for k in ("api_key", "hf_token", "client_secret", "db_password", "Authorization")] == [
        "***"
    ] * 5
    assert (
        rec["api_key_env"] == "OPENAI_API_KEY"
        and rec["max_new_tokens"] == 8
        and rec["token_count"] == "tokenizer"
    )
    assert rec["url"] == "https://***@h/x?key=***"
    assert (
        redact_text("retry error=401 api_key=sk-x url=http://a:b@h")
        == "retry error=401 api_key=*** url=http://***@h"
    )


# -- 6. bad values ------------------------------------------------------------------------------------------
BAD = [
    ("dataset.limit=-5", "dataset.limit=-5: must be a positive number of items, or null"),
    ("dataset.limit=0", "dataset.limit=0: must be a positive number of items"),
    ("n_samples=0", "n_samples=0: must be an integer >= 1"),
    ("max_retries=-1", "max_retries=-1: must be an integer >= 0"),
    ("decoding.temperature=-1", "decoding.temperature=-1.0: must be >= 0"),
    ("+judge.variantt=P2", "unknown config key judge.variantt (valid keys under judge: "),
    (
        "repeat_source=dtype",
        "repeat_source='dtype': must be one of none, batch (a dtype repeat source is not",
    ),
    ("repeat_source=batch", "repeat_source=batch needs n_samples >= 2"),
]


@pytest.mark.parametrize(("override", "message"), BAD)
def test_bad_value_is_a_one_line_config_error(override, message, tmp_path):
    from promptlottery.config import check_config
    from promptlottery.errors import ConfigError
    from promptlottery.stages import run_stage as run

    cfg = compose(["backbone=fake", override], tmp_path=tmp_path)
    with pytest.raises(ConfigError) as e:
        check_config(cfg)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    with pytest.raises(ConfigError):
        run(cfg, tmp_path / "job")
    assert not (tmp_path / "job").exists()  # nothing written


def test_bad_values_on_the_command_line_fail_in_one_line_without_outputs(tmp_path):
    chosen = [BAD[0], BAD[4], BAD[5]]
    procs = [
        _popen(_cmd(tmp_path, o, f"hydra.run.dir={tmp_path / str(i)}")) for i, (o, _) in enumerate(chosen)
    ]
    for i, ((_, message), p) in enumerate(zip(chosen, procs)):
        rc, _, err = _finish(p)
        assert rc == 2 and err.strip().splitlines()[-1].startswith(f"error: {message}"), err[-2000:]
        assert not (tmp_path / str(i) / "judgments.parquet").exists()
        assert json.loads((tmp_path / str(i) / "results.json").read_text())["status"] == "failed"


def test_read_only_cache_serves_a_cached_run_and_refuses_new_calls(tmp_path, monkeypatch):
    from promptlottery.calls import cache_store as cache_mod
    from promptlottery.calls.cache import CacheError

    _job(tmp_path, "first", "judge.variant=P1")
    cache_dir = tmp_path / "cache"
    cache_dir.chmod(0o555)
    try:
        if os.geteuid() == 0:  # root writes anywhere: make the cache see what a user would
            monkeypatch.setattr(cache_mod.os, "access", lambda *a, **k: False)
        again = _job(tmp_path, "again", "judge.variant=P1")
        rec = json.loads((again / "results.json").read_text())
        assert rec["status"] == "ok" and rec["calls"]["cache_hits"] == LIMIT
        with pytest.raises(CacheError, match=f"call cache dir {cache_dir} is read-only and {LIMIT} calls"):
            _job(tmp_path, "new", "judge.variant=P2")
        assert not (tmp_path / "new" / "judgments.parquet").exists()
    finally:
        cache_dir.chmod(0o755)


def test_corrupt_cache_file_is_named(tmp_path):
    from promptlottery.calls.cache import CacheError

    db = tmp_path / "cache" / "calls.sqlite"
    db.parent.mkdir()
    db.write_bytes(b"not a database\n" * 300)
    with pytest.raises(CacheError, match=f"call cache {db} is not a usable SQLite database"):
        _job(tmp_path, "job", "judge.variant=P1")
    assert not (tmp_path / "job" / "judgments.parquet").exists()


def test_non_utf8_bytes_in_a_dataset_name_file_and_line(tmp_path):
    from promptlottery.data import load_items
    from promptlottery.data.schema import DatasetError

    lines = (DATA_DIR / "stsb" / "sts-dev.tsv").read_bytes().split(b"\n")[:5]
    lines[2] = lines[2].replace(b" ", b" \xff\xfe ", 1)
    path = tmp_path / "stsb" / "sts-dev.tsv"
    path.parent.mkdir()
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(DatasetError, match=rf"^{path}:3: not valid utf-8 text"):
        load_items("stsb", data_dir=tmp_path)


# -- 7. which weights answered ------------------------------------------------------------------------------
def test_two_checkpoints_in_one_path_never_share_cache_keys(tmp_path):
    from promptlottery.backends.base import Decoding
    from promptlottery.backends.transformers_local import TransformersBackend
    from promptlottery.data import load_items
    from promptlottery.judging.runner import Condition, build_requests
    from promptlottery.prompts import load_group

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    (ckpt / "model.safetensors").write_bytes(b"\0" * 100)
    items = load_items("stsb", data_dir=DATA_DIR)[:1]
    cond = Condition("stsb", "semantic_alignment", "G12", "P1", "local", "similarity")

    def key(backend) -> str:
        return build_requests(items, cond, load_group("G12"), backend, Decoding())[0][1].key

    first = TransformersBackend(str(ckpt))
    ident = first.identity()
    assert ident["revision"].startswith("files-") and ident["dtype"] == "float32"  # auto on a CPU
    (ckpt / "model.safetensors").write_bytes(b"\0" * 200)  # retrained, saved to the same path
    second = TransformersBackend(str(ckpt))
    assert second.identity()["revision"] != ident["revision"] and key(second) != key(first)
    assert TransformersBackend(str(ckpt), revision="v2").identity()["revision"] == "v2"


def test_a_user_name_in_a_url_is_no_credential_but_a_password_is():
    from promptlottery.tracking.secrets import secret_override

    assert secret_override("paths.cache_url=postgresql://postgres@127.0.0.1:5432/db") is None
    assert "credentials in a URL" in secret_override("paths.cache_url=postgresql://postgres:pw@127.0.0.1/db")

"""Fixtures for the `cluster` tests: a one-node SLURM cluster and a PostgreSQL server on loopback.

Started by ``scripts/local_slurm.sh`` / ``scripts/local_postgres.sh`` in their own dirs and on their
own ports (so they do not meet a cluster a person started by hand), stopped when the session ends.
They need root and the Debian packages that ``make setup-cluster`` installs; ``make test-cluster``
runs them. Without those they fail and say so: a skipped cluster test would read as a pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import REPO

SLURM_ENV = {
    "LOCAL_SLURM_DIR": "/tmp/promptlottery-slurm-test",
    "LOCAL_SLURM_CTLD_PORT": "16817",
    "LOCAL_SLURM_SLURMD_PORT": "16818",
    "LOCAL_SLURM_DBD_PORT": "16819",
    "LOCAL_SLURM_DB_PORT": "16306",
}
PG_ENV = {"LOCAL_PG_DIR": "/tmp/promptlottery-pg-test", "LOCAL_PG_PORT": "15432"}


def _script(name: str, action: str, env: dict[str, str]) -> str:
    proc = subprocess.run(
        [str(REPO / "scripts" / name), action],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        pytest.fail(f"scripts/{name} {action} failed (rc={proc.returncode}): {proc.stderr.strip()[-800:]}")
    return proc.stdout


def _require(*binaries: str) -> None:
    if os.geteuid() != 0:
        pytest.fail("cluster tests start system services: run them as root (`make test-cluster`)")
    missing = [b for b in binaries if shutil.which(b) is None and not os.path.exists(f"/usr/sbin/{b}")]
    if missing:
        pytest.fail(f"missing {missing}: `make setup-cluster` installs them")


@pytest.fixture(scope="session")
def slurm():
    """The environment (SLURM_CONF, PYTHONPATH) under which sbatch/squeue/scancel reach the cluster."""
    _require("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd")
    _script("local_slurm.sh", "stop", SLURM_ENV)  # leftovers of an interrupted session
    out = _script("local_slurm.sh", "start", SLURM_ENV)
    conf = next(line.split("=", 1)[1] for line in out.splitlines() if line.startswith("export SLURM_CONF="))
    # the jobs run this checkout's code with this interpreter (submitit uses sys.executable)
    path = os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH")) if p)
    yield {
        **os.environ,
        "SLURM_CONF": conf,
        "PYTHONPATH": path,
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": "offline",
    }
    _script("local_slurm.sh", "stop", SLURM_ENV)


@pytest.fixture(scope="session")
def postgres_url():
    """A fresh database on a throwaway server: postgresql://postgres@127.0.0.1:15432/promptlottery."""
    _require("runuser")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.fail("psycopg is missing: pip install -e '.[postgres]' (`make setup-cluster`)")
    _script("local_postgres.sh", "stop", PG_ENV)
    out = _script("local_postgres.sh", "start", PG_ENV)
    yield out.strip().splitlines()[-1]
    _script("local_postgres.sh", "stop", PG_ENV)

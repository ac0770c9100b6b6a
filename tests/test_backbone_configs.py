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


@pytest.mark.parametrize("path", BACKBONES, ids=lambda p: p.stem)
def test_backend_keys_are_constructor_arguments(path):
    backend = yaml.safe_load(path.read_text())["backend"]
    cls = _locate(backend["_target_"])
    params = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        pytest.skip(f"{cls.__name__} takes **kwargs")
    unknown = sorted(k for k in backend if k != "_target_" and k not in params)
    assert not unknown, f"{path.name}: {cls.__name__} does not take {unknown}"


def test_the_check_sees_an_unknown_key(tmp_path):
    # the same check on a copy of a server config with a key its class does not take
    spec = yaml.safe_load((REPO / "conf" / "backbone" / "smollm2_vllm_server.yaml").read_text())
    spec["backend"]["max_retries"] = 5
    cls = _locate(spec["backend"]["_target_"])
    params = inspect.signature(cls.__init__).parameters
    assert "max_retries" not in params

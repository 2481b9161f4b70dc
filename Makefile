# The front door. `make cook` and `make test` each work alone on a fresh clone.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv cook train-demo test test-slow test-browser lint typecheck bench fuzz clean schemas

venv: $(STAMP)

# torch first, pinned to the local CPU wheel, so nothing later pulls a CUDA build; then cook with
# every extra (test, plot, train, bench), so the tests, `cook stats --plot` and the benches all run.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test,plot,train,bench]'
	touch $(STAMP)

cook: $(STAMP)
	$(BIN)/cook run pipelines/demo.yaml --output out/demo --overwrite

# Cooks the demo into out/demo unless the same run finished there (cook run recognises it: `make cook`
# then `make train-demo` cooks once), then SFT steps on CPU through cook.reader.
train-demo: $(STAMP)
	$(BIN)/python -m cook.train.demo --pipeline pipelines/demo.yaml --out out/demo

# The suite without the `slow` tests (real 128k vocabularies, twenty random interrupts, clusters of
# Ray nodes) and the `browser` ones: a few minutes, each test under pytest-timeout, in two processes
# (pytest-xdist, a test file to a process: 3:09 here on 2 cores, 5:12 in one). `make test-slow` runs
# the slow ones, in one process (their kill tests count processes); CI runs both. `make test-browser`
# runs the browser ones.
test: $(STAMP)
	$(BIN)/python -m pytest tests -m "not slow and not browser" -n 2 --dist loadfile

test-slow: $(STAMP)
	$(BIN)/python -m pytest tests -m slow

# The pages of `cook inspect --html` / `cook stats --html` in headless Chromium (Debian's chromium,
# installed when missing; needs root and the Debian mirror). `make test` leaves them to this target.
test-browser: $(STAMP)
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)
	$(BIN)/python -m pytest tests -m browser

lint: $(STAMP)
	$(BIN)/ruff check cook tests bench
	$(BIN)/ruff format --check cook tests bench

typecheck: $(STAMP)
	$(BIN)/mypy cook

bench: $(STAMP)
	$(BIN)/python -m bench.run_all

fuzz: $(STAMP)
	COOK_FUZZ_EXAMPLES=20000 $(BIN)/python -m pytest tests/adversarial -k fuzz

clean:
	rm -rf $(VENV) out .pytest_cache

# schemas/pipeline.schema.json is derived from cook/config.py; a test keeps them equal.
schemas: $(STAMP)
	$(BIN)/python -c "import json, cook.config as c; print(json.dumps(c.pipeline_schema(), indent=2))" > schemas/pipeline.schema.json

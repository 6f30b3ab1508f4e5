# The two commands a newcomer needs: `make run` starts the gateway, `make test` runs the tests.
# Both create the virtual environment in .venv on first use and reinstall when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: run test bench check doctor clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-run: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

## run: start the gateway (config and state in $$SWITCHBOARD_HOME, default ~/.switchboard)
run: $(VENV)/.installed-run
	$(BIN)/switchboard run $(ARGS)

## check: validate the configuration and show what `run` would start
check: $(VENV)/.installed-run
	$(BIN)/switchboard check $(ARGS)

## doctor: check config, permissions, database, disk, platform tokens and the model
doctor: $(VENV)/.installed-run
	$(BIN)/switchboard doctor $(ARGS)

## test: the whole test suite (PYTEST_ARGS="-k name" to narrow it)
test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## bench: every benchmark (BENCH_ARGS="--quick" for the short versions)
bench: $(VENV)/.installed-dev
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info

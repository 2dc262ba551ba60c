# Two entry points (see README): `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo prep test test-all lint bench clean

setup: $(STAMP)

# torch first (the CPU build, pinned), then the project, so torch>=2.5 in pyproject is already met.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev,corpus]'
	touch $(STAMP)

prep: setup
	$(BIN)/musictx-prep

demo: setup
	bash scripts/demo.sh

lint: setup
	$(BIN)/ruff check musictx data_prep tests

test: lint
	$(BIN)/pytest -q

test-all: lint
	$(BIN)/pytest -q -m "slow or not slow"

clean:
	rm -rf $(VENV) outputs/prep outputs/train outputs/generate

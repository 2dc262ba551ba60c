# Entry points (see README): `make continue` (the main job: the shipped model continues the bundled motif),
# `make test`, and `make demo` (train a small model from scratch on Bach chorales). All create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup continue demo prep test test-all lint bench clean

setup: $(STAMP)

# torch first (the CPU build, pinned), then the project, so torch>=2.5 in pyproject is already met.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev,corpus,audio,app,gpu,eval]'
	touch $(STAMP)

# A shipped model (pop: the motif is metrical) continues musictx/assets/motif.mid: MIDI + piano roll (+ WAV) in outputs/continue/.
continue: setup
	OMP_WAIT_POLICY=PASSIVE $(BIN)/musictx-generate seed_midi=musictx/assets/motif.mid length_seconds=20 \
	    num_samples=2 seed=7 output_dir=outputs/continue hydra.run.dir=outputs/continue

prep: setup
	$(BIN)/musictx-prep

# DEMO_ARGS: musictx-train overrides, e.g. make demo DEMO_ARGS="trainer.max_steps=20" for a first look.
demo: setup
	bash scripts/demo.sh $(DEMO_ARGS)

lint: setup
	$(BIN)/ruff check musictx bench data_prep tests

# Both cores: pytest-xdist runs the tests in two worker processes (each test still uses one torch thread);
# worksteal: a worker that runs out takes queued tests from the other, so no long test runs alone at the end.
test: lint
	OMP_WAIT_POLICY=PASSIVE $(BIN)/pytest -q -n 2 --dist worksteal

test-all: lint
	OMP_WAIT_POLICY=PASSIVE $(BIN)/pytest -q -n 2 --dist worksteal -m "slow or not slow"

clean:
	rm -rf $(VENV) outputs/prep outputs/train outputs/generate outputs/continue

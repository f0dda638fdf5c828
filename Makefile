# Two commands on a fresh machine: `make lab` and `make test`. Each creates .venv with
# python3 -m venv if it is missing and installs pagedkv into it (editable, with the extras
# it needs) again only when pyproject.toml changed.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_NB := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: lab test test-fast notebooks bench demo lint install clean train-model

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "pagedkv needs Python >= 3.10; found " + sys.version.split()[0])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[lab,test,serve]'
	@touch $(STAMP)

install: $(STAMP)

# tests/browser starts JupyterLab with these same arguments (on a temporary copy of notebooks/).
LAB_ARGS := --ServerApp.root_dir=notebooks --LabApp.default_url=/lab/tree/00_start_here.ipynb

# Jupyter refuses to start as root (containers, Binder-like machines) without --allow-root.
ROOT_ARG := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP)
	$(BIN)/jupyter lab $(LAB_ARGS) $(ROOT_ARG)

test: $(STAMP)
	$(BIN)/python -m pytest tests notebooks $(PYTEST_NB)

test-fast: $(STAMP)
	$(BIN)/python -m pytest tests -m 'not slow'

# Re-execute every notebook in place so committed outputs never drift from the code;
# widget state and cell timings are not saved (they change on every run).
notebooks: $(STAMP)
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.store_widget_state=False --ExecutePreprocessor.record_timing=False \
		notebooks/[0-9]*.ipynb

demo: $(STAMP)
	$(BIN)/python -m pagedkv demo

bench: $(STAMP)
	$(BIN)/python -m pagedkv bench ops

# Rebuild pagedkv/data/tinylm.npz + tinylm.json from the frozen corpus and a fixed seed
# (~10 minutes on one CPU core). torch lives in its own .venv-train: the lab never needs it.
TRAIN_VENV := .venv-train
train-model:
	@test -x $(TRAIN_VENV)/bin/python || $(PYTHON) -m venv $(TRAIN_VENV)
	$(TRAIN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[train]'
	$(TRAIN_VENV)/bin/python tools/train_model.py

lint: $(STAMP)
	@$(BIN)/python -m ruff --version >/dev/null 2>&1 || $(BIN)/python -m pip install --quiet ruff
	$(BIN)/python -m ruff check pagedkv tests

clean:
	rm -rf $(VENV) build .pytest_cache .hypothesis

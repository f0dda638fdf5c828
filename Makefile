# Two commands on a fresh machine: `make lab` and `make test`. Each creates .venv with
# python3 -m venv if it is missing and installs pagedkv into it (editable, with the extras
# it needs) again only when pyproject.toml changed.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_NB := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg
# The class hub's proxy (`make hub`, below), from npm into a project-local folder.
NPM       := $(shell command -v npm 2>/dev/null)
HUB_NODE  := build/hub-node
HUB_PROXY := $(HUB_NODE)/node_modules/.bin/configurable-http-proxy

.PHONY: lab test test-fast notebooks records assignments autograde feedback hub hub-proxy bench demo lint install clean train-model

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "pagedkv needs Python >= 3.10; found " + sys.version.split()[0])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[lab,test,serve,teach,dev,hub]'
	@touch $(STAMP)

install: $(STAMP)

# JupyterLab serves the repository's root, as JupyterHub and Binder do, so the notebooks' links
# into docs/ (../docs/vllm_map.md) open; it starts on the first notebook. tests/browser starts
# JupyterLab with these same arguments (on a temporary copy of notebooks/ and docs/).
LAB_ARGS := --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks/00_start_here.ipynb

# Jupyter refuses to start as root (containers, Binder-like machines) without --allow-root.
ROOT_ARG := $(if $(filter 0,$(shell id -u)),--allow-root)

# No "Jupyter news?" toast and no update check over a learner's notebook, and code lines
# wrapped at the cell's width (a projector shows no sideways scroll): JupyterLab reads these
# defaults from the environment's settings folder (its overrides.json).
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json
$(LAB_OVERRIDES): classroom/lab_overrides.json $(STAMP)
	@mkdir -p $(dir $@)
	cp $< $@

lab: $(STAMP) $(LAB_OVERRIDES)
	$(BIN)/jupyter lab $(LAB_ARGS) $(ROOT_ARG)

# Both cores (pytest-xdist): a worker takes a whole file at a time (--dist loadfile), so a
# notebook's cells run in order in one kernel and a file's module fixtures are built once.
# The browser tests run after, alone: one JupyterLab and one Chromium, with no notebook kernel
# competing for the cores. CI=true runs hypothesis's full example counts, otherwise a fifth of
# them (tests/hypothesis_profiles.py).
XDIST := -n auto --dist loadfile

test: $(STAMP) $(LAB_OVERRIDES) $(if $(NPM),$(HUB_PROXY))
	$(BIN)/python -m pytest tests notebooks -m 'not browser' $(PYTEST_NB) $(XDIST)
	$(BIN)/python -m pytest tests -m browser -p no:nbval

# The developer loop: no slow or browser tests, no notebooks; nor nbval's plugin, nor the browser
# tests' modules, which import nbformat (its jsonschema format checkers cost ~2 s per process).
test-fast: $(STAMP)
	$(BIN)/python -m pytest tests -m 'not slow and not browser' -p no:nbval --ignore=tests/browser $(XDIST)

# Record the quick runs notebooks draw without running them (notebook 11's serving run, ~15 s of
# CPU): pagedkv/data/<name>_quick.json; tests/test_serving.py checks the record against a fresh
# run. Then re-execute the notebooks.
records: $(STAMP)
	$(BIN)/python -c "from pagedkv.bench import record; print(record('serving'))"

# Re-execute every notebook in place so committed outputs never drift from the code;
# widget state and cell timings are not saved (they change on every run).
notebooks: $(STAMP)
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.store_widget_state=False --ExecutePreprocessor.record_timing=False \
		notebooks/[0-9]*.ipynb notebooks/exercises/*.ipynb

# nbgrader, with the course in build/ and notebooks/exercises/ as the assignment "exercises"
# (docs/teaching.md): `make assignments` writes the student version (no solutions, no outputs)
# to build/release/exercises/; put each student's notebook in build/submitted/<student>/exercises/,
# then `make autograde` (scores in build/grades.csv) and `make feedback` (build/feedback/).
# nbgrader runs `alembic` from PATH, hence the venv's bin/ first; classroom/nbgrader_config.py
# (found through JUPYTER_CONFIG_PATH) leaves the picture cells out of the graded run.
NBGRADER := PATH="$(abspath $(BIN)):$$PATH" JUPYTER_CONFIG_PATH="$(CURDIR)/classroom" $(BIN)/nbgrader
COURSE_ARGS := --CourseDirectory.root=$(CURDIR) --CourseDirectory.source_directory=notebooks \
	--CourseDirectory.release_directory=build/release --CourseDirectory.submitted_directory=build/submitted \
	--CourseDirectory.autograded_directory=build/autograded --CourseDirectory.feedback_directory=build/feedback \
	--CourseDirectory.db_url=sqlite:///$(CURDIR)/build/gradebook.db

assignments: $(STAMP)
	@mkdir -p build
	$(NBGRADER) generate_assignment exercises --force $(COURSE_ARGS)

# A notebook copied into build/submitted/ after its last grading is regraded (classroom/
# stamp_submissions.py gives it a newer timestamp.txt, which nbgrader compares); FORCE=1
# regrades every submission.
FORCE_ARG := $(if $(FORCE),--force)

autograde: $(STAMP)
	$(BIN)/python classroom/stamp_submissions.py build/submitted
	$(NBGRADER) autograde exercises $(FORCE_ARG) $(COURSE_ARGS)
	$(NBGRADER) export --to build/grades.csv $(COURSE_ARGS)

feedback: $(STAMP)
	$(NBGRADER) generate_feedback exercises $(FORCE_ARG) $(COURSE_ARGS)

# `make hub`: a JupyterHub for one class on this machine, to try the nbgrader round trip
# (release, fetch, submit, collect, autograde, feedback) before a course: classroom/hub.py
# prints the address and the trial accounts; Ctrl-C stops it. Options (port, number of students):
# make hub HUB_ARGS="--port 8001 --students 5". tests/browser/test_hub_class.py
# drives the same hub in Chromium. Its proxy, configurable-http-proxy, comes from npm at the
# version classroom/package-lock.json pins, into build/hub-node/ (no global install);
# `make test` installs it too where npm exists (the hub test is skipped without it, outside CI).
$(HUB_PROXY): classroom/package.json classroom/package-lock.json
	@test -n "$(NPM)" || { echo "the hub's proxy needs node and npm (Debian: apt-get install -y nodejs npm)"; exit 1; }
	@mkdir -p $(HUB_NODE)
	cp classroom/package.json classroom/package-lock.json $(HUB_NODE)/
	cd $(HUB_NODE) && npm ci --no-audit --no-fund --loglevel=error
	@touch $(HUB_PROXY)

hub-proxy: $(HUB_PROXY)

HUB_ARGS ?=
hub: $(STAMP) $(HUB_PROXY) $(LAB_OVERRIDES)
	$(BIN)/python classroom/hub.py $(HUB_ARGS)

demo: $(STAMP)
	$(BIN)/python -m pagedkv demo

bench: $(STAMP)
	$(BIN)/python -m pagedkv bench ops

# The pinned ruff, mypy and import-linter come with the dev extra (pyproject.toml), installed
# with the rest; .pre-commit-config.yaml runs the same four commands.

# Rebuild pagedkv/data/tinylm.npz + tinylm.json from the frozen corpus and a fixed seed
# (~10 minutes on one CPU core). torch lives in its own .venv-train: the lab never needs it.
TRAIN_VENV := .venv-train
train-model:
	@test -x $(TRAIN_VENV)/bin/python || $(PYTHON) -m venv $(TRAIN_VENV)
	$(TRAIN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[train]'
	$(TRAIN_VENV)/bin/python tools/train_model.py

lint: $(STAMP)
	$(BIN)/python -m ruff check pagedkv tests classroom
	$(BIN)/python -m ruff format --check pagedkv tests classroom
	$(BIN)/python -m mypy pagedkv classroom
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) build .pytest_cache .hypothesis

# Two entry points, both safe to run again and again:
#   make lab   set up .venv and open the course in JupyterLab
#   make test  set up .venv and run every check (what CI runs)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXTRAS := test,lab,browser

.PHONY: lab test install lint unit notebooks clean

lab: install
	$(VENV)/bin/jupyter lab notebooks/

test: install lint unit notebooks

install: $(STAMP)

# Re-install whenever the dependency list or the lock file changes.
$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "rope_lab needs Python 3.10 or newer, found " + sys.version.split()[0]'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --constraint constraints.txt --editable ".[$(EXTRAS)]"
	touch $(STAMP)

lint: install
	$(PY) -m ruff check .

unit: install
	$(PY) -m pytest tests

notebooks: install
	$(PY) -m pytest --nbval-lax --nbval-current-env -p no:cacheprovider notebooks

clean:
	rm -rf $(VENV) build .pytest_cache

# Two entry points, both safe to run again and again:
#   make lab   set up .venv and open the course in JupyterLab
#   make test  set up .venv and run every check (what CI runs)
# and one more:
#   make book  execute every notebook and write the course as a static site in build/book/
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXTRAS := test,lab,models,browser

.PHONY: lab test install lint unit notebooks browser chromium book clean

# Jupyter refuses to run as root without --allow-root (containers, CI images).
lab: install
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/

test: install lint unit notebooks browser

install: $(STAMP)

# Re-install whenever the dependency list or the lock file changes.
$(STAMP): pyproject.toml constraints.txt Makefile
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "rope_lab needs Python 3.10 or newer, found " + sys.version.split()[0]'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --constraint constraints.txt --editable ".[$(EXTRAS)]"
	touch $(STAMP)

lint: install
	$(PY) -m ruff check .

unit: install
	$(PY) -m pytest tests --ignore=tests/browser

notebooks: install
	$(PY) -m pytest --nbval-lax --nbval-current-env -p no:cacheprovider notebooks

# The widgets in a real browser: JupyterLab + headless Debian Chromium, driven by Playwright.
# Screenshots land in test-artifacts/browser/.
browser: install chromium
	$(PY) -m pytest -p no:cacheprovider tests/browser

# Debian's chromium, installed only when /usr/bin/chromium is missing. That needs root (CI
# runs as root); anyone else gets a message and the browser test skips (under CI=true it fails).
chromium:
	@if [ -x /usr/bin/chromium ]; then \
		true; \
	elif ! command -v apt-get >/dev/null; then \
		echo "make: no /usr/bin/chromium and no apt-get: install Chromium yourself and set ROPE_LAB_CHROMIUM=/path/to/chromium, or the browser test skips"; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	else \
		echo "make: /usr/bin/chromium is missing and installing it needs root: run 'sudo apt-get update && sudo apt-get install chromium' once; until then the browser test skips"; \
	fi

book: install
	$(PY) -m rope_lab.book --out build/book

clean:
	rm -rf $(VENV) build .pytest_cache test-artifacts

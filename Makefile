# Two entry points, both safe to run again and again:
#   make lab   set up .venv with what the course needs and open it in JupyterLab
#   make test  set up .venv with the test tools too and run every check (what CI runs)
# and a few more:
#   make check    a teacher's check: every notebook of an edition runs (EDITION=zh_CN), ~2 min
#   make book     execute every notebook and write the course as a static site in build/book/
#   make slides   the same notebooks as offline reveal.js slide decks, both editions, in build/slides/
#   make compat   the oldest supported versions and Google Colab's stack (nox sessions)
#   make set-repository URL=https://github.com/OWNER/NAME REF=v1.0   where the course is published
#   make translations   refresh the translation catalogs from the English notebooks and build
#                       the Chinese edition (notebooks/zh_CN/) from them
#   make mutants  plant each bug of tests/mutants/catalogue.toml in a copy of the package and
#                 check that the notebook teaching it catches it with a ✘ (with and without
#                 the optional extras)
#
# Variables:
#   TORCH=cpu   on Linux, take torch's CPU-only build from PyTorch's own index instead of
#               PyPI's default build with its ~3 GB of CUDA libraries
#   INSTALLER=pip   install everything with pip (default: pip for torch, uv for the rest)
#   KEEP_NOX=1  make compat keeps each nox session's environment in .nox/ (about 3 GB each)
#               for the next run, instead of removing it once the session passes
#   JOBS=N      pytest workers (default: one per CPU core; the unit tests get one more)
PYTHON ?= python3
# Python's compiled bytecode goes to build/pycache for every command make starts, also where
# PYTHONDONTWRITEBYTECODE is set (it is on the machines this course is built on): without
# it every process compiled numpy, matplotlib, Jupyter and the course from source again (uv
# installs no .pyc files), about 1-2 CPU-seconds for each of make test's several hundred
# Python processes. The tree stays clean: no __pycache__ folders beside the sources. Your
# own PYTHONPYCACHEPREFIX, if you set one, is kept.
export PYTHONPYCACHEPREFIX ?= $(CURDIR)/build/pycache
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
PY := $(VENV)/bin/python
TORCH ?=
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
INSTALLER ?= uv
TORCH_VERSION := $(shell sed -n 's/^torch==//p' constraints.txt)
LAB_EXTRAS := lab,models
TEST_EXTRAS := lab,models,test,book,browser,teach
LAB_STAMP := $(VENV)/.installed-lab
TEST_STAMP := $(VENV)/.installed-test

.PHONY: lab test check install install-test lint unit notebooks browser chromium book slides compat \
	set-repository cjk-font notebook-filter stall-check translations mutants clean

# JupyterLab with the course's settings (lab/: no news pop-up, the Chinese font, encrypted
# kernel connections); your own ~/.jupyter settings still apply on top. Jupyter refuses to
# run as root without --allow-root (containers, CI images).
lab: install
	JUPYTER_CONFIG_PATH=lab $(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/

# Every check, one stage after another (each is a target of its own: make unit, make browser
# …), then a table of how long each stage took (scripts/stages.py), also when one fails.
TEST_STAGES := install-test lint unit notebooks browser compat
test:
	@MAKE='$(MAKE)' $(PYTHON) scripts/stages.py $(TEST_STAGES)

# A teacher's check before class: every notebook of an edition runs, several at once, with
# no error and no warning (rope_lab.runner; about 2 minutes on 2 cores). EDITION=zh_CN for
# the Chinese edition. Runs are kept in build/executed/ for `make book`.
EDITION ?= en
check: install
	$(PY) -m rope_lab.runner --edition $(EDITION)

install: $(LAB_STAMP)
install-test: $(TEST_STAMP)

# One recipe for both sets: a venv, torch through pip (it honours the machine's pip
# configuration and, with TORCH=cpu, PyTorch's CPU index), then the rest through uv, which
# installs ~140 packages in seconds (pip takes minutes), and pip again if uv cannot.
# Afterwards git strips notebook outputs on commit (`make notebook-filter`), so a notebook
# saved after a class never dirties the repository.
define install_set
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11, 5), "make needs Python 3.11.5 or newer, found " + sys.version.split()[0] + ": install one (python.org, your package manager or pyenv) and run make PYTHON=python3.11 ..."'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "make: installing torch and the [$(1)] extras into $(VENV) (about a minute the first time)"
	@{ $(PY) -m pip install --quiet --upgrade --constraint constraints.txt "pip>=24" uv \
	  && $(if $(filter cpu,$(TORCH)),$(PY) -m pip install --quiet --index-url $(TORCH_CPU_INDEX) "torch==$(TORCH_VERSION)" && touch $(VENV)/.torch-cpu,$(PY) -m pip install --quiet --constraint constraints.txt "torch==$(TORCH_VERSION)") \
	  && $(if $(filter uv,$(INSTALLER)),{ $(VENV)/bin/uv pip install --quiet --python $(PY) --constraint constraints.txt --editable ".[$(1)]" || { echo "make: uv could not install; trying pip (slower)"; $(PY) -m pip install --quiet --constraint constraints.txt --editable ".[$(1)]"; }; },$(PY) -m pip install --quiet --constraint constraints.txt --editable ".[$(1)]"); \
	} || { echo "make: installing the course failed (see pip's or uv's message above). It installs from PyPI: check the network or proxy (pip config list shows pip's settings), then run make again."; exit 1; }
	@$(MAKE) --no-print-directory notebook-filter PY='$(PY)'
endef

# What git stores of a notebook (.gitattributes): nbstripout's clean filter drops outputs,
# execution counts and widget state, keeps the cell ids (the claims inventory cites them),
# and drops metadata.language_info, which JupyterLab rewrites from the running kernel on
# every save (Python's version among it; under `make lab`, lab/kernel_language.py hands
# JupyterLab that same language_info when it opens a notebook, so opening one does not mark
# it modified). The kernelspec stays: the notebooks are committed with the one JupyterLab
# writes ("Python 3 (ipykernel)"), so a saved notebook equals the committed one and `git
# status` stays clean (tests/browser/test_readme_path.py checks it).
# git runs the filter as one long-running process (scripts/git_notebook_filter.py: one
# Python start per git command, not one per notebook; `clean` is for gits before 2.11), and
# the index is refreshed once here: in a fresh clone every entry is "racily clean", and the
# first command to write the index would otherwise clean every notebook (1 min 43 s once).
NBSTRIPOUT_ARGS = --keep-id --extra-keys metadata.language_info
NBSTRIPOUT = '$(abspath $(PY))' -m nbstripout $(NBSTRIPOUT_ARGS)
NOTEBOOK_FILTER = '$(abspath $(PY))' '$(abspath scripts/git_notebook_filter.py)' $(NBSTRIPOUT_ARGS)
notebook-filter:
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		git config filter.nbstripout.clean "$(NBSTRIPOUT)" && \
		git config filter.nbstripout.process "$(NOTEBOOK_FILTER)" && \
		git config filter.nbstripout.smudge cat && \
		git config diff.ipynb.textconv "$(NBSTRIPOUT) -t" && \
		{ git update-index -q --refresh >/dev/null 2>&1; true; } && \
		echo "make: git now strips notebook outputs on commit (nbstripout, see .gitattributes)"; \
	fi

# Re-install whenever the dependency list or the lock file changes.
$(LAB_STAMP): pyproject.toml constraints.txt Makefile
	$(call install_set,$(LAB_EXTRAS))
	touch $(LAB_STAMP)

$(TEST_STAMP): pyproject.toml constraints.txt Makefile
	$(call install_set,$(TEST_EXTRAS))
	touch $(LAB_STAMP) $(TEST_STAMP)

# pytest workers: one per core (JOBS=N to choose). Some of the unit tests wait (on
# subprocesses, kernels), so they get one worker more than there are cores; not more, as
# every worker collects every test file and imports what they import (`time make unit` on
# 2 cores: 3 workers 7:50 and 14:26 CPU-minutes, 4 workers 8:30 and 15:52). The slow tests
# are handed out first (tests/conftest.py) and an idle worker takes work from a busy one
# (--dist worksteal), so the run does not end on one long test started last.
JOBS ?= $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
UNIT_JOBS ?= $(shell echo $$(( $(JOBS) + 1 )))

# ruff for style and bugs; lint-imports for the package's floors ([tool.importlinter] in
# pyproject.toml: a module imports only the floors below its own).
lint: install-test
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports

unit: install-test
	$(PY) -m pytest tests --ignore=tests/browser -n $(UNIT_JOBS) --dist worksteal

# Both editions and the solutions, each notebook's cells on one worker (its kernel). Each
# run that passes is kept in build/executed/ (--keep-runs, conftest.py), where `make book`,
# `make check` and the browser stage's book take it instead of running the notebook again.
notebooks: install-test
	$(PY) -m pytest --nbval-lax --nbval-current-env -p no:cacheprovider -n $(JOBS) \
		--dist loadfile --keep-runs notebooks

# The widgets and the offline book in a real browser: JupyterLab + headless Debian
# Chromium, driven by Playwright. Screenshots land in test-artifacts/browser/.
# Two browsers at once: the README's path (a long JupyterLab session) beside the rest,
# grouped so that the tests sharing a JupyterLab or the executed book run on one worker.
browser: install-test chromium
	$(PY) -m pytest -p no:cacheprovider -n 2 --dist loadgroup tests/browser

# The oldest versions pyproject.toml allows, Google Colab's stack and the newest releases,
# each in its own virtual environment under .nox/, running the unit tests and every English
# notebook. One session at a time, and a session's environment (about 3 GB: torch, triton
# and the rest; its bytecode in build/pycache goes with it) is removed once it passes, so
# the disk needs room for .venv and one session, not three (a CI run once filled its disk
# on the third). A failed session's environment stays, for `.venv/bin/nox -s NAME` to rerun
# in; KEEP_NOX=1 keeps them all.
NOX_SESSIONS := oldest colab newest
compat: install-test
	@for session in $(NOX_SESSIONS); do \
		$(if $(filter cpu,$(TORCH)),ROPE_LAB_TORCH_INDEX=$(TORCH_CPU_INDEX)) ROPE_LAB_JOBS=$(JOBS) \
			$(VENV)/bin/nox --no-color -s $$session || exit 1; \
		$(if $(KEEP_NOX),,rm -rf .nox/$$session "$(PYTHONPYCACHEPREFIX)$(CURDIR)/.nox/$$session";) \
	done

# Debian's chromium, installed only when /usr/bin/chromium is missing. That needs root (CI
# runs as root); anyone else gets a message and the browser test skips (under CI=true it fails).
chromium:
	@if [ -x /usr/bin/chromium ] || [ -n "$$ROPE_LAB_CHROMIUM" ]; then \
		true; \
	elif ! command -v apt-get >/dev/null; then \
		echo "make: no /usr/bin/chromium and no apt-get: install Chromium yourself and set ROPE_LAB_CHROMIUM=/path/to/chromium, or the browser test skips"; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	else \
		echo "make: /usr/bin/chromium is missing and installing it needs root: run 'sudo apt-get update && sudo apt-get install chromium' once; until then the browser test skips"; \
	fi

book: install-test
	$(PY) -m rope_lab.book --out build/book

# Beside the book: one reveal.js deck per notebook, both editions, offline (reveal.js from the
# teach extra's sphinx-revealjs, MathJax and the font as in the book). Runs are shared with
# make book through build/executed/.
slides: install-test
	$(PY) -m rope_lab.slides --out build/slides

# Point the README badges, every notebook's install cell and the book's links at URL (GitHub,
# GitLab or Codeberg), its links at the release REF (a tag you then make, or a commit hash).
# Run it twice with a commit in between: the first run writes the settings and links, the
# second pins the install cell at that commit (a commit, unlike a tag, cannot be moved).
set-repository: install
	@test -n "$(URL)" -a -n "$(REF)" || { echo "usage: make set-repository URL=https://github.com/OWNER/NAME REF=v1.0"; exit 2; }
	$(PY) -m rope_lab.book --set-repository "$(URL)" --ref "$(REF)"

# One source, two languages: new or changed English text gets empty or fuzzy catalog entries
# (notebooks/locale/zh_CN/LC_MESSAGES/*.po), then notebooks/zh_CN/ is rebuilt from the English
# notebooks and the catalogs. Translators edit only the .po files. The build checks every
# translation first (no markup, URL scheme, control character or {field} the English lacks)
# and writes nothing while one fails; both steps write all their files or none.
translations: install-test
	$(PY) -m rope_lab.translations update
	$(PY) -m rope_lab.translations build

# Every bug of the mutant catalogue, planted alone in a temporary copy of the package, must be
# caught by a check of the notebook that teaches it (a ✘, not a crash), with the optional
# extras and without them. tests/test_mutants.py runs the same under `make unit`.
mutants: install-test
	$(PY) tests/mutants/run.py

# Rebuild the course's Chinese font (rope_lab/book_assets/cjk-subset.otf: the book, the lab
# and the figures) after adding Chinese text outside GB 2312 level 1 (needs fonts-noto-cjk).
cjk-font: install-test
	$(PY) scripts/cjk_font.py

# Execute notebooks 00, 04 and 06 ten times each under nbclient beside a CPU-burning process.
stall-check: install-test
	$(PY) scripts/stall_check.py

clean:
	rm -rf $(VENV) .nox build .pytest_cache test-artifacts

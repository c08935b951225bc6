"""The versions the course promises to support, installed and run (``make compat``).

pyproject.toml declares lower bounds ("numpy>=1.23.2", "transformers>=4.45" …) and
Colab brings its own stack. A bound nobody installs is a guess, so two nox sessions build
those environments and run what ``make test`` runs on the main one: the unit tests and
every notebook (course and solutions).

- ``oldest``: every direct dependency at the lowest version pyproject.toml allows
  (``>=X`` becomes ``==X``). torch is the exception, see :data:`TORCH_HERE`.
- ``colab``: Google Colab's stack, :data:`COLAB`.
- ``newest``: the newest release of every dependency (upgraded on every run), so that a
  deprecation in a new transformers, numpy or matplotlib shows up here before a learner
  sees it. torch is the exception, see :func:`newest`.

Of the test files a session runs, it runs the fast tests and the slow tests marked
``versions`` (a slow test whose subject is a library); the rest of the slow tests drive the
project's tooling (git, pip, compilers, signals), which ``make test`` runs in .venv.

Each session runs what the releases it installs can change: the test files and notebooks
that depend on a course library whose installed release differs from .venv's (the rule,
and why it is safe, is scripts/version_dependent.py's; the session logs which releases
differ and how many files it runs), on every core (``ROPE_LAB_JOBS``, which ``make test
JOBS=N`` sets). torch is installed with pip, as ``make`` installs it (the machine's pip
configuration applies), everything else with uv.

Run one with ``.venv/bin/nox -s oldest`` (or ``make compat`` for all three). The virtual
environments live in ``.nox/`` and are reused between runs; ``make compat`` removes each
one once its session passes (``KEEP_NOX=1`` keeps them). Each session first checks that the
disk has room for its environment (:func:`check_disk`), so a full disk stops it at once
with a message instead of pip's "No space left on device" half an hour into ``make test``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import nox

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["oldest", "colab", "newest"]

# torch's lowest bound (2.1) only comes as a multi-GB CUDA wheel for this Python, and the
# machines that build the course carry one torch wheel on disk; the README says so. Both
# sessions use the torch release that constraints.txt pins.
TORCH_HERE = next(line.split("==")[1].strip()
                  for line in (ROOT / "constraints.txt").read_text().splitlines()
                  if line.startswith("torch=="))
# Triton is torch's compiler: a torch release is built against one Triton release (PyPI's
# CUDA torch pins it), so every session keeps the Triton that constraints.txt pins beside
# TORCH_HERE (the newest session would otherwise pair torch with a Triton no user has).
TRITON_HERE = [line.strip() for line in (ROOT / "constraints.txt").read_text().splitlines()
               if line.startswith("triton==")]

# Google Colab's preinstalled stack (late 2026), as far as the course touches it: its own
# torch, ipywidgets 7.7.1 with the classic widget front end, transformers 4.x, and the
# numpy 2.0 / matplotlib 3.10 series. Colab runs Python 3.12; the session runs on the
# Python that runs nox.
COLAB = [
    "ipywidgets==7.7.1",
    "transformers==4.57.6",
    "numpy==2.0.2",
    "matplotlib==3.10.0",
    "ipykernel==6.17.1",
]

# What each session runs, after installing: the unit tests (the fast ones, and the slow ones
# about a library's behaviour: scripts/version_dependent.py's SESSION_MARKERS) and every
# English notebook and solution (the Chinese twins run the same code: tests/test_i18n.py
# checks that), each once
# (the re-run after Run All tests the notebooks, not the library versions; `make notebooks`
# runs both editions and the re-run), on every core. Not the tests of the pinned install
# itself (test_project, test_install: `make test` runs those); of the rest, the files that
# depend on a course library whose release here differs from .venv's
# (scripts/version_dependent.py says which, and why).
UNIT = ["pytest", "-q", "-p", "no:cacheprovider"]
NOT_FOR_SESSIONS = {"tests/test_project.py", "tests/test_install.py"}
NOTEBOOKS = ["pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
             "--nbval-no-rerun", "--dist", "loadfile"]
EXTRAS = "test,lab,models,book"


def lowest_versions() -> list[str]:
    """``name==lower`` for every ``name>=lower`` among the dependencies and extras in use."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in EXTRAS.split(","):
        requirements += project["optional-dependencies"][extra]
    pins = []
    for requirement in requirements:
        requirement, _, marker = requirement.partition(";")  # a marker travels with its pin
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?>=([^,;\s]+)", requirement.strip())
        if not match:
            raise ValueError(f"pyproject.toml: {requirement!r} is not of the form name>=version; "
                             "the oldest session cannot pin it")
        name, _, lower = match.groups()
        pin = f"{name}=={TORCH_HERE if name == 'torch' else lower}"
        pins.append(f"{pin} ;{marker}" if marker else pin)
    return pins


# A session's environment against the one that runs nox (.venv, which holds the same torch
# and triton): 3.1 GB against 2.5 GB here, with the session's tmp/ (pytest, torch.compile's
# cache). Measuring .venv, not a constant, follows torch's build: a CUDA build is 3 GB more.
SESSION_PER_VENV = 1.3


def _tree_bytes(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:  # a file removed while we walk
                pass
    return total


def check_disk(name: str, location: Path, *, runner: Path = Path(sys.prefix)) -> None:
    """Stop with one clear message when the disk cannot hold session ``name``'s environment.

    Needed: :data:`SESSION_PER_VENV` times the environment running nox (``runner``), less
    what ``location`` already holds from an earlier run.
    """
    needed = SESSION_PER_VENV * _tree_bytes(runner) - _tree_bytes(location)
    existing = next(p for p in [location, *location.parents] if p.exists())
    free = shutil.disk_usage(existing).free
    if free < needed:
        raise RuntimeError(
            f"nox session {name!r} needs about {needed / 1e9:.1f} GB free for its environment "
            f"in {location}, and the disk has {free / 1e9:.1f} GB free. Free some space "
            f"(make clean removes .venv, .nox and build, here or in another clone of the course), "
            f"or run the checks that need no more room: make lint unit notebooks browser")


def _version_rule():
    """scripts/version_dependent.py, the rule of what a library release can change."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("version_dependent",
                                                  ROOT / "scripts" / "version_dependent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def jobs() -> str:
    """pytest workers: ROPE_LAB_JOBS (`make test JOBS=...`), else one per CPU core."""
    return os.environ.get("ROPE_LAB_JOBS") or str(os.cpu_count() or 1)


def _uv() -> str:
    """The uv that `make` installed beside the Python running nox."""
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if found is None:
        raise RuntimeError("uv is missing from .venv: run `make install-test` again")
    return found


def _install_and_run(session: nox.Session, pins: list[str], *, newest: bool = False) -> None:
    try:
        check_disk(session.name, Path(session.virtualenv.location))
    except RuntimeError as error:
        session.error(str(error))
    constraints = Path(session.create_tmp()) / "constraints.txt"
    constraints.write_text("\n".join(pins) + "\n")
    # torch through pip, as `make` installs it (your pip configuration, a mirror or the
    # machine's own wheels, applies); `make test TORCH=cpu` passes PyTorch's CPU index on,
    # so no session pulls CUDA wheels
    torch_index = os.environ.get("ROPE_LAB_TORCH_INDEX")
    index = ["--index-url", torch_index] if torch_index else ["--constraint", str(constraints)]
    # --no-compile: pip would compile all of torch's modules (8 of its 20 s here); `make`
    # gives the session's processes a bytecode cache (PYTHONPYCACHEPREFIX), which compiles
    # only the modules they import, once
    if newest and torch_index:
        session.install("--no-compile", "--upgrade", *index, "torch")  # the newest CPU build
    else:
        session.install("--no-compile", *index, f"torch=={TORCH_HERE}")
    # whatever torch is installed now stays: the rest must not swap it for a CUDA build
    installed = session.run_install("python", "-c", "import torch; print(torch.__version__)",
                                    silent=True).strip().splitlines()[-1]
    pins = [pin for pin in pins if not pin.startswith("torch==")] + [f"torch=={installed}"]
    constraints.write_text("\n".join(pins) + "\n")
    # the rest through uv, as `make` does: seconds where pip takes minutes
    upgrade = ["--upgrade"] if newest else []
    python = str(Path(session.virtualenv.bin) / "python")
    session.run_install(_uv(), "pip", "install", "--quiet", "--python", python, *upgrade,
                        "--constraint", str(constraints), "-e", f".[{EXTRAS}]", external=True)
    rule = _version_rule()
    course = sorted(rule.course_distributions())
    versions = json.loads(session.run_install(
        "python", "-c", "import json, sys; sys.path.insert(0, 'scripts'); "
        "import version_dependent as rule; print(json.dumps(rule.installed_versions("
        f"{course!r})))", silent=True).strip().splitlines()[-1])
    changed = rule.changed_distributions(versions)
    session.log("releases that differ from .venv's: " + (", ".join(
        f"{name} {versions.get(name)}" for name in sorted(changed)) or "none"))
    tests = [path for path in sorted((ROOT / "tests").glob("test_*.py"))
             if path.relative_to(ROOT).as_posix() not in NOT_FOR_SESSIONS]
    from rope_lab.course import notebook_files

    notebooks = notebook_files(ROOT / "notebooks") + notebook_files(ROOT / "notebooks"
                                                                    / "solutions")
    tests, notebooks = (rule.dependent_files(tests, changed),
                        rule.dependent_files(notebooks, changed))
    session.log(f"{len(tests)} test files and {len(notebooks)} notebooks depend on them")
    env = {"MPLBACKEND": "Agg", "PYTHONHASHSEED": "0"}
    if tests:  # the fast tests and the slow ones about a library (the rule's markers)
        session.run(*UNIT, "-n", jobs(), "-m", rule.SESSION_MARKERS,
                    *[p.relative_to(ROOT).as_posix() for p in tests], *session.posargs, env=env)
    if notebooks:
        session.run(*NOTEBOOKS, "-n", jobs(),
                    *[p.relative_to(ROOT).as_posix() for p in notebooks], env=env)


@nox.session
def oldest(session: nox.Session) -> None:
    """The lowest versions pyproject.toml allows (torch: see TORCH_HERE)."""
    _install_and_run(session, lowest_versions())


@nox.session
def colab(session: nox.Session) -> None:
    """Google Colab's stack: ipywidgets 7.7.1, transformers 4.x, numpy 2.0, matplotlib 3.10."""
    _install_and_run(session, COLAB + [f"torch=={TORCH_HERE}", *TRITON_HERE])


@nox.session
def newest(session: nox.Session) -> None:
    """The newest release of every dependency and extra, upgraded on every run.

    torch: the newest release on PyPI is, on Linux, a CUDA build that pulls some 3 GB of
    NVIDIA libraries, so this session does not take it from PyPI. With
    ``ROPE_LAB_TORCH_INDEX`` set (``make test TORCH=cpu`` sets PyTorch's CPU index) it takes
    the newest CPU build from that index; without it, the torch release constraints.txt pins
    (:data:`TORCH_HERE`, the one ``make`` already installed, so nothing new is downloaded).
    Every other package is the newest that PyPI has for this Python.
    """
    _install_and_run(session, TRITON_HERE, newest=True)

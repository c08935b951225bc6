"""Shared fixtures: the devices to test on (CPU always, CUDA when present)."""

import pytest
import torch
from hypothesis import settings

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

# No hypothesis deadline: a test asserts what is computed, never how long it took (speed is
# the benchmarks' job). A deadline also fails the first example a worker runs: torch's first
# `assert_close` imports torch.distributed.tensor and sympy (0.9 s, torch 2.13), and once
# failed, hypothesis replays that example first in every later run.
settings.register_profile("rope_lab", deadline=None)
settings.load_profile("rope_lab")


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# The language a test reads the package in (tests/test_i18n*.py)

@pytest.fixture
def chinese(monkeypatch):
    """The Chinese edition for one test, English again after it."""
    from rope_lab import i18n

    monkeypatch.delenv(i18n.ENVIRONMENT_VARIABLE, raising=False)
    i18n.set_language("zh")
    yield
    i18n._chosen = None


@pytest.fixture
def english(monkeypatch):
    """The English edition for one test, whatever ROPE_LAB_LANG says."""
    from rope_lab import i18n

    monkeypatch.delenv(i18n.ENVIRONMENT_VARIABLE, raising=False)
    i18n._chosen = None


# The graders' worker process (rope_lab.exercises.worker)

@pytest.fixture
def grader_worker():
    """The graders' worker, started and waiting: a test's clock then counts the grading, not
    the seconds a fresh Python takes to import torch (after a test that stopped the worker)."""
    import time

    from rope_lab.exercises import grading, worker

    grading.start_worker()
    deadline = time.monotonic() + worker.SETUP_LIMIT_S
    while not grading._worker.ready and time.monotonic() < deadline:
        time.sleep(0.05)
    assert grading._worker.ready, "the graders' worker did not start"
    return grading._worker


# Longest first: with pytest-xdist (`make unit`), a run ends when its last test does, so the
# slow tests start at once and the thousands of fast ones fill the workers around them.
def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable


# make sets PYTHONPYCACHEPREFIX (Makefile): the bytecode of every module a test's subprocess
# imports lands under build/pycache, also that of the package copies and nox environments the
# tests make in their temporary folders. Those folders go (pytest keeps the last three runs);
# their bytecode goes with this run's, once every worker is done.
def pytest_sessionfinish(session):
    import shutil
    import sys
    from pathlib import Path

    factory = getattr(session.config, "_tmp_path_factory", None)
    basetemp = getattr(factory, "_basetemp", None)
    if sys.pycache_prefix and basetemp and not hasattr(session.config, "workerinput"):
        shutil.rmtree(Path(sys.pycache_prefix) / Path(basetemp).relative_to(Path(basetemp).anchor),
                      ignore_errors=True)

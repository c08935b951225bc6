"""Notebook checks on top of nbval (`pytest --nbval-lax notebooks`).

nbval runs every cell and fails on an error. Two more promises of the course are checked
here: no cell writes to stderr (warnings included), and each notebook's run time is
reported in the summary so the "under 20 s" budget is visible on every run.
"""

import time
from collections import defaultdict
from pathlib import Path

import pytest

_notebook_seconds = defaultdict(float)
NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if not hasattr(item, "cell"):  # not an nbval cell
        return (yield)
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        _notebook_seconds[_name(item.path)] += time.perf_counter() - start
        stderr = [
            output.get("text", "")
            for output in getattr(item, "test_outputs", None) or []
            if output.get("output_type") == "stream" and output.get("name") == "stderr"
        ]
        if stderr:
            raise AssertionError("cell wrote to stderr:\n" + "".join(stderr))


def _name(path: Path) -> str:
    """notebooks/solutions/x.ipynb → solutions/x.ipynb; notebooks/zh_CN/x.ipynb → zh_CN/x.ipynb
    (the Chinese edition has the English file names)."""
    try:
        return path.relative_to(NOTEBOOKS).as_posix()
    except ValueError:
        return path.name


def pytest_terminal_summary(terminalreporter):
    if not _notebook_seconds:
        return
    terminalreporter.section("notebook execution time (cells only, kernel start excluded)")
    for name, seconds in sorted(_notebook_seconds.items()):
        terminalreporter.write_line(f"{seconds:6.1f} s  {name}")

"""Every cell of every notebook can be re-run after Run All (the pass conftest.py adds to nbval).

`make test` runs it on every notebook (`pytest --nbval-lax notebooks`); here it runs on two
small notebooks, to show that it catches the bug it exists for and passes a clean notebook.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _notebook(path: Path, cells: dict[str, str]) -> None:
    path.write_text(json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": cell_id, "metadata": {},
                   "outputs": [], "source": source} for cell_id, source in cells.items()],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4, "nbformat_minor": 5}))


@pytest.mark.slow
def test_a_cell_broken_by_a_later_one_fails_its_re_run(tmp_path):
    pytest.importorskip("nbval")
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    # its own root: nox puts tmp_path inside the repository (.nox/*/tmp), where pytest would
    # otherwise take the repository's conftest.py and settings as well
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # notebook 11's bug: a later cell assigns a dict to the name of a module an earlier cell uses
    _notebook(tmp_path / "shadowed.ipynb", {"imports": "import math",
                                            "use-module": "radius = math.pi",
                                            "shadow": 'math = {"pi": 3.14}'})
    _notebook(tmp_path / "clean.ipynb", {"imports": "import math",
                                         "use-module": "radius = math.pi",
                                         "other-name": 'constants = {"pi": 3.14}'})
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--nbval-lax",
         "--nbval-current-env", "-rA", "shadowed.ipynb", "clean.ipynb"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = result.stdout
    assert result.returncode == 1, out[-3000:] + result.stderr[-3000:]
    # the failure names the notebook, the cell id and the error
    assert ("FAILED shadowed.ipynb::Cell 1 re-run after Run All (cell id use-module)" in out), out
    assert "AttributeError" in out and "'dict' object has no attribute 'pi'" in out
    # the first pass passed, and so did every re-run of the clean notebook
    assert re.search(r"^PASSED shadowed\.ipynb::Cell 1\s*$", out, re.MULTILINE), out
    assert "FAILED clean.ipynb" not in out
    assert out.count("PASSED clean.ipynb::Cell") == 6  # three cells, each run twice
    assert "re-run after Run All" in out  # the timing summary reports the second pass


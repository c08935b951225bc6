"""A notebook run and saved is no change to git: every notebook of both editions.

The README path (test_readme_path.py) runs a sample of the notebooks in JupyterLab and saves
them in a fresh clone; running every notebook there took ten of the check's minutes. What a
run adds to a notebook depends on its cells (outputs, widget state, execution counts and
timings), so here every notebook of the book, both editions, as the runner executed it for
the book (the session's ``executed_notebooks``, with the widgets' state as JupyterLab saves
it), is written as Jupyter writes a notebook and put through git's clean filter (nbstripout
with the Makefile's options): the result must be the notebook git stores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from rope_lab.translations.catalogs import CLEAN_FILTER_OPTIONS, stored_notebook

# Beside the book's other tests: the same runs, once.
pytestmark = pytest.mark.xdist_group("executed-book")


def test_every_notebook_run_and_saved_is_what_git_stores(executed_notebooks, tmp_path):
    pytest.importorskip("nbstripout")
    saved = {}
    for number, (path, notebook) in enumerate(executed_notebooks.items()):
        assert any(cell.get("outputs") for cell in notebook.cells), f"{path.name} has no outputs"
        saved[path] = tmp_path / f"{number:02d}-{path.name}"
        saved[path].write_text(nbformat.writes(notebook) + "\n", encoding="utf-8")
    assert any("widgets" in nbformat.read(copy, as_version=4).metadata
               for copy in saved.values()), "no run kept the widgets' state"
    # one nbstripout for them all, in place, with git's filter's options
    subprocess.run([sys.executable, "-m", "nbstripout", *CLEAN_FILTER_OPTIONS,
                    *map(str, saved.values())], check=True, capture_output=True)
    changed = [path.relative_to(path.parents[1]).as_posix() for path, copy in saved.items()
               if json.loads(copy.read_text(encoding="utf-8")) != stored_notebook(Path(path))]
    assert changed == [], f"run and saved, these differ from what git stores: {changed}"

"""scripts/version_dependent.py: the rule by which a version session (noxfile.py) chooses
what the releases it installs can change. A version-dependent test must never be left out."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("version_dependent",
                                               ROOT / "scripts" / "version_dependent.py")
rule = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rule)


def _tree(root: Path) -> Path:
    """A small course: its package, tests and a notebook, each reaching a library its own way."""
    (root / "rope_lab" / "sub").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "notebooks").mkdir()
    (root / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["numpy>=1", "tqdm>=4"]\n'
        '[project.optional-dependencies]\nmodels = ["transformers>=4"]\n'
        'test = ["pytest>=7", "hypothesis>=6"]\n')
    files = {
        "rope_lab/__init__.py": "",
        "rope_lab/plain.py": "import math\n",
        "rope_lab/top.py": "import numpy as np\n",
        "rope_lab/lazy.py": "def f():\n    import transformers\n    return transformers\n",
        "rope_lab/release.py": "from importlib import metadata\n\n"
                               "def rules():\n    return metadata.version('transformers')\n",
        "rope_lab/sub/__init__.py": "from . import inner\n",
        "rope_lab/sub/inner.py": "from ..lazy import f\n",
        "rope_lab/words.py": '"""Run python -m rope_lab.lazy to see it; rope_lab.top too."""\n',
        "tests/conftest.py": "import pytest\n",
        "tests/helper.py": "import tqdm\n",
        "tests/test_plain.py": "import hypothesis\nfrom rope_lab import plain, words\n",
        "tests/test_top.py": "from rope_lab.top import np\n",
        "tests/test_lazy.py": "def test():\n    from rope_lab.lazy import f\n",
        "tests/test_release.py": "from rope_lab import release\n",
        "tests/test_relative.py": "import rope_lab.sub\n",
        "tests/test_command.py": "import subprocess, sys\n\ndef test():\n    subprocess.run("
                                 "[sys.executable, '-m', 'rope_lab.lazy'])\n",
        "tests/test_shell.py": "import os\n\ndef test():\n"
                               "    os.system('python -m rope_lab.top')\n",
        "tests/test_helper.py": "import helper\n",
        "tests/test_skip.py": "import pytest\n\nnp = pytest.importorskip('numpy')\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)
    (root / "notebooks" / "n.ipynb").write_text(json.dumps({"cells": [
        {"cell_type": "code", "source": ["%matplotlib inline\n", "import rope_lab.lazy\n"]},
        {"cell_type": "markdown", "source": ["import numpy"]}]}))
    return root


def _chosen(root: Path, distributions: set[str]) -> set[str]:
    files = sorted((root / "tests").glob("test_*.py")) + [root / "notebooks" / "n.ipynb"]
    return {path.name for path in rule.dependent_files(files, distributions, root)}


def test_each_way_of_reaching_a_library_counts(tmp_path):
    root = _tree(tmp_path)
    through_transformers = {
        "test_lazy.py",      # an import inside a function, at the top of the test or not
        "test_release.py",   # importlib.metadata.version("transformers")
        "test_relative.py",  # through a package's relative imports
        "test_command.py",   # a module run in a subprocess
        "n.ipynb"}           # a notebook's code cells (its markdown and magics are not code)
    assert _chosen(root, {"transformers"}) == through_transformers
    # transformers requires numpy and tqdm: what reaches it reaches them
    assert _chosen(root, {"numpy"}) == {"test_top.py", "test_shell.py", "test_skip.py",
                                        *through_transformers}
    assert _chosen(root, {"tqdm"}) == {"test_helper.py", *through_transformers}
    # the sentence naming modules in words.py is not an import; plain math depends on none
    assert "test_plain.py" not in _chosen(root, {"numpy", "transformers", "tqdm"})


def test_the_checkers_do_not_count(tmp_path):
    root = _tree(tmp_path)
    assert rule.course_distributions(root) == {"numpy", "tqdm", "transformers"}


def test_a_session_runs_what_differs_from_this_environment(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    here = {"numpy": "2.4.6", "tqdm": "4.70.1", "transformers": "5.23.0"}
    monkeypatch.setattr(rule.metadata, "version", lambda name: here[name])
    assert rule.changed_distributions(dict(here), root) == set()
    assert rule.changed_distributions({**here, "numpy": "1.23.2"}, root) == {"numpy"}
    assert rule.changed_distributions({**here, "transformers": None}, root) == {"transformers"}


def test_every_file_that_names_transformers_is_chosen_for_it():
    """On the course itself: a test file or notebook that imports transformers, or reads
    configs through rope_lab.hf (whose rules follow the installed release), is chosen when
    transformers differs; so is every notebook that draws figures (matplotlib)."""
    tests = sorted((ROOT / "tests").glob("test_*.py"))
    chosen = set(rule.dependent_files(tests, {"transformers"}))
    for path in tests:
        text = path.read_text(encoding="utf-8")
        if "import transformers" in text or "from transformers" in text or "rope_lab.hf" in text:
            assert path in chosen, path.name
    from rope_lab.course import notebook_files

    notebooks = notebook_files(ROOT / "notebooks")
    assert set(rule.dependent_files(notebooks, {"matplotlib"})) == set(notebooks)


def _collected(path: str) -> set[str]:
    """The top-level modules a fresh process has imported once pytest collected ``path``."""
    probe = ("import json, sys, pytest; pytest.main(['-q', '--collect-only', '-p', "
             f"'no:cacheprovider', '{path}']); "
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    # without the installed plugins (nbval, hypothesis's, xdist …): what they import is
    # nobody's test file's, and loading them cost most of each collection
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True,
                          env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert " error" not in done.stdout, done.stdout[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def imported_by_any_test(tmp_path_factory) -> set[str]:
    """What pytest and its plugins import for any file (not the test file's doing), and what
    torch imports when it finds it (torch is the same release in every session): once."""
    path = tmp_path_factory.mktemp("nothing") / "test_nothing.py"
    path.write_text("import torch\n\ndef test():\n    pass\n")
    return _collected(str(path))


@pytest.mark.slow
@pytest.mark.parametrize("test_file", ["test_hf_config.py", "test_plots_05.py",
                                       "test_decay.py", "test_git_after_save.py"])
def test_what_a_test_file_imports_when_collected_is_in_its_closure(test_file,
                                                                  imported_by_any_test):
    """The rule reads files; Python runs them. Collecting a test file in a fresh process
    imports what it imports: every course library among that must be in the rule's view."""
    course = rule.course_distributions()
    imported = _collected(f"tests/{test_file}") - imported_by_any_test
    modules = rule.modules_of()
    needed = {name for name in course if modules.get(name, set()) & imported}
    missed = needed - rule.distributions_reached(ROOT / "tests" / test_file)
    assert missed == set(), f"{test_file} imports {missed} and the rule does not see it"


def test_a_slow_test_of_a_librarys_behaviour_runs_in_the_sessions():
    """The sessions run `-m "not slow or versions"`: a slow test that names a course library
    in its own code (its subject is that library) must be marked versions."""
    tests = sorted((ROOT / "tests").glob("test_*.py"))
    assert [found for path in tests for found in rule.unmarked_library_tests(path)] == []


def test_the_guard_sees_a_slow_library_test_without_the_mark(tmp_path):
    path = tmp_path / "test_x.py"
    path.write_text(
        "import pytest\n\n\n@pytest.mark.slow\ndef test_a():\n    import transformers\n\n\n"
        "@pytest.mark.slow\n@pytest.mark.versions\ndef test_b():\n    import matplotlib\n\n\n"
        "@pytest.mark.slow\ndef test_c():\n    import numpy, subprocess\n\n\n"
        "def test_d():\n    import nh3\n")
    assert rule.unmarked_library_tests(path) == ["test_x.py::test_a names ['transformers']"]
    path.write_text("import pytest\n\npytestmark = [pytest.mark.slow]\n\n\n"
                    "def test_e():\n    return matplotlib.figure\n")
    assert rule.unmarked_library_tests(path) == ["test_x.py::test_e names ['matplotlib']"]


def test_the_sessions_select_with_the_rules_markers():
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert "rule.SESSION_MARKERS" in noxfile
    assert rule.SESSION_MARKERS == "not slow or versions"

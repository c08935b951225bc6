"""The project's own promises: lock file, dependency lists, cheap import, clean notebooks."""

import ast
import functools
import json
import os
import re
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

from rope_lab.course import notebook_files

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
# conda-forge names that differ from the PyPI names used in pyproject.toml
CONDA_TO_PYPI = {"pytorch": "torch"}


def _name(requirement: str) -> str:
    name = re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {_name(r) for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        names |= {_name(r) for r in extra}
    return names


def environment_yml_dependencies() -> set[str]:
    names = set()
    text = (ROOT / "environment.yml").read_text()
    for line in text[text.index("dependencies:"):].splitlines():
        item = re.match(r"\s*- (.+)", line.split("#", 1)[0])
        if not item or item[1].strip() in ("pip", "pip:") or item[1].startswith("-e "):
            continue
        name = _name(item[1])
        if name != "python":
            names.add(CONDA_TO_PYPI.get(name, name))
    return names


def test_environment_yml_matches_pyproject():
    in_pyproject, in_conda = pyproject_dependencies(), environment_yml_dependencies()
    assert in_conda == in_pyproject, (
        f"only in pyproject.toml: {sorted(in_pyproject - in_conda)}; "
        f"only in environment.yml: {sorted(in_conda - in_pyproject)}"
    )


def constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0].strip()  # markers aside
        if line:
            name, version = line.split("==")
            pins[_name(name)] = version
    return pins


def test_constraints_pin_every_dependency_with_public_versions():
    pins = constraints()
    local = {name: version for name, version in pins.items() if "+" in version}
    assert not local, (f"constraints.txt pins local build tags {local}: PyPI has none, so the "
                       "install fails on every machine but this one")
    assert not [name for name in pins if name.startswith("nvidia-")], (
        "constraints.txt pins CUDA libraries: they exist on Linux only")
    missing = pyproject_dependencies() - set(pins)
    assert not missing, f"dependencies without a pin in constraints.txt: {sorted(missing)}"


@pytest.mark.skipif(
    Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
    reason="checks the environment `make install` builds (.venv), not this one",
)
def test_installed_environment_matches_constraints():
    pins = constraints()
    # the environment's own site-packages: importing torch.utils.cpp_extension (the C kernel's
    # tests) puts setuptools/_vendor on sys.path, whose vendored copies are not installs
    site = sorted({sysconfig.get_paths()[key] for key in ("purelib", "platlib")})
    installed = {_name(d.metadata["Name"]): d.version
                 for d in metadata.distributions(path=site)}
    # torch may be a local build of the pinned release (2.13.0+cpu satisfies torch==2.13.0)
    wrong = {n: (installed[n], v) for n, v in pins.items()
             if n in installed and installed[n].split("+")[0] != v}
    assert not wrong, f"installed versions differ from constraints.txt: {wrong}"


@pytest.mark.skipif(not (ROOT / ".venv" / ".torch-cpu").exists(),
                    reason="only where `make ... TORCH=cpu` asked for the CPU-only torch")
def test_cpu_only_torch_brought_no_cuda_packages():
    installed = [d.metadata["Name"] for d in metadata.distributions()]
    # triton may be there: the test set asks for it (its interpreter runs the CUDA kernel's
    # tests on a CPU); the lab set does not (test_lab_set_brings_no_triton).
    cuda = sorted(n for n in installed if _name(n).startswith(("nvidia-", "cuda-")))
    assert not cuda, f"TORCH=cpu was asked for, yet CUDA packages came in: {cuda}"


def test_lab_set_brings_no_triton():
    """`make lab` installs the runtime, lab and models sets: none of them asks for Triton (the
    PyPI torch wheel for Linux x86_64 brings its own; `make lab TORCH=cpu` brings none)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    makefile = (ROOT / "Makefile").read_text()
    lab_extras = re.search(r"^LAB_EXTRAS\s*:?=\s*(\S+)", makefile, re.M)[1].split(",")
    requirements = project["dependencies"] + [
        r for extra in lab_extras for r in project["optional-dependencies"][extra]]
    assert not [r for r in requirements if _name(r) == "triton"], requirements
    assert [r for r in project["optional-dependencies"]["test"] if _name(r) == "triton"]


@pytest.mark.slow
def test_import_is_cheap():
    code = (
        "import sys, rope_lab; "
        "print(sorted(m for m in ('matplotlib', 'ipywidgets', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_public_api_is_exported():
    import rope_lab

    for name in rope_lab.__all__:
        assert hasattr(rope_lab, name), name


def notebooks() -> list[Path]:
    return notebook_files(ROOT / "notebooks", recursive=True)


def committed_notebooks() -> list[Path]:
    """Every notebook of the repository: the course, the solutions, the test fixtures."""
    return [path for folder in ("notebooks", "tests") for path in
            notebook_files(ROOT / folder, recursive=True)]


def test_notebook_lists_leave_out_what_jupyterlab_writes(tmp_path):
    """JupyterLab keeps a copy of every notebook it saves in .ipynb_checkpoints/ and writes
    a save through a temporary .~name file: neither is a notebook of the course."""
    for name in ("a.ipynb", "solutions/b.ipynb", ".ipynb_checkpoints/a-checkpoint.ipynb",
                 "solutions/.ipynb_checkpoints/b-checkpoint.ipynb", ".~a.ipynb",
                 ".virtual_documents/a.ipynb"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    assert notebook_files(tmp_path) == [tmp_path / "a.ipynb"]
    assert notebook_files(tmp_path, recursive=True) == [tmp_path / "a.ipynb",
                                                        tmp_path / "solutions" / "b.ipynb"]
    assert notebook_files(tmp_path / "solutions", "b*") == [tmp_path / "solutions" / "b.ipynb"]


# A glob that names notebooks (or walks a tree: "**", rglob) outside rope_lab.course.
_NOTEBOOK_GLOB = re.compile(r"\.r?glob\([^)]*(?:ipynb|\*\*)|\.rglob\(")


def test_every_list_of_notebooks_goes_through_one_function():
    """A plain glob would pick up JupyterLab's checkpoint copies (issue: `make test` failed
    with "README does not list 00_start_here-checkpoint.ipynb" after a class)."""
    sources = [*(ROOT / "rope_lab").rglob("*.py"), *(ROOT / "tests").rglob("*.py"),
               *(ROOT / "scripts").glob("*.py"), ROOT / "noxfile.py", ROOT / "conftest.py"]
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}" for path in sources
             if path.name != "course.py" and path.exists()
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if _NOTEBOOK_GLOB.search(line) and "ipynb" in line]
    assert not found, ("list notebooks with rope_lab.course.notebook_files (it leaves out "
                       ".ipynb_checkpoints/):\n" + "\n".join(found))
    assert _NOTEBOOK_GLOB.search("sorted(folder.r" + 'glob("*.ipynb"))')  # it can fail


def _dirty_cells(notebook: dict) -> list[int]:
    return [index for index, cell in enumerate(notebook["cells"])
            if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count"))]


def _git(*args: str, cwd: Path = ROOT, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, **kwargs)


def committed_form(path: Path) -> dict:
    """The notebook as git would commit it: the working file through the clean filter.

    A notebook run and saved in class has outputs in the working tree; what counts is that
    git strips them (`make` sets up nbstripout as the clean filter, see .gitattributes).
    """
    notebook = json.loads(path.read_text())
    if not _dirty_cells(notebook):
        return notebook
    attribute = _git("check-attr", "filter", "--", str(path)).stdout
    clean = _git("config", "filter.nbstripout.clean").stdout.strip()
    assert attribute.strip().endswith("filter: nbstripout") and clean, (
        f"{path.name} has outputs and git's nbstripout filter is not set up here, so they "
        "would be committed: run `make lab` or `make test` once (it sets the filter up), or "
        f"strip them: .venv/bin/nbstripout --keep-id {path.relative_to(ROOT)}")
    cleaned = subprocess.run(clean, shell=True, input=path.read_text(), capture_output=True,
                             text=True, check=True, cwd=ROOT)
    return json.loads(cleaned.stdout)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: str(p.relative_to(ROOT)))
def test_notebook_outputs_are_stripped(path):
    dirty = _dirty_cells(committed_form(path))
    assert not dirty, f"{path.name}: cells {dirty} have outputs or execution counts"


def _makefile_variable(name: str) -> str:
    return re.search(rf"^{name}\s*:?=\s*(.+)$", (ROOT / "Makefile").read_text(), re.M)[1].strip()


def clean_filter() -> str:
    """The clean filter `make` sets up (the Makefile's NBSTRIPOUT), for this Python."""
    makefile = (ROOT / "Makefile").read_text()
    assert "$(NBSTRIPOUT)" in makefile.split("notebook-filter:", 1)[1].split("\n\n")[0]
    return (_makefile_variable("NBSTRIPOUT")
            .replace("$(NBSTRIPOUT_ARGS)", _makefile_variable("NBSTRIPOUT_ARGS"))
            .replace("'$(abspath $(PY))'", f"'{sys.executable}'"))


def process_filter() -> str:
    """The long-running filter `make` sets up (the Makefile's NOTEBOOK_FILTER)."""
    makefile = (ROOT / "Makefile").read_text()
    assert "$(NOTEBOOK_FILTER)" in makefile.split("notebook-filter:", 1)[1].split("\n\n")[0]
    return (_makefile_variable("NOTEBOOK_FILTER")
            .replace("$(NBSTRIPOUT_ARGS)", _makefile_variable("NBSTRIPOUT_ARGS"))
            .replace("'$(abspath $(PY))'", f"'{sys.executable}'")
            .replace("$(abspath scripts/", f"{ROOT / 'scripts'}/").replace(".py)'", ".py'"))


def stored_notebooks() -> dict[str, str]:
    """Each notebook as the repository stores it: git's index, not the working file (which
    holds a class's outputs and JupyterLab's metadata until git's filter strips them); the
    working file where git has none (a new notebook, a copy without .git)."""
    paths = {str(path.relative_to(ROOT)): path for path in committed_notebooks()}
    stored = {}
    if (ROOT / ".git").exists():
        batch = subprocess.run(["git", "cat-file", "--batch"], cwd=ROOT, capture_output=True,
                               input="".join(f":{name}\n" for name in paths).encode(),
                               check=True).stdout
        for name in paths:
            header, _, batch = batch.partition(b"\n")
            if header.endswith(b" missing"):
                continue
            size = int(header.split()[2])
            stored[name], batch = batch[:size].decode("utf-8"), batch[size + 1:]
    return {name: stored.get(name) or path.read_text(encoding="utf-8")
            for name, path in paths.items()}


@pytest.mark.slow
def test_every_notebook_is_stored_as_a_saved_one_is_cleaned(tmp_path):
    """What JupyterLab saves, cleaned by git's filter, is byte for byte what is committed.

    Two halves: the filter leaves the stored notebook unchanged (nbstripout --verify), and
    the file is in nbformat's own layout, which the filter writes. A notebook made by a
    script with other metadata or layout would show as modified after a class saves it.
    """
    pytest.importorskip("nbstripout")
    import nbformat

    stored = stored_notebooks()
    for name, text in stored.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    verify = subprocess.run(f"{clean_filter()} --verify "
                            + " ".join(f"'{tmp_path / name}'" for name in stored), shell=True,
                            capture_output=True, text=True)
    assert verify.returncode == 0, (
        "git's clean filter would change these notebooks (their outputs, execution counts or "
        "metadata.language_info are committed):\n" + verify.stdout + verify.stderr
        + f"fix: {clean_filter()} FILE")
    for name, text in stored.items():
        layout = nbformat.writes(nbformat.reads(text, as_version=nbformat.NO_CONVERT))
        assert text == layout.rstrip("\n") + "\n", (
            f"{name} is not in nbformat's layout (1-space indent, sorted keys, unescaped "
            f"text): fix: {clean_filter()} {name}")


def test_every_notebook_names_the_kernel_jupyterlab_writes():
    """On save JupyterLab writes the running kernel's spec into the notebook; storing the
    same one keeps a saved notebook unchanged (and opens it without a kernel dialog)."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    expected = {"display_name": spec.display_name, "language": spec.language, "name": "python3"}
    found = {name: json.loads(text)["metadata"].get("kernelspec")
             for name, text in stored_notebooks().items()}
    wrong = {name: kernelspec for name, kernelspec in found.items() if kernelspec != expected}
    assert not wrong, f"set metadata.kernelspec to {expected} in {wrong}"


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_a_notebook_saved_with_outputs_is_committed_stripped(tmp_path):
    """A teacher ran a notebook in class and saved it: git still stores it stripped."""
    pytest.importorskip("nbstripout")
    _git("init", "-q", cwd=tmp_path, check=True)
    (tmp_path / ".gitattributes").write_text((ROOT / ".gitattributes").read_text())
    # the configuration of `make notebook-filter`
    _git("config", "filter.nbstripout.clean", clean_filter(), cwd=tmp_path, check=True)
    _git("config", "filter.nbstripout.smudge", "cat", cwd=tmp_path, check=True)
    source = ROOT / "notebooks" / "00_start_here.ipynb"
    notebook = json.loads(source.read_text())
    code = next(cell for cell in notebook["cells"] if cell["cell_type"] == "code")
    code["execution_count"] = 3
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ran in class\n"]}]
    # what JupyterLab adds from the running kernel
    notebook["metadata"]["language_info"] = {"name": "python", "version": "3.11.7",
                                             "mimetype": "text/x-python"}
    (tmp_path / "00.ipynb").write_text(json.dumps(notebook, indent=1))
    _git("add", "00.ipynb", cwd=tmp_path, check=True)
    stored = json.loads(_git("show", ":00.ipynb", cwd=tmp_path, check=True).stdout)
    assert not _dirty_cells(stored)
    assert stored == committed_form(source)  # ids and metadata kept as committed


def lab_config() -> dict:
    """lab/jupyter_server_config.py as Jupyter loads it: its namespace and the config."""
    import runpy

    from traitlets.config import Config

    config = Config()
    namespace = runpy.run_path(str(ROOT / "lab" / "jupyter_server_config.py"),
                               init_globals={"get_config": lambda: config})
    return {"namespace": namespace, "config": config}


def test_make_lab_configures_jupyterlab_from_lab():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^\tJUPYTER_CONFIG_PATH=lab \$\(VENV\)/bin/jupyter lab ", makefile, re.M)
    config = lab_config()["config"]
    assert config.LabApp.news_url is None and config.LabApp.custom_css is True
    served = config.ServerApp.tornado_settings["static_custom_path"]
    assert [Path(folder) for folder in served] == [ROOT / "rope_lab" / "book_assets"]
    assert (ROOT / "rope_lab" / "book_assets" / "custom.css").exists()
    overrides = json.loads((ROOT / "lab" / "labconfig" / "default_setting_overrides.json")
                           .read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    # the course's two server extensions, importable from lab/ (the config puts it on the path)
    enabled = json.loads((ROOT / "lab" / "jupyter_server_config.d" / "rope_lab.json")
                         .read_text())["ServerApp"]["jpserver_extensions"]
    assert enabled == {"git_after_save": True, "kernel_language": True}
    assert str(ROOT / "lab") in sys.path
    for name in enabled:
        assert (ROOT / "lab" / f"{name}.py").is_file()


def _lab_module(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "lab" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_opened_notebook_gets_the_language_info_its_kernel_will_report():
    """JupyterLab marks a notebook modified when the starting kernel's language_info differs
    from the file's (committed without one): the lab serves the native kernel's own."""
    pytest.importorskip("ipykernel")
    import asyncio
    import platform

    lab = _lab_module("kernel_language")
    info = lab.native_language_info()
    assert info["name"] == "python" and info["version"] == platform.python_version()

    def served(held):
        return {"type": "notebook", "content": {"metadata": held, "cells": []}}

    python3 = {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)"}}
    assert lab.fill_language_info(served(dict(python3)))["content"]["metadata"][
        "language_info"] == info
    assert lab.fill_language_info(served({**python3, "language_info": {"name": "python"}}))[
        "content"]["metadata"]["language_info"] == info
    # another kernel, a fuller language_info of its own, no content, not a notebook: as is
    for held in [{"kernelspec": {"name": "ir"}},
                 {**python3, "language_info": {"name": "python", "version": "3.9.1"}}]:
        assert lab.fill_language_info(served(dict(held)))["content"]["metadata"] == held
    assert lab.fill_language_info({"type": "notebook", "content": None})["content"] is None
    assert lab.fill_language_info({"type": "file", "content": "x"}) == {"type": "file",
                                                                          "content": "x"}

    class Manager:  # the server's contents manager: async get, as jupyter_server's
        async def get(self, path, content=True):
            return served(dict(python3))

    class Server:
        contents_manager = Manager()

    server = Server()
    lab._load_jupyter_server_extension(server)
    lab._load_jupyter_server_extension(server)  # loaded twice: wrapped once
    assert server.contents_manager.get.__wrapped__.__name__ == "get"
    model = asyncio.run(server.contents_manager.get("00.ipynb"))
    assert model["content"]["metadata"]["language_info"] == info


def test_readme_shows_the_two_commands_and_every_notebook():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    for path in notebooks():
        if path.parent.name != "solutions":
            assert path.name in readme, f"README does not list {path.name}"


def test_the_setup_page_names_each_package_with_its_extra():
    """docs/setup.md's "`make test` adds `test` (...), `book` (...)" lists: every package it
    names is in that extra (it once put transformers, which is in `models`, in `test`)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    readme = " ".join((ROOT / "docs" / "setup.md").read_text().split())
    listed = re.search(r"`make test` adds `test` \(([^)]*)\)", readme)
    assert listed, "docs/setup.md no longer says what `make test` adds"
    names = [re.sub(r" on Linux.*", "", name).strip() for name in listed[1].split(",")]
    extra = {_name(requirement) for requirement in project["optional-dependencies"]["test"]}
    assert [name for name in names if _name(name) not in extra] == [], (names, extra)


def test_ci_runs_make_test_only():
    steps = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    assert steps[-1] == "make test"
    assert all(s.startswith(("set ", "cd ", "make test")) for s in steps), steps


def test_the_release_sweep_runs_the_files_that_depend_on_transformers():
    """scripts/transformers_releases.py: its lower bound is pyproject's, and its test list
    holds every file that imports transformers or reads configs through rope_lab's hf
    package, and not the others (found by reading the files: a new test file is never left
    out)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "transformers_releases", ROOT / "scripts" / "transformers_releases.py")
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    bounds = [r for group in project["optional-dependencies"].values() for r in group
              if r.replace(" ", "").startswith("transformers>=")]
    assert bounds == [f"transformers>={sweep.lower_bound()}"]
    quick, every = sweep.release_tests(), sweep.release_tests(all_tests=True)
    for name in ("test_hf_registry", "test_hf_config", "test_scaling", "test_mrope_rules",
                 "test_bench", "test_plots_10"):
        assert f"tests/{name}.py" in quick, name
    assert set(every) - set(quick) == set(sweep.SLOW)
    for name in ("test_project", "test_book", "test_widgets", "test_decay"):
        assert f"tests/{name}.py" not in every, name
    assert sweep._key("5.10.4") > sweep._key("5.9.0")


def _imports_in(nodes, module: str = "", *, into_functions: bool = False) -> set[str]:
    """Dotted names imported by ``nodes`` and the statements inside them (inside functions
    and classes too with ``into_functions``; else what runs on import)."""
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                base = ".".join(parts[:len(parts) - node.level] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif into_functions or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                     ast.ClassDef)):
            names |= _imports_in(ast.iter_child_nodes(node), module,
                                 into_functions=into_functions)
    return names


def _course_file(module: str) -> Path | None:
    path = ROOT / Path(*module.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _reached(test_file: Path, slow: set[str]) -> set[str]:
    """The rope_lab modules that the tests of ``test_file`` not named in ``slow`` import:
    anywhere in the file but the slow tests, and what importing those modules runs."""
    tree = ast.parse(test_file.read_text(encoding="utf-8"))
    nodes = [node for node in tree.body if getattr(node, "name", None) not in slow]
    reached, pending = set(), []
    for name in _imports_in(nodes, into_functions=True):
        parts = name.split(".")
        for length in range(1, len(parts) + 1):
            found = _course_file(".".join(parts[:length])) if parts[0] == "rope_lab" else None
            if found is not None:
                pending.append(found)
    while pending:
        current = pending.pop()
        module = ""
        if current.is_relative_to(ROOT / "rope_lab"):
            module = ".".join(current.relative_to(ROOT).with_suffix("").parts)
            module = module.removesuffix(".__init__")
            if module in reached:
                continue
            reached.add(module)
            if current.name == "__init__.py":
                module += ".__init__"  # relative imports count from the package itself
        pending.extend(_course_files_imported_by(current, module))
    return reached


@functools.cache
def _course_files_imported_by(path: Path, module: str) -> list[Path]:
    """The package's files that importing ``path`` (as ``module``) imports; each module is
    parsed once for all the test files, not once per test file (the test took 11 s, now 2)."""
    found = []
    for name in _imports_in(ast.parse(path.read_text(encoding="utf-8")).body, module):
        parts = name.split(".")
        if parts[0] == "rope_lab":
            found += [f for length in range(1, len(parts) + 1)
                      if (f := _course_file(".".join(parts[:length]))) is not None]
    return found


def test_the_fast_loop_reaches_every_module_of_the_package():
    """`pytest -m "not slow"` (CONTRIBUTING.md's fast loop) runs, for every module of the
    package, a test file that imports it: each test file with a test not marked slow, and
    what importing it runs of rope_lab."""
    modules = {".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
               for path in (ROOT / "rope_lab").rglob("*.py") if "__pycache__" not in path.parts}
    reached = set()
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        file_is_slow = any("slow" in ast.unparse(node) for node in tree.body
                           if isinstance(node, ast.Assign)
                           and any(getattr(t, "id", "") == "pytestmark" for t in node.targets))
        tests = [node for node in ast.walk(tree)
                 if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
        fast = [node for node in tests
                if not any("mark.slow" in ast.unparse(d) for d in node.decorator_list)]
        if fast and not file_is_slow:
            reached |= _reached(path, {node.name for node in tests} - {n.name for n in fast})
    entry_points = {module for module in modules if module.endswith(".__main__")}
    assert sorted(modules - reached - entry_points) == []


DOCUMENTS = ["README.md", "README.zh-CN.md", "CONTRIBUTING.md", "notebooks/TEACHING.md",
             *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]


def test_the_readme_fits_a_screen_and_points_at_the_rest():
    """README.md: what the course is, the two commands, the notebooks, where teachers and
    contributors go next, in at most 150 lines; the rest lives in docs/ and is linked."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    for needed in ["## Quick start", "make lab", "make test", "## The notebooks",
                   "make check", "notebooks/TEACHING.md", "CONTRIBUTING.md"]:
        assert needed in readme, needed
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)\)", readme))
    assert linked == {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")}


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_link_of_a_document_resolves(document):
    path = ROOT / document
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
        if not re.match(r"[a-z]+:", target):
            assert (path.parent / target).exists(), f"{document}: broken link {target}"


# A number with a unit of time or size; a document states one as a limit the code sets
# ("capped at 10 s", "over 1 GiB", "under 20 s", a target), or with the command that
# measures it, so a reader can produce it on their own machine.
_MEASURE = re.compile(r"\b\d[\d.,]*\s?(?:ms|s|min|minutes|seconds|GB|MB|KB|GiB|MiB|KiB)\b")
_LIMIT = re.compile(r"\b(?:capped|over|past|under|within|at most|limit|target|budget|refus)",
                    re.I)
_COMMAND = re.compile(r"`(?:make |python |\.venv/|scripts/|pytest)[^`]*`")


@pytest.mark.parametrize("document", DOCUMENTS)
def test_a_document_states_a_time_or_size_with_its_source(document):
    text = " ".join((ROOT / document).read_text(encoding="utf-8").split())
    sentences = re.split(r"(?<=[.;:!?。；])\s+|\n", text)
    unsourced = [sentence for sentence in sentences if _MEASURE.search(sentence)
                 and not _LIMIT.search(sentence) and not _COMMAND.search(sentence)]
    assert unsourced == [], f"{document}: times or sizes with no source: {unsourced}"


@pytest.mark.slow
def test_xdist_groups_keep_their_tests_on_one_worker(tmp_path):
    """`make browser` keeps the tests that share a costly fixture (the executed book, a
    JupyterLab) on one worker with `--dist loadgroup`. pytest 9.2 broke that silently
    (pytest-xdist#1386: no error, the groups ran on both workers and the book was executed
    twice), so constraints.txt holds pytest 9.1; this fails on a pair that breaks it."""
    for name in ("a", "b"):
        (tmp_path / f"test_{name}.py").write_text(
            "import os\n\nimport pytest\n\n"
            f"pytestmark = pytest.mark.xdist_group('{name}')\n\n\n"
            "@pytest.mark.parametrize('i', range(4))\n"
            f"def test_{name}(i):\n"
            f"    with open('workers.txt', 'a') as out:\n"
            f"        out.write('{name} ' + os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n")
    # xdist alone: loading every installed plugin in three processes cost most of a minute
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "xdist.plugin", "-n", "2", "--dist", "loadgroup", "."],
                          cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert done.returncode == 0, done.stdout[-2000:]
    lines = (tmp_path / "workers.txt").read_text().split("\n")
    workers = {group: {line.split()[1] for line in lines if line.startswith(group + " ")}
               for group in ("a", "b")}
    assert all(len(used) == 1 for used in workers.values()), (
        f"the groups ran on these workers: {workers} (pytest "
        f"{metadata.version('pytest')}, pytest-xdist {metadata.version('pytest-xdist')})")


@pytest.mark.slow
def test_the_notebooks_stage_collects_the_notebooks_and_nothing_else():
    """`make notebooks`' own command line, collecting only: every item is a notebook cell
    (an option that takes a value once swallowed the folder, and the stage ran the unit
    tests instead)."""
    shown = subprocess.run(["make", "-n", "--no-print-directory", "notebooks",
                            f"PY={sys.executable}", "JOBS=1"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.replace("\\\n", " ")
    command = next(line for line in shown.splitlines() if "-m pytest" in line)
    arguments = command.split("-m pytest", 1)[1].split()
    done = subprocess.run([sys.executable, "-m", "pytest", *arguments, "--collect-only", "-q"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    items = [line for line in done.stdout.splitlines() if "::" in line]
    assert len(items) > 500, done.stdout[-2000:]
    assert all(line.startswith("notebooks/") and ".ipynb::Cell " in line for line in items), (
        [line for line in items if not line.startswith("notebooks/")][:5])

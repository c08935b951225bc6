"""The project's own promises: lock file, dependency lists, cheap import, clean notebooks."""

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

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
    installed = {_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
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
    return sorted((ROOT / "notebooks").rglob("*.ipynb"))


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


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_a_notebook_saved_with_outputs_is_committed_stripped(tmp_path):
    """A teacher ran a notebook in class and saved it: git still stores it stripped."""
    nbstripout = pytest.importorskip("nbstripout")
    del nbstripout
    _git("init", "-q", cwd=tmp_path, check=True)
    (tmp_path / ".gitattributes").write_text((ROOT / ".gitattributes").read_text())
    # the same configuration as the Makefile's install step
    makefile = (ROOT / "Makefile").read_text()
    assert "filter.nbstripout.clean" in makefile and "--keep-id" in makefile
    _git("config", "filter.nbstripout.clean", f"'{sys.executable}' -m nbstripout --keep-id",
         cwd=tmp_path, check=True)
    _git("config", "filter.nbstripout.smudge", "cat", cwd=tmp_path, check=True)
    source = ROOT / "notebooks" / "00_start_here.ipynb"
    notebook = json.loads(source.read_text())
    code = next(cell for cell in notebook["cells"] if cell["cell_type"] == "code")
    code["execution_count"] = 3
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ran in class\n"]}]
    (tmp_path / "00.ipynb").write_text(json.dumps(notebook, indent=1))
    _git("add", "00.ipynb", cwd=tmp_path, check=True)
    stored = json.loads(_git("show", ":00.ipynb", cwd=tmp_path, check=True).stdout)
    assert not _dirty_cells(stored)
    assert stored == json.loads(source.read_text())  # ids and metadata kept as committed


def test_readme_shows_the_two_commands_and_every_notebook():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    for path in notebooks():
        if path.parent.name != "solutions":
            assert path.name in readme, f"README does not list {path.name}"


def test_ci_runs_make_test_only():
    steps = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    assert steps[-1] == "make test"
    assert all(s.startswith(("set ", "cd ", "make test")) for s in steps), steps

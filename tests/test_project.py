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
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[_name(name)] = version
    return pins


def test_constraints_pin_cpu_torch_and_every_dependency():
    pins = constraints()
    assert pins["torch"] == "2.13.0+cpu"
    assert not [name for name in pins if name.startswith("nvidia-")]
    missing = pyproject_dependencies() - set(pins)
    assert not missing, f"dependencies without a pin in constraints.txt: {sorted(missing)}"


@pytest.mark.skipif(
    Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
    reason="checks the environment `make install` builds (.venv), not this one",
)
def test_installed_environment_matches_constraints():
    pins = constraints()
    installed = {_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    wrong = {n: (installed[n], v) for n, v in pins.items() if n in installed and installed[n] != v}
    assert not wrong, f"installed versions differ from constraints.txt: {wrong}"
    assert not [n for n in installed if n.startswith("nvidia-")], "CUDA packages were installed"


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


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: str(p.relative_to(ROOT)))
def test_notebook_outputs_are_stripped(path):
    notebook = json.loads(path.read_text())
    dirty = [
        index
        for index, cell in enumerate(notebook["cells"])
        if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count"))
    ]
    assert not dirty, f"{path.name}: cells {dirty} have outputs or execution counts"


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

"""Which test files and notebooks a change of library versions can change.

The version sessions (noxfile.py: oldest, Colab, newest) install other releases of the
course's libraries than `make` does, and run only what those releases can change; the
transformers release sweep (scripts/transformers_releases.py) does the same for one library.
The rule, read from the files (nothing is run):

- A file depends on a distribution when it imports one of the distribution's modules, or
  of a distribution that requires it (transformers requires tqdm; torch requires sympy),
  directly or through what it imports of the course: rope_lab's modules (every import in
  them counts, at the top of the module or inside a function: a function's import runs when
  a test calls it), the helper modules of tests/ and the conftest.py files every test or
  notebook loads. An import is an ``import`` statement, ``importlib.import_module("x")``,
  ``pytest.importorskip("x")``, a module run in a subprocess (``-m rope_lab.hf``, or a
  string that is a rope_lab module's name), or a look at a distribution's installed release
  (``importlib.metadata.version("transformers")``: rope_lab.hf picks its rules by it).
- The course's distributions are those pyproject.toml names (dependencies and extras),
  except the tools that run the checks (:data:`CHECKERS`: pytest, nbval, hypothesis …):
  their releases change how the course is checked, not what a learner runs.
- A session runs the files that depend on a course distribution whose installed version
  differs from ``make``'s environment (.venv). Every test file is still collected there.
- Of those files a session runs the fast tests and, of the slow ones (marked ``slow``), those
  marked ``versions`` too (``-m "not slow or versions"``). A slow test that names a course
  library's module in its own code (``transformers``, ``nh3``, ``matplotlib`` …: its subject
  is that library's behaviour) must carry ``versions``: :func:`unmarked_library_tests`
  finds those that do not, and the tests fail on one. numpy and torch do not count there:
  every test and every notebook runs them, and the sessions run every fast test and every
  notebook that depends on them. The other slow tests drive the project's own tooling in
  subprocesses (git, pip, compilers, signals, locks, the mutant copies of the package), the
  same under any release; ``make test`` runs them in .venv.

``python scripts/version_dependent.py DIST...`` lists the files that depend on those
distributions.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import sys
from importlib import metadata
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "rope_lab"
# What runs the checks, not what the course runs (see the module's docstring).
CHECKERS = frozenset({"pytest", "pytest-xdist", "nbval", "hypothesis", "ruff", "nox",
                      "playwright", "import-linter"})
_MODULE_NAME = re.compile(rf"{PACKAGE}(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_RUN_MODULE = re.compile(rf"-m\s+({PACKAGE}(?:\.[A-Za-z_][A-Za-z0-9_]*)*)")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def course_distributions(root: Path = ROOT) -> set[str]:
    """Every distribution pyproject.toml names, but the checkers."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    named = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        named += extra
    return {normalize(re.match(r"[A-Za-z0-9_.\-]+", requirement)[0])
            for requirement in named} - CHECKERS


@functools.cache
def modules_of() -> dict[str, set[str]]:
    """Top-level module names of each installed distribution (normalized name)."""
    found: dict[str, set[str]] = {}
    for module, distributions in metadata.packages_distributions().items():
        for distribution in distributions:
            found.setdefault(normalize(distribution), set()).add(module)
    return found


def _imports(tree: ast.AST, *, commands: bool = True) -> set[str]:
    """Dotted module names imported anywhere in ``tree``: statements, import_module and
    importorskip calls, a string that is a rope_lab module's name (``[python, "-m",
    "rope_lab.hf"]``) and, with ``commands``, ``-m rope_lab.x`` inside a string (a command
    line). Docstrings and sentences are not imports."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and isinstance(node.func, (ast.Attribute, ast.Name))
              and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
              in {"import_module", "importorskip", "__import__"}):
            names.add(node.args[0].value)
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and isinstance(node.func, ast.Attribute)
              and node.func.attr in {"version", "distribution", "requires"}):
            # importlib.metadata.version("transformers"): what the code does depends on
            # which release is installed (rope_lab.hf picks its rules file by it)
            names.add(normalize(node.args[0].value).replace("-", "_"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _MODULE_NAME.fullmatch(node.value):
                names.add(node.value)
            elif commands:
                names.update(_RUN_MODULE.findall(node.value))
    return names


def _relative_imports(tree: ast.AST, module: str, root: Path = ROOT) -> set[str]:
    """``from . import x`` / ``from .y import x`` inside rope_lab module ``module``."""
    names = set()
    parts = module.split(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            package = 1 if _is_package(module, root) else 0
            base = ".".join(parts[:len(parts) - node.level + package])
            target = f"{base}.{node.module}" if node.module else base
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


@functools.cache
def _is_package(module: str, root: Path = ROOT) -> bool:
    return (root / Path(*module.split(".")) / "__init__.py").is_file()


@functools.cache  # each file's closure walks most of the package again: ~200 000 lookups
def course_file(module: str, root: Path = ROOT) -> Path | None:
    """The file of rope_lab module (or package) ``module``; None if it is not one."""
    path = root / Path(*module.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def _code_of(path: Path) -> str:
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        lines = [line for cell in cells if cell["cell_type"] == "code"
                 for line in "".join(cell["source"]).splitlines()]
        # IPython's magics and shell lines are not Python
        return "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                         for line in lines)
    return path.read_text(encoding="utf-8")


@functools.cache
def _names(path: Path, root: Path) -> frozenset[str]:
    """The dotted names ``path`` imports (:func:`_imports`, relative ones resolved)."""
    tree = ast.parse(_code_of(path))
    inside = path.is_relative_to(root / PACKAGE)
    names = _imports(tree, commands=not inside)  # the package's strings are messages
    if inside:
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        names |= _relative_imports(tree, module.removesuffix(".__init__"), root)
    return frozenset(names)


def imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """Top-level names of every module ``path`` reaches (see the module's docstring)."""
    helpers = {p.stem: p for p in (root / "tests").glob("*.py")}
    conftests = [root / "conftest.py"] + ([root / "tests" / "conftest.py"]
                                          if path.suffix == ".py" else [])
    seen: set[Path] = set()
    reached: set[str] = set()
    pending = [path, *[c for c in conftests if c.is_file()]]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for name in _names(current, root):
            top = name.split(".")[0]
            if top == PACKAGE:
                parts = name.split(".")
                for length in range(1, len(parts) + 1):  # importing a.b.c runs a, a.b, a.b.c
                    found = course_file(".".join(parts[:length]), root)
                    if found is not None:
                        pending.append(found)
            elif top in helpers and top != "conftest":
                pending.append(helpers[top])
            else:
                reached.add(top)
    return reached


@functools.cache
def requirements_of(distribution: str) -> frozenset[str]:
    """``distribution`` and everything it requires, transitively (installed ones; extras
    left out): a library runs its requirements' code, so their releases reach its users."""
    seen, pending = set(), [normalize(distribution)]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            required = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in required:
            if "extra ==" in requirement.replace('extra==', 'extra =='):
                continue
            pending.append(normalize(re.match(r"[A-Za-z0-9_.\-]+", requirement)[0]))
    return frozenset(seen)


def distributions_reached(path: Path, root: Path = ROOT) -> set[str]:
    """The installed distributions whose code ``path`` can run: those of the modules it
    reaches (:func:`imported_modules`) and, transitively, what they require."""
    by_module: dict[str, set[str]] = {}
    for distribution, modules in modules_of().items():
        for module in modules:
            by_module.setdefault(module, set()).add(distribution)
    reached: set[str] = set()
    for module in imported_modules(path, root):
        for distribution in by_module.get(module, {normalize(module)}):
            reached |= requirements_of(distribution)
    return reached


def depends_on(path: Path, distributions: set[str], root: Path = ROOT) -> bool:
    return bool(distributions_reached(path, root) & {normalize(d) for d in distributions})


def dependent_files(paths: list[Path], distributions: set[str], root: Path = ROOT) -> list[Path]:
    """The files among ``paths`` that depend on one of ``distributions``."""
    return [path for path in paths if depends_on(path, distributions, root)]


def changed_distributions(installed: dict[str, str | None], root: Path = ROOT) -> set[str]:
    """The course's distributions whose version in ``installed`` (name → version, None when
    absent) differs from this environment's."""
    changed = set()
    for name in course_distributions(root):
        try:
            here = metadata.version(name)
        except metadata.PackageNotFoundError:
            here = None
        if installed.get(name) != here:
            changed.add(name)
    return changed


def installed_versions(names) -> dict[str, str | None]:
    """Versions of ``names`` in this environment (for a session to report)."""
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


# Every test and notebook runs these; the fast tests that depend on them run in the sessions.
BASE = frozenset({"numpy", "torch"})
SESSION_MARKERS = "not slow or versions"


def _marks(decorators) -> set[str]:
    """Names of the pytest marks among ``decorators`` (``@pytest.mark.slow`` → "slow")."""
    found = set()
    for decorator in decorators:
        node = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "mark"):
            found.add(node.attr)
    return found


def _module_marks(tree: ast.Module) -> set[str]:
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "pytestmark"
                for target in node.targets):
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) \
                else [node.value]
            found |= _marks(values)
    return found


def unmarked_library_tests(path: Path, root: Path = ROOT) -> list[str]:
    """The slow tests of test file ``path`` that name a course library's module (numpy and
    torch aside, :data:`BASE`) in their own code and are not marked ``versions``."""
    modules = modules_of()
    libraries = {module for name in course_distributions(root) - BASE
                 for module in modules.get(name, set())}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module_marks = _module_marks(tree)
    found = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                or not node.name.startswith("test"):
            continue
        marks = module_marks | _marks(node.decorator_list)
        if "slow" not in marks or "versions" in marks:
            continue
        named = {child.id for child in ast.walk(node) if isinstance(child, ast.Name)}
        named |= {alias.name.split(".")[0] for child in ast.walk(node)
                  if isinstance(child, (ast.Import, ast.ImportFrom))
                  for alias in (child.names if isinstance(child, ast.Import) else
                                [ast.alias(child.module or "")])}
        if named & libraries:
            found.append(f"{path.name}::{node.name} names {sorted(named & libraries)}")
    return found


def main(argv: list[str] | None = None) -> int:
    distributions = set(sys.argv[1:] if argv is None else argv)
    if not distributions:
        print("usage: python scripts/version_dependent.py DISTRIBUTION...", file=sys.stderr)
        return 2
    from rope_lab.course import notebook_files

    files = sorted((ROOT / "tests").glob("test_*.py")) + notebook_files(ROOT / "notebooks",
                                                                        recursive=True)
    for path in dependent_files(files, distributions):
        print(path.relative_to(ROOT).as_posix())
    return 0


if __name__ == "__main__":
    sys.exit(main())

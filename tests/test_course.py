"""Course conventions, checked on every notebook that exists (later ones included).

- every notebook, solutions too, starts with exactly ``course.COLAB_CELL``, then a title,
  then the setup cell;
- every main notebook is listed in ``course.NOTEBOOKS`` and states the same minutes;
- every main notebook has the required sections, and its exercises have templates and a
  solutions notebook that asserts each checker.
"""

import json
import re
from pathlib import Path

import pytest

from rope_lab import course

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
REQUIRED_HEADINGS = ("Exercises", "Summary", "Further reading")
MINUTES = {notebook.filename: notebook.minutes for notebook in course.NOTEBOOKS}


def main_notebooks() -> list[Path]:
    return course.notebook_files(NOTEBOOK_DIR)


def solution_notebooks() -> list[Path]:
    return course.notebook_files(NOTEBOOK_DIR / "solutions")


def _ids(path: Path) -> str:
    return str(path.relative_to(ROOT))


def cells(path: Path) -> list[dict]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return [{"type": c["cell_type"], "source": "".join(c["source"])} for c in notebook["cells"]]


def markdown(path: Path) -> str:
    return "\n".join(c["source"] for c in cells(path) if c["type"] == "markdown")


def code(path: Path) -> str:
    return "\n".join(c["source"] for c in cells(path) if c["type"] == "code")


def checkers(source: str) -> set[str]:
    return set(re.findall(r"exercises\.(check_\w+)\(", source))


@pytest.mark.parametrize("path", main_notebooks() + solution_notebooks(), ids=_ids)
def test_starts_with_the_colab_cell_title_and_setup(path):
    first, second, third = cells(path)[:3]
    assert first["type"] == "code" and first["source"] == course.COLAB_CELL
    assert second["type"] == "markdown" and second["source"].startswith("# ")
    assert third["type"] == "code" and "rl.setup_notebook(seed=" in third["source"]


@pytest.mark.parametrize("path", main_notebooks(), ids=_ids)
def test_main_notebook_is_on_the_course_map_with_its_minutes(path):
    assert path.name in MINUTES, f"{path.name} is not listed in rope_lab.course.NOTEBOOKS"
    title = cells(path)[1]["source"].replace("*", "")  # **bold** or not
    assert "What you will learn" in title
    assert f"Time: about {MINUTES[path.name]} minutes" in title


@pytest.mark.parametrize("path", main_notebooks(), ids=_ids)
def test_main_notebook_has_the_required_sections_in_order(path):
    headings = [line.lstrip("#").strip() for line in markdown(path).splitlines()
                if line.startswith("#")]
    positions = []
    for required in REQUIRED_HEADINGS:
        found = [i for i, heading in enumerate(headings) if heading.startswith(required)]
        assert found, f"{path.name} has no '{required}' heading"
        positions.append(found[0])
    assert positions == sorted(positions), f"{path.name}: sections out of order {headings}"


@pytest.mark.parametrize("path", main_notebooks(), ids=_ids)
def test_exercises_have_templates_and_asserted_solutions(path):
    source = code(path)
    used = checkers(source)
    assert 1 <= len(used) <= 4, f"{path.name} grades {len(used)} exercises, expected 1–4"
    assert source.count('raise NotImplementedError("your code here")') >= len(used)
    solution = NOTEBOOK_DIR / "solutions" / f"{path.stem}_solutions.ipynb"
    assert solution.exists(), f"{path.name} has exercises but no {_ids(solution)}"
    asserted = set(re.findall(r"assert exercises\.(check_\w+)\(", code(solution)))
    assert used == asserted, f"{solution.name} asserts {sorted(asserted)}, expected {sorted(used)}"
    assert "NotImplementedError" not in code(solution)


@pytest.mark.parametrize("path", solution_notebooks(), ids=_ids)
def test_every_solutions_notebook_belongs_to_a_main_notebook(path):
    assert path.stem.endswith("_solutions")
    main = NOTEBOOK_DIR / f"{path.stem.removesuffix('_solutions')}.ipynb"
    assert main.exists(), f"{_ids(path)} has no {_ids(main)}"

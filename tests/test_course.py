"""Course conventions, checked on every notebook that exists (later ones included).

- every notebook, solutions too, starts with its title, then exactly ``course.COLAB_CELL``
  (short: the first screen is the title and what you will learn), then the setup cell; a
  Chinese notebook's install cell is the same code with its comment and message in Chinese;
- the install cell installs a pinned release of the published course, or nothing at all
  while the course names no published repository, and the README says the same;
- every main notebook is listed in ``course.NOTEBOOKS`` and states the same minutes;
- every main notebook has the required sections, and its exercises have templates and a
  solutions notebook that asserts each checker.
"""

import ast
import json
import re
import unicodedata
from pathlib import Path

import nbformat
import pytest

from rope_lab import book, course

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


ZH_DIR = NOTEBOOK_DIR / "zh_CN"


def chinese_notebooks() -> list[Path]:
    return course.notebook_files(ZH_DIR) + course.notebook_files(ZH_DIR / "solutions")


@pytest.mark.parametrize("path", main_notebooks() + solution_notebooks(), ids=_ids)
def test_starts_with_the_title_then_the_install_cell_and_setup(path):
    first, second, third = cells(path)[:3]
    assert first["type"] == "markdown" and first["source"].startswith("# ")
    assert second["type"] == "code" and second["source"] == course.COLAB_CELL, (
        f"{path.name}: the cell below the title must be exactly rope_lab.course.COLAB_CELL "
        "(python -m rope_lab.book --install-cells puts it there)")
    assert third["type"] == "code" and "rl.setup_notebook(seed=" in third["source"]


@pytest.mark.parametrize("path", chinese_notebooks(), ids=_ids)
def test_a_chinese_notebook_has_the_chinese_install_cell(path):
    first, second = cells(path)[:2]
    assert first["type"] == "markdown" and first["source"].startswith("# ")
    expected = course.install_cell(course.REPOSITORY, course.REF, language="zh")
    assert second["type"] == "code" and second["source"] == expected, (
        f"{_ids(path)}: the cell below the title must be course.install_cell(REPOSITORY, REF, "
        'language="zh") (python -m rope_lab.translations build puts it there)')


@pytest.mark.parametrize("path", main_notebooks(), ids=_ids)
def test_main_notebook_is_on_the_course_map_with_its_minutes(path):
    assert path.name in MINUTES, f"{path.name} is not listed in rope_lab.course.NOTEBOOKS"
    title = cells(path)[0]["source"].replace("*", "")  # **bold** or not
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


# --- the install cell: a pinned release of the published course, or nothing ---------------

PUBLISHED = ("https://github.com/teacher/rope-course", "v1.0")
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def run_cell(cell: str, *, colab: bool, monkeypatch) -> list:
    """Run an install cell as Colab would (google.colab imported) or elsewhere; return the
    commands it ran."""
    import subprocess
    import sys

    ran = []
    if colab:
        monkeypatch.setitem(sys.modules, "google.colab", type(sys)("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setattr(subprocess, "run", lambda command, **kw: ran.append(command) or
                        subprocess.CompletedProcess(command, 0, "", ""))
    exec(compile(cell, "install_cell", "exec"), {})
    return ran


def test_unpublished_the_cell_installs_nothing_and_says_what_to_do(monkeypatch):
    cell = course.install_cell(None, None)
    assert run_cell(cell, colab=False, monkeypatch=monkeypatch) == []
    with pytest.raises(SystemExit) as stop:
        run_cell(cell, colab=True, monkeypatch=monkeypatch)
    assert "names no published repository, so it installs nothing" in str(stop.value)
    assert "make lab" in str(stop.value)
    assert "http" not in cell and "pip" not in cell


@pytest.mark.parametrize(("ref", "archive"), [
    ("v1.0", "https://github.com/teacher/rope-course/archive/refs/tags/v1.0.zip"),
    (COMMIT, f"https://github.com/teacher/rope-course/archive/{COMMIT}.zip")])
def test_published_the_cell_installs_the_pinned_release_on_colab_only(ref, archive,
                                                                      monkeypatch):
    cell = course.install_cell(PUBLISHED[0], ref)
    assert run_cell(cell, colab=False, monkeypatch=monkeypatch) == []
    (command,) = run_cell(cell, colab=True, monkeypatch=monkeypatch)
    assert command[-1] == f"rope_lab[models] @ {archive}"
    assert "--no-input" in command and "heads" not in cell


@pytest.mark.parametrize("ref", ["main", "master", "HEAD", "", "v1 0", "../x", "v1.lock",
                                 "-v1", "v1..2", None, 1])
def test_a_ref_that_does_not_pin_a_release_is_refused(ref):
    with pytest.raises(ValueError, match="ref="):
        course.check_ref(ref)


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("published", [False, True])
def test_the_install_cell_is_short(published, language):
    where = PUBLISHED if published else (None, None)
    cell = course.install_cell(*where, language=language)
    assert len(cell.splitlines()) <= 13
    # in columns: a CJK character takes two
    assert max(sum(1 + (unicodedata.east_asian_width(c) in "WF") for c in line)
               for line in cell.splitlines()) <= 100


def _han(text: str) -> int:
    return len(re.findall(r"[\u4e00-\u9fff]", text))


def _code_of_install_cell(cell: str) -> str:
    """The cell's code with its message to the reader (SystemExit's argument, and the
    placeholder for an empty pip error) masked, the f-string fields it shows kept; comments
    are not in the tree."""
    tree = ast.parse(cell)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "SystemExit":
            fields = sorted(ast.unparse(value.value) for value in ast.walk(node)
                            if isinstance(value, ast.FormattedValue))
            node.args = [ast.Constant(f"<message showing {fields}>")]
        if isinstance(node, ast.BoolOp) and isinstance(node.values[-1], ast.List):
            node.values[-1].elts = [ast.Constant("<placeholder>")]
    return ast.dump(tree)


@pytest.mark.parametrize("where", [(None, None), PUBLISHED, (PUBLISHED[0], COMMIT)],
                         ids=["unpublished", "tag", "commit"])
def test_the_chinese_install_cell_is_the_english_code_in_chinese(where):
    english = course.install_cell(*where)
    chinese = course.install_cell(*where, language="zh")
    assert _code_of_install_cell(chinese) == _code_of_install_cell(english)
    assert _code_of_install_cell(english) != _code_of_install_cell(
        english.replace('"-q"', '"-qq"').replace("import sys", "import os, sys"))
    # the comment and the message are Chinese, and nothing of their English is left
    comment = chinese.split("\nimport", 1)[0]
    message = chinese[chinese.index("raise SystemExit("):]
    assert _han(comment) >= 20 and _han(message) >= 30
    for text in course.INSTALL_CELL_TEXTS[course._template_of(english)[0]]:
        assert text[:12] not in chinese  # "On Colab, in", "Could not in", "no message" …
    assert course.install_cell_language(chinese) == "zh"
    assert course.install_cell_language(english) == "en"
    assert course.install_cell_language(chinese.replace("。", ".", 1)) is None
    assert course.install_cell_language(english.replace("sys", "os")) is None


def test_the_catalog_words_are_the_english_cells_own():
    """INSTALL_CELL_TEXTS (the catalog's entries) are read off the English cells' comment,
    SystemExit message and placeholder, so neither can change without the other."""
    for where in [(None, None), PUBLISHED]:
        cell = course.install_cell(*where)
        texts = course.INSTALL_CELL_TEXTS[course._template_of(cell)[0]]
        tree = ast.parse(cell)
        (stop,) = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
                   and getattr(node.func, "id", None) == "SystemExit"]
        message = "".join(part.value if isinstance(part, ast.Constant)
                          else "{" + ast.unparse(part.value) + "}"
                          for part in (stop.args[0].values
                                       if isinstance(stop.args[0], ast.JoinedStr)
                                       else [stop.args[0]]))
        placeholders = [node.values[-1].elts[0].value for node in ast.walk(tree)
                        if isinstance(node, ast.BoolOp) and isinstance(node.values[-1], ast.List)]
        assert [cell.splitlines()[0], message, *placeholders] == [f"# {texts[0]}", *texts[1:]]


def test_the_chinese_cell_says_what_to_do_on_colab_and_nothing_elsewhere(monkeypatch):
    cell = course.install_cell(None, None, language="zh")
    assert run_cell(cell, colab=False, monkeypatch=monkeypatch) == []
    with pytest.raises(SystemExit) as stop:
        run_cell(cell, colab=True, monkeypatch=monkeypatch)
    assert str(stop.value) == (
        "这份课程副本没有指定已发布的仓库，所以不会安装任何东西。请在自己的电脑上运行课程"
        "（见 README：make lab），或者从已发布副本的 Colab 链接打开这个笔记本。")
    (command,) = run_cell(course.install_cell(*PUBLISHED, language="zh"), colab=True,
                          monkeypatch=monkeypatch)
    assert command[-1] == f"rope_lab[models] @ {course.archive_url(*PUBLISHED)}"


def test_a_translation_that_loses_a_field_or_a_cell_that_is_not_an_install_cell_is_refused(
        monkeypatch):
    from rope_lab import i18n

    with pytest.raises(ValueError, match="not an install cell"):
        course.translate_install_cell("print('hello')", "zh")
    with pytest.raises(ValueError, match="language must be one of"):
        course.install_cell(None, None, language="fr")
    real = i18n.gettext
    monkeypatch.setattr(i18n, "gettext", lambda message: real(message).replace("{last}", ""))
    monkeypatch.setattr(i18n, "_", i18n.gettext)
    with pytest.raises(ValueError, match=r"has the fields \['source'\]; expected those of the "
                                         r"English, \['last', 'source'\]"):
        course.install_cell(*PUBLISHED, language="zh")


def test_the_readme_block_and_the_links_follow_the_setting():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index(book.BADGES_START) + len(book.BADGES_START) + 1
    assert readme[start:readme.index(book.BADGES_END)] == book.readme_badges() + "\n"
    texts = [readme, *(path.read_text(encoding="utf-8")
                       for path in book.install_cell_notebooks(ROOT))]
    if not course.published():  # no link may send a reader to an address nobody here owns
        for text in texts:
            assert "colab.research.google.com/github/" not in text
            assert "mybinder.org/v2/gh/" not in text
            assert "/archive/" not in text
        assert book.UNPUBLISHED_NOTE in readme
    else:
        for notebook in course.NOTEBOOKS:
            assert course.colab_url(notebook.filename) in readme
        assert book.binder_url() in readme


def _copy_of_the_repo(tmp_path: Path) -> Path:
    import shutil

    root = tmp_path / "repo"
    shutil.copytree(NOTEBOOK_DIR, root / "notebooks")
    shutil.copytree(ROOT / "tests" / "browser", root / "tests" / "browser",
                    ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (root / "rope_lab").mkdir()
    shutil.copy(ROOT / "rope_lab" / "course.py", root / "rope_lab" / "course.py")
    shutil.copy(ROOT / "README.md", root / "README.md")
    return root


def _settings(root: Path) -> dict:
    namespace = {}
    exec(compile((root / "rope_lab" / "course.py").read_text(), "course", "exec"), namespace)
    return namespace


def test_set_repository_pins_every_link_and_install_cell(tmp_path):
    root = _copy_of_the_repo(tmp_path)
    for url, ref in (("https://github.com/teacher/rope-course/", "v1.0"),
                     ("https://github.com/teacher/rope-course", COMMIT)):  # and again
        changed = book.set_repository(url, ref, root)
        assert root / "rope_lab" / "course.py" in changed and root / "README.md" in changed
        settings = _settings(root)
        assert (settings["REPOSITORY"], settings["REF"]) == (PUBLISHED[0], ref)
        cell = settings["COLAB_CELL"]
        assert cell == course.install_cell(PUBLISHED[0], ref)
        readme = (root / "README.md").read_text()
        assert readme.count(f"colab.research.google.com/github/teacher/rope-course/blob/{ref}/"
                            "notebooks/") == len(course.NOTEBOOKS)
        assert f"mybinder.org/v2/gh/teacher/rope-course/{ref}?" in readme
        assert book.UNPUBLISHED_NOTE not in readme
        chinese = course.install_cell(PUBLISHED[0], ref, language="zh")
        assert chinese != cell and course.archive_url(PUBLISHED[0], ref) in chinese
        seen = {"en": 0, "zh": 0}
        for path in book.install_cell_notebooks(root):
            first, second = nbformat.read(path, as_version=4).cells[:2]
            if "google.colab" in (first.source + second.source):
                language = "zh" if "zh_CN" in path.relative_to(root).parts else "en"
                assert first.cell_type == "markdown", path.name
                assert second.source == {"en": cell, "zh": chinese}[language], path.name
                seen[language] += 1
        assert seen["zh"] == len(chinese_notebooks()) and seen["en"] > seen["zh"]


def test_set_repository_refuses_a_branch_or_a_bad_address(tmp_path):
    root = _copy_of_the_repo(tmp_path)
    with pytest.raises(ValueError, match="is a branch, which moves"):
        book.set_repository("https://github.com/a/b", "main", root)
    for url in ("github.com/a/b", "https://gitlab.com/a/b", "https://github.com/only-owner",
                "https://github.com/a/b/c", None):
        with pytest.raises(ValueError, match=r"url=.*expected https://github\.com/OWNER/NAME"):
            book.set_repository(url, "v1", root)
    assert _settings(root)["REPOSITORY"] == course.REPOSITORY  # nothing was rewritten


def test_set_repository_command_needs_a_ref(capsys):
    assert book.main(["--set-repository", "https://github.com/a/b"]) == 2
    assert "needs --ref" in capsys.readouterr().err

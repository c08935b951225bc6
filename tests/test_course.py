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

COMMIT = "0123456789abcdef0123456789abcdef01234567"
# a published course: its repository and the commit its install cell installs
PUBLISHED = ("https://github.com/teacher/rope-course", COMMIT)


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


@pytest.mark.parametrize(("repository", "archive"), [
    ("https://github.com/teacher/rope-course",
     f"https://github.com/teacher/rope-course/archive/{COMMIT}.zip"),
    ("https://gitlab.com/teacher/rope-course",
     f"https://gitlab.com/teacher/rope-course/-/archive/{COMMIT}/rope-course-{COMMIT}.zip"),
    ("https://codeberg.org/teacher/rope-course",
     f"https://codeberg.org/teacher/rope-course/archive/{COMMIT}.zip")])
def test_published_the_cell_installs_the_pinned_commit_on_colab_only(repository, archive,
                                                                     monkeypatch):
    cell = course.install_cell(repository, COMMIT)
    assert run_cell(cell, colab=False, monkeypatch=monkeypatch) == []
    (command,) = run_cell(cell, colab=True, monkeypatch=monkeypatch)
    assert command[-1] == f"rope_lab[models] @ {archive}"
    assert "--no-input" in command and "heads" not in cell and "tags" not in cell


@pytest.mark.parametrize("not_a_commit", ["v1.0", "0123abc", COMMIT.upper(), 1])
def test_the_install_cell_pins_a_commit_never_a_tag(not_a_commit):
    """Issue 35: the cell installed a tag's archive, which a moved tag changes."""
    with pytest.raises(ValueError, match="is not a full commit hash"):
        course.install_cell(PUBLISHED[0], not_a_commit)


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
    assert len(cell.splitlines()) <= 14  # the commit on a line of its own: a URL fits
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


@pytest.mark.parametrize("where", [(None, None), PUBLISHED], ids=["unpublished", "published"])
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
    with pytest.raises(ValueError, match=r"has the fields \['source'\] or other braces; "
                                         r"expected exactly those of the English, "
                                         r"\['last', 'source'\]"):
        course.install_cell(*PUBLISHED, language="zh")


@pytest.mark.parametrize("edit, expected", [
    # a field of its own in the f-string message would run code on every learner's Colab
    (lambda text: text.replace("{last}", "{last}{__import__('os').system('id')}"),
     "or other braces"),
    (lambda text: text + "\r", "control characters"),  # ends a line of the generated code
    (lambda text: text.replace("Colab", "Colab\nimport os", 1), "control characters"),
])
def test_a_translation_cannot_put_code_into_the_install_cell(monkeypatch, edit, expected):
    """Issue 35: a newline or an f-string field in a translated install-cell message became
    code in the generated cell; `make translations` and set-repository wrote it."""
    from rope_lab import i18n

    real = i18n.gettext
    monkeypatch.setattr(i18n, "gettext", lambda message: edit(real(message)))
    monkeypatch.setattr(i18n, "_", i18n.gettext)
    with pytest.raises(ValueError, match=expected):
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


def _commit_all(root: Path, message: str) -> str:
    import subprocess

    def git(*args):
        return subprocess.run(["git", "-C", str(root), "-c", "user.name=teacher", "-c",
                               "user.email=teacher@example.org", *args], check=True,
                              capture_output=True, text=True).stdout

    if not (root / ".git").exists():
        git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", message)
    return git("rev-parse", "HEAD").strip()


def _files(root: Path) -> dict:
    return {path: path.read_bytes() for path in root.rglob("*")
            if path.is_file() and ".git" not in path.parts}


def test_publishing_takes_two_runs_and_pins_the_install_cell_at_a_commit(tmp_path):
    """Issue 35: the install cell installed a tag's archive (a moved tag changes what learners
    run). Now the first run writes the settings and links, the second pins the package of
    the commit that records them; a third changes nothing."""
    import shutil

    root = _copy_of_the_repo(tmp_path)
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    _commit_all(root, "the course")
    url, ref = "https://github.com/teacher/rope-course/", "v1.0"
    first = book.set_repository(url, ref, root)
    assert first.step == 1 and first.package_commit is None
    assert set(first.changed) == {root / "rope_lab" / "course.py", root / "README.md"}
    settings = _settings(root)
    assert (settings["REPOSITORY"], settings["REF"], settings["PACKAGE_COMMIT"]) == (
        PUBLISHED[0], ref, None)
    readme = (root / "README.md").read_text()
    assert readme.count(f"colab.research.google.com/github/teacher/rope-course/blob/{ref}/"
                        "notebooks/") == len(course.NOTEBOOKS)
    assert f"mybinder.org/v2/gh/teacher/rope-course/{ref}?" in readme
    with pytest.raises(ValueError, match="does not record REPOSITORY"):
        book.set_repository(url, ref, root)  # not committed yet
    head = _commit_all(root, "publish at v1.0")
    second = book.set_repository(url, ref, root)
    assert second.step == 2 and second.package_commit == head
    settings = _settings(root)
    cell = settings["COLAB_CELL"]
    assert settings["PACKAGE_COMMIT"] == head
    assert cell == course.install_cell(PUBLISHED[0], head)
    chinese = course.install_cell(PUBLISHED[0], head, language="zh")
    assert f'commit = "{head}"' in cell and course.archive_url(PUBLISHED[0], head) == (
        f"https://github.com/teacher/rope-course/archive/{head}.zip") and "tags" not in cell
    seen = {"en": 0, "zh": 0}
    for path in book.install_cell_notebooks(root):
        first_cell, second_cell = nbformat.read(path, as_version=4).cells[:2]
        if "google.colab" in (first_cell.source + second_cell.source):
            language = "zh" if "zh_CN" in path.relative_to(root).parts else "en"
            assert first_cell.cell_type == "markdown", path.name
            assert second_cell.source == {"en": cell, "zh": chinese}[language], path.name
            seen[language] += 1
    assert seen["zh"] == len(chinese_notebooks()) and seen["en"] > seen["zh"]
    assert set(second.changed) == {root / "rope_lab" / "course.py", *(
        path for path in book.install_cell_notebooks(root) if "google.colab" in
        path.read_text(encoding="utf-8"))} - {root / "README.md"}
    _commit_all(root, "pin the install cell")
    third = book.set_repository(url, ref, root)
    assert (third.step, third.changed, third.package_commit) == (3, [], head)
    # the next release: a package change HEAD lacks is refused, with nothing written
    book.set_repository(url, "v1.1", root)
    _commit_all(root, "publish at v1.1")
    (root / "rope_lab" / "new_module.py").write_text("x = 1\n")
    before = _files(root)
    with pytest.raises(ValueError, match=r"changes HEAD .* lacks \(rope_lab/new_module.py\)"):
        book.set_repository(url, "v1.1", root)
    assert _files(root) == before


@pytest.mark.parametrize("url", [
    "https://github.com/../..", "https://github.com/a/..", "https://github.com/./b",
    "github.com/a/b", "http://github.com/a/b", "https://example.org/a/b",
    "https://github.com.example.org/a/b", "https://github.com/only-owner",
    "https://github.com/a/b/c", "https://github.com/a b/c", "https://github.com/-a/b", None])
def test_set_repository_refuses_an_address_that_names_no_repository(tmp_path, url):
    """Issue 35: `--set-repository https://github.com/../.. --ref v1` exited 0 and pointed 55
    files at it."""
    root = _copy_of_the_repo(tmp_path)
    before = _files(root)
    with pytest.raises(ValueError, match=r"url=.*does not name a repository on a known forge"):
        book.set_repository(url, "v1", root)
    assert _files(root) == before


def test_set_repository_refuses_a_branch(tmp_path):
    root = _copy_of_the_repo(tmp_path)
    with pytest.raises(ValueError, match="is a branch, which moves"):
        book.set_repository("https://github.com/a/b", "main", root)
    assert _settings(root)["REPOSITORY"] == course.REPOSITORY  # nothing was rewritten


def test_set_repository_changes_nothing_when_a_notebook_is_damaged(tmp_path):
    """Issue 35: set-repository stopped at a damaged notebook after changing 33 files and did
    not list them."""
    root = _copy_of_the_repo(tmp_path)
    damaged = sorted(book.install_cell_notebooks(root))[-1]
    damaged.write_text(damaged.read_text(encoding="utf-8")[:500], encoding="utf-8")
    before = _files(root)
    with pytest.raises(ValueError, match=rf"{damaged.name} is not a notebook nbformat can read"
                                         r".*nothing was changed"):
        book.set_repository("https://github.com/teacher/rope-course", "v1.0", root)
    assert _files(root) == before


def test_a_course_on_gitlab_or_codeberg_gets_binder_and_no_colab_links():
    for url, binder in (("https://gitlab.com/teacher/rope-course",
                         "https://mybinder.org/v2/gl/teacher%2Frope-course/v1.0?"),
                        ("https://codeberg.org/teacher/rope-course",
                         "https://mybinder.org/v2/git/https%3A%2F%2Fcodeberg.org%2Fteacher%2F"
                         "rope-course/v1.0?")):
        table = book.readme_badges(url, "v1.0")
        assert binder in table and "colab" not in table.lower()
        assert course.colab_url("03_rope_in_2d.ipynb", repository=url, ref="v1.0") is None


def test_set_repository_command_needs_a_ref(capsys):
    assert book.main(["--set-repository", "https://github.com/a/b"]) == 2
    assert "needs --ref" in capsys.readouterr().err

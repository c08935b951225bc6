"""rope_lab.book (the static site of `make book`) and the Colab links of README and notebooks."""

import base64
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from rope_lab import book
from rope_lab.course import COLAB_CELL, NOTEBOOKS, REF, REPOSITORY, colab_url, notebook_files

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "browser" / "widget_fixture.ipynb"
PNG_A = base64.b64encode(b"\x89PNG first").decode()
PNG_B = base64.b64encode(b"\x89PNG second").decode()


# --- Colab: README badges and the install cell ----------------------------------------------

def course_files(folder="notebooks"):
    return notebook_files(ROOT / folder)


def test_readme_badge_table_has_one_colab_link_per_notebook():
    published = ("https://github.com/teacher/course", "v1.0")
    rows = book.readme_badges(*published).splitlines()[2:2 + len(NOTEBOOKS)]
    for row, notebook in zip(rows, NOTEBOOKS, strict=True):
        url = colab_url(notebook.filename, repository=published[0], ref=published[1])
        assert f"]({url})" in row
        assert f"`{notebook.filename}`" in row and book.COLAB_BADGE in row
    unpublished = book.readme_badges(None, None)
    assert book.COLAB_BADGE not in unpublished and book.UNPUBLISHED_NOTE in unpublished


def test_colab_url_and_install_cell_use_the_one_repository():
    assert 'if "google.colab" in sys.modules:' in COLAB_CELL  # a no-op everywhere else
    if REPOSITORY is None:
        assert all(colab_url(n.filename) is None for n in NOTEBOOKS)
        return
    owner_and_name = REPOSITORY.removeprefix("https://github.com/")
    for notebook in NOTEBOOKS:
        assert colab_url(notebook.filename) == (
            "https://colab.research.google.com/github/"
            f"{owner_and_name}/blob/{REF}/notebooks/{notebook.filename}")
    assert COLAB_CELL.count(REPOSITORY) == 1


def test_runtime_requirements_accept_colab_torch_and_ipywidgets_7():
    tomllib = pytest.importorskip("tomllib")
    from packaging.requirements import Requirement

    requirements = {Requirement(r).name: Requirement(r).specifier for r in tomllib.loads(
        (ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    assert requirements["ipywidgets"].contains("7.7.1")
    assert requirements["torch"].contains("2.1.0")


@pytest.mark.parametrize("path", [*course_files(), *course_files("notebooks/solutions"),
                                  *course_files("notebooks/zh_CN"),
                                  *course_files("notebooks/zh_CN/solutions")],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_notebook_has_the_colab_install_cell_below_its_title(path):
    title, install = nbformat.read(path, as_version=4).cells[:2]
    assert title.cell_type == "markdown" and title.source.startswith("# ")
    if "zh_CN" in path.parts:  # the Chinese edition's: the same code, in Chinese
        expected = book.course.install_cell(REPOSITORY, REF, language="zh")
        assert expected != COLAB_CELL
    else:
        expected = COLAB_CELL
    assert install.cell_type == "code" and install.source == expected, (
        f"{path.name}: the cell below the title must be exactly rope_lab.course.COLAB_CELL "
        "(in a Chinese notebook, in Chinese: install_cell(..., language=\"zh\"))")
    assert book.is_install_cell(install)


def test_readme_colab_badges_match_the_notebooks():
    readme = (ROOT / "README.md").read_text()
    links = set(re.findall(r"https://colab\.research\.google\.com/github/[^)\s\"]+", readme))
    if not links:
        assert REPOSITORY is None, "README has no Colab badges: run python -m rope_lab.book " \
                                   "--install-cells"
        pytest.skip("the course names no published repository yet (make set-repository)")
    expected = {colab_url(n.filename) for n in NOTEBOOKS}
    assert not links - expected, f"README Colab links to no notebook: {sorted(links - expected)}"
    present = {colab_url(p.name) for p in course_files()}
    assert not present - links, f"notebooks without a README badge: {sorted(present - links)}"


# Work in JupyterLab, Notebook 7, VS Code and Colab alike: no front-end-specific output.
FRONT_END_SPECIFIC = re.compile(
    r"%%?javascript|%matplotlib (?:widget|ipympl|notebook)|IPython\.display import .*Javascript"
    r"|display\(Javascript|%%html")


@pytest.mark.parametrize("path", course_files() + course_files("notebooks/solutions"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_notebooks_need_no_front_end_specific_features(path):
    cells = nbformat.read(path, as_version=4).cells
    found = [(index, match[0]) for index, cell in enumerate(cells) if cell.cell_type == "code"
             and (match := FRONT_END_SPECIFIC.search(cell.source))]
    assert not found, f"{path.name}: cells using front-end-specific features: {found}"


def test_the_front_end_check_catches_javascript():
    assert FRONT_END_SPECIFIC.search("%%javascript\nalert(1)")
    assert FRONT_END_SPECIFIC.search("%matplotlib widget")
    assert not FRONT_END_SPECIFIC.search("%matplotlib inline\nwidgets.decay_panel()")


# --- widgets → static figures ---------------------------------------------------------------

def widget_notebook(with_output=True):
    """A notebook whose one cell shows a Panel-like widget: VBox(HBox(slider), Output)."""
    state = {
        "box": {"model_name": "VBoxModel",
                "state": {"children": ["IPY_MODEL_controls", "IPY_MODEL_out"]}},
        "controls": {"model_name": "HBoxModel",
                     "state": {"children": ["IPY_MODEL_base", "IPY_MODEL_dtype"]}},
        "base": {"model_name": "FloatLogSliderModel",
                 "state": {"description": "base", "value": 10000.0}},
        "dtype": {"model_name": "DropdownModel",
                  "state": {"description": "dtype", "index": 1,
                            "_options_labels": ["float32", "bfloat16"]}},
        "out": {"model_name": "OutputModel", "state": {"outputs": [
            {"output_type": "display_data", "data": {"image/png": PNG_A}, "metadata": {}},
            {"output_type": "display_data", "data": {"image/png": PNG_B}, "metadata": {}},
        ] if with_output else []}},
    }
    cell = new_code_cell("panel", outputs=[new_output("display_data", data={
        book.WIDGET_VIEW: {"model_id": "box", "version_major": 2, "version_minor": 0},
        "text/plain": "VBox(...)"})])
    nb = new_notebook(cells=[cell])
    nb.metadata["widgets"] = {book.WIDGET_STATE: {"state": state, "version_major": 2,
                                                  "version_minor": 0}}
    return nb


def test_a_widget_becomes_its_last_figure_and_a_note_with_the_settings():
    nb = widget_notebook()
    assert book.freeze_widgets(nb) == 1
    outputs = nb.cells[0].outputs
    assert [o.data.get("image/png") for o in outputs] == [PNG_B, None]
    assert "Shown at base = 10000, dtype = bfloat16." in outputs[1].data["text/markdown"]
    assert "widgets" not in nb.metadata
    assert not any(book.WIDGET_VIEW in o.get("data", {}) for o in outputs)


def test_a_widget_without_a_figure_becomes_a_note():
    nb = widget_notebook(with_output=False)
    book.freeze_widgets(nb)
    (note,) = nb.cells[0].outputs
    assert "no static figure" in note.data["text/markdown"]


def test_a_widget_whose_state_was_not_saved_becomes_a_note():
    nb = widget_notebook()
    nb.metadata.pop("widgets")
    book.freeze_widgets(nb)
    assert [set(o.data) for o in nb.cells[0].outputs] == [{"text/markdown", "text/plain"}]


# --- links and pages ------------------------------------------------------------------------

def test_links_between_notebooks_point_at_pages_or_the_repository(monkeypatch):
    monkeypatch.setattr(book, "REPOSITORY", "https://github.com/teacher/course")
    monkeypatch.setattr(book, "REF", "v1.0")
    repository = "https://github.com/teacher/course/blob/v1.0"
    page = ('<a href="03_rope_in_2d.ipynb#the-derivation">x</a>'
            '<a href="./04_rope_in_d_dimensions.ipynb">y</a>'
            '<a href="solutions/03_rope_in_2d_solutions.ipynb">z</a>'
            '<a href="https://example.org/a.ipynb">w</a><a href="#top">v</a>'
            '<a href="TEACHING.md#before-class">t</a><a href="../README.md">r</a>'
            '<a href="../rope_lab/decay.py">d</a>')
    out = book.rewrite_links(page, {"03_rope_in_2d.html", "teaching.html"})
    assert 'href="03_rope_in_2d.html#the-derivation"' in out
    assert f'href="{repository}/notebooks/04_rope_in_d_dimensions.ipynb"' in out
    assert (f'href="{repository}/notebooks/solutions/'
            '03_rope_in_2d_solutions.ipynb"') in out
    assert 'href="https://example.org/a.ipynb"' in out and 'href="#top"' in out
    assert 'href="teaching.html#before-class"' in out
    assert f'href="{repository}/README.md"' in out
    assert f'href="{repository}/rope_lab/decay.py"' in out
    monkeypatch.setattr(book, "REPOSITORY", None)  # unpublished: plain text, no link
    out = book.rewrite_links(page, {"03_rope_in_2d.html", "teaching.html"})
    assert '<a title="README.md in the course repository">r</a>' in out
    assert "github.com" not in out and 'href="03_rope_in_2d.html#the-derivation"' in out


def test_navigation_links_previous_next_and_the_map():
    order = [Path(n.filename) for n in NOTEBOOKS[:3]]
    first, middle, last = (book.navigation(p, order) for p in order)
    assert "←" not in first and "01_attention_without_position.html" in first
    assert "00_start_here.html" in middle and "02_absolute_position_encodings.html" in middle
    assert "→" not in last and "index.html" in last


@pytest.mark.slow
def test_problems_finds_errors_missing_pages_and_broken_links(tmp_path):
    path = tmp_path / "broken.ipynb"
    nbformat.write(new_notebook(cells=[
        new_markdown_cell("[elsewhere](missing.html)"),
        new_code_cell("1 / 0", outputs=[new_output(
            "error", ename="ZeroDivisionError", evalue="division by zero", traceback=[])]),
    ]), path)
    out = tmp_path / "book"
    book.build(out, [path], run=False, teaching=None, log=lambda _: None)
    found = book.problems(out, [path, tmp_path / "absent.ipynb"])
    assert "broken.html: shows an error or stderr output" in found
    assert "broken.html: broken link missing.html" in found
    assert "absent.ipynb: no page absent.html" in found


@pytest.mark.slow
def test_the_book_of_the_course(tmp_path):
    """`make book`'s site for every notebook of the course, as the notebooks are on disk (the
    executed book, both editions, is built and read in the browser stage:
    tests/browser/test_book_pages.py)."""
    notebooks = book.course_notebooks()
    out = tmp_path / "book"
    book.build(out, notebooks, run=False, log=lambda _: None)
    assert book.problems(out, notebooks) == []
    index = (out / "index.html").read_text()
    for notebook in notebooks:
        assert f'href="{book.page_name(notebook)}"' in index
    if (ROOT / "notebooks" / "TEACHING.md").exists():
        assert (out / "teaching.html").exists()


@pytest.mark.slow
def test_a_run_widget_is_frozen_into_its_figure(tmp_path):
    """The widget fixture executed by the book's runner: its panel becomes a static PNG
    beside the figure above it, and no widget view is left on the page."""
    out = tmp_path / "book"
    book.build(out, [FIXTURE], teaching=None, log=lambda _: None, cache=tmp_path / "cache")
    assert book.problems(out, [FIXTURE]) == []
    page = (out / book.page_name(FIXTURE)).read_text()
    assert book.WIDGET_VIEW not in page
    assert len(re.findall(r"<img[^>]*src=\"data:image/png;base64,", page)) == 2


# --- the 简体中文 edition ------------------------------------------------------------------------

ZH = ROOT / "notebooks" / "zh_CN"


def _heading(notebook: Path) -> str:
    """A notebook's title as its first markdown cell writes it ("03 · 二维的 RoPE")."""
    first = nbformat.read(notebook, as_version=4).cells[0].source.splitlines()[0]
    return first.removeprefix("# ").strip()


def _untranslated(tmp_path) -> Path:
    """An English notebook of the course map with no Chinese twin: a copy of the last
    notebook there is, under a folder of its own (so the book cannot find a twin)."""
    english = book.course_notebooks()[-1]
    path = tmp_path / "english_only" / english.name
    path.parent.mkdir()
    shutil.copy(english, path)
    return path


@pytest.fixture(scope="module")
def two_editions(tmp_path_factory):
    """A book (not executed) of notebook 03 in both editions and one English notebook without
    a Chinese twin: (site folder, the notebooks, the untranslated one)."""
    tmp_path = tmp_path_factory.mktemp("two-editions")
    untranslated = _untranslated(tmp_path)
    notebooks = [ROOT / "notebooks" / "03_rope_in_2d.ipynb", untranslated,
                 ZH / "03_rope_in_2d.ipynb"]
    out = tmp_path / "book"
    book.build(out, notebooks, run=False, log=lambda _: None)
    return out, notebooks, untranslated


def _switch(page: str) -> list[str]:
    return re.findall(r'<a class="rope-lab-language" href="([^"]+)"', page)


@pytest.mark.slow
def test_the_chinese_edition_is_a_folder_of_chinese_pages(two_editions):
    out, notebooks, untranslated = two_editions
    assert book.problems(out, notebooks) == []
    english = (out / "03_rope_in_2d.html").read_text()
    chinese = (out / "zh_CN" / "03_rope_in_2d.html").read_text()
    assert '<html lang="en">' in english and '<html lang="zh-CN">' in chinese
    # the page's title is the Chinese notebook's own heading, its navigation is Chinese
    assert f"<title>{_heading(ZH / '03_rope_in_2d.ipynb')}</title>" in chinese
    assert "课程地图" in chinese and "Course map" not in chinese
    assert "Course map" in english and "课程地图" not in english
    # the site's one font and one MathJax, from the folder above
    assert 'url("../cjk-subset.otf")' in chinese and 'src="../mathjax/MathJax.js' in chinese
    # the switch, at the top and the bottom: to the twin, or to the other edition's index
    assert _switch(english) == ["zh_CN/03_rope_in_2d.html"] * 2
    assert _switch(chinese) == ["../03_rope_in_2d.html"] * 2
    assert _switch((out / book.page_name(untranslated)).read_text()) == ["zh_CN/index.html"] * 2
    assert _switch((out / "index.html").read_text()) == ["zh_CN/index.html"]
    assert _switch((out / "zh_CN" / "index.html").read_text()) == ["../index.html"]
    assert _switch((out / "zh_CN" / "teaching.html").read_text()) == ["../teaching.html"]
    assert _switch((out / "claims.html").read_text()) == ["zh_CN/claims.html"]
    assert _switch((out / "zh_CN" / "claims.html").read_text()) == ["../claims.html"]
    chinese_claims = (out / "zh_CN" / "claims.html").read_text()
    assert '<html lang="zh-CN">' in chinese_claims and "没有位置编码时，注意力" in chinese_claims
    # the Chinese pages' neighbours are Chinese pages: 03 is the only one here
    # (the page's text, not its stylesheets: older JupyterLab themes draw icons with ← and →)
    text = re.sub(r"<style.*?</style>", "", chinese, flags=re.S)
    assert "←" not in text and "→" not in text


def test_the_chinese_index_links_its_pages_and_the_english_ones_not_translated(two_editions):
    out, _, untranslated = two_editions
    index = (out / "zh_CN" / "index.html").read_text()
    assert '<html lang="zh-CN">' in index and "<h1>rope_lab：交互式学习位置编码" in index
    title_03 = _heading(ZH / "03_rope_in_2d.ipynb").split(" · ", 1)[1]
    assert f'<a href="03_rope_in_2d.html">{title_03}</a>' in index
    assert re.search(rf'<a href="../{untranslated.stem}.html" hreflang="en">[^<]+</a> '
                     "<em>（英文版，尚未翻译）</em>", index)
    assert '<a href="teaching.html">教学指南</a>' in index
    assert '<a href="claims.html">原博文的论断</a>' in index
    assert "分钟</td>" in index and " min</td>" not in index


def test_an_index_of_a_partial_build_says_a_notebook_is_not_in_it():
    """`python -m rope_lab.book --out DIR 03_x.ipynb`: the other notebooks exist, they are
    just not in this build (not "not written yet")."""
    from rope_lab import i18n

    english = book.index_page([ROOT / "notebooks" / "03_rope_in_2d.ipynb"], {})
    with i18n.using_language("zh"):
        chinese = book.index_page([ZH / "03_rope_in_2d.ipynb"], {}, edition=book.EDITIONS[1])
    others = len(NOTEBOOKS) - 1
    assert english.count("<em>(not in this build)</em>") == others
    assert chinese.count("<em>（本次未构建）</em>") == others
    for page in (english, chinese):
        assert "not written" not in page and "尚未写成" not in page
        assert page.count('<a href="03_rope_in_2d.html">') == 1


@pytest.mark.slow
def test_a_translated_notebook_left_out_of_a_partial_build_is_not_called_untranslated(
        tmp_path):
    """English 03 and 05 but only Chinese 03 built: the Chinese index must not say that 05
    is not translated (notebooks/zh_CN/05 exists); it is not in this build. The English
    notebook without a twin (the fixture's) still gets "not translated yet"."""
    english_05 = ROOT / "notebooks" / "05_long_range_decay.ipynb"
    assert (ZH / english_05.name).is_file()
    untranslated = _untranslated(tmp_path)
    out = tmp_path / "book"
    book.build(out, [ROOT / "notebooks" / "03_rope_in_2d.ipynb", english_05, untranslated,
                     ZH / "03_rope_in_2d.ipynb"], run=False, log=lambda _: None)
    index = (out / "zh_CN" / "index.html").read_text()
    row_05 = next(row for row in index.split("<tr>") if row.startswith("<td>05</td>"))
    assert "<em>（本次未构建）</em>" in row_05 and "尚未翻译" not in row_05, row_05
    row_last = next(row for row in index.split("<tr>")
                    if row.startswith(f"<td>{untranslated.name[:2]}</td>"))
    assert "<em>（英文版，尚未翻译）</em>" in row_last, row_last


def test_chinese_pages_open_the_chinese_notebooks_online(monkeypatch):
    from rope_lab import course, i18n

    monkeypatch.setattr(course, "REPOSITORY", "https://github.com/teacher/course")
    monkeypatch.setattr(course, "REF", "v1.0")
    monkeypatch.setattr(book, "REPOSITORY", course.REPOSITORY)
    monkeypatch.setattr(book, "REF", course.REF)
    chinese = ZH / "03_rope_in_2d.ipynb"
    with i18n.using_language("zh"):
        nav = book.navigation(chinese, [chinese])
        index = book.index_page([chinese], {}, edition=book.EDITIONS[1])
    colab = ("https://colab.research.google.com/github/teacher/course/blob/v1.0/notebooks/"
             "zh_CN/03_rope_in_2d.ipynb")
    assert f"[在 Colab 中打开]({colab})" in nav
    assert "https://mybinder.org/v2/gh/teacher/course/v1.0?urlpath=lab/tree/notebooks/zh_CN" \
        in index and "源代码" in index
    english = book.navigation(ROOT / "notebooks" / "03_rope_in_2d.ipynb",
                              [ROOT / "notebooks" / "03_rope_in_2d.ipynb"])
    assert "/notebooks/03_rope_in_2d.ipynb)" in english and "Open in Colab" in english


def test_links_on_a_chinese_page_stay_in_the_chinese_edition(monkeypatch):
    from rope_lab import i18n

    monkeypatch.setattr(book, "REPOSITORY", None)
    pages = {"03_rope_in_2d.html", "09_performance.html", "zh_CN/03_rope_in_2d.html",
             "zh_CN/teaching.html", "teaching.html"}
    page = ('<a href="03_rope_in_2d.ipynb#x">a</a><a href="../09_performance.ipynb">b</a>'
            '<a href="TEACHING.md">c</a><a href="../../README.md">d</a>')
    with i18n.using_language("zh"):
        out = book.rewrite_links(page, pages, "zh_CN/04_rope_in_d_dimensions.html")
    assert 'href="03_rope_in_2d.html#x"' in out  # the twin, beside it
    assert 'href="../09_performance.html"' in out  # not translated: the English page
    assert 'href="teaching.html"' in out
    assert '<a title="课程仓库中的 README.md">d</a>' in out
    # notebook 00's course map (executed in Chinese) links to the pages of its edition
    nb = new_notebook(cells=[new_code_cell("course_map()", outputs=[new_output(
        "display_data", data={"text/markdown": "[打开](03_rope_in_2d.ipynb) "
                                               "[打开](09_performance.ipynb)"})])])
    book.local_links(nb, pages, "zh_CN/00_start_here.html")
    assert nb.cells[0].outputs[0].data["text/markdown"] == (
        "[打开](03_rope_in_2d.html) [打开](../09_performance.html)")


def test_a_frozen_panel_speaks_the_language_of_its_edition():
    from rope_lab import i18n

    before = i18n.get_language()
    nb = widget_notebook()
    with i18n.using_language("zh"):
        book.freeze_widgets(nb)
    assert i18n.get_language() == before  # the learner's choice is back
    note = nb.cells[0].outputs[1].data["text/markdown"]
    assert note.startswith("*交互面板：")
    assert note.endswith("图中的设置：base = 10000, dtype = bfloat16。*")
    with pytest.raises(RuntimeError), i18n.using_language("zh"):
        raise RuntimeError("a page failed")
    assert i18n.get_language() == before


def test_problems_finds_a_missing_font_a_wrong_language_and_no_switch(tmp_path, two_editions):
    site, notebooks, _ = two_editions
    out = tmp_path / "book"
    shutil.copytree(site, out)
    (out / book.CJK_FONT.name).unlink()
    page = out / "zh_CN" / "03_rope_in_2d.html"
    text = page.read_text()
    page.write_text(text.replace('<html lang="zh-CN">', '<html lang="en">')
                    .replace('class="rope-lab-language"', 'class="other"'))
    found = book.problems(out, notebooks)
    assert "zh_CN/03_rope_in_2d.html: loads a missing file ../cjk-subset.otf" in found
    assert "index.html: loads a missing file cjk-subset.otf" in found
    assert 'zh_CN/03_rope_in_2d.html: not marked lang="zh-CN"' in found
    assert "zh_CN/03_rope_in_2d.html: no language switch" in found
    assert not any("no page" in problem for problem in found)
    page.unlink()
    assert "zh_CN/03_rope_in_2d.ipynb: no page zh_CN/03_rope_in_2d.html" in book.problems(
        out, notebooks)


def test_make_book_publishes_every_edition_from_the_notebook_files():
    """Which Chinese pages exist follows notebooks/zh_CN/ (a notebook translated later gets
    its page and its switch with no change to the book)."""
    english, chinese = book.course_notebooks(), notebook_files(ZH)
    published = book.book_notebooks()
    assert published[:len(english)] == english and set(published) == set(english + chinese)
    assert all(book.page_name(p) == f"zh_CN/{p.stem}.html" for p in chinese)
    assert all(book.edition_of(p) == book.ENGLISH for p in english)
    assert {book.edition_of(p) for p in notebook_files(ZH, recursive=True)} == {
        book.EDITIONS[1]}  # the Chinese solutions too
    assert {book.edition_of(p) for p in notebook_files(ZH.parent / "solutions")} == {
        book.ENGLISH}


# --- offline: MathJax and the Chinese web font ----------------------------------------------

def test_the_cjk_font_has_every_chinese_character_of_the_repository():
    """Notebooks, markdown, translation catalogs (any locale folder), package strings."""
    from fontTools.ttLib import TTFont

    cmap = TTFont(book.CJK_FONT).getBestCmap()
    missing = sorted(ch for ch in book.cjk_characters() if ord(ch) not in cmap)
    assert not missing, (f"{book.CJK_FONT.name} lacks {''.join(missing)}: run `make cjk-font` "
                         "(scripts/cjk_font.py) after adding Chinese text")
    assert len(book.cjk_characters()) > 20  # the course does use Chinese (the glossary)


def gb2312_level_1() -> set[str]:
    """The 3755 common hanzi of GB 2312 (rows 16-55), from Python's own codec."""
    found = set()
    for row in range(0xB0, 0xD8):
        for cell in range(0xA1, 0xFF):
            try:
                found.add(bytes([row, cell]).decode("gb2312"))
            except UnicodeDecodeError:
                pass
    return found


def test_the_cjk_font_covers_common_chinese_and_stays_small():
    """The 简体中文 edition writes new sentences without a font rebuild for each: the font
    has all of GB 2312 level 1 and the usual CJK punctuation; it stays under a megabyte."""
    from fontTools.ttLib import TTFont

    font = TTFont(book.CJK_FONT)
    cmap = font.getBestCmap()
    common = gb2312_level_1()
    assert len(common) == 3755
    punctuation = set("，。、：；！？（）《》「」【】～")
    missing = sorted(ch for ch in common | punctuation if ord(ch) not in cmap)
    assert not missing, f"{book.CJK_FONT.name} lacks {''.join(missing[:50])}"
    assert book.CJK_FONT.stat().st_size < 1024 * 1024, book.CJK_FONT.stat().st_size
    assert font["name"].getDebugName(1) == "Noto Sans CJK SC"  # the name the CSS expects
    assert "Open Font License" in (book.ASSETS / "cjk-subset.LICENSE.txt").read_text()


def test_cjk_characters_reads_every_text_of_the_repository(tmp_path):
    (tmp_path / "notebooks" / "zh").mkdir(parents=True)
    (tmp_path / "notebooks" / "x.md").write_text("RoPE 是旋转位置编码。")
    (tmp_path / "locale" / "zh_CN" / "LC_MESSAGES").mkdir(parents=True)
    (tmp_path / "locale" / "zh_CN" / "LC_MESSAGES" / "rope_lab.po").write_text(
        'msgid "decay"\nmsgstr "衰减"\n')
    (tmp_path / "notebooks" / "zh" / "00.ipynb").write_text('{"source": "外推"}')
    (tmp_path / "pkg.py").write_text('TITLE = "注意力"')
    # not the course's text: JupyterLab's copies, environments, builds, binary files
    (tmp_path / "notebooks" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "notebooks" / ".ipynb_checkpoints" / "x-checkpoint.md").write_text("矩阵")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "site.py").write_text("熵")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "page.html").write_text("阈")
    (tmp_path / "font.otf").write_bytes("张量".encode())
    assert book.cjk_characters(tmp_path) == set("是旋转位置编码。衰减外推注意力")


@pytest.mark.slow
def test_the_font_script_names_the_fix_when_the_font_is_missing(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "cjk_font.py"), "--font",
                             str(tmp_path / "absent.ttc")], capture_output=True, text=True)
    assert result.returncode == 1
    assert "apt-get install fonts-noto-cjk" in result.stderr and "--font PATH" in result.stderr


def test_a_missing_mathjax_names_the_extra_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "jupyter_server_mathjax", None)  # import fails
    with pytest.raises(book.MissingBookDependency, match=r"pip install 'rope_lab\[book\]'"):
        book.build(tmp_path / "book", [FIXTURE], run=False, teaching=None, log=lambda _: None)
    assert not (tmp_path / "book").exists()  # nothing deleted or half-written


def test_a_missing_cjk_font_names_the_make_target(monkeypatch, tmp_path):
    monkeypatch.setattr(book, "CJK_FONT", tmp_path / "absent.woff")
    with pytest.raises(book.MissingBookDependency, match="make cjk-font"):
        book.build(tmp_path / "book", [FIXTURE], run=False, teaching=None, log=lambda _: None)


@pytest.mark.slow
def test_pages_load_nothing_from_the_network(tmp_path):
    out = tmp_path / "book"
    book.build(out, [ROOT / "notebooks" / "03_rope_in_2d.ipynb"], run=False, log=lambda _: None)
    assert (out / "mathjax" / "MathJax.js").exists() and (out / book.CJK_FONT.name).exists()
    assert not (out / "mathjax" / "extensions" / "a11y" / "mathmaps").exists()
    for page in out.glob("*.html"):
        text = page.read_text()
        remote = re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="(?:https?:)?//[^"]+"', text)
        assert not remote, f"{page.name} loads {remote}"
        assert f'src="{book.MATHJAX_URL}"' in text or page.name == "index.html"
        assert book.CJK_FAMILY in text


def test_pages_set_every_text_in_a_stack_that_ends_with_the_cjk_font(tmp_path):
    """Prose, code and printed outputs read their fonts from JupyterLab's variables; the
    book's CSS redefines them with the shipped font last (and sets no other family)."""
    out = tmp_path / "book"
    book.build(out, [FIXTURE], run=False, teaching=None, log=lambda _: None)
    page = (out / book.page_name(FIXTURE)).read_text()
    css = book.CJK_CSS.read_text()
    assert css in page and f'url("{book.CJK_FONT.name}")' in css
    for variable in ("--jp-ui-font-family", "--jp-content-font-family",
                     "--jp-code-font-family-default"):
        stack = re.search(variable + r":([^;]+);", css)[1]
        assert re.search(r'"rope_lab CJK( mono)?"\s*$', stack), (variable, stack)
    # the two @font-face rules, and code shown as HTML (show_source) in the code font
    rules = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    assert len(re.findall(r"(?<![-\w])font-family:", rules)) == 3
    assert "var(--jp-content-font-family)" in (out / "index.html").read_text()


@pytest.mark.parametrize("published", [False, True])
def test_course_map_links_become_links_to_pages(monkeypatch, published):
    """The course map links each notebook (in Colab once published, the file until then);
    the book points those links at its own pages, and leaves a notebook it has no page for."""
    from rope_lab import course

    if published:
        monkeypatch.setattr(course, "REPOSITORY", "https://github.com/teacher/rope-course")
        monkeypatch.setattr(course, "REF", "v1.0")
    first, second = NOTEBOOKS[0].filename, NOTEBOOKS[1].filename
    link = {name: course.colab_url(name) or name for name in (first, second)}
    assert (link[first] != first) == published
    nb = new_notebook(cells=[new_code_cell("course_map()", outputs=[
        new_output("display_data", data={
            "text/markdown": f"| [open]({link[first]}) | [open]({link[second]}) |",
            "text/html": f'<a href="{link[first]}">open</a>'})])])
    book.local_links(nb, {book.page_name(Path(first))})
    data = nb.cells[0].outputs[0].data
    assert data["text/markdown"] == (f"| [open]({book.page_name(Path(first))}) "
                                     f"| [open]({link[second]}) |")  # no page: left alone
    assert data["text/html"] == f'<a href="{book.page_name(Path(first))}">open</a>'


def test_notebooks_run_with_encrypted_kernel_connections():
    """ipykernel 7 warns at every start over plain TCP; the book asks for CurveZMQ keys."""
    zmq = pytest.importorskip("zmq")
    from jupyter_client.manager import KernelManager

    from rope_lab import runner

    config = runner.kernel_config()
    if "transport_encryption" in KernelManager.class_trait_names() and zmq.has("curve"):
        assert config.KernelManager.transport_encryption == "auto"
    else:
        assert "KernelManager" not in config


# --- a panel whose default figure is the one just above -------------------------------------

def _png(draw, dpi=72, size=(6, 4)) -> str:
    import io

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, dpi=dpi)
    draw(figure.add_subplot())
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return base64.b64encode(buffer.getvalue()).decode()


def test_same_figure_ignores_resolution_but_sees_a_different_plot():
    import numpy as np

    x = np.linspace(0, 10, 200)

    def curve(ax):
        ax.plot(x, np.sin(x), lw=3)

    def other(ax):
        ax.imshow(np.outer(np.sin(x), np.cos(x)))

    assert book.same_figure(_png(curve, dpi=72), _png(curve, dpi=144))
    assert not book.same_figure(_png(curve), _png(other))
    assert not book.same_figure(_png(curve), PNG_A)  # not an image at all


def _panel_below_a_figure(static: str, panel: str):
    """A notebook: a cell that shows the figure ``static``, then a panel drawing ``panel``."""
    nb = widget_notebook()
    nb.metadata["widgets"][book.WIDGET_STATE]["state"]["out"]["state"]["outputs"] = [
        {"output_type": "display_data", "data": {"image/png": panel}, "metadata": {}}]
    nb.cells.insert(0, new_code_cell("plots.figure()", outputs=[
        new_output("display_data", data={"image/png": static})]))
    return nb


def test_a_panel_showing_the_figure_above_is_not_shown_twice():
    import numpy as np

    def curve(ax):
        ax.plot(np.arange(50) ** 0.5, lw=3)

    nb = _panel_below_a_figure(static=_png(curve, dpi=72), panel=_png(curve, dpi=110))
    book.freeze_widgets(nb)
    outputs = nb.cells[1].outputs
    assert [set(o.data) for o in outputs] == [{"text/markdown", "text/plain"}]
    assert "draws the figure above" in outputs[0].data["text/markdown"]


def test_a_panel_drawing_something_else_keeps_its_figure():
    import numpy as np

    static = _png(lambda ax: ax.plot(np.arange(50), lw=3))
    panel = _png(lambda ax: ax.imshow(np.eye(20)))
    nb = _panel_below_a_figure(static, panel)
    book.freeze_widgets(nb)
    assert nb.cells[1].outputs[0].data["image/png"] == panel


def test_an_image_widget_panel_becomes_its_figure():
    nb = widget_notebook()
    state = nb.metadata["widgets"][book.WIDGET_STATE]["state"]
    state["out"] = {"model_name": "ImageModel", "state": {"format": "png"},
                    "buffers": [{"path": ["value"], "data": PNG_B, "encoding": "base64"}]}
    book.freeze_widgets(nb)
    assert nb.cells[0].outputs[0].data["image/png"] == PNG_B


# --- one setting for the repository ---------------------------------------------------------

def test_readme_binder_badge_uses_the_one_repository():
    readme = (ROOT / "README.md").read_text()
    if book.binder_url() is None:  # unpublished: no badge pointing anywhere
        assert "mybinder.org/v2" not in readme and book.BINDER_BADGE not in readme
        return
    assert f"({book.binder_url()})" in readme
    assert book.BINDER_BADGE in readme


def test_set_repository_command_line(tmp_path, monkeypatch, capsys):
    # what set_repository rewrites is tested in test_course.py; here, what the command says
    commit = "0123456789abcdef0123456789abcdef01234567"
    readme, settings = ROOT / "README.md", ROOT / "rope_lab" / "course.py"
    for step, expected in ((1, "step 1 of 2: 2 file(s) now point at https://github.com/a/b at v1"),
                           (2, f"step 2 of 2: 2 file(s) changed; the course points at "
                               f"https://github.com/a/b at v1 and every install cell installs "
                               f"the package of commit {commit}; commit, tag that commit v1")):
        monkeypatch.setattr(book, "set_repository", lambda url, ref, step=step: book.Publication(
            [settings, readme], step, commit if step == 2 else None))
        assert book.main(["--set-repository", "https://github.com/a/b", "--ref", "v1"]) == 0
        out = capsys.readouterr().out
        assert "book: rewrote README.md" in out and "book: rewrote rope_lab/course.py" in out
        assert expected in out, out


def test_set_repository_command_refuses_an_address_with_one_line(capsys):
    """Issue 35: `--set-repository https://github.com/../.. --ref v1` exited 0."""
    assert book.main(["--set-repository", "https://github.com/../..", "--ref", "v1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not name a repository on a known forge" in err


# --- the one gate for HTML -------------------------------------------------------------------

HOSTILE_MARKDOWN = """# Hostile

<script>alert('markdown')</script>
<img src="x.png" onerror="alert('onerror')">
[a link](javascript:alert('link')) and <a href="JaVaScRiPt:alert(1)">another</a>
<iframe src="https://example.org"></iframe><frameset><frame src="x"></frameset>
<object data="x.swf"></object><embed src="x.swf"><base href="https://example.org/">
<meta http-equiv="refresh" content="0; url=https://example.org">
<form action="https://example.org"><input name="password"></form>
<svg onload="alert('svg')"><circle r="4"/></svg>
<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">data</a>
<p style="position: fixed; background: url(https://example.org/track.png)">styled</p>

Kept: $\\theta_i = b^{-2i/d}$, **bold**, a [page](03_rope_in_2d.ipynb) and a table:

| m | angle |
|---|---|
| 1 | θ |
"""
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9"
       "awAAAABJRU5ErkJggg==")


def _hostile_notebook(folder: Path) -> Path:
    code = new_code_cell("show()", outputs=[
        new_output("display_data", data={
            "text/html": "<b>html output</b><script>alert('output')</script>"
                         "<img src=x onerror=alert(2)>",
            "text/plain": "html"}),
        new_output("display_data", data={"application/javascript": "alert('js output')",
                                         "text/plain": "js"}),
        new_output("display_data", data={"text/markdown": "<img src=y onerror=alert(3)> md",
                                         "text/plain": "md"}),
        new_output("display_data", data={"image/png": PNG, "text/plain": "figure"}),
        new_output("display_data", data={
            "text/html": '<div class="highlight" style="background: #f8f8f8"><pre>'
                         '<span style="color: #008000; font-weight: bold">def</span></pre></div>',
            "text/plain": "source"})])
    path = folder / "hostile.ipynb"
    nbformat.write(new_notebook(cells=[new_markdown_cell(HOSTILE_MARKDOWN), code]), path)
    return path


@pytest.mark.slow
@pytest.mark.versions
def test_no_script_handler_frame_or_javascript_url_reaches_a_page(tmp_path):
    """Issue 35: the book passed notebook markdown <script>, onerror=, javascript: links,
    <iframe> and text/html outputs through verbatim."""
    notebook = _hostile_notebook(tmp_path)
    out = tmp_path / "book"
    book.build(out, [notebook], run=False, teaching=None, log=lambda _: None)
    page = (out / "hostile.html").read_text(encoding="utf-8")
    head, body = page.split("<body", 1)
    tags = _tags(body)
    names = {tag for tag, _ in tags}
    assert not names & {"script", "iframe", "frame", "frameset", "object", "embed", "base",
                        "meta", "form", "input", "svg", "style"}, names
    attributes = [(tag, name, value or "") for tag, pairs in tags for name, value in pairs]
    assert not [a for a in attributes if a[1].startswith("on")], attributes
    urls = [value.strip().lower() for tag, name, value in attributes if name in ("href", "src")]
    assert not [url for url in urls if url.startswith(("javascript:", "vbscript:"))
                or url.startswith("data:") and not url.startswith("data:image/png")], urls
    assert not [a for a in attributes if a[1] == "style" and ("position" in a[2]
                                                              or "url(" in a[2])]
    for shown in ("alert('markdown')", "alert('output')", "alert('svg')", "alert('js output')"):
        assert shown not in body, shown  # a script's code is dropped, not shown as text
    assert not [p for p in book.problems(out, [notebook]) if "the body holds" in p]
    # the head is the book's template, whatever the notebook holds: the scripts of a page
    # made from a harmless notebook, MathJax among them
    plain = tmp_path / "plain.ipynb"
    nbformat.write(new_notebook(cells=[new_markdown_cell("# Plain")]), plain)
    book.build(tmp_path / "plain", [plain], run=False, teaching=None, log=lambda _: None)
    scripts = re.compile(r"<script[^>]*>.*?</script>", re.S)
    assert scripts.findall(head) == scripts.findall(
        (tmp_path / "plain" / "plain.html").read_text(encoding="utf-8").split("<body")[0])
    assert f'<script src="{book.MATHJAX_URL}">' in head
    # what a page needs survives: maths, bold, a table, the figure, highlighted code's colours
    assert "\\theta_i" in body and "<strong>bold</strong>" in body and "<table>" in body
    assert f'src="data:image/png;base64,{PNG}"' in body
    assert 'style="color:#008000;font-weight:bold"' in body and "<b>html output</b>" in body
    assert "styled" in body and "html output" in body and " md" in body


def _tags(body: str) -> list[tuple[str, list]]:
    """Every start tag of ``body`` as a browser's parser reads it: (name, attributes)."""
    from html.parser import HTMLParser

    found = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, attrs))

    Tags().feed(body)
    return found


def test_problems_finds_a_script_that_got_past_the_gate(tmp_path, monkeypatch):
    notebook = _hostile_notebook(tmp_path)
    monkeypatch.setattr(book, "sanitize_page", lambda page: page)  # the gate left out
    out = tmp_path / "book"
    book.build(out, [notebook], run=False, teaching=None, log=lambda _: None)
    assert any("the body holds" in problem and "<script" in problem
               for problem in book.problems(out, [notebook]))


def _shape(page: str) -> tuple[list, list, str]:
    """The body's tags, attribute names and text, read by an HTML parser: older nbconvert
    writes ``width=540`` unquoted, and the sanitizer quotes it (the same attribute)."""
    from html.parser import HTMLParser

    tags, attributes, text = [], [], []

    class Reader(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append(tag)
            attributes.extend(name for name, _ in attrs)

        handle_startendtag = handle_starttag

        def handle_data(self, data):
            text.append(data)

    reader = Reader(convert_charrefs=True)
    reader.feed("<body" + page.split("<body", 1)[1])
    reader.close()
    return sorted(tags), sorted(attributes), "".join(text)


def test_the_gate_keeps_a_page_of_the_course_as_it_is():
    """The sanitizer changes no tag, attribute or text of a real page (notebook 03, as it is
    in the working tree: stripped, or run and saved by a teacher)."""
    notebook = ROOT / "notebooks" / "03_rope_in_2d.ipynb"
    page = book.render_page(notebook, [notebook], {book.page_name(notebook), "index.html"})
    assert _shape(book.sanitize_page(page)) == _shape(page)


def test_the_page_shape_sees_a_dropped_attribute_or_tag():
    page = '<html><body><p class="a">x<img src="y" width=540></p></body></html>'
    assert _shape(page) == (["body", "img", "p"], ["class", "src", "width"], "x")
    assert _shape(page.replace(" width=540", "")) != _shape(page)
    assert _shape(page.replace('<img src="y" width=540>', "")) != _shape(page)
    assert _shape(page.replace(">x<", "><")) != _shape(page)


def test_every_font_file_mathjax_names_is_in_the_site(tmp_path):
    """MathJax's combined configuration names TeX fonts by file (its assistive MathML asked
    for TeX/otf/MathJax_AMS-Regular.otf on 05's page: a console error, as the site had no
    such file): every one it can ask for is there."""
    out = tmp_path / "book"
    book.build(out, [ROOT / "notebooks" / "03_rope_in_2d.ipynb"], run=False,
               teaching=None, log=lambda _: None)
    config = (out / book.MATHJAX_DIR / "config" / "TeX-AMS-MML_HTMLorMML-full.js").read_text()
    named = set(re.findall(r"MathJax_[A-Za-z]+-[A-Za-z]+\.otf", config))
    assert "MathJax_AMS-Regular.otf" in named
    folder = out / book.MATHJAX_DIR / "fonts" / "HTML-CSS" / "TeX" / "otf"
    assert sorted(name for name in named if not (folder / name).is_file()) == []
    for name in named:  # a real font, not an empty stand-in
        assert (folder / name).read_bytes()[:4] in (b"wOFF", b"OTTO", b"\0\1\0\0")

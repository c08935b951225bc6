"""rope_lab.slides: the slide types of every notebook (RISE) and the offline decks' checks.

The decks themselves are opened in a browser by tests/browser/test_slides_offline.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from rope_lab import book, slides
from rope_lab.translations import catalogs

ROOT = Path(__file__).resolve().parents[1]
ENGLISH = slides.course_notebooks()


def test_the_rule_on_each_kind_of_cell():
    nb = new_notebook(cells=[
        new_markdown_cell("# 03 · RoPE in two dimensions\n\nwhat you will learn"),
        new_code_cell(book.COLAB_CELL),
        new_code_cell("import torch"),
        new_markdown_cell("## 1. Complex numbers"),
        new_code_cell("x = 1"),
        new_markdown_cell("**Step 2 (polar form):** every number …"),
        new_markdown_cell("### Shift invariance"),
        new_markdown_cell("Turn the knobs: θ, then m and n."),
        new_code_cell("widgets.rotation_2d_panel()"),
        new_code_cell("longest = {}"),
        new_code_cell("widgets.Panel(plots.atlas, {'family': widgets.dropdown('family', [])}).box"),
        new_markdown_cell("A plain paragraph, *not* bold at its start: **bold** later."),
        new_code_cell("print(widgets)  # uses widgets, shows no panel"),
    ])
    assert slides.slide_types(nb) == ["slide", "skip", "-", "slide", "-", "subslide", "subslide",
                                      "subslide", "-", "-", "subslide", "-", "-"]


@pytest.mark.parametrize("path", ENGLISH, ids=lambda p: p.name)
def test_every_notebook_has_the_rules_slide_types_and_riSE_settings(path):
    nb = nbformat.read(path, as_version=4)
    assert slides.stored_types(nb) == slides.slide_types(nb), (
        f"{path.name}: its slide types are not the rule's; run python -m rope_lab.slides "
        "--mark, then python -m rope_lab.translations build")
    assert nb.metadata.get("rise") == slides.RISE_SETTINGS
    shown = [t for cell, t in zip(nb.cells, slides.stored_types(nb), strict=True)
             if slides.is_panel(cell)]
    assert all(t in slides.SHOWN for t in shown)  # every slider panel is on a slide


@pytest.mark.parametrize("path", ENGLISH, ids=lambda p: p.name)
def test_the_chinese_notebook_carries_the_same_slides(path):
    english = nbformat.read(path, as_version=4)
    chinese = nbformat.read(path.parent / "zh_CN" / path.name, as_version=4)
    assert [(c.id, c.metadata.get("slideshow")) for c in chinese.cells] == \
        [(c.id, c.metadata.get("slideshow")) for c in english.cells]
    assert chinese.metadata.get("rise") == english.metadata.get("rise")


def test_gits_notebook_filter_keeps_the_slides(tmp_path):
    """A notebook run and saved in class goes through nbstripout with the Makefile's options
    (catalogs.CLEAN_FILTER_OPTIONS; tests/test_i18n.py keeps the two equal): the slide types
    and RISE's settings stay."""
    nb = nbformat.read(ENGLISH[3], as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", text="run in class\n")]
            cell.execution_count = 1
    saved = tmp_path / ENGLISH[3].name
    nbformat.write(nb, saved)
    stored = nbformat.reads(subprocess.run(
        [sys.executable, "-m", "nbstripout", *catalogs.CLEAN_FILTER_OPTIONS],
        input=saved.read_bytes(), capture_output=True, check=True).stdout.decode(), as_version=4)
    assert not any(c.get("outputs") for c in stored.cells)  # the filter did strip
    assert slides.stored_types(stored) == slides.slide_types(stored)
    assert stored.metadata["rise"] == slides.RISE_SETTINGS


def test_mark_writes_the_committed_notebook_back_from_a_bare_one(tmp_path):
    """The rule, run on a notebook whose slide metadata was lost, writes the file that is
    committed, byte for byte; run again, it changes nothing."""
    bare = tmp_path / ENGLISH[5].name
    nb = nbformat.read(ENGLISH[5], as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("slideshow", None)
    nb.metadata.pop("rise", None)
    nbformat.write(nb, bare)
    assert slides.mark([bare]) == [bare]
    assert bare.read_bytes() == ENGLISH[5].read_bytes()
    assert slides.mark([bare]) == []


def test_problems_in_a_deck(tmp_path):
    notebook = ROOT / "notebooks" / "03_rope_in_2d.ipynb"
    deck = tmp_path / "03_rope_in_2d.html"
    (tmp_path / "reveal.js").mkdir()
    good = ('<!DOCTYPE html><html lang="en"><head><script src="reveal.js"></script></head>'
            "<body><section><p>hi</p></section></body><script>Reveal.initialize({})</script>"
            "</html>")
    (tmp_path / "reveal.js" / "x").write_text("")
    deck.write_text(good.replace('src="reveal.js"', 'src="reveal.js/x"'), encoding="utf-8")
    assert slides.problems(tmp_path, [notebook]) == []
    deck.write_text(good.replace('src="reveal.js"', 'src="https://unpkg.com/reveal.js"')
                    .replace("<p>hi</p>", "<p onclick='x()'>hi</p><script>alert(1)</script>")
                    .replace('lang="en"', 'lang="fr"'), encoding="utf-8")
    found = slides.problems(tmp_path, [notebook, notebook.parent / "zh_CN" / notebook.name])
    assert [p.split(":")[0] for p in found] == ["03_rope_in_2d.html"] * 3 + [
        "zh_CN/03_rope_in_2d.html"]
    assert "loads something from the network" in found[0]
    assert "not marked lang" in found[1] and "the slides hold" in found[2]


def test_bad_input(tmp_path, capsys):
    text = tmp_path / "notes.txt"
    text.write_text("not a notebook")
    assert slides.main(["--out", str(tmp_path / "out"), str(text)]) == 2
    assert "notes.txt: not a notebook of the course" in capsys.readouterr().err
    assert slides.main(["--out", str(text), str(ROOT / "notebooks" / "03_rope_in_2d.ipynb")]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_reveal_js_comes_from_the_package(tmp_path):
    pytest.importorskip("sphinx_revealjs", reason="the teach extra is not installed")
    source = slides.reveal_source()
    slides.copy_reveal(tmp_path, source)
    copied = tmp_path / slides.REVEAL_DIR
    assert (copied / "dist" / "reveal.js").read_bytes() == (source / "dist/reveal.js").read_bytes()
    theme = (copied / "dist" / "theme" / f"{slides.REVEAL_THEME}.css").read_text()
    assert "http" not in theme.split("*/", 1)[-1]  # no font from the network
    assert (copied / "dist/theme/fonts/source-sans-pro/source-sans-pro.css").exists()
    shutil.rmtree(copied)

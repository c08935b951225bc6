"""Notebook 00's course map and environment report."""

from rope_lab import about, course


def test_course_map_lists_every_notebook_with_its_colab_link(monkeypatch):
    text = about.course_map_markdown()
    for notebook in course.NOTEBOOKS:
        assert notebook.filename in text and notebook.title in text
        assert f"[open]({course.colab_url(notebook.filename) or notebook.filename})" in text
    monkeypatch.setattr(course, "REPOSITORY", "https://github.com/teacher/course")
    monkeypatch.setattr(course, "REF", "v2")
    text = about.course_map_markdown()
    for notebook in course.NOTEBOOKS:
        assert f"github/teacher/course/blob/v2/notebooks/{notebook.filename})" in text
    total = sum(notebook.minutes for notebook in course.NOTEBOOKS)
    assert text.splitlines()[-1].startswith(f"| | **total** | **{total}** |")


def test_course_map_of_a_subset():
    text = about.course_map_markdown(course.NOTEBOOKS[:2])
    assert len(text.splitlines()) == 2 + 2 + 1
    assert course.NOTEBOOKS[2].filename not in text


def test_environment_report_names_versions_and_device():
    import torch

    report = about.environment()
    assert report["torch"] in (torch.__version__, torch.__version__.split("+")[0])
    assert report["device"] in ("cpu", "cuda", "mps")
    for name in about.REPORTED_PACKAGES:
        assert report[name]
    lines = about.environment_report().splitlines()
    assert len(lines) == len(report) and all(" : " in line for line in lines)

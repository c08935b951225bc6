"""Without a browser the widget test skips, except under CI, where it fails."""

import importlib.util
from pathlib import Path

import pytest

from rope_lab.course import notebook_files

# This folder's conftest, loaded under its own name (the root and tests/ have one too).
_spec = importlib.util.spec_from_file_location(
    "browser_conftest", Path(__file__).with_name("conftest.py"))
setup = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(setup)


def test_missing_browser_skips_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no Chromium"):
        setup.unavailable("no Chromium found")


@pytest.mark.parametrize("value", ["true", "TRUE"])
def test_missing_browser_fails_under_ci(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        setup.unavailable("no Chromium found")


def test_chromium_path_can_be_given(monkeypatch, tmp_path):
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("ROPE_LAB_CHROMIUM", str(fake))
    assert setup.find_chromium() == str(fake)


def test_served_copies_name_a_kernel(tmp_path):
    import nbformat

    setup.copy_notebooks(tmp_path)
    copies = notebook_files(tmp_path, recursive=True)
    assert tmp_path / "fixtures" / "widget_fixture.ipynb" in copies
    for copy in copies:
        assert nbformat.read(copy, as_version=4).metadata["kernelspec"]["name"] == "python3"

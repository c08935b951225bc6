"""git and a saved notebook: the lab's post-save hook (lab/git_after_save.py) and git's
notebook filter as one process (scripts/git_notebook_filter.py), both set up by `make`.

A save must never hurt git: the hook returns within its bound however slow git is, never
leaves ``.git/index.lock`` behind, and takes any file name; the filter process cleans a
notebook exactly as the ``clean`` command does, and a fresh clone's first index write starts
it once, not once per notebook.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from test_project import clean_filter, process_filter  # noqa: E402

pytest.importorskip("nbstripout")
pytestmark = pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True)
                                .returncode != 0, reason="no git")


def _load_hook():
    spec = importlib.util.spec_from_file_location("git_after_save",
                                                  ROOT / "lab" / "git_after_save.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = _load_hook()


def git(*args: str, cwd: Path, check: bool = True, **kwargs) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check,
                          **kwargs).stdout


def saved_in_class(source: Path) -> str:
    """``source`` as JupyterLab saves it after Run All: outputs, counts, language_info."""
    notebook = json.loads(source.read_text(encoding="utf-8"))
    for count, cell in enumerate(c for c in notebook["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = count + 1
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ran\n"]}]
    notebook["metadata"]["language_info"] = {"name": "python", "version": "3.11.7"}
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def repository(folder: Path, names: list[str], *, process: bool = True) -> Path:
    """A committed repository of copies of notebook 00 under ``names``, with the filter as
    `make` sets it up (``process=False``: the clean command alone)."""
    folder.mkdir(parents=True, exist_ok=True)
    git("init", "-q", cwd=folder)
    (folder / ".gitattributes").write_text((ROOT / ".gitattributes").read_text())
    git("config", "filter.nbstripout.clean", clean_filter(), cwd=folder)
    if process:
        git("config", "filter.nbstripout.process", process_filter(), cwd=folder)
    git("config", "filter.nbstripout.smudge", "cat", cwd=folder)
    earlier = time.time() - 60  # not racily clean: git trusts the index (see make_racy)
    for name in [".gitattributes", *names]:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        if name != ".gitattributes":
            (folder / name).write_text((ROOT / "notebooks" / "00_start_here.ipynb").read_text())
        os.utime(folder / name, (earlier, earlier))
    git("add", "-A", cwd=folder)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x", cwd=folder)
    return folder


def status(folder: Path) -> str:
    return git("status", "--porcelain", cwd=folder)


def make_racy(folder: Path) -> None:
    """The index as a fresh clone leaves it: written in the same second as the files it
    lists ("racily clean": git cannot trust their stat data, so the next command that writes
    the index re-reads every one of them through the filter)."""
    oldest = min((folder / name).stat().st_mtime
                 for name in git("ls-files", "-z", cwd=folder).split("\0") if name)
    os.utime(folder / ".git" / "index", (oldest, oldest))


# File names git would otherwise read as patterns or pathspec magic (one raised "embedded
# null byte" from the hook: HTTP 500 on every save).
ODD_NAMES = ["sub dir/00.ipynb", "star*.ipynb", "what?.ipynb", "[ab].ipynb", ":colon.ipynb",
             "中文 名.ipynb"]


@pytest.mark.slow
def test_a_saved_notebook_is_clean_and_an_edited_one_is_not_whatever_its_name(tmp_path):
    """git status lists a notebook whose size changed as modified without running the clean
    filter; after the hook it compares content: run and saved is clean, edited is not."""
    folder = repository(tmp_path, ODD_NAMES + ["a.ipynb", "b.ipynb", "ab.ipynb"])
    for name in ODD_NAMES:
        (folder / name).write_text(saved_in_class(ROOT / "notebooks" / "00_start_here.ipynb"))
    listed = sorted(status(folder).splitlines())  # git's size shortcut: the hook's reason
    assert len(listed) == len(ODD_NAMES) and all(line[:3] == " M " for line in listed), listed
    for name in ODD_NAMES:
        hook.compare_by_content(str(folder / name))
    assert status(folder) == ""
    assert git("diff", "--cached", "--name-only", cwd=folder) == ""  # nothing staged
    path = folder / ODD_NAMES[1]
    notebook = json.loads(path.read_text())
    notebook["cells"][0]["source"] = ["# edited in class\n"]
    path.write_text(json.dumps(notebook, indent=1) + "\n")
    hook.compare_by_content(str(path))
    assert status(folder) == f" M {ODD_NAMES[1]}\n"  # a real edit still shows
    # not a notebook, not in git, not a checkout at all: nothing happens, nothing raises
    hook.git_compares_saved_notebooks(model={"type": "file"}, os_path=str(folder / "x.txt"))
    hook.git_compares_saved_notebooks(model={"type": "notebook"}, os_path="/nonexistent/x.ipynb")
    (folder / "new.ipynb").write_text("{}")
    hook.compare_by_content(str(folder / "new.ipynb"))
    assert status(folder) == f" M {ODD_NAMES[1]}\n?? new.ipynb\n"


@pytest.mark.slow
def test_a_notebook_saved_outside_the_lab_is_cleared_by_git_add(tmp_path):
    """docs/setup.md, VS Code (or nbconvert --inplace): no hook runs, so `git status` lists a
    run and saved notebook; `git add` on it stages nothing and clears the line, and stages a
    real edit as one."""
    folder = repository(tmp_path, ["ran.ipynb", "edited.ipynb"])
    for name in ["ran.ipynb", "edited.ipynb"]:
        (folder / name).write_text(saved_in_class(ROOT / "notebooks" / "00_start_here.ipynb"))
    notebook = json.loads((folder / "edited.ipynb").read_text())
    notebook["cells"][0]["source"] = ["# edited in class\n"]
    (folder / "edited.ipynb").write_text(json.dumps(notebook, indent=1) + "\n")
    assert status(folder) == " M edited.ipynb\n M ran.ipynb\n"
    assert git("diff", "--name-only", cwd=folder) == "edited.ipynb\n"
    git("add", "ran.ipynb", "edited.ipynb", cwd=folder)
    assert status(folder) == "M  edited.ipynb\n"
    assert git("diff", "--cached", "--name-only", cwd=folder) == "edited.ipynb\n"

@pytest.mark.slow
def test_a_save_never_waits_for_a_slow_git(tmp_path):
    """git that takes seconds (a fresh clone's first index write, a loaded machine): the
    save returns within the hook's bound; git finishes by itself, and leaves no lock."""
    folder = repository(tmp_path / "repo", ["00.ipynb"])
    slow = tmp_path / "bin"
    slow.mkdir()
    real_git = subprocess.run(["sh", "-c", "command -v git"], capture_output=True,
                              text=True).stdout.strip()
    (slow / "git").write_text(f'#!/bin/sh\n[ "$1" = update-index ] && sleep 4\n'
                             f'exec {shlex.quote(real_git)} "$@"\n')
    (slow / "git").chmod(0o755)
    (folder / "00.ipynb").write_text(saved_in_class(ROOT / "notebooks" / "00_start_here.ipynb"))
    path_before = os.environ["PATH"]
    os.environ["PATH"] = f"{slow}{os.pathsep}{path_before}"
    try:
        start = time.monotonic()
        hook.git_compares_saved_notebooks(model={"type": "notebook"},
                                          os_path=str(folder / "00.ipynb"))
        waited = time.monotonic() - start
        assert waited < 4, f"the save waited {waited:.1f} s for git"
        with hook._one_git_at_a_time:  # the background git has finished
            pass
    finally:
        os.environ["PATH"] = path_before
    assert not (folder / ".git" / "index.lock").exists()
    assert status(folder) == ""


@pytest.mark.slow
def test_a_git_that_hangs_is_stopped_without_leaving_its_lock(tmp_path, monkeypatch):
    """A filter that never ends holds git inside its index write. Past the hook's limit git
    is stopped with SIGTERM, on which it removes .git/index.lock (SIGKILL, as the old
    hook's timeout sent, left the lock and blocked every later git add and commit)."""
    folder = repository(tmp_path, ["00.ipynb", "01.ipynb"], process=False)
    git("config", "filter.nbstripout.clean", "sleep 600", cwd=folder)
    make_racy(folder)
    (folder / "00.ipynb").write_text(saved_in_class(ROOT / "notebooks" / "00_start_here.ipynb"))
    monkeypatch.setattr(hook, "GIT_TIMEOUT_SECONDS", 2)
    hook.compare_by_content(str(folder / "00.ipynb"))
    assert not (folder / ".git" / "index.lock").exists()
    git("config", "filter.nbstripout.clean", clean_filter(), cwd=folder)
    git("add", "00.ipynb", cwd=folder)  # git is usable again
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "saved", cwd=folder,
        check=False)
    assert status(folder) == ""


@pytest.mark.slow
def test_the_filter_process_cleans_as_the_clean_command(tmp_path):
    """What git stores through the one-process filter is, byte for byte, what the clean
    command stores: saved notebooks of both editions, and a file that is no notebook."""
    sources = [ROOT / "notebooks" / "00_start_here.ipynb",
               ROOT / "notebooks" / "zh_CN" / "03_rope_in_2d.ipynb",
               ROOT / "notebooks" / "solutions" / "05_long_range_decay_solutions.ipynb"]
    stored = {}
    for kind in ["clean", "process"]:
        folder = repository(tmp_path / kind, [], process=kind == "process")
        for number, source in enumerate(sources):
            (folder / f"{number}.ipynb").write_text(saved_in_class(source), encoding="utf-8")
        (folder / "broken.ipynb").write_text("not a notebook")
        subprocess.run(["git", "add", "-A"], cwd=folder, capture_output=True)
        stored[kind] = git("ls-files", "--stage", cwd=folder)
    assert stored["process"] == stored["clean"]
    assert stored["clean"].count(".ipynb") == len(sources) + 1


@pytest.mark.slow
def test_a_fresh_clones_first_index_write_starts_the_filter_once(tmp_path):
    """In a fresh clone every notebook is racily clean, and the first command that writes
    the index re-reads them all through the filter: one Python start for all of them (the
    clean command once took 1 min 43 s here, one start per notebook)."""
    names = [f"{number:02d}.ipynb" for number in range(8)]
    source = repository(tmp_path / "source", names)
    clone = tmp_path / "clone"
    git("clone", "-q", str(source), str(clone), cwd=tmp_path)
    for key in ["clean", "process", "smudge"]:
        git("config", f"filter.nbstripout.{key}",
            git("config", f"filter.nbstripout.{key}", cwd=source).strip(), cwd=clone)
    make_racy(clone)
    traced = subprocess.run(["git", "update-index", "--refresh"], cwd=clone,
                            capture_output=True, text=True,
                            env={**os.environ, "GIT_TRACE": "1"}).stderr
    starts = [line for line in traced.splitlines()
              if "run_command" in line and ("nbstripout" in line or "notebook_filter" in line)]
    assert len(starts) == 1 and "git_notebook_filter.py" in starts[0], starts
    assert status(clone) == ""


def test_the_filter_process_builds_no_iri_parsers():
    """nbformat brings jsonschema, which imports rfc3987_syntax when it is installed (it
    builds some 35 parsers, about 1 s, for formats nbformat never checks): the filter
    process, started by every git command that reads a notebook, leaves it out."""
    probe = ("import sys; sys.path.insert(0, 'scripts'); import git_notebook_filter as f; "
             "f.clean(open('notebooks/00_start_here.ipynb', 'rb').read(), ['--keep-id']); "
             "print(sys.modules.get('rfc3987_syntax', 'absent'))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() in ("None", "absent"), done.stdout

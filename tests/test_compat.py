"""`make compat`'s use of the disk: one nox session's environment at a time, and a clear stop
when the disk cannot hold the next one (a CI run once failed on pip's "No space left on
device" in the third session, half an hour in)."""

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("nox")


@functools.cache  # nox warns when a session is registered twice
def _noxfile():
    spec = importlib.util.spec_from_file_location("rope_lab_noxfile", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_disk_too_small_for_the_session_stops_it_with_the_sizes(tmp_path):
    noxfile = _noxfile()
    runner = tmp_path / "venv"
    runner.mkdir()
    with open(runner / "torch.so", "wb") as big:  # sparse: its size, not its blocks
        big.truncate(10 ** 13)
    location = tmp_path / ".nox" / "newest"
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(RuntimeError) as error:
        noxfile.check_disk("newest", location, runner=runner)
    message = str(error.value)
    assert "'newest'" in message and str(location) in message
    assert f"{noxfile.SESSION_PER_VENV * 1e13 / 1e9:.1f} GB" in message
    assert f"{free / 1e9:.1f} GB free" in message
    assert "make lint unit notebooks browser" in message


def test_a_session_the_disk_can_hold_or_one_already_installed_goes_on(tmp_path):
    noxfile = _noxfile()
    runner = tmp_path / "venv"
    runner.mkdir()
    (runner / "torch.so").write_bytes(b"x" * 1000)
    noxfile.check_disk("oldest", tmp_path / ".nox" / "oldest", runner=runner)
    # an environment already in place from an earlier run needs only what it lacks
    with open(runner / "torch.so", "wb") as big:
        big.truncate(10 ** 13)
    location = tmp_path / ".nox" / "oldest"
    location.mkdir(parents=True)
    with open(location / "torch.so", "wb") as big:
        big.truncate(int(noxfile.SESSION_PER_VENV * 10 ** 13))
    noxfile.check_disk("oldest", location, runner=runner)


def test_the_makefile_runs_the_sessions_of_the_noxfile():
    sessions = re.search(r"^NOX_SESSIONS := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert sessions.group(1).split() == _noxfile().nox.options.sessions


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("failing, keep, left, ran", [
    ("", "", [], ["oldest", "colab", "newest"]),
    ("colab", "", ["colab"], ["oldest", "colab"]),
    ("", "1", ["colab", "newest", "oldest"], ["oldest", "colab", "newest"]),
])
def test_make_compat_removes_a_sessions_environment_once_it_passes(tmp_path, failing, keep,
                                                                   left, ran):
    """A stand-in nox records each session and leaves its environment in .nox/."""
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    nox = venv / "bin" / "nox"
    nox.write_text(f"""#!{sys.executable}
import sys, pathlib
name = sys.argv[sys.argv.index("-s") + 1]
pathlib.Path(".nox", name).mkdir(parents=True)
with open("ran", "a") as ran:
    ran.write(name + "\\n")
sys.exit(1 if name == {failing!r} else 0)
""")
    nox.chmod(0o755)
    for stamp in (".installed-lab", ".installed-test"):  # newer than what they depend on
        (venv / stamp).touch()
        os.utime(venv / stamp, (2e9, 2e9))
    done = subprocess.run(["make", "--no-print-directory", "compat", f"VENV={venv}",
                           f"KEEP_NOX={keep}"], cwd=tmp_path, capture_output=True, text=True)
    assert (done.returncode != 0) == bool(failing), done.stdout + done.stderr
    assert (tmp_path / "ran").read_text().split() == ran
    assert sorted(p.name for p in (tmp_path / ".nox").iterdir()) == left

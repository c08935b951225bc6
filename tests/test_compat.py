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
sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_install as install  # noqa: E402


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


@pytest.mark.parametrize("session", ["oldest", "colab"])
def test_every_pinned_nox_session_resolves(tmp_path, session):
    """The pins of `make compat`'s sessions resolve from PyPI, in seconds (uv), before
    `make test` spends a quarter of an hour getting there: a lower bound that no release
    satisfies beside the others (jupyterlab 4.0 with jupyterlab-rise 0.43.1, which needs
    4.1) once failed CI only at the oldest session's install."""
    nox_module = _noxfile()
    pins = (nox_module.lowest_versions() if session == "oldest"
            else [*nox_module.COLAB, f"torch=={nox_module.TORCH_HERE}", *nox_module.TRITON_HERE])
    if not install._reachable(install.PYPI + "/pip/"):
        pytest.skip("PyPI is not reachable from here") if os.environ.get("CI") != "true" \
            else pytest.fail("PyPI is not reachable; CI must prove the sessions resolve")
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed (make installs it into .venv)")
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("\n".join(pins) + "\n")
    reqs = tmp_path / "requirements.txt"
    reqs.write_text(f"-e {ROOT}[{nox_module.EXTRAS}]\n")
    result = subprocess.run(
        [uv, "pip", "compile", "--no-config", "--quiet", "--index-url", install.PYPI,
         "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}",
         "--constraint", str(constraints), str(reqs)],
        env=install.public_index_only(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]

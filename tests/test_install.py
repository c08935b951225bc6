"""The course installs where its users are: PyPI alone, any platform, Colab.

The machines that build the course carry a local torch wheel and package mirrors in their
pip configuration; a user's laptop has neither. These tests ask PyPI itself, with every
local source switched off, whether the pinned sets resolve. They need the network: without
it they skip, except under CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

from rope_lab.course import COLAB_CELL, archive_url, install_cell

ROOT = Path(__file__).resolve().parents[1]
PYPI = "https://pypi.org/simple"
# Linux x86_64 and aarch64, macOS on Apple silicon, Windows: uv's names for them.
PLATFORMS = ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu", "aarch64-apple-darwin",
             "x86_64-pc-windows-msvc"]
OLDEST_PYTHON = "3.11.5"  # soupsieve 4.1.2 (pinned) needs 3.11.5
LAB_SET = ("lab", "models")
TEST_SET = ("lab", "models", "test", "book", "browser", "teach")


def _reachable(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=10).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def pypi():
    if not _reachable(PYPI + "/pip/"):
        reason = f"PyPI ({PYPI}) is not reachable from here"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}; CI must prove the pins resolve", pytrace=False)
        pytest.skip(reason)


def requirements(*extras: str) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = list(project["dependencies"])
    for extra in extras:
        found += project["optional-dependencies"][extra]
    return found


def public_index_only() -> dict[str, str]:
    """The environment of a plain machine: no pip configuration file at all (so no local
    wheel folder, mirror or cap from this machine's), only PyPI as the index."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "UV_")) or k in ("PIP_CERT",)}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=PYPI, PIP_FIND_LINKS="",
               PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


@pytest.mark.slow
def test_pinned_sets_resolve_from_pypi_alone(pypi, tmp_path):
    """`pip install --dry-run` with only the public index: the set `make test` uses. It holds
    `make lab`'s set and every version is pinned, so `make lab`'s resolves too (one pip run,
    about a minute, instead of two).

    Slow where the index serves no separate wheel metadata (pip then downloads each wheel,
    torch's CUDA libraries included, ~3 GB; its cache makes later runs quicker).
    """
    assert set(LAB_SET) <= set(TEST_SET)
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("\n".join(requirements(*TEST_SET)) + "\n")
    report = tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", str(report), "--constraint", str(ROOT / "constraints.txt"),
         "--requirement", str(reqs)],
        env=public_index_only(), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    chosen = {item["metadata"]["name"].lower(): item for item in
              json.loads(report.read_text())["install"]}
    assert "+" not in chosen["torch"]["metadata"]["version"]
    local = [name for name, item in chosen.items()
             if not item["download_info"]["url"].startswith("https://")]
    assert not local, f"resolved from local files, not PyPI: {local}"


def _uv_compile(tmp_path: Path, *options: str) -> str:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed (make installs it into .venv)")
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("\n".join(requirements(*TEST_SET)) + "\n")
    env = public_index_only()
    env["MACOSX_DEPLOYMENT_TARGET"] = "14.0"  # torch's macOS wheels are for macOS 14+
    result = subprocess.run(
        [uv, "pip", "compile", "--no-config", "--quiet", "--index-url", PYPI, *options,
         "--constraint", str(ROOT / "constraints.txt"), str(reqs)],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_pinned_sets_resolve_for_every_python_and_os(pypi, tmp_path):
    """One universal resolution (uv) covers every marker: Python 3.11.5 and newer, any OS.

    The test set contains the lab set and every pin is exact, so the lab set resolves too.
    """
    lock = _uv_compile(tmp_path, "--universal", "--python-version", OLDEST_PYTHON)
    assert "torch==" in lock
    assert "sys_platform == 'linux'" in lock  # CUDA libraries only where torch wants them


@pytest.mark.slow
@pytest.mark.parametrize("platform", PLATFORMS)
def test_pinned_sets_have_wheels_on_every_platform(pypi, tmp_path, platform):
    """Per platform (pip evaluates markers for this machine only, so uv does this)."""
    lock = _uv_compile(tmp_path, "--python-platform", platform,
                       "--python-version", OLDEST_PYTHON, "--only-binary", "torch")
    assert "torch==" in lock


# --- Colab's install cell -------------------------------------------------------------------

# the cell of a published course (the committed one installs nothing until then)
PINNED = ("https://github.com/teacher/course", "0123456789abcdef0123456789abcdef01234567")
PINNED_CELL = install_cell(*PINNED)
# the Chinese edition's: the same code, its comment and message in Chinese
PINNED_CELL_ZH = install_cell(*PINNED, language="zh")


def run_colab_cell(source_url: str, monkeypatch, pinned: str = PINNED_CELL) -> None:
    """Run the install cell as Colab would (google.colab imported), installing from a URL."""
    cell = pinned.replace(archive_url(PINNED[0], "{commit}"), source_url)  # the f-string
    assert cell != pinned
    monkeypatch.setitem(sys.modules, "google.colab", type(sys)("google.colab"))
    exec(compile(cell, "colab_cell", "exec"), {})


@pytest.mark.parametrize(("pinned", "start", "advice"), [
    (PINNED_CELL, "Could not install rope_lab from {missing}: ",
     ("internet access", "opens in a browser")),
    (PINNED_CELL_ZH, "无法从 {missing} 安装 rope_lab：",
     ("请检查运行时能否访问互联网", "能否在浏览器中打开"))], ids=["en", "zh"])
def test_colab_cell_never_prompts_and_fails_with_one_clear_message(monkeypatch, tmp_path,
                                                                   pinned, start, advice):
    missing = (tmp_path / "no-such-archive.zip").as_uri()
    with pytest.raises(SystemExit) as stop:
        run_colab_cell(missing, monkeypatch, pinned)
    message = str(stop.value)
    assert message.startswith(start.format(missing=missing))
    first_line, second_line = message.split("\n")
    assert len(first_line) > len(start.format(missing=missing))  # pip's own last line
    assert all(words in second_line for words in advice)
    assert "--no-input" in pinned and "stdin=subprocess.DEVNULL" in pinned
    assert "git+" not in pinned  # a zip over HTTPS: no git, no credential prompt


@pytest.mark.parametrize("cell", [COLAB_CELL, PINNED_CELL, install_cell(language="zh"),
                                  PINNED_CELL_ZH],
                         ids=["committed", "pinned", "committed-zh", "pinned-zh"])
def test_colab_cell_does_nothing_outside_colab(monkeypatch, cell):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(compile(cell, "colab_cell", "exec"), {})


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_the_archive_colab_downloads_is_an_installable_project(tmp_path):
    """GitHub's zip of the branch (git archive, with its `name-main/` prefix) builds."""
    archive = tmp_path / "rope_lab-main.zip"
    subprocess.run(["git", "archive", "--format=zip", "--prefix=rope_lab-main/",
                    "-o", str(archive), "HEAD"], cwd=ROOT, check=True)
    names = zipfile.ZipFile(archive).namelist()
    assert "rope_lab-main/pyproject.toml" in names
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--quiet",
         "--no-input", "--report", str(tmp_path / "report.json"),
         f"rope_lab[models] @ {archive.as_uri()}"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    (item,) = json.loads((tmp_path / "report.json").read_text())["install"]
    assert item["metadata"]["name"] == "rope_lab"


@pytest.mark.slow
def test_make_without_a_network_says_what_to_check(tmp_path):
    """No PyPI (a classroom without network): one message naming the fix, not a stack."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = public_index_only()
    env.update(PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_RETRIES="0", PIP_TIMEOUT="2",
               UV_INDEX_URL="http://127.0.0.1:9/simple", UV_OFFLINE="1")
    result = subprocess.run(["make", "-C", str(ROOT), "install", f"VENV={tmp_path / 'venv'}",
                             f"PYTHON={sys.executable}"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "make: installing the course failed" in result.stdout
    assert "check the network or proxy" in result.stdout
    assert not (tmp_path / "venv" / ".installed-lab").exists()


@pytest.mark.slow
def test_the_wheel_holds_every_module_and_data_file(tmp_path):
    """What Colab and `pip install` get: every module and data file of rope_lab/, none left
    behind by the package list in pyproject.toml (a subpackage missing there installs
    nothing of it, while an editable install hides the gap)."""
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                             "--wheel-dir", str(tmp_path), str(ROOT)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    (wheel,) = tmp_path.glob("rope_lab-*.whl")
    shipped = {name for name in zipfile.ZipFile(wheel).namelist()
               if name.startswith("rope_lab/")}
    tracked = subprocess.run(["git", "ls-files", "rope_lab"], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    source = {path for path in tracked or (str(p.relative_to(ROOT)) for p in
                                           (ROOT / "rope_lab").rglob("*") if p.is_file())
              if "__pycache__" not in path and (ROOT / path).exists()}
    missing = sorted(source - shipped)
    assert not missing, f"the wheel lacks {missing}: list them in pyproject.toml"

"""Run the transformers-dependent tests against every transformers release pyproject allows.

``pyproject.toml`` promises ``transformers>=4.45``; the nox sessions install three stacks
(oldest, Colab, newest). Releases in between differ too (YaRN's factor in 4.51 to 4.55,
Qwen2-VL's video positions in 5.3 to 5.5, which model types a release registers), so this
script installs each release (by default the newest patch of every minor release from the
lower bound on) next to this environment and runs the test files that can depend on it
(:func:`release_tests`: they import transformers, or read configs through rope_lab.hf):

    .venv/bin/python scripts/transformers_releases.py                  # every minor release
    .venv/bin/python scripts/transformers_releases.py 4.53.3 5.0.0     # some releases
    .venv/bin/python scripts/transformers_releases.py --write-rules    # + rules files

Each release gets a small virtual environment of its own under ``--cache`` holding only
transformers and what it pins differently (huggingface_hub, tokenizers); everything else
(torch, numpy, pytest, rope_lab's other dependencies) is read from this environment through
a ``.pth`` file, so a release costs seconds, not a torch download. Needs the package index
(pip) the first time a release is installed. ``--write-rules`` also writes the release's
per-model-type rules into ``rope_lab/hf/transformers_rules/`` (what rope_lab.hf reads
configs with; see :func:`rope_lab.hf.transformers_oracle.write_rules`).

Prints one line per release and a summary table; exits 1 when a release fails. Not part of
``make test`` (about 40 releases × half a minute): run it when transformers releases.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import tomllib

from rope_lab import _atomic
from rope_lab.hf.config import _version_key as _key  # how rope_lab orders releases

ROOT = Path(__file__).resolve().parents[1]
# A test file depends on the release when it imports transformers (or tests/hf_compat), or
# uses rope_lab.hf, whose rules file is chosen by the installed release.
DEPENDS = re.compile(r'^[^#\n]*(import transformers|from transformers'
                     r'|importorskip\("transformers"\)|import hf_compat|from hf_compat'
                     r'|from rope_lab import [^\n]*\bhf\b'
                     r'|rope_lab\.hf\b|metadata\.version\("transformers"\))', re.M)
# Slow files whose transformers use the others cover (graders and figures that read the
# bundled fixtures through rope_lab.hf): with --all-tests only.
SLOW = ("tests/test_exercises_battery.py", "tests/test_plots_lint.py", "tests/test_style.py")


def release_tests(all_tests: bool = False) -> list[str]:
    """The test files that can depend on the installed transformers release."""
    found = sorted(path.relative_to(ROOT).as_posix()
                   for path in (ROOT / "tests").glob("test_*.py")
                   if DEPENDS.search(path.read_text(encoding="utf-8")))
    return found if all_tests else [name for name in found if name not in SLOW]


def lower_bound() -> str:
    """The ``transformers>=X`` of pyproject's optional dependencies."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirements in project.get("optional-dependencies", {}).values():
        for requirement in requirements:
            found = re.fullmatch(r"transformers>=([\d.]+)", requirement.replace(" ", ""))
            if found:
                return found[1]
    raise SystemExit("pyproject.toml names no transformers>=X")


def index_releases() -> list[str]:
    """Every final release of transformers on the package index pip is configured with."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "transformers"],
                         capture_output=True, text=True, check=True).stdout
    listed = re.search(r"Available versions: (.*)", out)
    if not listed:
        raise SystemExit(f"pip index versions transformers said:\n{out}")
    return [v.strip() for v in listed[1].split(",") if re.fullmatch(r"\d+\.\d+\.\d+", v.strip())]


def default_releases() -> list[str]:
    """The lower bound itself and the newest patch of every minor release since."""
    low = _key(lower_bound() + ".0" * (3 - lower_bound().count(".") - 1))
    newest: dict[tuple[int, int], str] = {}
    for version in index_releases():
        if _key(version) >= low:
            minor = _key(version)[:2]
            if minor not in newest or _key(version) > _key(newest[minor]):
                newest[minor] = version
    lowest = ".".join(map(str, low))
    return sorted(set(newest.values()) | {lowest}, key=_key)


def environment(version: str, cache: Path) -> Path:
    """A virtual environment with transformers ``version`` on top of this one: its python."""
    folder = cache / f"transformers-{version}"
    python = folder / "bin" / "python"
    if (folder / ".complete").exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(folder)],
                   check=True)
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                          "['purelib'])"], capture_output=True, text=True, check=True)
    # this environment's packages after the release's own (a .pth line is appended to path)
    here = sorted({sysconfig.get_paths()[key] for key in ("purelib", "platlib")})
    _atomic.write_text(Path(own.stdout.strip(), "zz_rope_lab_base.pth"), "\n".join(here) + "\n")
    # pip's resolver complains about packages of this environment that want another
    # transformers (sentence-transformers): shown only when the install fails
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                           "--disable-pip-version-check", f"transformers=={version}"],
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"installing transformers {version} failed:\n{done.stderr}")
    _atomic.write_text(folder / ".complete", version + "\n")
    return python


def run(version: str, cache: Path, write_rules: bool, tests: list[str]) -> dict:
    python = environment(version, cache)
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               # nbconvert's templates live in this environment's share/jupyter
               JUPYTER_PATH=str(Path(sys.prefix, "share", "jupyter")))
    if write_rules:
        subprocess.run([str(python), "-m", "rope_lab.hf.transformers_oracle"], cwd=ROOT,
                       env=env, check=True, capture_output=True)
    started = time.perf_counter()
    # -rP: the registry walk prints its counts, shown for a passing test too
    done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-rfEP", *tests], cwd=ROOT, env=env, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    # "test id - first line of the error", as pytest's short summary gives it
    failed = [line.removeprefix("FAILED ").removeprefix("ERROR ")
              for line in lines if line.startswith(("FAILED ", "ERROR "))]
    counts = re.findall(r"transformers \S+ object\s*: (\{.*\})", done.stdout)
    return {"transformers": version, "ok": done.returncode == 0,
            "summary": lines[-1] if lines else done.stderr.strip()[-300:],
            "failed": failed, "registry": counts[0] if counts else None,
            "seconds": round(time.perf_counter() - started, 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("releases", nargs="*", help="default: every minor release, newest patch")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "rope_lab"
                        / "transformers-releases", help="where the environments are kept")
    parser.add_argument("--write-rules", action="store_true",
                        help="also write each release's rules file into the package")
    parser.add_argument("--all-tests", action="store_true",
                        help=f"also the slow files ({', '.join(Path(n).name for n in SLOW)})")
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    args = parser.parse_args(argv)
    releases = args.releases or default_releases()
    args.cache.mkdir(parents=True, exist_ok=True)
    tests = release_tests(args.all_tests)
    results = []
    for number, version in enumerate(releases, 1):
        print(f"[{number}/{len(releases)}] transformers {version} …", end=" ", flush=True)
        result = run(version, args.cache, args.write_rules, tests)
        results.append(result)
        print(f"{'ok' if result['ok'] else 'FAILED'}: {result['summary']}", flush=True)
        for test in result["failed"]:
            print(f"    {test}")
    if args.json:
        _atomic.write_text(args.json, json.dumps(results, indent=1) + "\n")
    bad = [r["transformers"] for r in results if not r["ok"]]
    print(f"\n{len(results) - len(bad)} of {len(results)} releases pass"
          + (f"; failing: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

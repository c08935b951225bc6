"""How the experiments keep their results: where, how they write, and what trained them.

- **Where.** A run writes only where it is told (``--out``) or, by default, into the folder it
  is started from; a default that would land inside the installed package (and replace the
  results the notebooks plot) is refused. ``--out`` naming a folder, or a file in a folder
  that does not exist or cannot be written, is refused before any training.
- **How.** Every write goes through :mod:`rope_lab._atomic` (a temporary file in the same
  folder, flushed to disk, renamed over the target): a reader, or the next run after a
  kill, sees the previous file or the new one, never half of one. Runs that share a file
  take turns through a lock file next to it (``NAME.lock``), so each can merge its work
  into what the others wrote.
- **What trained them.** :func:`code_version` hashes the package sources that determine the
  numbers; a results file records it (per unit for the position-scheme grid), with the
  package version and the git commit when there is one.
- **Damaged files.** :func:`read_json` names the file and what is wrong with it.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from rope_lab import _atomic

PACKAGE = Path(__file__).resolve().parents[1]  # the rope_lab folder
# Sources that describe a result without changing it (provenance, writing files).
NOT_NUMERIC = frozenset({"timing.py", "_atomic.py", "experiments/_files.py"})
# Files a module compiles or reads at run time, beside its own source.
COMPILED_WITH = {"_ckernel.py": ("kernels/rope.c",)}
LOCK_SECONDS = 60.0


class ResultsError(ValueError):
    """A results file that cannot be used, or an output path that cannot be written."""


# --- where ----------------------------------------------------------------------------------

def check_output(path, *, option: str = "--out", default: bool = False) -> Path:
    """``path`` if a results file can be written there, else :class:`ResultsError`.

    ``default``: the path was not chosen by the user, so it must not lie inside the package.
    """
    try:
        path = _atomic.check_target(path, option)
    except ValueError as error:
        raise ResultsError(str(error)) from None
    if default and inside_package(path):
        raise ResultsError(
            f"the default output {path.resolve()} lies inside the installed package "
            f"({PACKAGE}) and would replace the results the notebooks plot; run from another "
            f"folder, or name that file with {option} to replace them on purpose")
    return path


def inside_package(path) -> bool:
    return Path(path).resolve().is_relative_to(PACKAGE)


# --- how ------------------------------------------------------------------------------------

@contextlib.contextmanager
def locked(path, *, seconds: float = LOCK_SECONDS):
    """Hold ``NAME.lock`` beside ``path`` (one process at a time, across processes); the lock
    file is removed when the last holder lets go, also after an error (a full disk).

    A holder removes the file while it holds the lock; a process that was waiting on that
    file then finds the name gone or pointing at a newer file, and takes the lock again on
    whatever the name holds now, so two holders never hold two different files at once.
    """
    lock_path = Path(path).with_name(Path(path).name + ".lock")
    deadline = time.monotonic() + seconds
    while True:
        descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while not _try_lock(descriptor):
                if time.monotonic() > deadline:
                    raise ResultsError(f"another process has held {lock_path} for "
                                       f"{seconds:g} s; wait for it to finish, or pass another "
                                       "--out")
                time.sleep(0.02)
            if _same_file(descriptor, lock_path):
                break
        except BaseException:
            os.close(descriptor)
            raise
        os.close(descriptor)  # the holder before us removed it: lock the current one
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if _same_file(descriptor, lock_path):
                os.unlink(lock_path)
        os.close(descriptor)  # releases the lock


def _same_file(descriptor: int, path: Path) -> bool:
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(descriptor)
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


def _try_lock(descriptor: int) -> bool:
    if os.name == "nt":
        import msvcrt

        try:
            msvcrt.locking(descriptor, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


# --- damaged files --------------------------------------------------------------------------

def read_json(path) -> dict:
    """The JSON object in ``path``; :class:`ResultsError` naming the file and the problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ResultsError(f"{path} is not UTF-8 text ({error.reason} at byte "
                           f"{error.start}); expected a results JSON") from None
    except OSError as error:
        raise ResultsError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ResultsError(f"{path} is not valid JSON ({error.msg} at line {error.lineno}, "
                           f"column {error.colno}); expected a results file written by "
                           "rope_lab; fix it or move it away") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path} holds a JSON {type(data).__name__}; expected an object "
                           "(a results file written by rope_lab)")
    return data


# --- what trained them ----------------------------------------------------------------------

def sources(entry: str) -> list[str]:
    """The package files (relative to the package folder) whose code ``entry`` runs.

    Follows ``rope_lab`` imports from ``entry`` (e.g. ``"experiments/extrapolation.py"``),
    except the modules that only describe a result (:data:`NOT_NUMERIC`); adds the files a
    module compiles (:data:`COMPILED_WITH`).
    """
    found, todo = set(), [entry]
    while todo:
        relative = todo.pop()
        if relative in found or relative in NOT_NUMERIC:
            continue
        found.add(relative)
        todo += COMPILED_WITH.get(relative, ())
        if relative.endswith(".py"):
            todo += _imported(PACKAGE / relative)
    return sorted(found)


def _imported(path: Path) -> list[str]:
    """The rope_lab modules ``path`` imports (at top level or inside functions)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    found = []
    for name in names:
        if name != "rope_lab" and not name.startswith("rope_lab."):
            continue
        parts = name.split(".")[1:]
        for candidate in (Path(*parts).with_suffix(".py") if parts else None,
                          Path(*parts, "__init__.py")):
            if candidate is not None and (PACKAGE / candidate).is_file():
                found.append(candidate.as_posix())
                break
    return found


_versions: dict[str, dict] = {}


def code_version(entry: str) -> dict:
    """What identifies the code behind a result: a hash of :func:`sources` ``(entry)``, the
    package version, and the git commit of a checkout (with ``git_dirty`` when those files
    differ from it). Computed once per process."""
    if entry not in _versions:
        from rope_lab._version import __version__

        files = sources(entry)
        digest = hashlib.sha256()
        for relative in files:
            digest.update(relative.encode() + b"\0" + (PACKAGE / relative).read_bytes() + b"\0")
        _versions[entry] = {"sources_sha256": digest.hexdigest()[:16], "files": files,
                            "rope_lab": __version__, **_git(files)}
    return _versions[entry]


def _git(files: list[str]) -> dict:
    root = PACKAGE.parent
    if not (root / ".git").exists():
        return {"git_commit": None}
    try:
        # --no-optional-locks: status must not take the index lock (a git stopped at the
        # timeout would leave it behind and block the user's next commit)
        git = ["git", "--no-optional-locks", "-C", str(root)]
        commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True)
        changed = subprocess.run([*git, "status", "--porcelain", "--",
                                  *(f"rope_lab/{f}" for f in files)],
                                 capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None}
    return {"git_commit": commit.stdout.strip(), "git_dirty": bool(changed.stdout.strip())}


# --- workers that end with their parent -----------------------------------------------------

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """Process-pool initializer: end this worker when the process that started it ends,
    even by SIGKILL (which gives the parent no chance to stop its pool).

    Linux: the kernel sends SIGKILL when the parent dies (``prctl(PR_SET_PDEATHSIG)``).
    Elsewhere, and as a second guard: a thread checks every second whether the worker was
    re-parented.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # it died before the line above ran
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True,
                     name="rope_lab: end with the parent").start()


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(1)

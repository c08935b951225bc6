"""One way to write a file: whole or not at all.

Every file rope_lab and its scripts write (catalogs, compiled catalogs, notebooks, the font,
results, benchmark JSON, book pages, README edits, plots) goes through here; a test reads the
code and fails on any other write path (tests/test_atomic.py).

A write goes to a hidden temporary file in the target's folder (``.NAME.*.tmp``), is flushed
to disk (fsync), takes the old file's permissions (or the umask's, for a new file) and is
then renamed over the target (``os.replace``, atomic on POSIX and Windows). So a kill at any
moment, a full disk or a file-size limit (``ulimit -f``) leaves the previous file as it was:
a reader sees the old file or the new one, never part of one. A symlink is followed: the
file it points at is replaced, the link stays.

:func:`replace_all` does the same for several files at once: every new file is written
first, and only when all of them are on disk are they renamed into place, so a full disk
changes none of them.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path


def check_target(path, option: str = "--out") -> Path:
    """``path`` if a file can be written there, else ValueError naming ``option`` and what is
    wrong: a folder, a folder that does not exist or cannot be written, something that is not
    a regular file. Commands check their output paths with it before any work."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{option} {path} is a folder; expected a file name such as "
                         f"{path / 'results.json'}")
    folder = path.parent
    if not folder.exists():
        raise ValueError(f"{option} {path}: the folder {folder} does not exist; create it "
                         "first or choose another path")
    if not folder.is_dir():
        raise ValueError(f"{option} {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {path}: the folder {folder} is not writable")
    if path.exists() and not path.is_file():
        raise ValueError(f"{option} {path} exists and is not a regular file")
    return path


def write_bytes(path, data: bytes) -> None:
    """Replace ``path`` with ``data`` (see the module's docstring)."""
    with writing(path) as handle:
        handle.write(data)


def write_text(path, text: str, *, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``text`` (``\\n`` line ends on every platform)."""
    write_bytes(path, text.encode(encoding))


def copy_file(source, target) -> None:
    """Replace ``target`` with a copy of the file ``source``."""
    write_bytes(target, Path(source).read_bytes())


@contextlib.contextmanager
def writing(path, mode: str = "wb", *, encoding: str | None = None) -> Iterator:
    """A file object to write the new ``path`` into, for libraries that write to one
    (``figure.savefig(handle)``, ``font.save(handle)``, ``json.dump(data, handle)``).

    The target is replaced when the block ends without an exception; an exception leaves
    the old file and removes the temporary one.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w', got {mode!r}")
    target = _target(path)
    temporary = _temporary(target)
    try:
        with open(temporary, mode, encoding=encoding if mode == "w" else None,
                  newline="" if mode == "w" else None) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        _copy_mode(target, temporary)
        os.replace(temporary, target)
    except BaseException:
        _remove(temporary)
        raise
    _sync_folder(target.parent)


def write_new(path, text: str, *, encoding: str = "utf-8") -> None:
    """Create ``path`` holding ``text``, whole or not at all; FileExistsError if it exists."""
    target = Path(path)
    temporary = _temporary(target)
    try:
        with open(temporary, "wb") as handle:
            handle.write(text.encode(encoding))
            handle.flush()
            os.fsync(handle.fileno())
        _copy_mode(target, temporary)
        try:
            os.link(temporary, target)  # atomic, and never replaces an existing file
        except FileExistsError:
            raise
        except OSError:  # a file system without hard links: reserve the name, then replace
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            os.replace(temporary, target)
    finally:
        _remove(temporary)
    _sync_folder(target.parent)


def replace_all(contents: Mapping) -> list[Path]:
    """Replace every file of ``contents`` (path → bytes or str) or none of them.

    All temporary files are written first: a full disk or a size limit stops there, with
    nothing changed. Then each is renamed into place; if a rename fails, the files already
    replaced get their old content back. Returns the paths, in the order given.
    """
    staged: list[tuple[Path, str]] = []
    try:
        for path, content in contents.items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            target = _target(path)
            temporary = _temporary(target)
            staged.append((target, temporary))
            with open(temporary, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            _copy_mode(target, temporary)
    except BaseException:
        for _target_path, temporary in staged:
            _remove(temporary)
        raise
    done: list[tuple[Path, str | None]] = []
    try:
        for target, temporary in staged:
            backup = _keep_old(target)
            try:
                os.replace(temporary, target)
            except BaseException:
                if backup is not None:
                    _remove(backup)
                raise
            done.append((target, backup))
    except BaseException:
        for target, backup in reversed(done):  # put the old files back
            with contextlib.suppress(OSError):
                if backup is None:
                    os.unlink(target)
                else:
                    os.replace(backup, target)
        for _target_path, temporary in staged:
            _remove(temporary)
        raise
    for _done_target, backup in done:
        if backup is not None:
            _remove(backup)
    for folder in {target.parent for target, _ in staged}:
        _sync_folder(folder)
    return [target for target, _ in staged]


def _target(path) -> Path:
    """The file to replace: ``path``, or the file a symlink there points at."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _temporary(target: Path) -> str:
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                             dir=target.parent)
    os.close(descriptor)
    return temporary


def _keep_old(target: Path) -> str | None:
    """A hard link to the current ``target`` (no copy of its bytes), to restore it from."""
    if not target.exists():
        return None
    backup = _temporary(target)
    try:
        os.unlink(backup)
        os.link(target, backup)
    except OSError:
        _remove(backup)
        return None
    return backup


def _copy_mode(target: Path, temporary: str) -> None:
    """Give the new file the old one's permissions (mkstemp makes it 0600), or the umask's."""
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    os.chmod(temporary, mode)


def _umask() -> int:
    try:  # Linux: read it without changing it (os.umask would, for every thread)
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX; a no-op where folders cannot be opened)."""
    with contextlib.suppress(OSError, AttributeError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _remove(path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)

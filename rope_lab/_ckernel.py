"""RoPE on a CPU in one pass, both layouts: a small C kernel, compiled on first use.

PyTorch has no single CPU kernel for a' = a·c − b·s, b' = b·c + a·s when a and b sit d/2
apart, so the eager half-layout path needs three kernels per block (see :mod:`rope_lab.fast`;
the row "eager blocks (no C compiler)" of ``python -m rope_lab.bench`` shows what the extra
passes over the cache cost). ``kernels/rope.c`` does the rotation in one loop, for the half
and the interleaved layout: each element is read once and written once, like ``x.clone()``.
Given position ids, the same call first computes the cos/sin table of those positions by the
angle rule of :mod:`rope_lab._angles` (one small pass, where PyTorch would run several
kernels, each one a wait for every thread on a busy machine). A fresh output of a MiB or
more has its pages faulted in by one system call before the loop writes them
(``madvise(MADV_POPULATE_WRITE)``, Linux 5.14 and later; elsewhere the loop faults them in as
it writes): left to the loop, each page's first write traps into the kernel, which evicts the
cos/sin rows and inputs the loop reuses, and a fresh 32 MiB output cost 1.15-1.3 × a copy.

How it is built: the first call that can use it looks for a C compiler (``$CC``, then ``cc``,
``gcc``, ``clang``), compiles the source (:func:`status` reports how long that took) into a
shared library in
``$ROPE_LAB_CACHE_DIR`` or ``~/.cache/rope_lab`` (keyed by the source, the compiler, the flags
and the CPU, so a cache shared between machines never loads a library built for another
CPU), and loads it with ctypes. Where any step fails (no compiler, Windows, a read-only home)
the eager path runs instead (same results, a little slower), :func:`status` says why, and
the first rotation that could have used the kernel warns once per process
(:class:`FastPathWarning`). ``ROPE_LAB_C_KERNEL=0`` in the environment turns it off
silently; :func:`disabled` turns it off for a block.

A failing compiler costs little: all attempts together stop after
:data:`BUILD_SECONDS_LIMIT`, and the failure is remembered, in this process and in the
cache folder, so that no process tries again for :data:`FAILURE_RETRY_SECONDS` (delete the
``.failed`` file that :func:`status` names to retry sooner).

The cache folder is private: created with mode 0700, refused when it is a symlink, belongs
to another user or can be written by others (a library loaded from there runs as you), and
refused when a folder above it lets another user rename it (one that is neither yours nor
root's, or writable by others without the sticky bit of ``/tmp``: OpenSSH's StrictModes
rule). Each library is opened once (``O_NOFOLLOW``), the open file is checked (a regular
file of yours that nobody else can write), and on Linux exactly that file is loaded
(``dlopen("/proc/self/fd/N")``), so swapping the folder or the file between the check and
the load cannot slip another library in; elsewhere the folder rule above is what guards the
path. The fallback folder, ``<tmp>/rope_lab-<uid>``, must moreover have mode 0700 exactly.
Builds are atomic (other processes never see half a file) and serialized by a lock file.

Threads: the kernel shares its rows among ``torch.get_num_threads()`` OpenMP threads. Built
with ``-fopenmp`` it links libgomp.so.1, which PyTorch's Linux wheels have already loaded, so
the threads are PyTorch's own (a second pool would fight PyTorch's threads, which spin for a
while after every parallel op). A library built without OpenMP runs only where torch uses
one thread; with more, the eager path (multi-threaded) is the faster choice.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from importlib import resources

import torch

from rope_lab import _strides, _validate

SOURCE = "kernels/rope.c"
# Below this many elements one thread does it all: waking the pool costs more than it saves.
PARALLEL_MIN_ELEMENTS = 1 << 16
# A fresh output of at least this many bytes gets its pages faulted in by one system call
# before the loop writes them (see populate() in kernels/rope.c).
POPULATE_MIN_BYTES = 1 << 20
# Tried in order: OpenMP and -march=native (the library is cached per CPU) first, then
# without each (Apple's clang has no -fopenmp; some compilers no -march=native).
_BASE_FLAGS = ["-O3", "-ffp-contract=off", "-fPIC", "-shared"]
FLAG_SETS = (
    [*_BASE_FLAGS, "-march=native", "-fopenmp"],
    [*_BASE_FLAGS, "-fopenmp"],
    [*_BASE_FLAGS, "-march=native"],
    _BASE_FLAGS,
)
# The whole build (every compiler and flag set, waiting for another process's build included)
# gives up after this many seconds; a working compiler needs well under one.
BUILD_SECONDS_LIMIT = 10.0
# A failed build is remembered on disk for this long: no process tries again before.
FAILURE_RETRY_SECONDS = 6 * 3600
_DTYPE_NAMES = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16"}
LAYOUTS = ("half", "interleaved")
# The dtype of the cos/sin tables (and of the arithmetic) for each dtype of x.
TABLE_DTYPES = {torch.float32: torch.float32, torch.float64: torch.float64,
                torch.bfloat16: torch.float32}

_lock = threading.Lock()
_library = None  # the loaded ctypes library, once built
_reason = None  # why there is no library, once a build was tried and failed
_quiet = False  # True when that reason is a choice (ROPE_LAB_C_KERNEL=0): no warning
_warned = False
_enabled = True


class FastPathWarning(RuntimeWarning):
    """A fast kernel (the C loop, Triton) cannot be used here; the eager path gives the same
    results."""


class BackendUnavailable(ValueError):
    """``apply_rope(..., backend=NAME)`` asked for a path that cannot run these inputs here."""


def status() -> str:
    """One line: where the compiled kernel lives, or why the eager path runs instead."""
    library = _load()
    if library is not None:
        how = (f"built in {library.build_seconds:.2f} s" if library.build_seconds is not None
               else "loaded from the cache")
        return f"C kernel: {library._name} ({how})"
    return f"eager path: {_reason}"


def available() -> bool:
    """True when the compiled kernel is built (or can be) and enabled."""
    return _enabled and _load() is not None


@contextlib.contextmanager
def disabled():
    """Run the block on the eager path (for comparisons; not thread-safe)."""
    global _enabled
    previous, _enabled = _enabled, False
    try:
        yield
    finally:
        _enabled = previous


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out: torch.Tensor,
           layout: str, *, required: bool = False, fresh: bool = False) -> bool:
    """out = x rotated by the tables cos, sin in ``layout``, when the kernel applies; False
    otherwise.

    Applies to CPU tensors: x and out float32, float64 or bfloat16, cos and sin
    ``(..., seq, r/2)`` of the matching table dtype (:data:`TABLE_DTYPES`: float32 for
    bfloat16 x, computed in float32 and rounded once), with contiguous features and leading
    dims that fold into three (any memory order of batch, heads and seq does). out may be x
    itself (each pair is read before it is written). x may be wider than 2·cos.shape[-1]:
    only the rotated features are written.

    required: raise :class:`BackendUnavailable` saying why, instead of returning False
    (``apply_rope(..., backend="c")``). fresh: out (its first rotated features) starts a
    contiguous tensor the caller has just allocated, whose rows the loop may fault in first.

    Kept lean: at a decode step (q of 8 × 64 numbers) the checks and the folding of strides
    would cost more than the loop itself, so what they conclude is kept per library, layout,
    dtypes, shapes and strides (a model calls with the same few on every layer and step).
    """
    if not _enabled:
        reason = "it is turned off for this block (rope_lab._ckernel.disabled())"
    elif not (x.layout is out.layout is cos.layout is sin.layout is torch.strided):
        reason = "it needs plain strided tensors"
    else:
        library = _library if _library is not None else _load()
        if library is None:
            reason = f"{_reason}" if required else _NO_LIBRARY
        else:
            threads = torch.get_num_threads() if x.numel() >= PARALLEL_MIN_ELEMENTS else 1
            # out and the tables share x's device, out x's dtype and shape (the dispatcher
            # made them so); what else the checks read is here
            key = (id(library), layout, threads, fresh, x.dtype, x.shape, x.stride(),
                   x.is_neg(), x.device.type, out.stride(), cos.dtype, sin.dtype, cos.shape,
                   cos.stride(), sin.stride())
            plan = _table_plans.get(key)
            if plan is None:
                plan = _table_plan(library, x, cos, sin, out, layout, threads, fresh)
                if len(_table_plans) >= 256:
                    _table_plans.clear()
                _table_plans[key] = plan
            if not isinstance(plan, str):
                function, sizes = plan
                function(x.data_ptr(), cos.data_ptr(), sin.data_ptr(), out.data_ptr(), sizes)
                return True
            reason = plan
    if required:
        raise BackendUnavailable(f"backend='c' cannot run here: {reason}")
    if reason == _NO_LIBRARY:
        _warn_once()
    return False


# What rotate concluded, by the properties of its arguments: why it declines (a str), or
# (C function, its array of sizes and strides).
_table_plans: dict = {}


def _populate_row_bytes(out: torch.Tensor, fresh: bool) -> int:
    """The bytes between rows of a fresh, large out, for the loop to fault in first (0: no)."""
    row_bytes = out.stride(-2) * out.element_size() if out.dim() >= 2 else 0
    if not fresh or row_bytes * (out.numel() // max(out.shape[-1], 1)) < POPULATE_MIN_BYTES:
        return 0
    return row_bytes


def _int64s(*values) -> ctypes.Array:
    """The sizes and strides a C function takes, as one int64 array (see kernels/rope.c)."""
    return (ctypes.c_int64 * len(values))(*values)


_NO_LIBRARY = "no library"


def rotate_positions(x: torch.Tensor, positions, theta: torch.Tensor, out: torch.Tensor,
                     layout: str, *, fresh: bool = False) -> bool:
    """out = x rotated by m·θ_i in ``layout``, the angles included, in one call, when it
    applies (int64 positions; see kernels/rope.c); False otherwise.

    The call computes cos and sin for each given position (a table of positions × r/2, on
    the stack for a decode step), then the rotation, both on the threads :func:`rotate`
    would use: the cos/sin table costs one small pass instead of several PyTorch kernels.

    positions: int64 on the CPU, broadcasting to x.shape[:-1], or None for 0 … seq − 1;
    theta ``(r/2,)`` of x's table dtype, r = 2·theta.numel() ≤ x.shape[-1] (only those
    features are written); fresh as in :func:`rotate`. Trusted (the dispatcher made them
    so): x, out, theta and the positions on the CPU, out of x's dtype and with no elements
    that share memory (apply_rope's fresh output, or an x that apply_rope_ checked), theta
    contiguous.

    At a decode step the checks and the folding of strides would cost more than the loop,
    so what they conclude is kept per layout, dtypes, shapes and strides (a model calls with
    the same few on every layer and step).
    """
    if not _enabled or x.layout is not torch.strided or out.layout is not torch.strided:
        return False
    library = _library if _library is not None else _load()
    if library is None:
        return False
    if positions is not None and not positions.is_contiguous():
        positions = positions.contiguous()
    threads = torch.get_num_threads() if x.numel() >= PARALLEL_MIN_ELEMENTS else 1
    key = (id(library), layout, threads, fresh, x.dtype, x.shape, x.stride(), x.is_neg(),
           out.stride(), theta.dtype, theta.shape,
           None if positions is None else (positions.dtype, positions.shape))
    plan = _position_plans.get(key)
    if plan is None:
        plan = _plan_positions(library, x, positions, theta, out, layout, threads, fresh)
        if len(_position_plans) >= 256:
            _position_plans.clear()
        _position_plans[key] = plan
    if plan is False:
        return False
    function, sizes, count = plan
    if function(x.data_ptr(), None if positions is None else positions.data_ptr(),
                theta.data_ptr(), out.data_ptr(), sizes) != 0:
        raise MemoryError(f"the C loop could not allocate its cos/sin table for {count} "
                          f"positions × {theta.shape[0]} pairs")
    return True


# What rotate_positions concluded, by the properties of its arguments: False (declined), or
# (C function, its array of sizes and strides, the number of positions).
_position_plans: dict = {}


def _plan_positions(library, x, positions, theta, out, layout, threads, fresh):
    if not (theta.is_cpu and theta.stride(-1) == 1
            and (positions is None or (positions.dtype == torch.int64 and positions.is_cpu))
            and _problem(x, theta, theta, out, trusted_out=True) is None):
        return False
    if threads > 1 and not library.has_openmp:
        return False
    batch = x.shape[:-1]
    if positions is None:  # position number = index along seq
        count, position_strides = x.shape[-2], [0] * (len(batch) - 1) + [1]
    else:
        count = positions.numel()
        position_strides = _strides.broadcast_strides(positions, batch, trailing=0)
    dims = _strides.fold(batch, [x.stride()[:-1], out.stride()[:-1], position_strides])
    if dims is None:
        return False
    (n0, n1, n2), (xs, os_, ps) = dims
    function = getattr(library, f"rope_{layout}_positions_{_DTYPE_NAMES[x.dtype]}")
    sizes = _int64s(*xs, count, *ps, *os_, n0, n1, n2, theta.shape[0], threads,
                    _populate_row_bytes(out, fresh))
    return function, sizes, count


def _table_plan(library, x, cos, sin, out, layout, threads, fresh):
    """(C function, sizes) for :func:`rotate`, or why not (a str)."""
    reason = _problem(x, cos, sin, out)
    if reason is not None:
        return reason
    batch = x.shape[:-1]
    dims = _strides.fold(batch, [x.stride()[:-1], _strides.broadcast_strides(cos, batch),
                                 _strides.broadcast_strides(sin, batch), out.stride()[:-1]])
    if dims is None:
        return (f"x's leading dims {tuple(batch)} with strides {x.stride()[:-1]} do not fold "
                "into three")
    if threads > 1 and not library.has_openmp:
        # one C thread loses to several eager ones
        return (f"the library was built without OpenMP and torch uses {threads} threads "
                "(torch.set_num_threads(1) lets it run)")
    (n0, n1, n2), (xs, cs, ss, os_) = dims
    function = getattr(library, f"rope_{layout}_{_DTYPE_NAMES[x.dtype]}")
    return function, _int64s(*xs, *cs, *ss, *os_, n0, n1, n2, cos.shape[-1], threads,
                             _populate_row_bytes(out, fresh))


def _problem(x, cos, sin, out, *, trusted_out: bool = False) -> str | None:
    """Why the loop cannot take these tensors, or None. trusted_out: out is known to have no
    elements sharing memory (a fresh tensor, or an x that apply_rope_ checked)."""
    dtype = x.dtype
    if dtype not in _DTYPE_NAMES:
        return f"it handles float32, float64 and bfloat16 x; got {dtype}"
    if not (out.dtype == dtype and cos.dtype == sin.dtype == TABLE_DTYPES[dtype]):
        return (f"out must have x's dtype and cos/sin {TABLE_DTYPES[dtype]}; got x {dtype}, "
                f"out {out.dtype}, cos {cos.dtype}")
    for t in (x, cos, out) if cos is sin else (x, cos, sin, out):
        if not t.is_cpu:
            return f"it runs CPU tensors; x is on {x.device}"
        if t.layout is not torch.strided or t.is_neg():
            return "it needs plain strided tensors"
        if t.stride(-1) != 1 and t.shape[-1] != 1:
            return "it needs unit stride along the features"
    if x.dim() < 2 or x.numel() == 0:
        return f"it needs a non-empty x with a sequence dim; got shape {tuple(x.shape)}"
    # out with elements sharing memory is left to the eager path (apply_rope_ refuses such an
    # x before it gets here); the loop would rotate shared elements repeatedly
    if not trusted_out and not _validate.non_overlapping(out):
        return "out has elements that share memory"
    return None


# --- building ---------------------------------------------------------------------------------

def _load():
    global _library, _reason, _quiet
    if _library is not None or _reason is not None:
        return _library
    with _lock:
        if _library is None and _reason is None:
            try:
                _library = _build()
            except _Unavailable as error:
                _reason, _quiet = str(error), error.quiet
    return _library


def _warn_once() -> None:
    """Say once per process why the fast path is off (unless it was turned off on purpose)."""
    global _warned
    if _warned or _quiet or _reason is None:
        return
    _warned = True
    # Point at the first caller outside the package (the notebook's or script's line).
    frame, level = sys._getframe(0), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(
        f"rope_lab: the compiled C kernel for RoPE is unavailable ({_reason}); using the "
        "eager path: same results, a little slower. Set ROPE_LAB_C_KERNEL=0 to silence this.",
        FastPathWarning, stacklevel=level)


_PACKAGE = os.path.dirname(os.path.abspath(__file__))


class _Unavailable(Exception):
    """Why the kernel cannot be built here (the eager path runs instead)."""

    def __init__(self, reason: str, *, quiet: bool = False):
        super().__init__(reason)
        self.quiet = quiet


def _build() -> ctypes.CDLL:
    if os.environ.get("ROPE_LAB_C_KERNEL", "1").strip() == "0":
        raise _Unavailable("turned off by ROPE_LAB_C_KERNEL=0", quiet=True)
    if sys.platform == "win32":
        raise _Unavailable("the C kernel is not built on Windows")
    source = resources.files("rope_lab").joinpath(SOURCE).read_bytes()
    compilers = _compilers()
    if not compilers:
        raise _Unavailable("no C compiler found ($CC, cc, gcc, clang)")
    folder = _cache_folder()
    commands = [compiler + flags for compiler in compilers for flags in FLAG_SETS]
    paths = [os.path.join(folder, f"rope-{_key(source, command)}.so")
             for command in commands]
    library = _load_built(paths)  # built before, by this or another process
    if library is not None:
        return library
    failed = os.path.join(folder, f"rope-{_key(source, *commands)}.failed")
    remembered = _remembered_failure(failed)
    if remembered:
        raise _Unavailable(f"{remembered} (remembered in {failed}; delete it to retry now)")
    deadline = time.monotonic() + BUILD_SECONDS_LIMIT
    with _folder_lock(folder, deadline):
        library = _load_built(paths)  # another process may have built it while we waited
        if library is not None:
            return library
        failures = []
        for command, path in zip(commands, paths, strict=True):
            if time.monotonic() >= deadline:
                failures.append(f"gave up after {BUILD_SECONDS_LIMIT:g} s")
                break
            started = time.perf_counter()
            error = _compile(command, source, path, deadline)
            if error:
                failures.append(f"{shlex.join(command)}: {error}")
                continue
            try:
                library = _open(path)
            except (OSError, AttributeError, _Unavailable) as error:
                failures.append(f"{path}: {error}")
                continue
            library.build_seconds = time.perf_counter() - started
            return library
        reason = "compiling failed: " + "; ".join(failures)[:500]
        _remember_failure(failed, reason)
    raise _Unavailable(f"{reason} (remembered in {failed} for {FAILURE_RETRY_SECONDS} s)")


def _key(source: bytes, *commands: list[str]) -> str:
    """Hash of what a build depends on (-march=native: the CPU too)."""
    parts = [source, *(" ".join(command).encode() for command in commands)]
    return hashlib.sha256(b"\0".join([*parts, _machine_id().encode()])).hexdigest()[:16]


def _load_built(paths: list[str]):
    """The first of ``paths`` that exists and loads, or None."""
    for path in paths:
        if os.path.lexists(path):
            with contextlib.suppress(OSError, AttributeError, _Unavailable):
                library = _open(path)
                library.build_seconds = None
                return library
    return None


def _open(path: str) -> ctypes.CDLL:
    """Load the library at ``path``: exactly the file that passed the checks.

    The descriptor stays open while the library is loaded (for the process's life: ctypes
    never unloads), so its ``/proc/self/fd/N`` name is never reused for another file
    (dlopen returns an already loaded library by name, without opening the file).
    """
    descriptor = _open_private_file(path)  # again, just before running code from it
    try:
        # Linux: load the open, checked file itself. Elsewhere (no /proc): the path, which
        # _private_folder made sure no other user can redirect.
        library = ctypes.CDLL(f"/proc/self/fd/{descriptor}" if _LOAD_BY_DESCRIPTOR else path)
    except BaseException:
        os.close(descriptor)
        raise
    library._descriptor, library._name = descriptor, path  # _name: what status() shows
    for layout in LAYOUTS:
        for dtype in _DTYPE_NAMES.values():
            tables = getattr(library, f"rope_{layout}_{dtype}")
            tables.argtypes = [ctypes.c_void_p] * 4 + [ctypes.POINTER(ctypes.c_int64)]
            tables.restype = None
            positions = getattr(library, f"rope_{layout}_positions_{dtype}")
            positions.argtypes = [ctypes.c_void_p] * 4 + [ctypes.POINTER(ctypes.c_int64)]
            positions.restype = ctypes.c_int
    library.has_openmp = bool(library.rope_has_openmp())
    return library


def _compilers() -> list[list[str]]:
    found = []
    candidates = [os.environ.get("CC", ""), "cc", "gcc", "clang"]
    for candidate in candidates:
        words = shlex.split(candidate)
        if words and shutil.which(words[0]) and words not in found:
            found.append(words)
    return found


# --- a private cache folder -------------------------------------------------------------------

def _cache_folder() -> str:
    """The configured folder, else ``<tmp>/rope_lab-<uid>``, whichever is safe to load from."""
    folder = os.environ.get("ROPE_LAB_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "rope_lab")
    fallback = os.path.join(tempfile.gettempdir(), f"rope_lab-{os.getuid()}")
    problems = []
    for candidate, exact in ((folder, False), (fallback, True)):
        try:
            _private_folder(candidate, exact_mode=exact)
        except (OSError, _Unavailable) as error:
            problems.append(f"{candidate}: {error}")
            continue
        return candidate
    raise _Unavailable("no private cache folder: " + "; ".join(problems))


def _private_folder(path: str, *, exact_mode: bool) -> None:
    """Make sure ``path`` is a directory we own that nobody else can write to or move.

    A new folder gets mode 0700 whatever the umask. An existing one is refused when it is a
    symlink, someone else's, or writable by group or others (with ``exact_mode``: any mode
    but 0700, as for a folder in the shared temporary directory), and so is any folder whose
    ancestors let another user replace it (:func:`_check_ancestors`).
    """
    created = False
    with contextlib.suppress(FileExistsError):
        _make_parents(os.path.dirname(path) or ".")
        os.mkdir(path, 0o700)
        created = True
    _check_ancestors(path)
    if os.path.islink(path):
        raise _Unavailable("it is a symlink")
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        info = os.fstat(descriptor)
        if info.st_uid != os.getuid():
            raise _Unavailable(f"it belongs to user id {info.st_uid}, not to you")
        if created:
            os.fchmod(descriptor, 0o700)
        elif info.st_mode & (0o077 if exact_mode else 0o022):
            raise _Unavailable(f"mode {info.st_mode & 0o777:o} lets others "
                               + ("in" if exact_mode else "write to it")
                               + ("; expected 700" if exact_mode else ""))
        if not os.access(path, os.W_OK):
            raise _Unavailable("it is not writable")
    finally:
        os.close(descriptor)


def _make_parents(folder: str) -> None:
    """os.makedirs, but the folders it creates are writable by you only, whatever the umask
    (a umask of 0 would leave them open to everyone, and the cache refused)."""
    missing = []
    while folder and not os.path.exists(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for new in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(new, 0o755)
            os.chmod(new, stat.S_IMODE(os.lstat(new).st_mode) & ~0o022)


# dlopen("/proc/self/fd/N") opens the file behind descriptor N (Linux); macOS has no /proc.
_LOAD_BY_DESCRIPTOR = os.path.isdir("/proc/self/fd")


def _check_ancestors(path: str) -> None:
    """Refuse ``path`` when another user could rename a folder on the way to it.

    Every folder above it (on the path as given and on the resolved one: a symlink on the way
    is only as safe as the folder that holds it and the folders it leads through) must belong
    to you or to root and be writable by nobody else, unless it has the sticky bit (as /tmp
    does: there others cannot rename what is yours). OpenSSH's StrictModes applies the same
    rule to ~/.ssh.
    """
    absolute = os.path.abspath(path)
    folders = set()
    for start in (absolute, os.path.realpath(absolute)):
        folder = os.path.dirname(start)
        while True:
            folders.add(folder)
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    for folder in sorted(folders):
        try:
            info = os.stat(folder)
        except OSError:
            continue  # not there yet: makedirs creates it, and the next check sees it
        if info.st_uid not in (0, os.getuid()):
            raise _Unavailable(f"the folder above it, {folder}, belongs to user id "
                               f"{info.st_uid}, who could replace the cache")
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            raise _Unavailable(f"the folder above it, {folder}, has mode "
                               f"{info.st_mode & 0o777:o}: others can write to it and it has "
                               "no sticky bit, so they could replace the cache")


def _open_private_file(path: str) -> int:
    """An open descriptor of ``path``, checked: a regular file (not a symlink) we own, that
    nobody else can write to. The caller uses (and closes) the descriptor, never the path."""
    # O_NONBLOCK: a FIFO planted under the name must not hang the open
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        if os.path.islink(path):
            raise _Unavailable(f"{path} is not a regular file (a symlink)") from None
        raise error
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise _Unavailable(f"{path} is not a regular file")
        if info.st_uid != os.getuid():
            raise _Unavailable(f"{path} belongs to user id {info.st_uid}, not to you")
        if info.st_mode & 0o022:
            raise _Unavailable(f"{path} has mode {info.st_mode & 0o777:o}: others can write "
                               "to it")
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _write_private(path: str, data: bytes, mode: int = 0o600) -> None:
    """Write a new file with exactly ``mode``, whatever the umask; never through a symlink."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(descriptor, "wb") as handle:
        os.fchmod(descriptor, mode)
        handle.write(data)


@contextlib.contextmanager
def _folder_lock(folder: str, deadline: float):
    """One build at a time per cache folder, across processes (threads hold ``_lock``)."""
    import fcntl  # POSIX only, like the rest of the build

    path = os.path.join(folder, "rope.lock")
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise _Unavailable(
                        f"another process held {path} for {BUILD_SECONDS_LIMIT:g} s") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _remembered_failure(path: str) -> str | None:
    """The reason of a failed build recorded at ``path`` less than FAILURE_RETRY_SECONDS ago."""
    try:
        with os.fdopen(_open_private_file(path), encoding="utf-8") as handle:
            record = json.load(handle)
        if time.time() - float(record["time"]) < FAILURE_RETRY_SECONDS:
            return str(record["reason"])
    except (OSError, ValueError, KeyError, TypeError, _Unavailable):
        pass
    return None


def _remember_failure(path: str, reason: str) -> None:
    temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        _write_private(temporary, json.dumps({"time": time.time(), "reason": reason}).encode())
        os.replace(temporary, path)
    except OSError:
        pass  # not remembered on disk: the next process tries again, no harm done
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _compile(command: list[str], source: bytes, path: str, deadline: float) -> str | None:
    """Compile ``source`` to ``path`` (atomically: other processes never see half a file),
    giving up at ``deadline``. Returns None on success, else the compiler's last line."""
    work = tempfile.mkdtemp(prefix="build-", dir=os.path.dirname(path))  # mode 0700
    try:
        source_path = os.path.join(work, "rope.c")
        _write_private(source_path, source)
        built = os.path.join(work, "rope.so")
        try:
            # A session of its own, so that a timeout kills the compiler's children too.
            process = subprocess.Popen([*command, source_path, "-o", built],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as error:
            return str(error)
        try:
            output, _ = process.communicate(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return f"stopped at the build's limit of {BUILD_SECONDS_LIMIT:g} s"
        if process.returncode != 0 or not os.path.exists(built):
            lines = output.decode(errors="replace").strip().splitlines()
            return lines[-1] if lines else f"exit status {process.returncode}"
        descriptor = os.open(built, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fchmod(descriptor, 0o700)  # whatever the umask gave it
        finally:
            os.close(descriptor)
        os.replace(built, path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return None


def _machine_id() -> str:
    """What -march=native depends on: the architecture and the CPU's model and flags."""
    details = [platform.machine(), platform.processor()]
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("model name", "flags", "Features", "CPU part")):
                    details.append(line.strip())
                if line.strip() == "":
                    break  # the first processor is enough
    except OSError:
        pass
    return "\n".join(details)

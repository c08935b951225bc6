"""The half layout on a CPU in one pass: a small C kernel, compiled on first use.

PyTorch has no single CPU kernel for a' = a·c − b·s, b' = b·c + a·s when a and b sit d/2
apart, so the eager half-layout path needs three kernels per block (see :mod:`rope_lab.fast`;
the row "eager blocks (no C compiler)" of ``python -m rope_lab.bench`` shows what the extra
passes over the cache cost). ``kernels/rope_half.c`` does the rotation in one loop: each
element is read once and written once, like ``x.clone()``.

How it is built: the first call that can use it looks for a C compiler (``$CC``, then ``cc``,
``gcc``, ``clang``), compiles the source (:func:`status` reports how long that took) into a
shared library in
``$ROPE_LAB_CACHE_DIR`` or ``~/.cache/rope_lab`` (keyed by the source, the compiler, the flags
and the CPU, so a cache shared between machines never loads a library built for another
CPU), and loads it with ctypes. Where any step fails (no compiler, Windows, a read-only home)
:func:`status` says why, and the eager path runs instead: same results, a little slower.
``ROPE_LAB_C_KERNEL=0`` in the environment, or :func:`disabled`, turns it off.

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
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from importlib import resources

import torch

SOURCE = "kernels/rope_half.c"
# Below this many elements one thread does it all: waking the pool costs more than it saves.
PARALLEL_MIN_ELEMENTS = 1 << 16
# Tried in order: OpenMP and -march=native (the library is cached per CPU) first, then
# without each (Apple's clang has no -fopenmp; some compilers no -march=native).
_BASE_FLAGS = ["-O3", "-ffp-contract=off", "-fPIC", "-shared"]
FLAG_SETS = (
    [*_BASE_FLAGS, "-march=native", "-fopenmp"],
    [*_BASE_FLAGS, "-fopenmp"],
    [*_BASE_FLAGS, "-march=native"],
    _BASE_FLAGS,
)
_FUNCTIONS = {torch.float32: "rope_half_float32", torch.float64: "rope_half_float64"}

_lock = threading.Lock()
_library = None  # the loaded ctypes library, once built
_reason = None  # why there is no library, once a build was tried and failed
_enabled = True


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


def rotate_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                out: torch.Tensor) -> bool:
    """out = the half-layout rotation of x, when the kernel applies; False otherwise.

    Applies to CPU tensors of one dtype (float32 or float64) for x, cos, sin and out, with
    contiguous features and leading dims that fold into three (any memory order of batch,
    heads and seq does). out may be x itself (each pair is read before it is written). x may
    be wider than 2·cos.shape[-1]: only the rotated features are written.
    """
    if not _enabled or not _applies(x, cos, sin, out):
        return False
    library = _load()
    if library is None:
        return False
    half = cos.shape[-1]
    batch = x.shape[:-1]
    tensors = (x, cos.expand(*batch, half), sin.expand(*batch, half), out)
    dims = _fold(batch, [t.stride()[:-1] for t in tensors])
    if dims is None:
        return False
    sizes, strides = dims
    threads = torch.get_num_threads() if x.numel() >= PARALLEL_MIN_ELEMENTS else 1
    if threads > 1 and not library.has_openmp:
        return False  # one C thread loses to several eager ones
    arguments = []
    for tensor, tensor_strides in zip(tensors, strides, strict=True):
        arguments += [tensor.data_ptr(), *tensor_strides]
    getattr(library, _FUNCTIONS[x.dtype])(*arguments, *sizes, half, threads)
    return True


def _applies(x, cos, sin, out) -> bool:
    dtype = x.dtype
    return (
        dtype in _FUNCTIONS
        and cos.dtype == sin.dtype == out.dtype == dtype
        and all(t.device.type == "cpu" and t.layout == torch.strided and not t.is_neg()
                and (t.stride(-1) == 1 or t.shape[-1] == 1) for t in (x, cos, sin, out))
        and x.numel() > 0
        and x.dim() >= 2
        # out with elements sharing memory (an expanded tensor, rotated in place) is left to
        # the eager path, whose copy_ refuses it with PyTorch's own error; the loop would
        # rotate the shared elements more than once
        and _non_overlapping(out)
    )


def _non_overlapping(t: torch.Tensor) -> bool:
    """True when no two elements of t share memory (checked on the strides, conservatively:
    sorted by stride, every dim must step past the whole extent of the dims inside it)."""
    extent = 1
    for stride, size in sorted((t.stride(k), t.shape[k]) for k in range(t.dim())
                               if t.shape[k] > 1):
        if stride < extent:
            return False
        extent = stride * size
    return True


def _fold(batch: torch.Size, strides: list) -> tuple | None:
    """Fold the leading dims ``batch`` (seq last) into three, the same way for every tensor.

    strides: one tuple of strides over ``batch`` per tensor (0 where it broadcasts). Dims of
    size 1 are dropped; neighbours k, k+1 merge when every tensor steps over k exactly as over
    a whole row of k+1. Returns (sizes, strides per tensor), three each, or None when more than
    three dims remain.
    """
    keep = [k for k, n in enumerate(batch) if n != 1]
    sizes = [batch[k] for k in keep]
    folded = [[s[k] for k in keep] for s in strides]
    k = len(sizes) - 2
    while k >= 0:
        if all(s[k] == s[k + 1] * sizes[k + 1] for s in folded):
            sizes[k] *= sizes.pop(k + 1)
            for s in folded:
                s[k] = s.pop(k + 1)
        k -= 1
    if len(sizes) > 3:
        return None
    pad = 3 - len(sizes)
    return [1] * pad + sizes, [[0] * pad + s for s in folded]


# --- building ---------------------------------------------------------------------------------

def _load():
    global _library, _reason
    if _library is not None or _reason is not None:
        return _library
    with _lock:
        if _library is None and _reason is None:
            try:
                _library = _build()
            except _Unavailable as error:
                _reason = str(error)
    return _library


class _Unavailable(Exception):
    """Why the kernel cannot be built here (the eager path runs instead)."""


def _build() -> ctypes.CDLL:
    if os.environ.get("ROPE_LAB_C_KERNEL", "1").strip() == "0":
        raise _Unavailable("turned off by ROPE_LAB_C_KERNEL=0")
    if sys.platform == "win32":
        raise _Unavailable("the C kernel is not built on Windows")
    source = resources.files("rope_lab").joinpath(SOURCE).read_bytes()
    compilers = _compilers()
    if not compilers:
        raise _Unavailable("no C compiler found ($CC, cc, gcc, clang)")
    folder = _cache_folder()
    failures = []
    for compiler in compilers:
        for flags in FLAG_SETS:
            key = hashlib.sha256(b"\0".join([
                source, " ".join(compiler + flags).encode(), _machine_id().encode(),
            ])).hexdigest()[:16]
            path = os.path.join(folder, f"rope_half-{key}.so")
            build_seconds = None
            if not os.path.exists(path):
                started = time.perf_counter()
                error = _compile(compiler, flags, source, path)
                if error:
                    failures.append(f"{shlex.join(compiler + flags)}: {error}")
                    continue
                build_seconds = time.perf_counter() - started
            try:
                library = ctypes.CDLL(path)
                for name in _FUNCTIONS.values():
                    getattr(library, name).argtypes = (
                        [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64] * 4
                        + [ctypes.c_int64] * 5)
                    getattr(library, name).restype = None
                library.has_openmp = bool(library.rope_has_openmp())
                library.build_seconds = build_seconds
            except (OSError, AttributeError) as error:
                failures.append(f"{path}: {error}")
                continue
            return library
    raise _Unavailable("compiling failed: " + "; ".join(failures)[:500])


def _compilers() -> list[list[str]]:
    found = []
    candidates = [os.environ.get("CC", ""), "cc", "gcc", "clang"]
    for candidate in candidates:
        words = shlex.split(candidate)
        if words and shutil.which(words[0]) and words not in found:
            found.append(words)
    return found


def _cache_folder() -> str:
    folder = os.environ.get("ROPE_LAB_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "rope_lab")
    for candidate in (folder, os.path.join(tempfile.gettempdir(), f"rope_lab-{os.getuid()}")):
        try:
            os.makedirs(candidate, exist_ok=True)
        except OSError:
            continue
        if os.access(candidate, os.W_OK):
            return candidate
    raise _Unavailable(f"no writable cache folder ({folder} or the temporary folder)")


def _compile(compiler, flags, source: bytes, path: str) -> str | None:
    """Compile ``source`` to ``path`` (atomically: other processes never see half a file).
    Returns None on success, else the compiler's last line."""
    folder = os.path.dirname(path)
    with tempfile.TemporaryDirectory(dir=folder) as work:
        source_path = os.path.join(work, "rope_half.c")
        with open(source_path, "wb") as handle:
            handle.write(source)
        built = os.path.join(work, "rope_half.so")
        try:
            result = subprocess.run([*compiler, *flags, source_path, "-o", built],
                                    capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as error:
            return str(error)
        if result.returncode != 0 or not os.path.exists(built):
            lines = (result.stderr or result.stdout or "").strip().splitlines()
            return lines[-1] if lines else f"exit status {result.returncode}"
        os.replace(built, path)
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
